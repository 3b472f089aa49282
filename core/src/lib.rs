//! firsttoken-core: everything about a measurement that does not touch the outside world.
//!
//! The incremental SSE parser ([`sse`]), stream dialects ([`dialect`]), the timed stream
//! recorder ([`stream`]), the benchmark plan ([`plan`]), statistics ([`stats`]), the
//! histograms crowd summaries are read from ([`sketch`], [`summary`]), the coarse client
//! description ([`client`]), the connection log that tells new connections
//! from reused ones ([`connections`]), the versioned result record ([`schema`]), share
//! links ([`share`]), their QR codes ([`qr`]), the target check before a link goes out
//! ([`check`]), provider presets ([`presets`]), and what the pages work out without
//! drawing: the compose form's study ([`compose`]), a run's time left ([`progress`]) and
//! the before/after reading ([`compare`]).
//!
//! No I/O and no clock: callers pass bytes and `performance.now()` readings in. The same
//! code runs in the browser (wasm32) and in the collector, so they cannot disagree.

pub mod check;
pub mod client;
pub mod compare;
pub mod compose;
pub mod connections;
pub mod dialect;
pub mod entries;
pub mod export;
pub mod fold;
pub mod landing;
pub mod outcome;
pub mod plan;
pub mod presets;
pub mod progress;
pub mod qr;
pub mod report;
pub mod schema;
pub mod share;
pub mod sketch;
pub mod sse;
pub mod stats;
pub mod stream;
pub mod summary;

pub use dialect::{Decoded, Dialect, Usage};
pub use plan::{Phase, PhasePlan, Plan};
pub use schema::{Client, ErrorClass, NetworkLabel, Run, Sample, Target, ValidationError};
pub use sse::{Event, SseParser};
pub use stream::{StreamMetrics, StreamRecorder};
