//! firsttoken-core: the contract between the browser and the collector, and how a
//! measurement becomes a record.
//!
//! The collector's HTTP contract ([`api`]); the benchmark plan ([`plan`]) and the share
//! links that carry it ([`share`]); the versioned result record ([`schema`]) and its
//! export ([`export`]); what sets a request apart in the crowd's cells ([`condition`]);
//! and how the engine's observations become samples: a request's outcome ([`outcome`]),
//! the connection log that tells new connections from reused ones ([`connections`]), and
//! which Resource Timing entry is whose ([`entries`]); and where a request's wait for its
//! first token went ([`layers`]). The leaves the rest takes from: a
//! field's error ([`field`]), origins ([`url`]), text a person reads ([`text`]), the
//! study id ([`study_id`]).
//!
//! No I/O and no clock: callers pass bytes and `performance.now()` readings in. The same
//! code runs in the browser (wasm32) and in the collector, so they cannot disagree. The
//! stream reader it records from is `firsttoken-stream`; the crowd's statistics are
//! `firsttoken-crowd`.

pub mod api;
pub mod condition;
pub mod connections;
pub mod entries;
pub mod export;
pub mod field;
pub mod layers;
pub mod outcome;
pub mod plan;
pub mod schema;
pub mod share;
pub mod study_id;
pub mod text;
pub mod url;
