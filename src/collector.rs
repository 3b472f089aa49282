//! Talks to the collection endpoint: uploads runs and reads summaries.

use serde::Deserialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Headers, RequestInit, Response};

use crate::browser::js_error_text;
use crate::engine::Scope;

/// The collector's runs path on the app's own server.
pub const RUNS_PATH: &str = "/api/v1/runs";
/// The collector's summary path on the app's own server.
pub const SUMMARY_PATH: &str = "/api/v1/summary";

/// The collector's answer to an accepted upload.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StoredRun {
    pub run_id: String,
    /// Where the stored run can be read, relative to the collector's origin.
    pub url: String,
    /// Deletes the run; given only with the upload that stored it.
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
    /// The collector refused the run for good: the record breaks a rule.
    Refused(String),
    /// Worth trying again: no answer, a server error, or too many uploads for now.
    Retry(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Refused(why) | Failure::Retry(why) => f.write_str(why),
        }
    }
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

fn json_request(method: &str, body: Option<&str>) -> Result<RequestInit, String> {
    let init = RequestInit::new();
    init.set_method(method);
    if let Some(body) = body {
        init.set_body(&JsValue::from_str(body));
        let headers = Headers::new().map_err(|e| js_error_text(&e))?;
        headers
            .set("content-type", "application/json")
            .map_err(|e| js_error_text(&e))?;
        init.set_headers(&headers);
    }
    Ok(init)
}

/// The status and body text of a request, or why there was none.
async fn exchange(scope: &Scope, url: &str, init: &RequestInit) -> Result<(u16, String), String> {
    let response: Response = JsFuture::from(scope.fetch(url, init))
        .await
        // The browser hides why on purpose ("TypeError: Failed to fetch" for every cause:
        // offline, refused, DNS, CORS), so saying more would be guessing.
        .map_err(|_| "the collector could not be reached".to_owned())?
        .unchecked_into();
    let text = JsFuture::from(response.text().map_err(|e| js_error_text(&e))?)
        .await
        .map_err(|e| format!("the collector's answer was cut off: {}", js_error_text(&e)))?
        .as_string()
        .unwrap_or_default();
    Ok((response.status(), text))
}

fn error_message(status: u16, text: &str) -> String {
    match serde_json::from_str::<ErrorBody>(text) {
        Ok(ErrorBody { error }) => format!("the collector answered {status}: {}", error.message),
        Err(_) => format!("the collector answered HTTP {status}"),
    }
}

/// Sends a run record (JSON) to the collector's runs endpoint `url`. The run id inside is
/// the idempotency key: sending the same run again is harmless.
pub async fn upload_record(scope: &Scope, url: &str, record: &str) -> Result<StoredRun, Failure> {
    let init = json_request("POST", Some(record)).map_err(Failure::Retry)?;
    let (status, text) = exchange(scope, url, &init).await.map_err(Failure::Retry)?;
    match status {
        200..=299 => serde_json::from_str(&text).map_err(|e| {
            Failure::Retry(format!(
                "the collector answered {status} with something unexpected: {e}"
            ))
        }),
        408 | 429 | 500..=599 => Err(Failure::Retry(error_message(status, &text))),
        _ => Err(Failure::Refused(error_message(status, &text))),
    }
}

/// Offers a record once more as the page goes away (`keepalive`: the browser finishes the
/// request after the page is gone). Nothing hears the answer.
pub fn send_keepalive(url: &str, record: &str) {
    let Ok(init) = json_request("POST", Some(record)) else {
        return;
    };
    // Not in web-sys's stable RequestInit yet; every browser firsttoken supports reads it.
    let _ = js_sys::Reflect::set(&init, &"keepalive".into(), &JsValue::TRUE);
    let _ = Scope::current().fetch(url, &init);
}

/// Asks the collector at `summary_url` for a summary; `query` is the query string
/// (without `?`). The error says what the collector or the network said.
pub async fn summary(
    scope: &Scope,
    summary_url: &str,
    query: &str,
) -> Result<firsttoken_core::summary::Summary, String> {
    let init = json_request("GET", None)?;
    let (status, text) = exchange(scope, &format!("{summary_url}?{query}"), &init).await?;
    if (200..300).contains(&status) {
        return serde_json::from_str(&text)
            .map_err(|e| format!("the collector answered something unexpected: {e}"));
    }
    Err(match serde_json::from_str::<ErrorBody>(&text) {
        Ok(ErrorBody { error }) => error.message,
        Err(_) => format!("the collector answered HTTP {status}"),
    })
}
