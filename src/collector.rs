//! Talks to the collection endpoint: uploads runs, deletes them, reads summaries.
//!
//! Every request here goes without cookies (`credentials: "omit"`) and has a time limit:
//! a collector that never answers must not hold up the uploads queued behind it.

use firsttoken_core::api::{DELETE_TOKEN_SHA256, ErrorBody, StoredRun};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, Headers, RequestCredentials, RequestInit, Response};

use crate::platform::{JsError, Scope};

/// The longest one request to the collector may take, answer included.
const ATTEMPT_TIMEOUT_MS: u32 = 30_000;

/// Why a request to the collector got no answer to act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CollectorError {
    #[error("the collector did not answer within {} s", ATTEMPT_TIMEOUT_MS / 1000)]
    TimedOut,
    /// The browser hides why on purpose ("TypeError: Failed to fetch" for every cause:
    /// offline, refused, DNS, CORS), so saying more would be guessing.
    #[error("the collector could not be reached")]
    Unreachable,
    #[error("the collector's answer was cut off: {0}")]
    CutOff(JsError),
    /// An answer that is not the one asked for, with the collector's message where it
    /// sent one (it names the offending field).
    #[error("the collector answered {}", match message {
        Some(message) => format!("{status}: {message}"),
        None => format!("HTTP {status}"),
    })]
    Answered {
        status: u16,
        message: Option<String>,
    },
    /// A success whose body is not what the collector sends.
    #[error("the collector answered {status} with something unexpected: {detail}")]
    Unexpected { status: u16, detail: String },
    /// The browser would not make the request.
    #[error(transparent)]
    Browser(#[from] JsError),
}

/// Why an upload did not go through.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The collector refused the run for good: the record itself breaks a rule (400,
    /// 409, 413, 422). Sending it again cannot help.
    #[error("{0}")]
    Refused(String),
    /// The collector had the run and it was deleted there with its token (410): it is not
    /// stored again, and the run is as deleted as if this browser had asked.
    #[error("{0}")]
    Deleted(String),
    /// Worth trying again: no answer, a timeout, a server error, a budget or rate limit,
    /// or an answer that may be a proxy's or a captive portal's rather than the
    /// collector's (a 401, 403 or 404 during a deploy). `after_ms` is what the answer's
    /// `Retry-After` asked for.
    #[error("{why}")]
    Retry { why: String, after_ms: Option<u32> },
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

/// A request to the collector: no cookies, JSON when there is a body, and the headers
/// given.
fn request(
    method: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> Result<RequestInit, JsError> {
    let init = RequestInit::new();
    init.set_method(method);
    init.set_credentials(RequestCredentials::Omit);
    let all = Headers::new()?;
    if let Some(body) = body {
        init.set_body(&JsValue::from_str(body));
        all.set("content-type", "application/json")?;
    }
    for (name, value) in headers {
        all.set(name, value)?;
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
async fn exchange(scope: &Scope, url: &str, init: &RequestInit) -> Result<Answer, CollectorError> {
    let controller = AbortController::new().map_err(JsError::from)?;
    init.set_signal(Some(&controller.signal()));
    let abort = controller.clone();
    // The timer aborts the request and, with it, the reading of its body.
    let _timer = scope.timeout(ATTEMPT_TIMEOUT_MS, move || abort.abort());
    let response: Response = JsFuture::from(scope.fetch(url, init))
        .await
        .map_err(|_| {
            if controller.signal().aborted() {
                CollectorError::TimedOut
            } else {
                CollectorError::Unreachable
            }
        })?
        .unchecked_into();
    let retry_after = response.headers().get("retry-after").ok().flatten();
    let text = JsFuture::from(response.text().map_err(JsError::from)?)
        .await
        .map_err(|e| {
            if controller.signal().aborted() {
                CollectorError::TimedOut
            } else {
                CollectorError::CutOff(e.into())
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

impl Answer {
    /// The answer as an error, with the collector's message where it sent one.
    fn error(&self) -> CollectorError {
        CollectorError::Answered {
            status: self.status,
            message: ErrorBody::message_of(&self.text),
        }
    }

    /// The body of a success, read as `T`.
    fn read<T: serde::de::DeserializeOwned>(&self) -> Result<T, CollectorError> {
        serde_json::from_str(&self.text).map_err(|e| CollectorError::Unexpected {
            status: self.status,
            detail: e.to_string(),
        })
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
    let retry = |why: CollectorError| Failure::Retry {
        why: why.to_string(),
        after_ms: None,
    };
    let headers: Vec<(&str, &str)> = delete_token_sha256
        .map(|digest| (DELETE_TOKEN_SHA256, digest))
        .into_iter()
        .collect();
    let init = request("POST", Some(record), &headers).map_err(|e| retry(e.into()))?;
    let answer = exchange(scope, url, &init).await.map_err(retry)?;
    match answer.status {
        200..=299 => answer.read().map_err(retry),
        410 => Err(Failure::Deleted(answer.error().to_string())),
        status if is_final_refusal(status) => Err(Failure::Refused(answer.error().to_string())),
        _ => Err(Failure::Retry {
            why: answer.error().to_string(),
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
) -> Result<DeleteOutcome, CollectorError> {
    let authorization = format!("Bearer {token}");
    let init = request("DELETE", None, &[("authorization", &authorization)])?;
    let answer = exchange(scope, run_url, &init).await?;
    match answer.status {
        200..=299 => Ok(DeleteOutcome::Deleted),
        404 => Ok(DeleteOutcome::AlreadyGone),
        _ => Err(answer.error()),
    }
}

/// Why a summary could not be read.
/// Asks the page's own server who made a link (`check_url`: its
/// [`firsttoken_core::api::CHECK_PATH`]), sending the part after `#`.
pub async fn check_link(
    scope: &Scope,
    check_url: &str,
    fragment: &str,
) -> Result<firsttoken_core::api::LinkCheck, CollectorError> {
    let init = request(
        "POST",
        Some(fragment),
        &[("content-type", "text/plain;charset=UTF-8")],
    )?;
    let answer = exchange(scope, check_url, &init).await?;
    match answer.status {
        200..=299 => answer.read(),
        _ => Err(answer.error()),
    }
}

/// Has the collector at `studies_url` sign `study` (its JSON) with the operator's
/// admin token.
pub async fn sign_study(
    scope: &Scope,
    studies_url: &str,
    study: &str,
    admin_token: &str,
) -> Result<firsttoken_core::share::SignedStudy, CollectorError> {
    let authorization = format!("Bearer {admin_token}");
    let init = request("POST", Some(study), &[("authorization", &authorization)])?;
    let answer = exchange(scope, studies_url, &init).await?;
    match answer.status {
        200..=299 => answer.read(),
        _ => Err(answer.error()),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummaryError {
    /// The collector keeps its results behind a token, and none (or the wrong one) was
    /// sent; the collector's message says so.
    #[error("{0}")]
    NeedsToken(String),
    #[error(transparent)]
    Other(#[from] CollectorError),
}

/// Asks the collector at `summary_url` for a summary; `query` is the query string
/// (without `?`), `token` the results token where the collector wants one.
pub async fn summary(
    scope: &Scope,
    summary_url: &str,
    query: &str,
    token: Option<&str>,
) -> Result<firsttoken_crowd::summary::Summary, SummaryError> {
    let authorization = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = authorization
        .as_deref()
        .map(|a| ("authorization", a))
        .into_iter()
        .collect();
    let init = request("GET", None, &headers).map_err(CollectorError::from)?;
    let answer = exchange(scope, &format!("{summary_url}?{query}"), &init).await?;
    match (answer.status, answer.error()) {
        (200..=299, _) => Ok(answer.read()?),
        // The collector's own words ("this collector needs a results token") where it sent
        // them, for the token form.
        (
            401,
            CollectorError::Answered {
                message: Some(m), ..
            },
        ) => Err(SummaryError::NeedsToken(m)),
        (401, error) => Err(SummaryError::NeedsToken(error.to_string())),
        (_, error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_bindgen_test::wasm_bindgen_test;

    #[wasm_bindgen_test(unsupported = test)]
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

    #[wasm_bindgen_test(unsupported = test)]
    fn retry_after_is_read_in_seconds_and_bounded() {
        assert_eq!(retry_after_ms(Some("3")), Some(3000));
        assert_eq!(retry_after_ms(Some(" 120 ")), Some(120_000));
        assert_eq!(retry_after_ms(Some("999999")), Some(3_600_000));
        assert_eq!(retry_after_ms(Some("Wed, 21 Oct 2015 07:28:00 GMT")), None);
        assert_eq!(retry_after_ms(None), None);
    }
}
