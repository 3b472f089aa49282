//! Statistics over measured times (DESIGN.md, "Statistics").
//!
//! Percentiles use linear interpolation between closest ranks, numpy's default and that of
//! the common LLM serving benchmarks, so numbers compare directly with theirs. Confidence
//! intervals are percentile bootstraps with a seeded generator, so the same samples always
//! give the same interval, in the browser and in the collector.

/// The `p`-th percentile (0–100) of `values`, by linear interpolation between closest
/// ranks. `None` for no values; NaN values are ignored.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    percentile_sorted(&sorted(values), p)
}

/// [`percentile`] of values already sorted ascending (and free of NaN).
pub fn percentile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let rank = p.clamp(0.0, 100.0) / 100.0 * last as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64))
}

/// The median: the 50th percentile.
pub fn median(values: &[f64]) -> Option<f64> {
    percentile(values, 50.0)
}

/// The arithmetic mean, ignoring NaN.
pub fn mean(values: &[f64]) -> Option<f64> {
    let clean: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    (!clean.is_empty()).then(|| clean.iter().sum::<f64>() / clean.len() as f64)
}

/// `values` without NaN, sorted ascending.
pub fn sorted(values: &[f64]) -> Vec<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    sorted.sort_by(f64::total_cmp);
    sorted
}

/// SplitMix64 (Steele, Lea & Flood, 2014): a tiny generator whose sequence is the same on
/// every platform, which is all a reproducible bootstrap needs.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (multiply-shift; its bias is below 2⁻³² for any n a run has).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// How many resamples a bootstrap draws.
pub const BOOTSTRAP_RESAMPLES: usize = 1000;
/// The seed every interval firsttoken reports is drawn with.
pub const BOOTSTRAP_SEED: u64 = 0x00f1_257f_0c3e_2025;

/// A value with its 95% confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

/// Above this many values [`percentile_ci`] stops drawing resamples and uses the
/// bootstrap's large-sample form, which it converges to (and which a crowd summary over a
/// million samples can afford).
pub const RESAMPLE_LIMIT: usize = 10_000;

/// The `p`-th percentile of sorted values with a 95% percentile-bootstrap interval:
/// `resamples` times, draw `n` values with replacement, take the resample's percentile;
/// the interval is the 2.5th and 97.5th percentiles of those.
///
/// Resamples are drawn as counts over the sorted values, so no resample needs sorting:
/// each costs O(n). Above [`RESAMPLE_LIMIT`] values the interval is computed instead of
/// drawn: how many resampled values fall at or below a sorted value is binomial, so the
/// resampled percentile's rank spreads by ±1.96·√(n·q·(1−q)) around the percentile's own
/// rank (q = p/100), the classic order-statistic interval.
pub fn percentile_ci(sorted: &[f64], p: f64, resamples: usize, seed: u64) -> Option<Estimate> {
    let value = percentile_sorted(sorted, p)?;
    let n = sorted.len();
    if n > RESAMPLE_LIMIT {
        return Some(large_sample_ci(sorted, p, value));
    }
    let mut rng = SplitMix64::new(seed);
    let mut counts = vec![0u32; n];
    let rank = p.clamp(0.0, 100.0) / 100.0 * (n - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    let mut stats = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        counts.iter_mut().for_each(|c| *c = 0);
        for _ in 0..n {
            counts[rng.below(n)] += 1;
        }
        // The resample, sorted, holds sorted[i] counts[i] times: walk the counts to the
        // two order statistics the percentile interpolates between.
        let (mut at_lo, mut at_hi) = (None, None);
        let mut seen = 0usize;
        for (i, &c) in counts.iter().enumerate() {
            seen += c as usize;
            if at_lo.is_none() && seen > lo {
                at_lo = Some(sorted[i]);
            }
            if seen > hi {
                at_hi = Some(sorted[i]);
                break;
            }
        }
        let (a, b) = (at_lo.unwrap_or(value), at_hi.unwrap_or(value));
        stats.push(a + (b - a) * (rank - lo as f64));
    }
    stats.sort_by(f64::total_cmp);
    Some(Estimate {
        value,
        low: percentile_sorted(&stats, 2.5)?,
        high: percentile_sorted(&stats, 97.5)?,
    })
}

fn large_sample_ci(sorted: &[f64], p: f64, value: f64) -> Estimate {
    let n = sorted.len() as f64;
    let q = p.clamp(0.0, 100.0) / 100.0;
    let rank = q * (n - 1.0);
    let spread = 1.959_963_984_540_054 * (n * q * (1.0 - q)).sqrt();
    let at = |r: f64| {
        let r = r.clamp(0.0, n - 1.0);
        let (lo, hi) = (r.floor() as usize, r.ceil() as usize);
        sorted[lo] + (sorted[hi] - sorted[lo]) * (r - lo as f64)
    };
    Estimate {
        value,
        low: at(rank - spread),
        high: at(rank + spread),
    }
}

/// The shape of a set of times.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    pub count: usize,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub p50: Estimate,
    pub p90: Estimate,
    pub p95: Estimate,
    pub p99: Estimate,
}

/// Count, mean, extremes and the four reported percentiles with their intervals; each
/// percentile draws its resamples from the same seed.
pub fn distribution(values: &[f64], seed: u64) -> Option<Distribution> {
    let sorted = sorted(values);
    let ci = |p| percentile_ci(&sorted, p, BOOTSTRAP_RESAMPLES, seed);
    Some(Distribution {
        count: sorted.len(),
        mean: mean(&sorted)?,
        min: *sorted.first()?,
        max: *sorted.last()?,
        p50: ci(50.0)?,
        p90: ci(90.0)?,
        p95: ci(95.0)?,
        p99: ci(99.0)?,
    })
}

/// Each run's median and the median of those: networks drift between sessions, so a
/// crowd's typical run is worth reporting beside the pooled percentiles.
pub fn median_of_run_medians<'a>(
    runs: impl IntoIterator<Item = &'a [f64]>,
) -> (Vec<f64>, Option<f64>) {
    let medians: Vec<f64> = runs.into_iter().filter_map(median).collect();
    let overall = median(&medians);
    (medians, overall)
}

/// What the gaps between tokens looked like.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ItlSummary {
    pub gaps: usize,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    /// The longest stall: what a reader notices as the answer freezing.
    pub max: f64,
}

/// Pools the inter-token gaps of several requests.
pub fn itl_summary<'a>(gap_lists: impl IntoIterator<Item = &'a [f64]>) -> Option<ItlSummary> {
    let all: Vec<f64> = gap_lists.into_iter().flatten().copied().collect();
    let sorted = sorted(&all);
    Some(ItlSummary {
        gaps: sorted.len(),
        mean: mean(&sorted)?,
        p50: percentile_sorted(&sorted, 50.0)?,
        p99: percentile_sorted(&sorted, 99.0)?,
        max: *sorted.last()?,
    })
}

/// Time per output token after the first: `(e2e − ttft) / (output_tokens − 1)`. Needs the
/// stream's own token count (chunks are not tokens) and at least two tokens.
pub fn tpot_ms(ttft_ms: f64, e2e_ms: f64, output_tokens: u64) -> Option<f64> {
    (output_tokens >= 2).then(|| (e2e_ms - ttft_ms) / (output_tokens - 1) as f64)
}

/// How TTFT at one concurrency level compares with running alone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelDegradation {
    pub level: u32,
    pub samples: usize,
    pub median_ttft_ms: f64,
    /// Median TTFT at this level over the median at level 1.
    pub ratio: Option<f64>,
    /// What a server that handles one request at a time would give: (k + 1) / 2.
    pub serial_model: f64,
}

/// Median TTFT per concurrency level, each over level 1's, beside the serial model.
/// `levels` pairs each level with its TTFTs; levels without samples are left out.
pub fn concurrency_degradation(levels: &[(u32, Vec<f64>)]) -> Vec<LevelDegradation> {
    let base = levels
        .iter()
        .find(|(k, _)| *k == 1)
        .and_then(|(_, ttfts)| median(ttfts))
        .filter(|m| *m > 0.0);
    let mut out: Vec<LevelDegradation> = levels
        .iter()
        .filter_map(|(k, ttfts)| {
            let median_ttft_ms = median(ttfts)?;
            Some(LevelDegradation {
                level: *k,
                samples: ttfts.len(),
                median_ttft_ms,
                ratio: base.map(|b| median_ttft_ms / b),
                serial_model: (f64::from(*k) + 1.0) / 2.0,
            })
        })
        .collect();
    out.sort_by_key(|d| d.level);
    out
}

/// A plain reading of a degradation ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// TTFT hardly grows: requests are served side by side.
    Parallel,
    /// TTFT grows, less than a one-at-a-time server would.
    Partial,
    /// TTFT grows as if requests waited for each other.
    Serial,
}

impl LevelDegradation {
    /// Where the ratio falls between 1 (parallel) and the serial model; `None` at level 1
    /// or without a level-1 baseline.
    pub fn reading(&self) -> Option<Concurrency> {
        let ratio = self.ratio?;
        let span = self.serial_model - 1.0;
        if span <= 0.0 {
            return None;
        }
        let position = (ratio - 1.0) / span;
        Some(if position < 0.25 {
            Concurrency::Parallel
        } else if position < 0.75 {
            Concurrency::Partial
        } else {
            Concurrency::Serial
        })
    }
}

/// The app's own overhead from interleaved rounds: each round's `app − direct` TTFT
/// difference, and the median difference with its 95% bootstrap interval. Pairing by round
/// keeps the network's drift out of the difference.
pub fn paired_overhead(app: &[f64], direct: &[f64], seed: u64) -> Option<Estimate> {
    let differences: Vec<f64> = app
        .iter()
        .zip(direct)
        .map(|(a, d)| a - d)
        .filter(|d| !d.is_nan())
        .collect();
    percentile_ci(&sorted(&differences), 50.0, BOOTSTRAP_RESAMPLES, seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values computed with numpy 2.4.6: `np.percentile(a, p)` (method="linear").
    #[test]
    fn matches_numpy_linear() {
        let a = [15.0, 20.0, 35.0, 40.0, 50.0];
        assert_eq!(percentile(&a, 50.0), Some(35.0));
        assert_eq!(percentile(&a, 90.0), Some(46.0));
        assert_eq!(percentile(&a, 95.0), Some(48.0));
        assert_eq!(percentile(&a, 99.0), Some(49.6));
        let b = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0];
        // np.percentile([3,1,4,1,5,9,2,6], [50, 90, 99]) → [3.5, 6.9, 8.79]
        assert_eq!(median(&b), Some(3.5));
        assert!((percentile(&b, 90.0).expect("some") - 6.9).abs() < 1e-12);
        assert!((percentile(&b, 99.0).expect("some") - 8.79).abs() < 1e-12);
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(median(&[f64::NAN, 2.0]), Some(2.0));
    }

    #[test]
    fn splitmix64_matches_its_reference_sequence() {
        // The first outputs for seed 1234567, from the independent Python implementation
        // in tests/reference/stats_reference.py.
        let mut rng = SplitMix64::new(1_234_567);
        assert_eq!(rng.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(rng.next_u64(), 3_203_168_211_198_807_973);
    }

    #[test]
    fn an_interval_holds_its_estimate_and_is_reproducible() {
        let values: Vec<f64> = (1..=200).map(|i| f64::from(i * 7 % 101)).collect();
        let sorted = sorted(&values);
        let a = percentile_ci(&sorted, 90.0, 500, 42).expect("values");
        let b = percentile_ci(&sorted, 90.0, 500, 42).expect("values");
        assert_eq!(a, b);
        assert!(a.low <= a.value && a.value <= a.high, "{a:?}");
        let c = percentile_ci(&sorted, 90.0, 500, 43).expect("values");
        assert_ne!(a, c, "another seed draws other resamples");
    }

    #[test]
    fn the_large_sample_interval_agrees_with_resampling() {
        // Just above the limit, draw the bootstrap anyway and compare: the computed
        // interval's ends must sit where the resampled ones do, within a tenth of the
        // interval's own width.
        let mut rng = SplitMix64::new(7);
        let values: Vec<f64> = (0..RESAMPLE_LIMIT + 2000)
            .map(|_| {
                // A right-skewed shape, like latencies: 250 ms plus an exponential tail.
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                250.0 - 80.0 * (1.0 - u).ln()
            })
            .collect();
        let sorted = sorted(&values);
        for p in [50.0, 90.0, 99.0] {
            let computed = percentile_ci(&sorted, p, 0, 0).expect("values");
            let drawn = resampled_ci(&sorted, p, 400, 11);
            let width = drawn.high - drawn.low;
            assert_eq!(computed.value, drawn.value);
            assert!(
                (computed.low - drawn.low).abs() < 0.1 * width,
                "p{p}: {computed:?} vs {drawn:?}"
            );
            assert!(
                (computed.high - drawn.high).abs() < 0.1 * width,
                "p{p}: {computed:?} vs {drawn:?}"
            );
        }
    }

    /// The resampling bootstrap however many values there are.
    fn resampled_ci(sorted: &[f64], p: f64, resamples: usize, seed: u64) -> Estimate {
        let mut rng = SplitMix64::new(seed);
        let mut stats: Vec<f64> = (0..resamples)
            .map(|_| {
                let mut resample: Vec<f64> = (0..sorted.len())
                    .map(|_| sorted[rng.below(sorted.len())])
                    .collect();
                resample.sort_by(f64::total_cmp);
                percentile_sorted(&resample, p).expect("values")
            })
            .collect();
        stats.sort_by(f64::total_cmp);
        Estimate {
            value: percentile_sorted(sorted, p).expect("values"),
            low: percentile_sorted(&stats, 2.5).expect("stats"),
            high: percentile_sorted(&stats, 97.5).expect("stats"),
        }
    }

    #[test]
    fn degradation_reads_plainly() {
        let levels = vec![
            (1, vec![100.0, 100.0, 100.0]),
            (3, vec![100.0, 200.0, 300.0]),
            (5, vec![105.0, 110.0, 100.0, 95.0, 102.0]),
        ];
        let d = concurrency_degradation(&levels);
        assert_eq!(d[0].reading(), None);
        assert_eq!((d[1].ratio, d[1].serial_model), (Some(2.0), 2.0));
        assert_eq!(d[1].reading(), Some(Concurrency::Serial));
        assert_eq!(d[2].reading(), Some(Concurrency::Parallel));
    }

    #[test]
    fn run_medians_leave_out_empty_runs() {
        let runs = [vec![300.0, 310.0, 900.0], vec![], vec![500.0, 520.0]];
        let (medians, overall) = median_of_run_medians(runs.iter().map(Vec::as_slice));
        assert_eq!(medians, vec![310.0, 510.0]);
        assert_eq!(overall, Some(410.0));
    }

    #[test]
    fn tpot_needs_two_tokens() {
        assert_eq!(tpot_ms(300.0, 1275.0, 40), Some(25.0));
        assert_eq!(tpot_ms(300.0, 310.0, 1), None);
    }
}
