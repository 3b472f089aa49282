//! The target check: what a few real requests from the operator's browser showed about an
//! endpoint, read as a checklist before the link goes out.
//!
//! The browser sends the requests ([`Reply`] is what each one showed) and this module
//! says, line by line, whether beta users' runs will work and which numbers they will
//! lack, with the response headers that fix each failing line and examples for common
//! stacks ([`examples`]). No I/O here: the same reading is tested natively.

use firsttoken_core::outcome::is_event_stream;
use firsttoken_core::schema::{Connection, ErrorClass};
use firsttoken_stream::dialect::Dialect;
use firsttoken_stream::recorder::StreamRecorder;
use firsttoken_stream::sse::SseParser;

mod fixes;
mod main_lines;
mod side;

pub use fixes::{examples, preflight_headers};
pub use main_lines::MainLine;
use side::side_lines;

/// How one line of the checklist reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Works as the runs need.
    Pass,
    /// Runs work, but a number will be missing (the line says which).
    Warn,
    /// Runs will fail, or measure the wrong thing.
    Fail,
    /// Could not be told: an earlier line failed, or what would show it is too small to
    /// see here (the line says which).
    Skip,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Fail => "fail",
            Verdict::Skip => "skip",
        }
    }
}

/// One line of the checklist.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Stable name of the line (`cors`, `format`, …): tests and the page's test ids use it.
    pub key: String,
    pub verdict: Verdict,
    /// What the line is about, in a few words.
    pub title: String,
    /// What was seen, and what it means for the runs.
    pub detail: String,
    /// The exact response headers (or body field) that fix the line, when it fails.
    pub fix: Option<String>,
}

/// What one request of the check showed, from the browser's side.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reply {
    /// The HTTP status; 0 when no response arrived.
    pub status: u16,
    pub error: Option<ErrorClass>,
    pub error_message: Option<String>,
    /// The response's `Content-Type`.
    pub content_type: Option<String>,
    /// When the response head arrived, from the request's start.
    pub headers_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    /// Any output (reasoning, tool calls) before the answer text.
    pub ttft_any_ms: Option<f64>,
    pub output_tokens: Option<u64>,
    /// Resource Timing's connection detail; `None` when the browser withheld it (a
    /// cross-origin response without `Timing-Allow-Origin`) or made no entry.
    pub conn: Option<Connection>,
    /// `Server-Timing` entries Resource Timing exposed.
    pub server_timing: usize,
    /// Entries of the timing object the stream carried (the plan's timings pointer).
    pub stream_timings: usize,
    /// The server's own time to its first token was known and fitted what the browser
    /// saw, so runs split the whole wait ([`firsttoken_core::layers`]).
    pub server_whole: bool,
    /// The request needed a CORS preflight.
    pub preflighted: bool,
    /// The client port the target reported (`X-Firsttoken-Client-Port`).
    pub client_port: Option<u16>,
    /// The response came after a redirect.
    pub redirected: bool,
    /// The start of the body, to tell which stream format it is when it is not the one
    /// chosen.
    pub body_start: Vec<u8>,
}

impl Reply {
    /// A response with answer text.
    pub fn answered(&self) -> bool {
        self.error.is_none() && self.ttft_ms.is_some()
    }

    fn outcome(&self) -> String {
        match (self.error, self.ttft_ms) {
            (None, Some(ttft)) => format!(
                "HTTP {}, first answer token after {}",
                self.status,
                ms(ttft)
            ),
            _ => match &self.error_message {
                Some(message) => message.clone(),
                None if self.status == 0 => "no response".to_owned(),
                None => format!("HTTP {} without answer text", self.status),
            },
        }
    }
}

/// Whether the browser may send the plan's requests to the target, as far as it could be
/// told from requests with and without a CORS preflight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cors {
    /// The target is on the page's own origin: no CORS at all.
    SameOrigin,
    /// The plan's own request got a response.
    Passed,
    /// A request without a preflight got a response, but the plan's did not: the
    /// preflight failed. `refused` are the request headers whose preflight, sent alone,
    /// failed (empty when each passed alone and only their combination failed, or the
    /// method did).
    PreflightRefused { refused: Vec<String> },
    /// The server answers (a `no-cors` request reached it) but not with
    /// `Access-Control-Allow-Origin` for this page.
    NoAllowOrigin,
    /// No response the page may read, even to a `no-cors` request: the server cannot be
    /// reached (the host name does not resolve, the connection is refused, the
    /// certificate is not trusted), or it answers without CORS in a way the browser
    /// withholds from `no-cors` requests too (opaque-response blocking withholds an
    /// error status or JSON). The browser does not say which.
    NoResponse,
}

/// Whether the fresh URL reached a new connection to the same server.
#[derive(Debug, Clone, PartialEq)]
pub struct Fresh {
    /// The fresh URL as sent (its `{n}` filled in).
    pub url: String,
    pub reply: Reply,
    /// A second fresh host name, asked right after the first: whether the browser
    /// coalesces the fresh names onto one connection.
    pub second: Option<(String, Reply)>,
}

/// Everything the check saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// The origin of the page the runs will start from.
    pub page_origin: String,
    /// The stream format the plan chose.
    pub dialect: Dialect,
    /// Request headers the plan sends that need a CORS preflight (lowercase), the
    /// engine's `content-type: application/json` included.
    pub request_headers: Vec<String>,
    pub main: Reply,
    /// The main request sent again straight after it: whether the client port the target
    /// reports stays the same on one connection.
    pub main_again: Option<Reply>,
    /// For a request that needs a CORS preflight: the main request once more, after
    /// [`PREFLIGHT_WAIT_MS`] with nothing sent (longer than the 5 s a browser keeps a
    /// preflight's answer without `Access-Control-Max-Age`): whether it waited for a new
    /// preflight.
    pub after_wait: Option<Reply>,
    pub cors: Cors,
    pub fresh: Option<Fresh>,
    pub probe: Option<Reply>,
    /// Each compared target's label and reply.
    pub compared: Vec<(String, Reply)>,
}

/// How long the check waits before sending the main request once more, to see whether
/// the preflight's answer is kept: past Chromium's 5 s default for an answer without
/// `Access-Control-Max-Age`.
pub const PREFLIGHT_WAIT_MS: u32 = 6_000;

/// The checklist for what was observed, in reading order: can the request go at all,
/// does an answer come back in the chosen format, and which numbers will the runs have
/// (a function each, in `main_lines.rs`), then the lines about the other requests.
pub fn checklist(o: &Observed) -> Vec<Line> {
    let no_response = "Not known: the request did not get a response.";
    let mut lines = vec![main_lines::reachable(o), main_lines::cors(o)];
    let cors_ok = matches!(o.cors, Cors::SameOrigin | Cors::Passed);
    if !(cors_ok && o.main.status != 0) {
        lines.extend(MainLine::AFTER_CORS.iter().map(|l| l.skipped(no_response)));
        lines.extend(side_lines(o));
        return lines;
    }
    let main = &o.main;
    let success = (200..300).contains(&main.status);
    let stream = is_event_stream(main.content_type.as_deref().unwrap_or("none"));
    lines.push(main_lines::status(main, success));
    lines.push(main_lines::event_stream(main, success, stream));
    if !(success && stream) {
        lines.extend(
            MainLine::AFTER_CORS[2..]
                .iter()
                .map(|l| l.skipped(no_response)),
        );
        lines.extend(side_lines(o));
        return lines;
    }
    lines.extend([
        main_lines::format(o),
        main_lines::first_token(main),
        main_lines::usage(o),
        main_lines::timing_allow_origin(o),
        main_lines::server_timing(o),
        main_lines::http_version(main),
    ]);
    lines.extend(side_lines(o));
    lines
}

/// The stream format `body` reads as: the first of the JSON formats in which it carries
/// output, else plain text when no event carries JSON, else none.
pub fn guess_format(body: &[u8]) -> Option<Dialect> {
    let mut json_events = 0;
    let mut events = 0;
    let mut parser = SseParser::new();
    parser.feed(body, |event| {
        events += 1;
        if event.data.trim_start().starts_with('{') {
            json_events += 1;
        }
    });
    if events == 0 {
        return None;
    }
    Dialect::PLAIN.into_iter().find(|dialect| {
        if *dialect == Dialect::Text && json_events > 0 {
            return false;
        }
        let mut recorder = StreamRecorder::new(dialect.clone());
        recorder.on_chunk(0.0, body);
        let metrics = recorder.finish();
        metrics.parse_error.is_none() && (metrics.content_chunks > 0 || metrics.output_chunks > 0)
    })
}

fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else {
        format!("{v:.0} ms")
    }
}

fn opt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "an unknown time".to_owned(), ms)
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "https://bench.example.org";
    const OPENAI: &[u8] =
        include_bytes!("../../../stream/tests/fixtures/sse/openai_chat_basic.sse");
    const RESPONSES: &[u8] =
        include_bytes!("../../../stream/tests/fixtures/sse/openai_responses.sse");
    const ANTHROPIC: &[u8] =
        include_bytes!("../../../stream/tests/fixtures/sse/anthropic_messages.sse");

    /// What a well-set-up cross-origin target shows.
    fn good() -> Observed {
        let mut o = observed();
        o.main_again = Some(o.main.clone());
        o
    }

    fn observed() -> Observed {
        Observed {
            page_origin: PAGE.into(),
            dialect: Dialect::OpenaiChat,
            request_headers: preflight_headers(["Authorization"]),
            main: Reply {
                status: 200,
                content_type: Some("text/event-stream; charset=utf-8".into()),
                headers_ms: Some(120.0),
                ttft_ms: Some(340.0),
                ttft_any_ms: Some(340.0),
                output_tokens: Some(12),
                conn: Some(Connection {
                    reused: Some(true),
                    protocol: Some("http/1.1".into()),
                    ..Connection::default()
                }),
                server_timing: 3,
                preflighted: true,
                client_port: Some(50_001),
                body_start: OPENAI.to_vec(),
                ..Reply::default()
            },
            main_again: None,
            after_wait: None,
            cors: Cors::Passed,
            fresh: None,
            probe: None,
            compared: Vec::new(),
        }
    }

    fn verdicts(o: &Observed) -> Vec<(String, Verdict)> {
        checklist(o)
            .into_iter()
            .map(|l| (l.key, l.verdict))
            .collect()
    }

    fn line(o: &Observed, key: &str) -> Line {
        checklist(o)
            .into_iter()
            .find(|l| l.key == key)
            .unwrap_or_else(|| panic!("no line {key}"))
    }

    #[test]
    fn a_well_set_up_target_passes_every_line() {
        let v = verdicts(&good());
        let keys: Vec<&str> = v.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "reachable",
                "cors",
                "status",
                "event_stream",
                "format",
                "first_token",
                "usage",
                "timing_allow_origin",
                "server_timing",
                "http_version",
                "client_port"
            ]
        );
        assert!(v.iter().all(|(_, v)| *v == Verdict::Pass), "{v:?}");
        assert!(examples(PAGE, &checklist(&good())).is_empty());
        assert!(line(&good(), "first_token").detail.contains("340 ms"));
    }

    #[test]
    fn the_format_a_stream_looks_like_is_named() {
        assert_eq!(guess_format(OPENAI), Some(Dialect::OpenaiChat));
        assert_eq!(guess_format(RESPONSES), Some(Dialect::OpenaiResponses));
        assert_eq!(guess_format(ANTHROPIC), Some(Dialect::Anthropic));
        assert_eq!(
            guess_format(b"data: hello\n\ndata: world\n\n"),
            Some(Dialect::Text)
        );
        assert_eq!(guess_format(b"data: {\"x\": 1}\n\n"), None);
        assert_eq!(guess_format(b""), None);

        let mut o = good();
        o.main.ttft_ms = None;
        o.main.ttft_any_ms = None;
        o.main.body_start = ANTHROPIC.to_vec();
        let format = line(&o, "format");
        assert_eq!(format.verdict, Verdict::Fail);
        assert!(format.detail.contains("looks like anthropic"), "{format:?}");
        assert_eq!(line(&o, "first_token").verdict, Verdict::Fail);
        o.main.output_tokens = None;
        assert_eq!(
            line(&o, "usage").verdict,
            Verdict::Skip,
            "unreadable, not missing"
        );
    }

    #[test]
    fn cors_failures_name_the_header_and_give_the_fix() {
        let mut o = good();
        o.main.status = 0;
        o.main.error = Some(ErrorClass::Network);
        o.cors = Cors::PreflightRefused {
            refused: vec!["authorization".into()],
        };
        let cors = line(&o, "cors");
        assert_eq!(cors.verdict, Verdict::Fail);
        assert!(
            cors.detail.contains("on the header authorization"),
            "{cors:?}"
        );
        let fix = cors.fix.expect("a fix");
        assert!(fix.contains(&format!("Access-Control-Allow-Origin: {PAGE}")));
        assert!(fix.contains("Access-Control-Allow-Headers: content-type, authorization"));
        // Nothing after it can be known.
        let v = verdicts(&o);
        assert!(v[2..].iter().all(|(_, v)| *v == Verdict::Skip), "{v:?}");
        let stacks = examples(PAGE, &checklist(&o));
        assert_eq!(stacks.len(), 4);
        for (stack, code) in &stacks {
            assert!(code.contains(PAGE), "{stack}: {code}");
            assert!(code.contains("authorization"), "{stack}: {code}");
        }

        o.cors = Cors::NoAllowOrigin;
        assert!(
            line(&o, "cors")
                .detail
                .contains("without Access-Control-Allow-Origin")
        );
        o.cors = Cors::NoResponse;
        let reachable = line(&o, "reachable");
        assert_eq!(reachable.verdict, Verdict::Fail);
        assert!(
            reachable.detail.contains("cannot be reached"),
            "{reachable:?}"
        );
        assert!(
            reachable.detail.contains("without CORS headers"),
            "{reachable:?}"
        );
        assert!(reachable.fix.is_some());
        assert_eq!(line(&o, "cors").verdict, Verdict::Skip);
    }

    #[test]
    fn a_response_that_is_not_a_stream_fails_and_skips_what_it_hides() {
        let mut o = good();
        o.main.content_type = Some("application/json".into());
        o.main.error = Some(ErrorClass::Protocol);
        o.main.ttft_ms = None;
        let line = line(&o, "event_stream");
        assert_eq!(line.verdict, Verdict::Fail);
        assert!(line.detail.contains("application/json"));
        assert_eq!(line.fix.as_deref(), Some("Content-Type: text/event-stream"));
        let v = verdicts(&o);
        assert!(v[4..].iter().all(|(_, v)| *v == Verdict::Skip), "{v:?}");

        let mut o = good();
        o.main.status = 401;
        o.main.error = Some(ErrorClass::Http);
        o.main.ttft_ms = None;
        let status = checklist(&o)
            .into_iter()
            .find(|l| l.key == "status")
            .expect("a status line");
        assert_eq!(status.verdict, Verdict::Fail);
        assert!(status.detail.contains("credentials"), "{status:?}");
    }

    #[test]
    fn missing_timing_headers_warn_with_what_runs_will_lack() {
        let mut o = good();
        o.main.conn = None;
        o.main.server_timing = 0;
        o.main.output_tokens = None;
        let tao = line(&o, "timing_allow_origin");
        assert_eq!(tao.verdict, Verdict::Warn);
        assert_eq!(
            tao.fix.as_deref(),
            Some(&*format!("Timing-Allow-Origin: {PAGE}"))
        );
        let st = line(&o, "server_timing");
        assert_eq!(st.verdict, Verdict::Warn);
        assert!(st.detail.contains("only with Timing-Allow-Origin"));
        assert_eq!(line(&o, "http_version").verdict, Verdict::Skip);
        let usage = line(&o, "usage");
        assert_eq!(usage.verdict, Verdict::Warn);
        assert!(usage.fix.expect("a fix").contains("include_usage"));
        let stacks = examples(PAGE, &checklist(&o));
        let nginx = &stacks.iter().find(|(s, _)| *s == "nginx").expect("nginx").1;
        assert!(nginx.contains(&format!(
            "add_header Timing-Allow-Origin \"{PAGE}\" always;"
        )));
        assert!(nginx.contains("proxy_buffering off"));
        assert!(
            !nginx.contains("Access-Control-Allow-Origin"),
            "CORS passed"
        );

        // A stream's own timing object is a waterfall too.
        o.main.stream_timings = 4;
        assert_eq!(line(&o, "server_timing").verdict, Verdict::Pass);
        // Steps alone split the server's time before its head, not the model's after it:
        // the line names the timing that would.
        assert!(
            line(&o, "server_timing")
                .detail
                .contains("first_token_written_ms")
        );
        o.main.server_whole = true;
        let whole = line(&o, "server_timing").detail;
        assert!(
            !whole.contains("first_token_written_ms") && whole.contains("the rest"),
            "{whole}"
        );
        // Same origin: the browser gives every detail.
        o.cors = Cors::SameOrigin;
        assert_eq!(line(&o, "timing_allow_origin").verdict, Verdict::Pass);
    }

    #[test]
    fn http2_suggests_multiplexed() {
        let mut o = good();
        o.main.conn.as_mut().expect("a connection").protocol = Some("h2".into());
        let line = line(&o, "http_version");
        assert_eq!(line.verdict, Verdict::Pass);
        assert!(line.detail.contains("\"multiplexed\": true"));
    }

    #[test]
    fn a_fresh_url_on_the_connection_already_used_fails() {
        let mut o = good();
        let mut reply = o.main.clone();
        o.fresh = Some(Fresh {
            url: "https://7.fresh.example.org/v1/chat".into(),
            reply: reply.clone(),
            second: None,
        });
        // The same client port: HTTP/2 coalesced the new host name onto the connection.
        reply.conn.as_mut().expect("a connection").protocol = Some("h2".into());
        o.fresh.as_mut().expect("a fresh request").reply = reply.clone();
        let fresh = line(&o, "fresh");
        assert_eq!(fresh.verdict, Verdict::Fail, "{fresh:?}");
        assert!(fresh.detail.contains("already in use"));
        reply.client_port = Some(50_002);
        o.fresh.as_mut().expect("a fresh request").reply = reply.clone();
        assert_eq!(line(&o, "fresh").verdict, Verdict::Pass);
        // No port, and a preflight hides the connect: cannot be told.
        reply.client_port = None;
        o.main.client_port = None;
        o.main_again = Some(o.main.clone());
        o.fresh.as_mut().expect("a fresh request").reply = reply.clone();
        assert_eq!(line(&o, "fresh").verdict, Verdict::Warn);
        // Not answering at all.
        reply.status = 0;
        reply.error = Some(ErrorClass::Network);
        reply.ttft_ms = None;
        o.fresh.as_mut().expect("a fresh request").reply = reply;
        let fresh = line(&o, "fresh");
        assert_eq!(fresh.verdict, Verdict::Fail);
        assert!(fresh.detail.contains("wildcard host name resolves"));
    }

    /// Two fresh host names on one wildcard certificate: the second rides on the first's
    /// HTTP/2 connection. One fresh name could not show it.
    #[test]
    fn fresh_names_coalesced_onto_one_connection_fail_with_the_fix() {
        let mut o = good();
        let fresh_reply = |port: u16| {
            let mut r = o.main.clone();
            r.client_port = Some(port);
            r.conn.as_mut().expect("a connection").protocol = Some("h2".into());
            r
        };
        o.fresh = Some(Fresh {
            url: "https://7.fresh.example.org/v1/chat".into(),
            reply: fresh_reply(50_002),
            second: Some((
                "https://8.fresh.example.org/v1/chat".into(),
                fresh_reply(50_002),
            )),
        });
        let fresh = line(&o, "fresh");
        assert_eq!(fresh.verdict, Verdict::Fail, "{fresh:?}");
        assert!(fresh.detail.contains("coalesces"), "{fresh:?}");
        assert!(fresh.detail.contains("8.fresh.example.org"), "{fresh:?}");
        assert_eq!(fresh.fix.as_deref(), Some("keepalive_requests 2;"));
        o.fresh.as_mut().expect("fresh").second = Some((
            "https://8.fresh.example.org/v1/chat".into(),
            fresh_reply(50_003),
        ));
        assert_eq!(line(&o, "fresh").verdict, Verdict::Pass);
    }

    /// The port a proxy reports is not the browser's: the check says so, and does not
    /// blame certificates for what the port showed.
    #[test]
    fn a_port_that_is_not_the_browsers_is_named() {
        // uvicorn behind a proxy: port 0.
        let mut o = good();
        o.main.client_port = Some(0);
        o.main_again = Some(o.main.clone());
        o.fresh = Some(Fresh {
            url: "https://7.fresh.example.org/v1/chat".into(),
            reply: o.main.clone(),
            second: None,
        });
        let port = line(&o, "client_port");
        assert_eq!(port.verdict, Verdict::Warn);
        assert!(port.detail.contains("port 0"), "{port:?}");
        let fresh = line(&o, "fresh");
        assert_ne!(fresh.verdict, Verdict::Fail, "{fresh:?}");
        assert!(!fresh.detail.contains("certificate"), "{fresh:?}");
        // nginx without upstream keep-alive: a new port per request.
        let mut o = good();
        let mut again = o.main.clone();
        again.client_port = Some(50_009);
        o.main_again = Some(again);
        let port = line(&o, "client_port");
        assert_eq!(port.verdict, Verdict::Warn);
        assert!(port.detail.contains("changed"), "{port:?}");
        assert!(port.fix.is_some_and(|f| f.contains("$remote_port")));
        // No second request (an older page): no line.
        let mut o = good();
        o.main_again = None;
        assert!(checklist(&o).iter().all(|l| l.key != "client_port"));
    }

    #[test]
    fn probes_and_compared_targets_get_a_line_each() {
        let mut o = good();
        o.probe = Some(Reply {
            status: 204,
            headers_ms: Some(31.0),
            ..Reply::default()
        });
        o.compared = vec![
            ("provider".into(), o.main.clone()),
            (
                "gateway".into(),
                Reply {
                    status: 0,
                    error: Some(ErrorClass::Network),
                    error_message: Some("Failed to fetch".into()),
                    ..Reply::default()
                },
            ),
        ];
        let v = verdicts(&o);
        assert_eq!(
            v[v.len() - 3..],
            [
                ("probe".to_owned(), Verdict::Pass),
                ("compare_0".to_owned(), Verdict::Pass),
                ("compare_1".to_owned(), Verdict::Fail)
            ]
        );
        assert!(line(&o, "compare_1").title.contains("gateway"));
    }

    /// The main request once more after the wait: a new preflight before it (on the warm
    /// connection, at least ¾ of a round trip and 5 ms more before it left) warns with
    /// the header to send; none passes only where a probe timed a round trip that a
    /// preflight would have shown; a request that opened its own connection says the
    /// keep-alive is short, not that the preflight expired.
    #[test]
    fn a_preflight_answer_not_kept_is_warned_of() {
        let sent = |ms: f64, headers: f64| Reply {
            conn: Some(Connection {
                reused: Some(true),
                sent_ms: Some(ms),
                ..Connection::default()
            }),
            headers_ms: Some(headers),
            ..good().main
        };
        let probe = |ms: f64| Reply {
            status: 200,
            headers_ms: Some(ms),
            ..Reply::default()
        };
        // 80 ms round trip, a probe that shows it.
        let mut o = good();
        o.probe = Some(probe(82.0));
        o.main = sent(245.0, 330.0);
        o.main_again = Some(sent(0.4, 85.0));
        o.after_wait = Some(sent(83.0, 170.0));
        let l = line(&o, "preflight_cache");
        assert_eq!(l.verdict, Verdict::Warn, "{l:?}");
        assert_eq!(l.fix.as_deref(), Some("Access-Control-Max-Age: 7200"));
        o.after_wait = Some(sent(0.5, 86.0));
        assert_eq!(line(&o, "preflight_cache").verdict, Verdict::Pass);
        // Without a probe, no new preflight is not evidence: the warm request's 150 ms to
        // its head may be mostly the server's, and a 50 ms preflight would not clear ¾ of
        // it.
        o.probe = None;
        o.main_again = Some(sent(0.4, 150.0));
        assert_eq!(line(&o, "preflight_cache").verdict, Verdict::Skip);
        // But a clear one still warns.
        o.after_wait = Some(sent(130.0, 280.0));
        assert_eq!(line(&o, "preflight_cache").verdict, Verdict::Warn);
        // Loopback: nothing a preflight costs can be seen.
        o.probe = Some(probe(0.9));
        o.main = sent(1.2, 2.0);
        o.main_again = Some(sent(0.3, 1.1));
        o.after_wait = Some(sent(0.6, 1.4));
        assert_eq!(line(&o, "preflight_cache").verdict, Verdict::Skip);
        // The connection was closed meanwhile: the request timed a connect of its own, so
        // no preflight went first.
        let mut closed = sent(170.0, 250.0);
        closed.conn.as_mut().expect("conn").reused = Some(false);
        o.after_wait = Some(closed);
        let l = line(&o, "preflight_cache");
        assert_eq!(l.verdict, Verdict::Warn);
        assert!(
            l.detail.contains("new connection") && l.fix.is_none(),
            "{l:?}"
        );
        // Same origin: no wait, no line.
        o.after_wait = None;
        assert!(!verdicts(&o).iter().any(|(k, _)| k == "preflight_cache"));
    }

    /// A redirect costs a round trip: a probe that is redirected is no round trip, and a
    /// target URL that redirects makes every request pay one more.
    #[test]
    fn redirects_are_warned_of() {
        let mut o = good();
        o.probe = Some(Reply {
            status: 200,
            headers_ms: Some(205.0),
            redirected: true,
            ..Reply::default()
        });
        assert_eq!(line(&o, "probe").verdict, Verdict::Warn);
        assert!(line(&o, "probe").detail.contains("redirect"));
        assert!(o.main.answered() && !verdicts(&o).iter().any(|(k, _)| k == "redirect"));
        o.main.redirected = true;
        assert_eq!(line(&o, "redirect").verdict, Verdict::Warn);
    }

    #[test]
    fn only_non_safelisted_headers_need_a_preflight() {
        assert_eq!(
            preflight_headers(["Accept", "Authorization", "x-api-key", "authorization"]),
            ["content-type", "authorization", "x-api-key"]
        );
    }
}
