//! firsttoken-crowd: a crowd's percentiles with confidence intervals.
//!
//! - [`stats`]: percentiles by numpy's linear rule, with the fewest values each may be
//!   read from; seeded bootstrap and cluster intervals; the generator behind them.
//! - [`sketch`]: one run's values as a mergeable histogram with a proven 0.25% error.
//! - [`fold`]: whole days' runs folded together, keeping what the intervals need.
//! - [`summary`]: groups of runs read as percentiles with intervals, the collector's
//!   answer and the Results page's question.
//!
//! Numbers only: nothing here knows what a plan or a record is.

pub mod fold;
pub mod sketch;
pub mod stats;
pub mod summary;
