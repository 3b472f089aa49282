//! Talks to the collection endpoint: uploads runs, deletes them, reads summaries.
//!
//! Every request here goes without cookies (`credentials: "omit"`) and has a time limit:
//! a collector that never answers must not hold up the uploads queued behind it.

use serde::Deserialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, Headers, RequestCredentials, RequestInit, Response};

use crate::browser::js_error_text;
use crate::engine::Scope;

/// The collector's runs path on the app's own server.
pub const RUNS_PATH: &str = "/api/v1/runs";
/// The collector's summary path on the app's own server.
pub const SUMMARY_PATH: &str = "/api/v1/summary";
/// The header carrying the digest of the uploader's own delete token.
pub const DELETE_TOKEN_SHA256: &str = "x-delete-token-sha256";
/// The longest one request to the collector may take, answer included.
const ATTEMPT_TIMEOUT_MS: u32 = 30_000;

/// The collector's answer to an accepted upload.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StoredRun {
    pub run_id: String,
    /// Where the stored run can be read, relative to the collector's origin.
    pub url: String,
    /// Deletes the run: only from a collector that made the token itself (an upload
    /// without a token digest), and only with the answer that stored the run.
    #[serde(default)]
    pub delete_token: Option<String>,
}

impl StoredRun {
    /// The stored run's address on the collector whose runs endpoint is `collector`.
    pub fn absolute_url(&self, collector: &str) -> String {
        match firsttoken_core::schema::origin_of(collector) {
            Some(origin) => format!("{origin}{}", self.url),
            None => self.url.clone(),
        }
    }
}

/// Why an upload did not go through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The collector refused the run for good: the record itself breaks a rule (400,
    /// 409, 413, 422). Sending it again cannot help.
    Refused(String),
    /// Worth trying again: no answer, a timeout, a server error, a budget or rate limit,
    /// or an answer that may be a proxy's or a captive portal's rather than the
    /// collector's (a 401, 403 or 404 during a deploy). `after_ms` is what the answer's
    /// `Retry-After` asked for.
    Retry { why: String, after_ms: Option<u32> },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Refused(why) | Failure::Retry { why, .. } => f.write_str(why),
        }
    }
}

/// Whether an answer with `status` says the record itself is wrong: only then is an
/// upload given up.
pub fn is_final_refusal(status: u16) -> bool {
    matches!(status, 400 | 409 | 413 | 422)
}

/// A `Retry-After` value in milliseconds: delay-seconds only (dates need a clock the
/// collector and the browser agree on), at most an hour.
pub fn retry_after_ms(value: Option<&str>) -> Option<u32> {
    let seconds: u32 = value?.trim().parse().ok()?;
    Some(seconds.min(3600) * 1000)
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

/// The collector's message already names the offending field.
#[derive(Deserialize)]
struct ErrorDetail {
    message: String,
}

/// A request to the collector: no cookies, JSON when there is a body, and the headers
/// given.
fn request(
    method: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> Result<RequestInit, String> {
    let init = RequestInit::new();
    init.set_method(method);
    init.set_credentials(RequestCredentials::Omit);
    let all = Headers::new().map_err(|e| js_error_text(&e))?;
    if let Some(body) = body {
        init.set_body(&JsValue::from_str(body));
        all.set("content-type", "application/json")
            .map_err(|e| js_error_text(&e))?;
    }
    for (name, value) in headers {
        all.set(name, value).map_err(|e| js_error_text(&e))?;
    }
    init.set_headers(&all);
    Ok(init)
}

/// What came back: status, `Retry-After` and body text.
struct Answer {
    status: u16,
    retry_after_ms: Option<u32>,
    text: String,
}

/// Sends one request with [`ATTEMPT_TIMEOUT_MS`]; the error says why there was no answer.
async fn exchange(scope: &Scope, url: &str, init: &RequestInit) -> Result<Answer, String> {
    let controller = AbortController::new().map_err(|e| js_error_text(&e))?;
    init.set_signal(Some(&controller.signal()));
    let abort = controller.clone();
    // The timer aborts the request and, with it, the reading of its body.
    let _timer = scope.timeout(ATTEMPT_TIMEOUT_MS, move || abort.abort());
    let timed_out = || {
        format!(
            "the collector did not answer within {} s",
            ATTEMPT_TIMEOUT_MS / 1000
        )
    };
    let response: Response = JsFuture::from(scope.fetch(url, init))
        .await
        .map_err(|_| {
            if controller.signal().aborted() {
                timed_out()
            } else {
                // The browser hides why on purpose ("TypeError: Failed to fetch" for every
                // cause: offline, refused, DNS, CORS), so saying more would be guessing.
                "the collector could not be reached".to_owned()
            }
        })?
        .unchecked_into();
    let retry_after = response.headers().get("retry-after").ok().flatten();
    let text = JsFuture::from(response.text().map_err(|e| js_error_text(&e))?)
        .await
        .map_err(|e| {
            if controller.signal().aborted() {
                timed_out()
            } else {
                format!("the collector's answer was cut off: {}", js_error_text(&e))
            }
        })?
        .as_string()
        .unwrap_or_default();
    Ok(Answer {
        status: response.status(),
        retry_after_ms: retry_after_ms(retry_after.as_deref()),
        text,
    })
}

fn error_message(status: u16, text: &str) -> String {
    match serde_json::from_str::<ErrorBody>(text) {
        Ok(ErrorBody { error }) => format!("the collector answered {status}: {}", error.message),
        Err(_) => format!("the collector answered HTTP {status}"),
    }
}

/// Sends a run record (JSON) to the collector's runs endpoint `url`, with the digest of
/// its delete token. The run id inside is the idempotency key: sending the same run again
/// is harmless.
pub async fn upload_record(
    scope: &Scope,
    url: &str,
    record: &str,
    delete_token_sha256: Option<&str>,
) -> Result<StoredRun, Failure> {
    let retry = |why| Failure::Retry {
        why,
        after_ms: None,
    };
    let headers: Vec<(&str, &str)> = delete_token_sha256
        .map(|digest| (DELETE_TOKEN_SHA256, digest))
        .into_iter()
        .collect();
    let init = request("POST", Some(record), &headers).map_err(retry)?;
    let answer = exchange(scope, url, &init).await.map_err(retry)?;
    let status = answer.status;
    match status {
        200..=299 => serde_json::from_str(&answer.text).map_err(|e| {
            retry(format!(
                "the collector answered {status} with something unexpected: {e}"
            ))
        }),
        _ if is_final_refusal(status) => Err(Failure::Refused(error_message(status, &answer.text))),
        _ => Err(Failure::Retry {
            why: error_message(status, &answer.text),
            after_ms: answer.retry_after_ms,
        }),
    }
}

/// Offers a record once more as the page goes away (`keepalive`: the browser finishes the
/// request after the page is gone). Nothing hears the answer. The caller keeps the record
/// under the browser's `keepalive` limit (64 KiB), past which the request is refused.
pub fn send_keepalive(url: &str, record: &str, delete_token_sha256: Option<&str>) {
    let headers: Vec<(&str, &str)> = delete_token_sha256
        .map(|digest| (DELETE_TOKEN_SHA256, digest))
        .into_iter()
        .collect();
    let Ok(init) = request("POST", Some(record), &headers) else {
        return;
    };
    // Not in web-sys's stable RequestInit yet; every browser firsttoken supports reads it.
    let _ = js_sys::Reflect::set(&init, &"keepalive".into(), &JsValue::TRUE);
    let _ = Scope::current().fetch(url, &init);
}

/// What a delete found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    /// The collector has no run under that id (deleted before, or purged).
    AlreadyGone,
}

/// Deletes the stored run at `run_url` with its delete token.
pub async fn delete_run(
    scope: &Scope,
    run_url: &str,
    token: &str,
) -> Result<DeleteOutcome, String> {
    let authorization = format!("Bearer {token}");
    let init = request("DELETE", None, &[("authorization", &authorization)])?;
    let answer = exchange(scope, run_url, &init).await?;
    match answer.status {
        200..=299 => Ok(DeleteOutcome::Deleted),
        404 => Ok(DeleteOutcome::AlreadyGone),
        status => Err(error_message(status, &answer.text)),
    }
}

/// Why a summary could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SummaryError {
    /// The collector keeps its results behind a token, and none (or the wrong one) was
    /// sent.
    NeedsToken(String),
    Other(String),
}

/// Asks the collector at `summary_url` for a summary; `query` is the query string
/// (without `?`), `token` the results token where the collector wants one.
pub async fn summary(
    scope: &Scope,
    summary_url: &str,
    query: &str,
    token: Option<&str>,
) -> Result<firsttoken_core::summary::Summary, SummaryError> {
    let authorization = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = authorization
        .as_deref()
        .map(|a| ("authorization", a))
        .into_iter()
        .collect();
    let init = request("GET", None, &headers).map_err(SummaryError::Other)?;
    let answer = exchange(scope, &format!("{summary_url}?{query}"), &init)
        .await
        .map_err(SummaryError::Other)?;
    if (200..300).contains(&answer.status) {
        return serde_json::from_str(&answer.text).map_err(|e| {
            SummaryError::Other(format!("the collector answered something unexpected: {e}"))
        });
    }
    let message = match serde_json::from_str::<ErrorBody>(&answer.text) {
        Ok(ErrorBody { error }) => error.message,
        Err(_) => format!("the collector answered HTTP {}", answer.status),
    };
    Err(if answer.status == 401 {
        SummaryError::NeedsToken(message)
    } else {
        SummaryError::Other(message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_record_the_collector_calls_wrong_is_given_up() {
        for status in [400, 409, 413, 422] {
            assert!(is_final_refusal(status), "{status}");
        }
        // A proxy's 404 or 401 during a deploy, a captive portal's 403, a budget's 429,
        // a full store's 507: all pass, so the run is tried again.
        for status in [401, 403, 404, 405, 408, 429, 500, 502, 503, 507] {
            assert!(!is_final_refusal(status), "{status}");
        }
    }

    #[test]
    fn retry_after_is_read_in_seconds_and_bounded() {
        assert_eq!(retry_after_ms(Some("3")), Some(3000));
        assert_eq!(retry_after_ms(Some(" 120 ")), Some(120_000));
        assert_eq!(retry_after_ms(Some("999999")), Some(3_600_000));
        assert_eq!(retry_after_ms(Some("Wed, 21 Oct 2015 07:28:00 GMT")), None);
        assert_eq!(retry_after_ms(None), None);
    }
}
