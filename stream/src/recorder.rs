//! Turns a response body, as timestamped chunks, into the stream's timing metrics.
//!
//! The engine stamps each chunk with `performance.now()` the moment the reader hands it
//! over, before any parsing, and passes the stamp in with the bytes. Every event a chunk
//! completes happened at that chunk's time: that is how a parse can never delay a
//! timestamp. All times are milliseconds from the request's `t0`.

use crate::dialect::{Dialect, Timings, Usage, timings_from};
use crate::sse::{MAX_PENDING_BYTES, SseParser};

/// At most this many inter-token gaps are kept per request; a longer answer keeps its
/// first gaps (its totals, TTFT and last-token time stay exact).
pub const MAX_ITL_GAPS: usize = 8192;

/// What a finished stream measured.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamMetrics {
    /// The first body chunk was read.
    pub ttfb_ms: Option<f64>,
    /// The chunk completing the first event with answer text was read: **the** TTFT.
    pub ttft_ms: Option<f64>,
    /// The first event with any output (reasoning, tool call or answer text).
    pub ttft_any_ms: Option<f64>,
    /// The last event with output.
    pub last_token_ms: Option<f64>,
    /// Gaps between successive output events. Events that arrived in the same chunk are
    /// 0 ms apart: that is what the reader saw.
    pub itl_ms: Vec<f64>,
    /// Events dispatched.
    pub events: u32,
    /// Events with any output.
    pub output_chunks: u32,
    /// Events with answer text.
    pub content_chunks: u32,
    /// Events with reasoning text.
    pub reasoning_chunks: u32,
    /// Characters of answer text received (kept instead of the text itself).
    pub content_chars: u64,
    /// Body bytes received.
    pub bytes: u64,
    /// Token counts the stream reported (later reports update earlier ones, count by count).
    pub usage: Option<Usage>,
    /// The server's own timing breakdown, when the stream carried one.
    pub timings: Option<Timings>,
    /// The first error the stream reported inside itself: its message, for this page only.
    pub stream_error: Option<String>,
    /// That error's `type` and `code`, where they are identifiers: what a record keeps.
    pub stream_error_code: Option<String>,
    /// The first event that did not have its dialect's shape.
    pub parse_error: Option<String>,
    /// The stream's own end marker arrived.
    pub done: bool,
    /// The body ended inside an event (a truncated answer).
    pub unterminated: bool,
    /// The dialect ends its streams with a marker of its own, so a stream without `done`
    /// was cut off.
    pub expects_end_marker: bool,
}

/// Feeds stamped chunks through the SSE parser and a dialect, keeping the metrics.
#[derive(Debug)]
pub struct StreamRecorder {
    parser: SseParser,
    dialect: Dialect,
    /// Where in an event's JSON the server may put its timing breakdown, for dialects
    /// that have no place of their own for it.
    timings_pointer: Option<String>,
    /// The pointer's first key, quoted (`"server_timings"`): an event whose data does not
    /// contain it cannot have the breakdown, so it is not parsed a second time.
    timings_key: String,
    metrics: StreamMetrics,
}

impl StreamRecorder {
    /// A recorder for one response body in `dialect`.
    pub fn new(dialect: Dialect) -> Self {
        Self {
            parser: SseParser::new(),
            timings_pointer: None,
            timings_key: String::new(),
            metrics: StreamMetrics {
                expects_end_marker: dialect.has_end_marker(),
                ..StreamMetrics::default()
            },
            dialect,
        }
    }

    /// Also looks for a timing breakdown at `pointer` in every JSON event.
    pub fn with_timings_pointer(mut self, pointer: Option<String>) -> Self {
        self.timings_key = pointer
            .as_deref()
            .and_then(|p| p.strip_prefix('/'))
            .map(|p| p.split('/').next().unwrap_or_default())
            // RFC 6901: `~1` stands for `/` and `~0` for `~` in a pointer's keys.
            .map(|key| format!("\"{}\"", key.replace("~1", "/").replace("~0", "~")))
            .unwrap_or_default();
        self.timings_pointer = pointer;
        self
    }

    /// What has been measured so far (for live display).
    pub fn metrics(&self) -> &StreamMetrics {
        &self.metrics
    }

    /// One chunk as the reader handed it over at `t_ms`.
    pub fn on_chunk(&mut self, t_ms: f64, bytes: &[u8]) {
        let Self {
            parser,
            dialect,
            timings_pointer,
            timings_key,
            metrics: m,
        } = self;
        m.ttfb_ms.get_or_insert(t_ms);
        m.bytes += bytes.len() as u64;
        parser.feed(bytes, |event| {
            m.events += 1;
            let decoded = match dialect.decode(&event) {
                Ok(decoded) => decoded,
                Err(e) => {
                    m.parse_error.get_or_insert_with(|| e.to_string());
                    return;
                }
            };
            if decoded.has_output() {
                m.output_chunks += 1;
                m.ttft_any_ms.get_or_insert(t_ms);
                if let Some(last) = m.last_token_ms
                    && m.itl_ms.len() < MAX_ITL_GAPS
                {
                    m.itl_ms.push(t_ms - last);
                }
                m.last_token_ms = Some(t_ms);
            }
            if decoded.has_answer() {
                m.content_chunks += 1;
                m.content_chars += decoded.content.chars().count() as u64;
                m.ttft_ms.get_or_insert(t_ms);
            }
            if decoded.has_reasoning() {
                m.reasoning_chunks += 1;
            }
            if let Some(usage) = decoded.usage {
                m.usage = Some(Usage::merge(m.usage, usage));
            }
            if let Some(timings) = decoded.timings {
                m.timings = Some(timings);
            } else if let Some(pointer) = timings_pointer.as_deref()
                && event.data.contains(timings_key.as_str())
                && let Ok(value) = serde_json::from_str::<serde_json::Value>(&event.data)
                && let Some(timings) = value.pointer(pointer).and_then(timings_from)
            {
                m.timings = Some(timings);
            }
            if let Some(error) = decoded.error
                && m.stream_error.is_none()
            {
                m.stream_error = Some(error);
                m.stream_error_code = decoded.error_code;
            }
            m.done |= decoded.done;
        });
    }

    /// The body ended (the reader said done).
    pub fn finish(mut self) -> StreamMetrics {
        let end = self.parser.finish();
        self.metrics.unterminated = end.unterminated;
        if end.overflowed {
            self.metrics.parse_error = Some(format!(
                "a line or an event of the stream grew past {MAX_PENDING_BYTES} bytes; the rest was not parsed"
            ));
        }
        self.metrics
    }

    /// A chunk of a body that is not parsed (not an event stream): it counts for the
    /// time to first byte and the byte count only.
    pub fn on_unparsed_chunk(&mut self, t_ms: f64, len: usize) {
        self.metrics.ttfb_ms.get_or_insert(t_ms);
        self.metrics.bytes += len as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(content: &str) -> String {
        format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{content}\"}}}}]}}\n\n")
    }

    #[test]
    fn times_come_from_the_chunk_that_completed_the_event() {
        let mut rec = StreamRecorder::new(Dialect::OpenaiChat);
        rec.on_chunk(
            10.0,
            b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        );
        // The first answer event is split: its first half arrives at 20 ms, the blank line
        // completing it at 30 ms. TTFT is 30 ms, the moment the reader had the whole event.
        let first = chunk("Hi");
        let (a, b) = first.split_at(first.len() - 1);
        rec.on_chunk(20.0, a.as_bytes());
        rec.on_chunk(30.0, b.as_bytes());
        rec.on_chunk(
            45.0,
            format!("{}{}", chunk(" there"), chunk("!")).as_bytes(),
        );
        rec.on_chunk(50.0, b"data: [DONE]\n\n");
        let m = rec.finish();
        assert_eq!(m.ttfb_ms, Some(10.0));
        assert_eq!(m.ttft_ms, Some(30.0));
        assert_eq!(m.ttft_any_ms, Some(30.0));
        assert_eq!(m.last_token_ms, Some(45.0));
        assert_eq!(m.itl_ms, vec![15.0, 0.0]);
        assert_eq!((m.events, m.output_chunks, m.content_chunks), (5, 3, 3));
        assert_eq!(m.content_chars, "Hi there!".len() as u64);
        assert!(m.done);
        assert!(!m.unterminated);
    }

    /// Anthropic's `redacted_thinking` block is the model's output (encrypted reasoning),
    /// so it sets `ttft_any_ms`; the answer's first token comes later, with the text.
    #[test]
    fn redacted_thinking_sets_the_first_output_not_the_first_answer() {
        let event = |name: &str, data: &str| format!("event: {name}\ndata: {data}\n\n");
        let mut rec = StreamRecorder::new(Dialect::Anthropic);
        rec.on_chunk(
            10.0,
            event("message_start", r#"{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}"#).as_bytes(),
        );
        rec.on_chunk(
            20.0,
            event("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3p"}}"#).as_bytes(),
        );
        rec.on_chunk(
            70.0,
            event("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}}"#).as_bytes(),
        );
        rec.on_chunk(
            80.0,
            event("message_stop", r#"{"type":"message_stop"}"#).as_bytes(),
        );
        let m = rec.finish();
        assert_eq!(m.ttft_any_ms, Some(20.0));
        assert_eq!(m.ttft_ms, Some(70.0));
        assert!(m.done);
    }

    /// OpenAI's `delta.refusal` is what the user reads instead of an answer: its first
    /// token is the first token.
    #[test]
    fn a_refusal_sets_the_first_token() {
        let mut rec = StreamRecorder::new(Dialect::OpenaiChat);
        rec.on_chunk(
            15.0,
            b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"refusal\":\"I can\"}}]}\n\n",
        );
        rec.on_chunk(25.0, b"data: [DONE]\n\n");
        let m = rec.finish();
        assert_eq!(m.ttft_ms, Some(15.0));
        assert_eq!(m.ttft_any_ms, Some(15.0));
    }

    #[test]
    fn a_malformed_event_is_recorded_and_the_stream_goes_on() {
        let mut rec = StreamRecorder::new(Dialect::OpenaiChat);
        rec.on_chunk(5.0, b"data: {oops\n\n");
        rec.on_chunk(6.0, chunk("x").as_bytes());
        let m = rec.finish();
        assert!(
            m.parse_error
                .as_deref()
                .is_some_and(|e| e.contains("openai-chat"))
        );
        assert_eq!(m.ttft_ms, Some(6.0));
        assert!(!m.done);
    }

    #[test]
    fn an_endless_line_or_event_ends_in_a_parse_error_not_in_memory() {
        let mut rec = StreamRecorder::new(Dialect::OpenaiChat);
        rec.on_chunk(1.0, chunk("a").as_bytes());
        let piece = vec![b'x'; 64 * 1024];
        rec.on_chunk(2.0, b"data: ");
        for i in 0..40 {
            rec.on_chunk(3.0 + f64::from(i), &piece);
        }
        rec.on_chunk(50.0, b"\n\n");
        rec.on_chunk(51.0, chunk("b").as_bytes());
        let m = rec.finish();
        assert!(
            m.parse_error
                .as_deref()
                .is_some_and(|e| e.contains("grew past")),
            "{:?}",
            m.parse_error
        );
        assert_eq!(m.ttft_ms, Some(1.0));
        assert_eq!(m.content_chunks, 1, "nothing after the overflow is parsed");

        // Many data lines of one event, none of them long: the event is bounded too.
        let mut rec = StreamRecorder::new(Dialect::Text);
        let line = format!("data: {}\n", "y".repeat(1000));
        for i in 0..1200 {
            rec.on_chunk(f64::from(i), line.as_bytes());
        }
        assert!(rec.finish().parse_error.is_some());
    }

    #[test]
    fn itl_list_is_capped() {
        let mut rec = StreamRecorder::new(Dialect::Text);
        for i in 0..(MAX_ITL_GAPS + 10) {
            rec.on_chunk(i as f64, b"data: t\n\n");
        }
        let m = rec.finish();
        assert_eq!(m.itl_ms.len(), MAX_ITL_GAPS);
        assert_eq!(m.last_token_ms, Some((MAX_ITL_GAPS + 9) as f64));
    }
}
