//! Concurrency degradation: each level's median TTFT over level 1's, with an interval
//! that resamples whole batches, beside what a one-at-a-time server would give, and the
//! reading a person gets from it.

use firsttoken_crowd::stats::{Estimate, SplitMix64};

/// How TTFT at one concurrency level compares with running alone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelDegradation {
    pub level: u32,
    /// Requests made at this level, failed ones included.
    pub requests: usize,
    /// The batches of simultaneous requests they came in.
    pub batches: usize,
    /// Of the requests, how many gave no first token (an error, a timeout, a cut-off
    /// stream).
    pub failed: usize,
    /// The median TTFT, failed requests counting as slower than any answer; `None` when
    /// half of the requests or more failed.
    pub median_ttft_ms: Option<f64>,
    /// The median at this level over the median at level 1, with a 95% bootstrap interval
    /// (`f64::INFINITY` where resamples were mostly failures); `None` without a level-1
    /// baseline. Level 1 itself has none.
    pub ratio: Option<Estimate>,
    /// What a server that handles one request at a time would give: (k + 1) / 2.
    pub serial_model: f64,
    /// The network's part of every first token, taken out of each before the ratio is
    /// worked out (the warm probes' median round trip; 0 without probes). A network round
    /// trip is not queued behind other requests: left in, it dilutes the ratio, and a
    /// one-at-a-time server behind a 300 ms link read as "partly" serial.
    pub network_floor_ms: f64,
}

/// A failed request in a concurrency level: slower than any answer.
const FAILED: f64 = f64::INFINITY;

/// Fewer batches than this at a level leave too few distinct resamples for an interval
/// to decide anything (two batches give three).
pub const MIN_BATCHES_FOR_READING: usize = 3;

/// The median of sorted values that may end in infinities (failures).
fn median_with_failures(sorted: &[f64]) -> Option<f64> {
    (!sorted.is_empty()).then(|| percentile_with_failures(sorted, 50.0))
}

/// The ratio of two medians where either may be a failure: a failed baseline makes the
/// ratio undecidable, which counts as unbounded.
fn ratio_of(level: f64, base: f64) -> f64 {
    if base.is_infinite() || level.is_infinite() {
        FAILED
    } else {
        level / base
    }
}

/// A level's batches with failures as infinities.
fn with_failures(batches: &[Vec<Option<f64>>]) -> Vec<Vec<f64>> {
    batches
        .iter()
        .filter(|b| !b.is_empty())
        .map(|b| {
            b.iter()
                .map(|t| t.filter(|v| !v.is_nan()).unwrap_or(FAILED))
                .collect()
        })
        .collect()
}

/// The median of whole batches drawn with replacement from `batches`.
fn resampled_median(batches: &[Vec<f64>], rng: &mut SplitMix64) -> f64 {
    let mut values: Vec<f64> = (0..batches.len())
        .flat_map(|_| batches[rng.below(batches.len())].iter().copied())
        .collect();
    values.sort_by(f64::total_cmp);
    median_with_failures(&values).unwrap_or(FAILED)
}

fn pooled_median(batches: &[Vec<f64>]) -> Option<f64> {
    let mut values: Vec<f64> = batches.iter().flatten().copied().collect();
    values.sort_by(f64::total_cmp);
    median_with_failures(&values)
}

/// Median TTFT per concurrency level, each over level 1's with a bootstrap interval,
/// beside the serial model. `levels` gives each level's batches of simultaneous
/// requests, each request's TTFT or `None` when it gave no first token: failures count
/// against a level (as slower than any answer) instead of dropping out of it, so a server
/// that collapses under simultaneous requests cannot look unaffected.
///
/// The interval resamples whole batches, since requests of one batch wait for each other
/// (a one-at-a-time server answers a batch of 3 after 1, 2 and 3 steps, every time):
/// `resamples` times, draw as many of level 1's batches as it has, with replacement, then
/// as many of this level's, from one generator seeded afresh for each level, and take
/// the ratio of the two pooled medians; the interval is the 2.5th and 97.5th percentiles
/// of those ratios. Levels without requests are left out.
pub fn concurrency_degradation(
    levels: &[(u32, Vec<Vec<Option<f64>>>)],
    network_floor_ms: f64,
    resamples: usize,
    seed: u64,
) -> Vec<LevelDegradation> {
    // The floor may not take a level-1 first token to zero or below: what is left must be
    // the server's. A floor that would is not used.
    let level_1_min = levels
        .iter()
        .filter(|(k, _)| *k == 1)
        .flat_map(|(_, batches)| batches.iter().flatten().flatten())
        .copied()
        .fold(f64::INFINITY, f64::min);
    let floor =
        if network_floor_ms.is_finite() && network_floor_ms > 0.0 && network_floor_ms < level_1_min
        {
            network_floor_ms
        } else {
            0.0
        };
    let server_part = |batches: &[Vec<f64>]| -> Vec<Vec<f64>> {
        batches
            .iter()
            .map(|b| b.iter().map(|v| v - floor).collect())
            .collect()
    };
    let base = levels
        .iter()
        .find(|(k, _)| *k == 1)
        .map(|(_, batches)| server_part(&with_failures(batches)))
        .filter(|b| pooled_median(b).is_some_and(|m| m.is_finite() && m > 0.0));
    let mut out: Vec<LevelDegradation> = levels
        .iter()
        .map(|(k, batches)| (*k, with_failures(batches)))
        .filter(|(_, batches)| !batches.is_empty())
        .map(|(k, all_of_it)| {
            let median = pooled_median(&all_of_it).unwrap_or(FAILED);
            let batches = server_part(&all_of_it);
            let ratio = base.as_ref().filter(|_| k != 1).map(|base| {
                let mut rng = SplitMix64::new(seed);
                let mut ratios: Vec<f64> = (0..resamples)
                    .map(|_| {
                        let b = resampled_median(base, &mut rng);
                        ratio_of(resampled_median(&batches, &mut rng), b)
                    })
                    .collect();
                ratios.sort_by(f64::total_cmp);
                Estimate {
                    value: ratio_of(
                        pooled_median(&batches).unwrap_or(FAILED),
                        pooled_median(base).unwrap_or(FAILED),
                    ),
                    low: percentile_with_failures(&ratios, 2.5),
                    high: percentile_with_failures(&ratios, 97.5),
                }
            });
            let all = batches.iter().flatten();
            LevelDegradation {
                level: k,
                requests: all.clone().count(),
                batches: batches.len(),
                failed: all.filter(|v| v.is_infinite()).count(),
                median_ttft_ms: median.is_finite().then_some(median),
                ratio,
                serial_model: (f64::from(k) + 1.0) / 2.0,
                network_floor_ms: floor,
            }
        })
        .collect();
    out.sort_by_key(|d| d.level);
    out
}

/// [`percentile_sorted`] of sorted values that may end in infinities: interpolating
/// towards an infinity gives infinity, never NaN.
fn percentile_with_failures(sorted: &[f64], p: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return FAILED;
    };
    let rank = p.clamp(0.0, 100.0) / 100.0 * last as f64;
    let (lo, hi) = (sorted[rank.floor() as usize], sorted[rank.ceil() as usize]);
    if lo == hi || hi.is_infinite() {
        hi.max(lo)
    } else {
        lo + (hi - lo) * (rank - rank.floor())
    }
}

/// What a concurrency level says about the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// TTFT hardly grows: the interval excludes the one-at-a-time model.
    Parallel,
    /// TTFT grows, less than a one-at-a-time server would: the interval excludes both.
    Partial,
    /// TTFT grows as if requests waited for each other: the interval excludes running
    /// side by side.
    Serial,
    /// The interval holds both models, or the level had fewer than
    /// [`MIN_BATCHES_FOR_READING`] batches: too few requests to tell.
    Undecided,
}

impl LevelDegradation {
    /// Where this level falls between 1 (side by side) and the serial model. A model is
    /// named only when the ratio's interval excludes the other one: "side by side" needs
    /// the interval's top below the serial model, "one at a time" its bottom above 1.
    /// `None` at level 1 or without a level-1 baseline.
    pub fn reading(&self) -> Option<Concurrency> {
        let ratio = self.ratio?;
        let span = self.serial_model - 1.0;
        if span <= 0.0 {
            return None;
        }
        if self.batches < MIN_BATCHES_FOR_READING {
            return Some(Concurrency::Undecided);
        }
        let position = (ratio.value - 1.0) / span;
        let excludes_serial = ratio.high < self.serial_model;
        let excludes_parallel = ratio.low > 1.0;
        Some(match (excludes_parallel, excludes_serial) {
            (false, false) => Concurrency::Undecided,
            (false, true) => Concurrency::Parallel,
            (true, false) => Concurrency::Serial,
            (true, true) if position < 0.25 => Concurrency::Parallel,
            (true, true) if position >= 0.75 => Concurrency::Serial,
            (true, true) => Concurrency::Partial,
        })
    }
}
