//! The messages between the page and the engine. They cross a `postMessage` boundary as
//! JSON strings ([`super::worker::to_js`]), so both sides share these types.

use firsttoken_core::plan::{Phase, Plan};
use firsttoken_core::schema::{EngineReport, Sample};
use serde::{Deserialize, Serialize};

/// From the page to the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToEngine {
    /// Run `plan`; `tag` marks its requests when the plan asks for a run tag, and numbers
    /// its fresh host names. It is random and is not the run id: a target that learned the
    /// run id could upload a record of its own under it first.
    Start { plan: Plan, tag: String },
    /// Stop: in-flight requests are aborted (and recorded as such), nothing new starts.
    Cancel,
    /// The page became hidden or visible (browsers throttle hidden pages).
    Visibility { hidden: bool },
    /// The page has drawn every sample it was sent ([`super::control::Drawn`]).
    Drawn,
}

/// From the engine to the page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FromEngine {
    /// The engine is listening (a worker drops messages sent before this).
    Ready,
    Progress(Progress),
    /// A request finished, failed ones included (boxed: it is by far the largest message).
    Sample(Box<Sample>),
    Finished(Finished),
}

/// Where the run is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub phase: Phase,
    /// 1-based position of the phase in the plan.
    pub phase_number: u32,
    pub phases: u32,
    /// Requests finished when the phase started, and in all (each sample says when one more ends).
    pub done: u32,
    pub total: u32,
    /// During a cold phase's wait: how long the engine is idle on purpose, in ms.
    pub idle_ms: Option<u32>,
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finished {
    /// For each target: a response said it was the demo target (simulated numbers).
    pub demo: Vec<bool>,
    pub cancelled: bool,
    pub engine: EngineReport,
    /// Samples (by index) whose new-or-reused label rested on the client port alone, the
    /// port switched off later in the run: their connection cannot be told after all.
    pub withdrawn: Vec<u32>,
}
