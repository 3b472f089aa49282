//! Turns what the engine saw of one request ([`Observation`]) into a [`Sample`], in one
//! step: the response (if any), the stream's metrics, how the request ended, and what
//! the engine learnt around it (Resource Timing, the page's visibility, its waits). Pure,
//! so every error class is tested natively; the engine only fetches, reads and stamps.

use firsttoken_stream::recorder::StreamMetrics;

use crate::plan::Phase;
use crate::schema::{Connection, ErrorClass, Sample, ServerTimingEntry, stored_time};
use crate::text::clean_text;

/// How a request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// The reader said done.
    Completed,
    /// `fetch()` or a read failed: the browser's message (DNS, refused, reset, CORS…).
    Failed(String),
    /// The plan's timeout fired.
    TimedOut,
    /// Nothing arrived for the plan's stall limit, in ms.
    Stalled(u32),
    /// The user cancelled.
    Aborted,
}

/// The response head, when there was one.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseHead {
    pub status: u16,
    pub status_text: String,
    pub content_type: String,
    /// When `fetch()` resolved, from `t0`.
    pub headers_ms: f64,
}

/// Where a sample sits in its run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Position {
    pub index: u32,
    pub phase: Phase,
    pub target: u32,
    pub scenario: Option<String>,
    pub concurrency: u32,
    pub batch: Option<u32>,
    pub idle_ms: Option<u32>,
    pub start_ms: f64,
}

/// How much of an error message a sample keeps: it is shown in a table and uploaded, so
/// it is kept shorter than the most a record may hold
/// ([`crate::schema::MAX_MESSAGE_CHARS`], which a record from another client may use).
const KEPT_MESSAGE_CHARS: usize = 300;

/// What the engine saw of one request, gathered in one place as it learns it: where the
/// request sits in its run, its response head (if any), the stream's metrics, how and
/// when it ended, and what only the engine knows (the page's visibility, the idle wait
/// before it, a redirect, then, once its batch's Resource Timing entries are paired, its
/// connection, `Server-Timing` and index, and the `Retry-After` wait after it).
/// [`Observation::into_sample`] turns it into the run's [`Sample`], once.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub at: Position,
    pub head: Option<ResponseHead>,
    pub metrics: StreamMetrics,
    pub ending: Ending,
    /// When the request ended, from `t0`; it becomes `e2e_ms` only when the body was
    /// read to its end.
    pub end_ms: f64,
    /// The page was hidden at some point during the request or its idle wait.
    pub hidden: bool,
    /// The response came after a redirect (`Response.redirected`).
    pub redirected: bool,
    /// For a cold request: the idle time spent, and how late the wait's timer came back.
    pub idle_spent_ms: Option<f64>,
    pub idle_timer_late_ms: Option<f64>,
    /// For a `429` answer: how long the engine waited after it.
    pub retry_wait_ms: Option<f64>,
    /// The connection, from Resource Timing and the connection log.
    pub conn: Option<Connection>,
    /// The response's `Server-Timing` entries, as the browser gave them.
    pub server_timing: Vec<ServerTimingEntry>,
}

impl Observation {
    /// What the request itself showed; the rest is filled in as the engine learns it.
    pub fn new(
        at: Position,
        head: Option<ResponseHead>,
        metrics: StreamMetrics,
        ending: Ending,
        end_ms: f64,
    ) -> Self {
        Self {
            at,
            head,
            metrics,
            ending,
            end_ms,
            hidden: false,
            redirected: false,
            idle_spent_ms: None,
            idle_timer_late_ms: None,
            retry_wait_ms: None,
            conn: None,
            server_timing: Vec::new(),
        }
    }

    /// Whether the body was read to its end.
    fn completed(&self) -> bool {
        self.head.is_some() && self.ending == Ending::Completed
    }

    /// The sample's `e2e_ms`, exactly as [`Observation::into_sample`] will record it
    /// (cleaned and rounded): the engine pairs Resource Timing entries by it before the
    /// sample is made.
    pub fn e2e_ms(&self) -> Option<f64> {
        self.completed()
            .then_some(self.end_ms)
            .and_then(stored_time)
    }

    /// The sample, made and cleaned in one step ([`Sample::clean`]: error message and
    /// texts clamped, what no record may hold dropped and counted, times rounded). Its
    /// error class and message come from how the request ended; the message is kept
    /// shorter than a record allows (300 characters).
    pub fn into_sample(self) -> Sample {
        let (error, message) = classify(
            self.head.as_ref(),
            &self.metrics,
            &self.ending,
            self.at.phase.streams(),
        );
        let completed = self.completed();
        let (at, head, metrics) = (self.at, self.head, self.metrics);
        let mut sample = Sample {
            index: at.index,
            phase: at.phase,
            target: at.target,
            scenario: at.scenario,
            concurrency: at.concurrency,
            batch: at.batch,
            idle_ms: at.idle_ms,
            start_ms: at.start_ms,
            status: head.as_ref().map_or(0, |h| h.status),
            error,
            error_message: message.map(|m| clean_text(&m, KEPT_MESSAGE_CHARS)),
            headers_ms: head.as_ref().map(|h| h.headers_ms),
            ttfb_ms: metrics.ttfb_ms,
            ttft_ms: metrics.ttft_ms,
            ttft_any_ms: metrics.ttft_any_ms,
            last_token_ms: metrics.last_token_ms,
            e2e_ms: completed.then_some(self.end_ms),
            itl_ms: metrics.itl_ms,
            output_chunks: metrics.output_chunks,
            reasoning_chunks: metrics.reasoning_chunks,
            usage: metrics.usage,
            done: metrics.done,
            stream_timings: metrics.timings,
            conn: self.conn,
            server_timing: self.server_timing,
            hidden: self.hidden,
            idle_spent_ms: self.idle_spent_ms,
            idle_timer_late_ms: self.idle_timer_late_ms,
            retry_wait_ms: self.retry_wait_ms,
            redirected: self.redirected,
            dropped: 0,
        };
        sample.clean();
        sample
    }
}

/// The error class and message, most fundamental failure first: no response, a bad
/// status, not a stream, then what went wrong inside the stream.
fn classify(
    head: Option<&ResponseHead>,
    metrics: &StreamMetrics,
    ending: &Ending,
    expect_stream: bool,
) -> (Option<ErrorClass>, Option<String>) {
    let ended_early = |mid: &str| match ending {
        Ending::Completed => None,
        Ending::TimedOut => Some((ErrorClass::Timeout, format!("timed out {mid}"))),
        Ending::Stalled(ms) => Some((
            ErrorClass::Stalled,
            format!(
                "stalled {mid}: nothing arrived for {} s",
                f64::from(*ms) / 1000.0
            ),
        )),
        Ending::Aborted => Some((ErrorClass::Aborted, format!("cancelled {mid}"))),
        Ending::Failed(why) => Some((ErrorClass::Network, format!("failed {mid}: {why}"))),
    };
    let (class, message) = match head {
        None => ended_early("before the response arrived")
            .unwrap_or((ErrorClass::Network, "no response".to_owned())),
        // The status text is the target's own words: the code says it all.
        Some(h) if !(200..300).contains(&h.status) => {
            (ErrorClass::Http, format!("HTTP {}", h.status))
        }
        Some(h) if expect_stream && !is_event_stream(&h.content_type) => (
            ErrorClass::Protocol,
            format!(
                "expected an event stream (text/event-stream), got {}",
                media_type(&h.content_type).unwrap_or("another content type")
            ),
        ),
        Some(_) => {
            if let Some(failure) = ended_early("mid-stream") {
                failure
            } else if metrics.stream_error.is_some() {
                // Its message is the target's text, shown on the page that measured it
                // but never recorded; its identifiers are.
                (
                    ErrorClass::Stream,
                    match &metrics.stream_error_code {
                        Some(code) => format!("the stream reported an error ({code})"),
                        None => "the stream reported an error".to_owned(),
                    },
                )
            } else if let Some(error) = &metrics.parse_error {
                (ErrorClass::Parse, error.clone())
            } else if expect_stream && metrics.unterminated {
                (
                    ErrorClass::Truncated,
                    "the stream ended in the middle of an event".to_owned(),
                )
            } else if expect_stream && metrics.expects_end_marker && !metrics.done {
                (
                    ErrorClass::Truncated,
                    if metrics.content_chunks > 0 {
                        "the stream ended before its end marker, after part of the answer"
                    } else {
                        "the stream ended before its end marker, with no answer"
                    }
                    .to_owned(),
                )
            } else {
                return (None, None);
            }
        }
    };
    (Some(class), Some(message))
}

/// The media type of a `Content-Type` value when it is one (`type/subtype`, token
/// characters only, at most 80): anything else is not repeated.
fn media_type(content_type: &str) -> Option<&str> {
    let media = content_type.split(';').next()?.trim();
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let (kind, sub) = media.split_once('/')?;
    (media.len() <= 80 && token(kind) && token(sub)).then_some(media)
}

/// Whether a response with this `Content-Type` is parsed as an event stream.
pub fn is_event_stream(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("text/event-stream"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample of a request the engine learnt nothing more about.
    fn sample(
        at: Position,
        head: Option<&ResponseHead>,
        metrics: StreamMetrics,
        ending: &Ending,
        end_ms: f64,
    ) -> Sample {
        Observation::new(at, head.cloned(), metrics, ending.clone(), end_ms).into_sample()
    }

    const AT: Position = Position {
        index: 0,
        phase: Phase::Steady,
        target: 0,
        scenario: None,
        concurrency: 1,
        batch: None,
        idle_ms: None,
        start_ms: 0.0,
    };

    fn head(status: u16, content_type: &str) -> ResponseHead {
        ResponseHead {
            status,
            status_text: String::new(),
            content_type: content_type.into(),
            headers_ms: 3.0,
        }
    }

    fn answered() -> StreamMetrics {
        StreamMetrics {
            ttfb_ms: Some(4.0),
            ttft_ms: Some(300.0),
            ttft_any_ms: Some(300.0),
            last_token_ms: Some(400.0),
            content_chunks: 10,
            done: true,
            expects_end_marker: true,
            ..StreamMetrics::default()
        }
    }

    #[test]
    fn a_complete_stream_has_no_error_and_an_e2e() {
        let s = sample(
            AT.clone(),
            Some(&head(200, "text/event-stream; charset=utf-8")),
            answered(),
            &Ending::Completed,
            410.0,
        );
        assert_eq!((s.status, s.error, s.e2e_ms), (200, None, Some(410.0)));
        s.validate(0).expect("a valid sample");
    }

    #[test]
    fn each_failure_gets_its_class() {
        let cases = [
            (
                None,
                StreamMetrics::default(),
                Ending::Failed("TypeError: Failed to fetch".into()),
                ErrorClass::Network,
            ),
            (
                None,
                StreamMetrics::default(),
                Ending::TimedOut,
                ErrorClass::Timeout,
            ),
            (
                None,
                StreamMetrics::default(),
                Ending::Aborted,
                ErrorClass::Aborted,
            ),
            (
                Some(head(429, "application/json")),
                StreamMetrics::default(),
                Ending::Completed,
                ErrorClass::Http,
            ),
            (
                Some(head(200, "application/json")),
                StreamMetrics::default(),
                Ending::Completed,
                ErrorClass::Protocol,
            ),
            (
                Some(head(200, "text/event-stream")),
                answered(),
                Ending::Failed("network error".into()),
                ErrorClass::Network,
            ),
            (
                Some(head(200, "text/event-stream")),
                answered(),
                Ending::TimedOut,
                ErrorClass::Timeout,
            ),
            (
                Some(head(200, "text/event-stream")),
                StreamMetrics {
                    stream_error: Some("overloaded".into()),
                    ..answered()
                },
                Ending::Completed,
                ErrorClass::Stream,
            ),
            (
                Some(head(200, "text/event-stream")),
                StreamMetrics {
                    parse_error: Some("bad".into()),
                    ..answered()
                },
                Ending::Completed,
                ErrorClass::Parse,
            ),
        ];
        for (head, metrics, ending, class) in cases {
            let s = sample(AT.clone(), head.as_ref(), metrics, &ending, 500.0);
            assert_eq!(s.error, Some(class), "{ending:?} {head:?}");
            assert!(s.error_message.is_some());
            s.validate(0).expect("a valid sample");
        }
    }

    #[test]
    fn a_stream_cut_off_before_its_end_is_a_failure_that_keeps_its_ttft() {
        let stream = head(200, "text/event-stream");
        // Part of the answer, then a clean end without [DONE].
        let cut = StreamMetrics {
            done: false,
            expects_end_marker: true,
            content_chunks: 3,
            ..answered()
        };
        let s = sample(
            AT.clone(),
            Some(&stream),
            cut.clone(),
            &Ending::Completed,
            500.0,
        );
        assert_eq!(s.error, Some(ErrorClass::Truncated));
        assert_eq!(s.ttft_ms, Some(300.0), "the first token was seen");
        assert!(
            s.error_message
                .as_deref()
                .is_some_and(|m| m.contains("after part of the answer")),
            "{s:?}"
        );
        s.validate(0).expect("a valid sample");
        // Nothing at all, then a clean end.
        let empty = StreamMetrics {
            expects_end_marker: true,
            ..StreamMetrics::default()
        };
        let s = sample(AT.clone(), Some(&stream), empty, &Ending::Completed, 20.0);
        assert_eq!((s.error, s.ttft_ms), (Some(ErrorClass::Truncated), None));
        // The body ended inside an event, whatever the dialect.
        let inside = StreamMetrics {
            unterminated: true,
            ..answered()
        };
        let s = sample(AT.clone(), Some(&stream), inside, &Ending::Completed, 20.0);
        assert_eq!(s.error, Some(ErrorClass::Truncated));
        // A dialect without an end marker (plain text) ends when the body ends.
        let text = StreamMetrics {
            done: false,
            expects_end_marker: false,
            ..answered()
        };
        let s = sample(AT.clone(), Some(&stream), text, &Ending::Completed, 20.0);
        assert_eq!(s.error, None);
        // An error event then the end is a stream error, not a cut.
        let errored = StreamMetrics {
            stream_error: Some("overloaded".into()),
            ..cut
        };
        let s = sample(AT.clone(), Some(&stream), errored, &Ending::Completed, 20.0);
        assert_eq!(s.error, Some(ErrorClass::Stream));
    }

    #[test]
    fn a_stall_is_its_own_ending() {
        let s = sample(
            AT.clone(),
            Some(&head(200, "text/event-stream")),
            answered(),
            &Ending::Stalled(5000),
            9000.0,
        );
        assert_eq!(s.error, Some(ErrorClass::Stalled));
        assert_eq!(s.e2e_ms, None);
        assert!(
            s.error_message
                .as_deref()
                .is_some_and(|m| m.contains("nothing arrived for 5 s")),
            "{s:?}"
        );
    }

    #[test]
    fn a_message_with_line_breaks_is_kept_on_one_line() {
        let s = sample(
            AT.clone(),
            Some(&head(200, "text/event-stream")),
            answered(),
            &Ending::Failed("TypeError:\nnetwork error\r\n".into()),
            500.0,
        );
        assert_eq!(
            s.error_message.as_deref(),
            Some("failed mid-stream: TypeError: network error  ")
        );
        s.validate(0).expect("a valid sample");
    }

    #[test]
    fn no_text_the_target_wrote_is_recorded() {
        let told = |head: ResponseHead, metrics: StreamMetrics| {
            sample(AT.clone(), Some(&head), metrics, &Ending::Completed, 500.0)
                .error_message
                .expect("a failure")
        };
        let secret = "my api key is sk-123, user alice@example.com";
        let mut status = head(503, "application/json");
        status.status_text = secret.into();
        assert_eq!(told(status, answered()), "HTTP 503");
        assert_eq!(
            told(head(200, &format!("text/html; {secret}")), answered()),
            "expected an event stream (text/event-stream), got text/html"
        );
        assert_eq!(
            told(head(200, secret), answered()),
            "expected an event stream (text/event-stream), got another content type"
        );
        let in_stream = StreamMetrics {
            stream_error: Some(secret.into()),
            stream_error_code: Some("type overloaded_error, code 529".into()),
            ..answered()
        };
        assert_eq!(
            told(head(200, "text/event-stream"), in_stream),
            "the stream reported an error (type overloaded_error, code 529)"
        );
        let without_code = StreamMetrics {
            stream_error: Some(secret.into()),
            ..answered()
        };
        assert_eq!(
            told(head(200, "text/event-stream"), without_code),
            "the stream reported an error"
        );
    }

    #[test]
    fn e2e_only_when_the_body_was_read_to_its_end() {
        let s = sample(
            AT.clone(),
            Some(&head(200, "text/event-stream")),
            answered(),
            &Ending::TimedOut,
            60_000.0,
        );
        assert_eq!(s.e2e_ms, None);
        let s = sample(
            AT.clone(),
            Some(&head(500, "text/plain")),
            StreamMetrics::default(),
            &Ending::Completed,
            9.0,
        );
        assert_eq!(
            (s.e2e_ms, s.error_message.as_deref()),
            (Some(9.0), Some("HTTP 500"))
        );
    }

    #[test]
    fn a_probe_is_not_expected_to_stream() {
        let probe = Position {
            phase: Phase::Probe,
            ..AT
        };
        let s = sample(
            probe,
            Some(&head(200, "application/json")),
            StreamMetrics::default(),
            &Ending::Completed,
            4.0,
        );
        assert_eq!((s.error, s.e2e_ms), (None, Some(4.0)));
    }

    #[test]
    fn long_messages_are_cut() {
        let s = sample(
            AT.clone(),
            None,
            StreamMetrics::default(),
            &Ending::Failed("x".repeat(5000)),
            1.0,
        );
        assert_eq!(
            s.error_message.expect("message").chars().count(),
            KEPT_MESSAGE_CHARS
        );
    }
    /// What the engine learnt around a request, odd values included: a connection with
    /// a negative time and an unknown protocol, a day-long `Server-Timing` entry, times
    /// finer than a record keeps.
    fn learnt(mut o: Observation) -> Observation {
        o.at.index = 7;
        o.at.start_ms = 1_234.567_891;
        o.hidden = true;
        o.redirected = true;
        o.idle_spent_ms = Some(30_012.345_678);
        o.idle_timer_late_ms = Some(-1.0);
        o.retry_wait_ms = Some(1_000.123_456);
        o.conn = Some(Connection {
            reused: Some(false),
            new_connection: Some(true),
            protocol: Some("h2 with spaces".into()),
            dns_ms: Some(-2.0),
            connect_ms: Some(12.345_678),
            tls_ms: Some(6.000_001),
            sent_ms: Some(20.1),
            wait_ms: Some(f64::NAN),
        });
        o.server_timing = vec![
            ServerTimingEntry {
                name: "db".into(),
                duration_ms: 53.333_333,
                description: Some("query\n".into()),
            },
            ServerTimingEntry {
                name: "forever".into(),
                duration_ms: 2.0 * crate::schema::MAX_MS,
                description: None,
            },
        ];
        o
    }

    /// The sample made in one step is the one the engine made before, when it cleaned
    /// the sample as it was made, again once Resource Timing was in, and the record once
    /// more after the `Retry-After` wait: the same values, the same count of dropped ones.
    #[test]
    fn one_step_makes_the_sample_the_repeated_cleaning_made() {
        let stream = head(200, "text/event-stream");
        let odd = StreamMetrics {
            itl_ms: vec![0.1 + 0.2, -4.0, 5.004_999],
            timings: Some(firsttoken_stream::dialect::Timings::from_iter([
                ("auth_ms".to_owned(), 12.345_6),
                ("created_at".to_owned(), 1_764_576_000_000.0),
            ])),
            ..answered()
        };
        for (metrics, ending) in [
            (answered(), Ending::Completed),
            (odd, Ending::Completed),
            (answered(), Ending::Failed("reset\n".repeat(100))),
        ] {
            let observed = learnt(Observation::new(
                AT.clone(),
                Some(stream.clone()),
                metrics,
                ending,
                410.123_456_7,
            ));
            let once = observed.clone().into_sample();
            let mut before = sample(
                Position {
                    start_ms: observed.at.start_ms,
                    ..AT.clone()
                },
                Some(&stream),
                observed.metrics.clone(),
                &observed.ending,
                observed.end_ms,
            );
            before.idle_spent_ms = observed.idle_spent_ms;
            before.idle_timer_late_ms = observed.idle_timer_late_ms;
            before.hidden = observed.hidden;
            before.redirected = observed.redirected;
            before.conn = observed.conn.clone();
            before.server_timing = observed.server_timing.clone();
            before.index = observed.at.index;
            before.clean();
            before.retry_wait_ms = observed.retry_wait_ms;
            before.clean();
            assert_eq!(once, before);
            assert_eq!(
                serde_json::to_string(&once).expect("json"),
                serde_json::to_string(&before).expect("json")
            );
            assert!(once.is_clean(), "{once:?}");
            assert_eq!(observed.e2e_ms(), once.e2e_ms);
        }
    }

    /// The engine pairs Resource Timing entries by the end the sample will record.
    #[test]
    fn the_end_is_known_as_it_will_be_recorded() {
        let stream = head(200, "text/event-stream");
        for (end_ms, ending) in [
            (410.123_456_7, Ending::Completed),
            (0.004_999, Ending::Completed),
            (2.0 * crate::schema::MAX_MS, Ending::Completed),
            (f64::NAN, Ending::Completed),
            (410.0, Ending::TimedOut),
        ] {
            let o = Observation::new(AT.clone(), Some(stream.clone()), answered(), ending, end_ms);
            assert_eq!(o.e2e_ms(), o.clone().into_sample().e2e_ms, "{end_ms}");
        }
        let none = Observation::new(AT.clone(), None, answered(), Ending::Completed, 4.0);
        assert_eq!(none.e2e_ms(), None);
    }
}
