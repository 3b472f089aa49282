//! The server's integration tests, as one test binary: one link of the server and its
//! dependencies instead of one per file. Each module is one subject; `common` holds the
//! in-process client and the two databases every test runs on. (`privacy.rs` is a binary
//! of its own: it installs a process-wide log subscriber.)

mod common;

mod access;
mod admin;
mod budgets;
mod columns;
mod demo;
#[cfg(feature = "probe-dimension")]
mod dimensions;
mod export;
mod folds;
mod group_commit;
mod in_flight;
mod instances;
mod layers;
mod limits;
mod ops;
mod partitions;
mod purge_race;
mod runs;
mod shutdown;
mod slow_read;
mod sources;
mod static_files;
mod studies;
mod summary;
mod upgrade;
mod weight;
mod withheld;
