//! The checklist's lines about the main request, one function each, in reading order:
//! can the request go at all, does an answer come back in the chosen format, and which
//! numbers will the runs have. [`super::checklist`] puts them together.

use firsttoken_stream::dialect::Dialect;

use super::fixes::allow_headers_fix;
use super::{Cors, Line, Observed, Reply, Verdict, guess_format, ms, opt_ms, plural};

/// A line of the checklist about the main request: its stable key (tests and the page's
/// test ids use it) and its title are written here once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MainLine {
    Reachable,
    Cors,
    Status,
    EventStream,
    Format,
    FirstToken,
    Usage,
    TimingAllowOrigin,
    ServerTiming,
    HttpVersion,
}

impl MainLine {
    /// The lines that need the main request's response, in order: skipped, all of them,
    /// when no response could be read; from `EventStream` on when it was not a stream.
    pub const AFTER_CORS: [MainLine; 8] = [
        MainLine::Status,
        MainLine::EventStream,
        MainLine::Format,
        MainLine::FirstToken,
        MainLine::Usage,
        MainLine::TimingAllowOrigin,
        MainLine::ServerTiming,
        MainLine::HttpVersion,
    ];

    pub fn key(self) -> &'static str {
        match self {
            MainLine::Reachable => "reachable",
            MainLine::Cors => "cors",
            MainLine::Status => "status",
            MainLine::EventStream => "event_stream",
            MainLine::Format => "format",
            MainLine::FirstToken => "first_token",
            MainLine::Usage => "usage",
            MainLine::TimingAllowOrigin => "timing_allow_origin",
            MainLine::ServerTiming => "server_timing",
            MainLine::HttpVersion => "http_version",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            MainLine::Reachable => "Reachable",
            MainLine::Cors => "CORS",
            MainLine::Status => "HTTP status",
            MainLine::EventStream => "Event stream",
            MainLine::Format => "Stream format",
            MainLine::FirstToken => "First answer token",
            MainLine::Usage => "Token usage",
            MainLine::TimingAllowOrigin => "Timing-Allow-Origin",
            MainLine::ServerTiming => "Server timings",
            MainLine::HttpVersion => "HTTP version",
        }
    }

    /// This line, read as `verdict`, with what was seen.
    pub(super) fn line(self, verdict: Verdict, detail: String) -> Line {
        Line {
            key: self.key().to_owned(),
            verdict,
            title: self.title().to_owned(),
            detail,
            fix: None,
        }
    }

    /// This line, not known: `why`.
    pub(super) fn skipped(self, why: &str) -> Line {
        self.line(Verdict::Skip, why.to_owned())
    }
}

/// Whether any answer could be read: the server is up and lets this page see it.
pub(super) fn reachable(o: &Observed) -> Line {
    let page = o.page_origin.as_str();
    match o.cors {
        Cors::NoResponse => Line {
            fix: Some(allow_headers_fix(page, &o.request_headers)),
            ..MainLine::Reachable.line(
                Verdict::Fail,
                format!(
                    "No response this page may read ({}): either the server cannot be reached (the host name does not resolve, the connection is refused, or its certificate is not trusted by this browser), or it answers without CORS headers for {page}. This page is cross-origin isolated (for its finer clock), so the browser withholds even a no-cors answer without CORS or Cross-Origin-Resource-Policy, and does not say which it was. If the server is up, add:",
                    o.main.outcome()
                ),
            )
        },
        _ => MainLine::Reachable.line(
            Verdict::Pass,
            "The server answered.".to_owned(),
        ),
    }
}

/// Whether CORS lets the page send the request and read the answer.
pub(super) fn cors(o: &Observed) -> Line {
    let page = o.page_origin.as_str();
    match &o.cors {
        Cors::SameOrigin => MainLine::Cors.line(
            Verdict::Pass,
            "Same origin as this page: no CORS preflight, no CORS headers needed.".to_owned(),
        ),
        Cors::Passed => MainLine::Cors.line(
            Verdict::Pass,
            if o.main.preflighted {
                format!(
                    "The preflight passed for POST with {}, and the response allows {page}.",
                    o.request_headers.join(", ")
                )
            } else {
                format!("The response allows {page}.")
            },
        ),
        Cors::PreflightRefused { refused } => Line {
            fix: Some(allow_headers_fix(page, &o.request_headers)),
            ..MainLine::Cors.line(
                Verdict::Fail,
                if refused.is_empty() {
                    format!(
                        "The CORS preflight failed: the server answers requests from {page} without one, but not POST with {} together.",
                        o.request_headers.join(", ")
                    )
                } else {
                    format!(
                        "The CORS preflight failed on the header{} {}: the server does not list {} in Access-Control-Allow-Headers for {page}.",
                        plural(refused.len()),
                        refused.join(", "),
                        if refused.len() == 1 { "it" } else { "them" }
                    )
                },
            )
        },
        Cors::NoAllowOrigin => Line {
            fix: Some(allow_headers_fix(page, &o.request_headers)),
            ..MainLine::Cors.line(
                Verdict::Fail,
                format!(
                    "The server answers, but without Access-Control-Allow-Origin for {page}: the browser hides the response from the page."
                ),
            )
        },
        Cors::NoResponse => MainLine::Cors.line(
            Verdict::Skip,
            "Not known: no response could be read (see above).".to_owned(),
        ),
    }
}

/// The main request's HTTP status, and what a failing one usually means.
pub(super) fn status(main: &Reply, success: bool) -> Line {
    if success {
        MainLine::Status.line(
            Verdict::Pass,
            format!("{} after {}.", main.status, opt_ms(main.headers_ms)),
        )
    } else {
        MainLine::Status.line(
            Verdict::Fail,
            format!(
                "{}{}",
                main.outcome(),
                match main.status {
                    401 | 403 =>
                        ": the server refused the credentials; check the benchmark token or the headers.",
                    404 | 405 => ": check the URL and that the endpoint takes POST.",
                    400 | 422 =>
                        ": the server refused the request body; check it against the API.",
                    429 => ": rate limited; runs will wait as Retry-After says.",
                    _ => ".",
                }
            ),
        )
    }
}

/// Whether the answer is an event stream.
pub(super) fn event_stream(main: &Reply, success: bool, stream: bool) -> Line {
    let content_type = main.content_type.as_deref().unwrap_or("none");
    if !success {
        MainLine::EventStream.line(
            Verdict::Skip,
            "Not known: the response was an error.".to_owned(),
        )
    } else if stream {
        MainLine::EventStream.line(Verdict::Pass, "Content-Type: text/event-stream.".to_owned())
    } else {
        Line {
            fix: Some("Content-Type: text/event-stream".to_owned()),
            ..MainLine::EventStream.line(
                Verdict::Fail,
                format!(
                    "Content-Type is {content_type}, not text/event-stream: the runs read only event streams. Ask for a stream (\"stream\": true in the body) or answer with one."
                ),
            )
        }
    }
}

/// Whether the stream reads as the chosen format, and which one it looks like if not.
pub(super) fn format(o: &Observed) -> Line {
    let main = &o.main;
    let format_ok = main.ttft_ms.is_some() || main.ttft_any_ms.is_some();
    let chosen = o.dialect.name();
    if format_ok {
        MainLine::Format.line(Verdict::Pass, format!("The stream reads as {chosen}."))
    } else {
        let guess = guess_format(&main.body_start).filter(|d| *d != o.dialect);
        MainLine::Format.line(
            Verdict::Fail,
            match guess {
                Some(d) => format!(
                    "Nothing in the stream reads as {chosen}; it looks like {}. Choose {} as the stream format.",
                    d.name(),
                    d.name()
                ),
                None => format!(
                    "Nothing in the stream reads as {chosen}, nor as any format firsttoken knows{}. Describe it as a custom format in the study's JSON.",
                    main.error_message
                        .as_deref()
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default()
                ),
            },
        )
    }
}

/// When the first answer token came, and whether the stream then ended well.
pub(super) fn first_token(main: &Reply) -> Line {
    match (main.ttft_ms, main.error) {
        (Some(ttft), None) => MainLine::FirstToken.line(
            Verdict::Pass,
            format!(
                "Arrived after {} (one request; the runs measure the spread).",
                ms(ttft)
            ),
        ),
        (Some(ttft), Some(_)) => MainLine::FirstToken.line(
            Verdict::Fail,
            format!(
                "Arrived after {}, but the stream then failed: {}.",
                ms(ttft),
                main.outcome()
            ),
        ),
        (None, _) => {
            MainLine::FirstToken.line(Verdict::Fail, format!("None arrived: {}.", main.outcome()))
        }
    }
}

/// Whether the stream reports token usage, which time per output token needs.
pub(super) fn usage(o: &Observed) -> Line {
    let main = &o.main;
    let format_ok = main.ttft_ms.is_some() || main.ttft_any_ms.is_some();
    match main.output_tokens {
        None if !format_ok => MainLine::Usage.line(
            Verdict::Skip,
            "Not known: the stream does not read as the chosen format.".to_owned(),
        ),
        Some(n) => MainLine::Usage.line(
            Verdict::Pass,
            format!("Reported: {n} output tokens, so time per output token is measured."),
        ),
        None => Line {
            fix: matches!(o.dialect, Dialect::OpenaiChat).then(|| {
                "\"stream_options\": {\"include_usage\": true} in the request body".to_owned()
            }),
            ..MainLine::Usage.line(
                Verdict::Warn,
                "Not reported: runs count chunks, not tokens, and give no time per output token."
                    .to_owned(),
            )
        },
    }
}

/// Whether Resource Timing shows the runs the connection's details.
pub(super) fn timing_allow_origin(o: &Observed) -> Line {
    let page = o.page_origin.as_str();
    let main = &o.main;
    // Same-origin entries always carry their detail.
    let same_origin = o.cors == Cors::SameOrigin;
    let timing_allowed = same_origin || main.conn.is_some();
    if timing_allowed {
        MainLine::TimingAllowOrigin.line(
            Verdict::Pass,
            if same_origin {
                "Same origin: the browser shows connection details.".to_owned()
            } else {
                "Present: runs record connection reuse, the HTTP version and DNS, TCP and TLS times.".to_owned()
            },
        )
    } else {
        Line {
            fix: Some(format!("Timing-Allow-Origin: {page}")),
            ..MainLine::TimingAllowOrigin.line(
                Verdict::Warn,
                "Missing: runs will have no connection reuse, no HTTP version, no DNS, TCP or TLS times, and no Server-Timing.".to_owned(),
            )
        }
    }
}

/// Whether the server says where its time went (Server-Timing, or the stream's timing object).
pub(super) fn server_timing(o: &Observed) -> Line {
    let main = &o.main;
    let timing_allowed = o.cors == Cors::SameOrigin || main.conn.is_some();
    if main.server_timing > 0 || main.stream_timings > 0 {
        let seen = match (main.server_timing, main.stream_timings) {
            (0, n) => format!("The stream's timing object has {n} entries"),
            (n, 0) => format!("Server-Timing has {n} entries"),
            (a, b) => format!("Server-Timing has {a} entries and the stream's timing object {b}"),
        };
        let split = if main.server_whole {
            "runs split each request's wait for its first token into before sending, the server's own time, and the rest (the network and the stream's delivery).".to_owned()
        } else {
            format!(
                "runs show the server's steps, but its time to the first token is not among them: with {}_ms in the stream's timing object (from the request's arrival to its first token written), runs split each request's wait into before sending, the server's own time, and the rest.",
                firsttoken_core::layers::FIRST_TOKEN_WRITTEN
            )
        };
        MainLine::ServerTiming.line(Verdict::Pass, format!("{seen}: {split}"))
    } else {
        Line {
            fix: Some("Server-Timing: auth;dur=12, db;dur=48, retrieval;dur=130".to_owned()),
            ..MainLine::ServerTiming.line(
                Verdict::Warn,
                if timing_allowed {
                    "None: no Server-Timing header and no timing object in the stream, so runs show no breakdown of the server's time.".to_owned()
                } else {
                    "None seen: a cross-origin Server-Timing header is visible only with Timing-Allow-Origin, and the stream has no timing object. Runs show no breakdown of the server's time.".to_owned()
                },
            )
        }
    }
}

/// The HTTP version, and what it means for concurrency.
pub(super) fn http_version(main: &Reply) -> Line {
    let protocol = main.conn.as_ref().and_then(|c| c.protocol.clone());
    match protocol.as_deref() {
        Some(p @ ("h2" | "h3")) => MainLine::HttpVersion.line(
            Verdict::Pass,
            format!(
                "{p}: requests share one connection. Mark the study multiplexed (\"multiplexed\": true in its JSON) so concurrency levels above 6 are sent at once."
            ),
        ),
        Some(p) => MainLine::HttpVersion.line(
            Verdict::Pass,
            format!(
                "{p}: browsers open at most 6 connections to one host, so a concurrency level above 6 queues in the browser."
            ),
        ),
        None => MainLine::HttpVersion.line(
            Verdict::Skip,
            "Not shown: the browser gives it only with Timing-Allow-Origin.".to_owned(),
        ),
    }
}
