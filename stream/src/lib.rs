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

pub mod dialect;
pub mod recorder;
pub mod sse;
