//! The collector's HTTP contract, written once for the app that calls it and the server
//! that answers: where each endpoint is (after the server's base path), the headers both
//! sides name, and the bodies they exchange. The record an upload carries is
//! [`crate::schema::Run`]; a summary's answer is `firsttoken_crowd::summary::Summary`.
//! `server/openapi.json` describes the same endpoints for everyone else.

use serde::{Deserialize, Serialize};

/// Where a firsttoken server takes runs (`POST`), after its base path; a study without a
/// collector uploads to the one that served its page. One stored run is at
/// `{RUNS_PATH}/{run_id}` (`GET`, and `DELETE` with its delete token).
pub const RUNS_PATH: &str = "/api/v1/runs";
/// Where crowd summaries are read (`GET`, with the query's dimensions and filters).
pub const SUMMARY_PATH: &str = "/api/v1/summary";
/// Where the page asks its own server who made a link: POST the part after `#`.
pub const CHECK_PATH: &str = "/api/v1/studies/check";
/// Where the operator signs a study: POST its JSON with the admin token.
pub const STUDIES_PATH: &str = "/api/v1/studies";

/// The request header carrying the SHA-256, in hex, of a delete token the uploader made
/// itself: the collector then keeps the digest and never sends a token back. A browser
/// makes the token before the first attempt and keeps it with the run, so whichever
/// attempt is stored (a `keepalive` send as the page went away, a retry after a lost
/// answer, a second tab), the token it holds deletes the run.
pub const DELETE_TOKEN_SHA256: &str = "x-delete-token-sha256";
/// The response header by which the demo target says its numbers are simulated; a run
/// that got it is marked `target.demo` and kept out of crowd summaries.
pub const DEMO_HEADER: &str = "x-firsttoken-demo";
/// The response header by which the demo target tells the client the port it connected
/// from, so a run can tell a new connection from a reused one without Resource Timing.
pub const CLIENT_PORT_HEADER: &str = "x-firsttoken-client-port";

/// The collector's answer to an accepted upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRun {
    pub run_id: String,
    /// Where the stored run can be read, relative to the collector's origin.
    pub url: String,
    /// Deletes the run (`DELETE url` with `Authorization: Bearer <token>`). Given once,
    /// with the upload that stored the run, and only when the collector made the token
    /// (the upload sent no [`DELETE_TOKEN_SHA256`]): a repeated upload is answered
    /// without it, since anyone who can read a run could upload it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_token: Option<String>,
}

impl StoredRun {
    /// The stored run's address on the collector whose runs endpoint is `collector`.
    pub fn absolute_url(&self, collector: &str) -> String {
        match crate::url::origin_of(collector) {
            Some(origin) => format!("{origin}{}", self.url),
            None => self.url.clone(),
        }
    }
}

/// The body of every error answer: `{"error": {"code", "message", "field"}}`, the shape
/// OpenAI-compatible clients already expect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

impl ErrorBody {
    /// The message of an error body, reading nothing else: what the app shows. (The
    /// beta user's page reads only this; a second reader of the whole body would be
    /// compiled into every download.)
    pub fn message_of(body: &str) -> Option<String> {
        #[derive(Deserialize)]
        struct Body {
            error: Message,
        }
        #[derive(Deserialize)]
        struct Message {
            message: String,
        }
        serde_json::from_str::<Body>(body)
            .ok()
            .map(|body| body.error.message)
    }
}

/// What went wrong: a stable `code` to act on (`invalid`, `too_many_requests`, …), a
/// message for a person that already names the offending field, and that field's path
/// where there is one (`samples[3].ttft_ms`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// What the page's own server says of a link ([`CHECK_PATH`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkCheck {
    /// The link carries this server's signature: its operator made it, and it is unchanged.
    pub signed: bool,
    /// When the operator signed it (ms since 1970), where the server still has the date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_at_ms: Option<u64>,
    /// Why the link is not the operator's, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsigned_reason: Option<String>,
    /// Why the study may not send this browser's cookies, when it asks to and may not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookies_refused: Option<String>,
}
