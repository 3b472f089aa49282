//! The measurement engine: runs a plan from the browser and hands each finished sample
//! back as it completes. It measures; it does not draw (the page does, from the messages
//! it is sent). It runs in a dedicated Web Worker ([`worker`]), driven from the page
//! through [`client::Engine`].

pub mod client;
pub mod control;
pub mod features;
pub mod health;
pub mod protocol;
pub mod request;
pub mod runner;
pub mod timing;
pub mod worker;

pub use client::{Engine, Placement};
pub use protocol::{Finished, FromEngine, Progress, ToEngine};
pub use request::{
    Ended, Exchange, Measured, Observed, Prepared, RequestSpec, RunContext, measure, measure_alone,
    prepare, send,
};
pub use runner::{Controls, apply_withdrawn, first_request, fresh_base, run_plan};
