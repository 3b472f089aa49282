//! Turns what the engine saw of one request into a [`Sample`]: the response (if any), the
//! stream's metrics and how the request ended. Pure, so every error class is tested
//! natively; the engine only fetches, reads and stamps.

use firsttoken_stream::recorder::StreamMetrics;

use crate::plan::Phase;
use crate::schema::{ErrorClass, Sample};
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

/// Builds the sample. `end_ms` is when the request ended, from `t0`; it becomes `e2e_ms`
/// only when the body was read to its end.
pub fn sample(
    at: Position,
    head: Option<&ResponseHead>,
    metrics: StreamMetrics,
    ending: &Ending,
    end_ms: f64,
) -> Sample {
    let (error, message) = classify(head, &metrics, ending, at.phase.streams());
    let completed = head.is_some() && *ending == Ending::Completed;
    let mut sample = Sample {
        index: at.index,
        phase: at.phase,
        target: at.target,
        scenario: at.scenario,
        concurrency: at.concurrency,
        batch: at.batch,
        idle_ms: at.idle_ms,
        start_ms: at.start_ms,
        status: head.map_or(0, |h| h.status),
        error,
        error_message: message.map(|m| clean_text(&m, KEPT_MESSAGE_CHARS)),
        headers_ms: head.map(|h| h.headers_ms),
        ttfb_ms: metrics.ttfb_ms,
        ttft_ms: metrics.ttft_ms,
        ttft_any_ms: metrics.ttft_any_ms,
        last_token_ms: metrics.last_token_ms,
        e2e_ms: completed.then_some(end_ms),
        itl_ms: metrics.itl_ms,
        output_chunks: metrics.output_chunks,
        reasoning_chunks: metrics.reasoning_chunks,
        usage: metrics.usage,
        done: metrics.done,
        stream_timings: metrics.timings,
        // What only the engine knows (Resource Timing, Server-Timing, page visibility) it
        // fills in afterwards.
        conn: None,
        server_timing: Vec::new(),
        hidden: false,
        idle_spent_ms: None,
        idle_timer_late_ms: None,
        retry_wait_ms: None,
        redirected: false,
        dropped: 0,
    };
    sample.clean();
    sample
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
}
