//! firsttoken-stream: server-sent events read for timing.
//!
//! - [`sse`]: an incremental parser of the `text/event-stream` format, fed bytes as they
//!   arrive. It ends a line on a lone CR the moment the CR arrives, holds at most
//!   [`sse::MAX_PENDING_BYTES`] of an unfinished event, and says whether the stream ended
//!   inside one.
//! - [`dialect`]: what the LLM providers' stream formats (OpenAI's chat and responses,
//!   Anthropic's messages, a described custom format) count as answer text, other output,
//!   usage, error and end.
//! - [`recorder`]: one stream's time to first token, gaps between tokens and end, on the
//!   clock of whoever feeds it.
//!
//! Sans-IO and clock-free: the caller passes each chunk with its own reading of when it
//! arrived, so the same code times a stream in a browser (wasm32) and natively.
//!
//! ```
//! use firsttoken_stream::dialect::Dialect;
//! use firsttoken_stream::recorder::StreamRecorder;
//!
//! let mut recorder = StreamRecorder::new(Dialect::OpenaiChat);
//! recorder.on_chunk(212.0, b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n");
//! recorder.on_chunk(640.5, b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n");
//! recorder.on_chunk(702.0, b"data: [DONE]\n\n");
//! let metrics = recorder.finish();
//! assert_eq!(metrics.ttfb_ms, Some(212.0));
//! assert_eq!(metrics.ttft_ms, Some(640.5)); // the role chunk is not a token
//! assert!(metrics.done);
//! ```

pub mod dialect;
pub mod recorder;
pub mod sse;
