//! The demo target's per-request knobs, read from the query string.

use serde::Deserialize;

use crate::error::AppError;

/// A failure the demo can be asked to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// `429 Too Many Requests` with `Retry-After`.
    #[serde(rename = "http_429")]
    Http429,
    /// `429` whose `Retry-After` is an HTTP date two seconds ahead, the header's other
    /// form.
    #[serde(rename = "http_429_date")]
    Http429Date,
    /// `500 Internal Server Error`.
    #[serde(rename = "http_500")]
    Http500,
    /// The connection closes before any response is sent.
    CloseBeforeHeaders,
    /// The connection breaks after `fault_after` tokens, without ending the stream (the
    /// browser sees a network error).
    CloseMidStream,
    /// The response ends cleanly after `fault_after` tokens, without the stream's end
    /// marker: no `finish_reason`, no `[DONE]` (the browser sees a normal end).
    EndMidStream,
    /// The stream stops sending after `fault_after` tokens and never ends.
    Stall,
    /// A 200 whose content type is not an event stream.
    WrongContentType,
    /// An event whose data is not valid JSON, after `fault_after` tokens.
    MalformedJson,
    /// An error event inside the 200 stream after `fault_after` tokens, then the end.
    ErrorEvent,
}

/// Everything a request can set: `?first_token_ms=300&itl_ms=25&tokens=40&slots=1&…`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Knobs {
    /// The model's own delay from being called to its first token.
    pub first_token_ms: u64,
    /// Milliseconds between answer events.
    pub itl_ms: u64,
    /// Answer tokens to send.
    pub tokens: u32,
    /// Tokens per event (one event can carry several: chunk counts are not token counts).
    pub tokens_per_event: u32,
    /// Each delay varies by up to ± this many milliseconds.
    pub jitter_ms: u64,
    /// Time the app spends authenticating, before its response starts.
    pub auth_ms: u64,
    /// Time the app spends on rate limiting.
    pub rate_limit_ms: u64,
    /// Time the app spends on retrieval.
    pub retrieval_ms: u64,
    /// A blocking step before the model call (synchronous database calls): it occupies
    /// the request's worker, so nothing else on that worker moves meanwhile.
    pub pre_model_ms: u64,
    /// Workers of the app (0: no worker model, every step is asynchronous). One worker and
    /// a blocking pre-model step reproduce a server that handles requests one at a time.
    pub slots: u32,
    /// Which pool of workers (so independent tests do not share them).
    pub pool: String,
    /// `Connection: close` on the response.
    pub connection_close: bool,
    /// Answer with `307 Temporary Redirect` to the same URL without this knob (the
    /// browser repeats the POST there).
    pub redirect: bool,
    pub fault: Option<Fault>,
    /// The response also carries values a careless server sends: a Unix timestamp and a
    /// negative duration in its timing object, more timing entries than a record holds,
    /// a `Server-Timing` duration over a day and a token count no answer has. The
    /// measurement itself is unchanged.
    pub odd_values: bool,
    /// After how many tokens a mid-stream fault happens (default: half of them).
    pub fault_after: Option<u32>,
}

impl Default for Knobs {
    fn default() -> Self {
        Self {
            first_token_ms: Self::DEFAULT_FIRST_TOKEN_MS,
            itl_ms: Self::DEFAULT_ITL_MS,
            tokens: Self::DEFAULT_TOKENS,
            tokens_per_event: 1,
            jitter_ms: 0,
            auth_ms: 0,
            rate_limit_ms: 0,
            retrieval_ms: 0,
            pre_model_ms: 0,
            slots: 0,
            pool: "default".to_owned(),
            connection_close: false,
            redirect: false,
            fault: None,
            odd_values: false,
            fault_after: None,
        }
    }
}

impl Knobs {
    /// A hosted model's typical first-token delay.
    pub const DEFAULT_FIRST_TOKEN_MS: u64 = 300;
    /// About 40 tokens a second.
    pub const DEFAULT_ITL_MS: u64 = 25;
    /// A short chat answer.
    pub const DEFAULT_TOKENS: u32 = 40;

    /// Checks every knob is in range; the error names the query parameter.
    pub fn check(self) -> Result<Self, AppError> {
        let bad = |name: &str, range: &str, value: u64| {
            Err(AppError::BadRequest(format!(
                "query parameter {name} must be {range}, got {value}"
            )))
        };
        for (name, value) in [
            ("first_token_ms", self.first_token_ms),
            ("auth_ms", self.auth_ms),
            ("rate_limit_ms", self.rate_limit_ms),
            ("retrieval_ms", self.retrieval_ms),
            ("pre_model_ms", self.pre_model_ms),
        ] {
            if value > 120_000 {
                return bad(name, "at most 120000", value);
            }
        }
        if self.itl_ms > 10_000 {
            return bad("itl_ms", "at most 10000", self.itl_ms);
        }
        if self.jitter_ms > 10_000 {
            return bad("jitter_ms", "at most 10000", self.jitter_ms);
        }
        if !(1..=4096).contains(&self.tokens) {
            return bad("tokens", "between 1 and 4096", u64::from(self.tokens));
        }
        if !(1..=64).contains(&self.tokens_per_event) {
            return bad(
                "tokens_per_event",
                "between 1 and 64",
                u64::from(self.tokens_per_event),
            );
        }
        if self.slots > 64 {
            return bad("slots", "at most 64", u64::from(self.slots));
        }
        if self.pool.is_empty()
            || self.pool.len() > 64
            || !self
                .pool
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(AppError::BadRequest(
                "query parameter pool must be 1–64 letters, digits, - or _".into(),
            ));
        }
        if let Some(after) = self.fault_after
            && after > self.tokens
        {
            return bad("fault_after", "at most tokens", u64::from(after));
        }
        Ok(self)
    }

    /// The longest this request can take by its knobs: every step before the model, the
    /// first token, every later event, and the jitter on each.
    pub fn planned(&self) -> std::time::Duration {
        let events = u64::from(self.tokens.div_ceil(self.tokens_per_event));
        let steps = self.auth_ms + self.rate_limit_ms + self.retrieval_ms + self.pre_model_ms;
        let jitter = self.jitter_ms * (4 + events);
        std::time::Duration::from_millis(
            steps + self.first_token_ms + events.saturating_sub(1) * self.itl_ms + jitter,
        )
    }

    /// How many tokens go out before a mid-stream fault.
    pub fn tokens_before_fault(&self) -> u32 {
        self.fault_after.unwrap_or(self.tokens / 2)
    }
}
