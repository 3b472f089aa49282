//! Statistics over measured times (ARCHITECTURE.md, "The statistics").
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

    /// Uniform in `[0, 1)`: the top 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
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
        return Some(large_sample_ci(sorted, p, value, 1.0));
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

/// The 97.5th percentile of the standard normal distribution.
pub const Z_975: f64 = 1.959_963_984_540_054;

/// The order-statistic interval: ranks `q(n−1) ± 1.96·√(n·q(1−q)·inflation)`, where
/// `inflation` is how many times the percentile's variance exceeds independent values'
/// (1 for independent ones).
fn large_sample_ci(sorted: &[f64], p: f64, value: f64, inflation: f64) -> Estimate {
    let n = sorted.len() as f64;
    let q = p.clamp(0.0, 100.0) / 100.0;
    let rank = q * (n - 1.0);
    let spread = Z_975 * (n * q * (1.0 - q) * inflation).sqrt();
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

/// The median of `a` minus the median of `b`, two independent groups, with a 95%
/// percentile-bootstrap interval that resamples each group on its own. `None` unless
/// each group has two values or more.
pub fn difference_of_medians(a: &[f64], b: &[f64], seed: u64) -> Option<Estimate> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let value = median(a)? - median(b)?;
    let mut rng = SplitMix64::new(seed);
    let mut resample = |values: &[f64], into: &mut Vec<f64>| {
        into.clear();
        into.extend((0..values.len()).map(|_| values[rng.below(values.len())]));
        into.sort_by(f64::total_cmp);
        percentile_sorted(into, 50.0)
    };
    let (mut ra, mut rb) = (Vec::with_capacity(a.len()), Vec::with_capacity(b.len()));
    let mut stats: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .filter_map(|_| Some(resample(a, &mut ra)? - resample(b, &mut rb)?))
        .collect();
    stats.sort_by(f64::total_cmp);
    Some(Estimate {
        value,
        low: percentile_sorted(&stats, 2.5)?,
        high: percentile_sorted(&stats, 97.5)?,
    })
}

/// The fewest values the `p`-th percentile is reported from: `1 / (1 − p/100)`, so that
/// at least one value lies above it (p90 from 10 values, p95 from 20, p99 from 100). Below
/// that, the "p99" of 30 values is only their maximum under another name. The median
/// needs one value.
pub fn min_values_for(p: f64) -> usize {
    if p <= 50.0 {
        1
    } else {
        (1.0 / (1.0 - p.min(99.9) / 100.0)).round() as usize
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
    /// `None` below [`min_values_for`] values, as for p95 and p99.
    pub p90: Option<Estimate>,
    pub p95: Option<Estimate>,
    pub p99: Option<Estimate>,
}

/// The shape of a run's times, `in_order` as the requests ran. Each percentile's interval
/// allows for correlation between neighbours ([`run_percentile_ci`]): requests
/// of one run are not independent on a real network (a congested minute, a handover, a
/// provider's busy spell make neighbours alike), and resampling them one by one as if
/// they were gives intervals too narrow (about 1.7× at a lag-1 correlation of 0.5).
pub fn distribution(in_order: &[f64], seed: u64) -> Option<Distribution> {
    let sorted = sorted(in_order);
    let ci = |p| {
        (sorted.len() >= min_values_for(p))
            .then(|| run_percentile_ci(in_order, &sorted, p, seed))
            .flatten()
    };
    Some(Distribution {
        count: sorted.len(),
        mean: mean(&sorted)?,
        min: *sorted.first()?,
        max: *sorted.last()?,
        p50: ci(50.0)?,
        p90: ci(90.0),
        p95: ci(95.0),
        p99: ci(99.0),
    })
}

/// The `p`-th percentile of a run's values (`in_order` as they ran, `sorted` the same
/// sorted) with its 95% interval: the bootstrap's where the values show no positive
/// correlation, else the order-statistic interval with its rank spread widened by
/// √[`dependence_inflation`] (ranks `q(n−1) ± 1.96·√(n·q(1−q)·inflation)`).
pub fn run_percentile_ci(in_order: &[f64], sorted: &[f64], p: f64, seed: u64) -> Option<Estimate> {
    let inflation = dependence_inflation(in_order, p);
    if inflation <= 1.0 {
        return percentile_ci(sorted, p, BOOTSTRAP_RESAMPLES, seed);
    }
    let value = percentile_sorted(sorted, p)?;
    Some(large_sample_ci(sorted, p, value, inflation))
}

/// How many times the variance of the `p`-th percentile of `in_order` exceeds what
/// independent values would give: `1 + 2·Σₖ ρₖ`, with ρₖ the lag-k autocorrelation of
/// the indicator series `[xᵢ ≤ the percentile]` (a sample percentile's variance is that
/// indicator mean's, to first order). The sum is Geyer's initial positive sequence: lags
/// in pairs, stopping at the first pair whose sum is not positive, so noise at long lags
/// is left out. Never below 1: a series that looks anti-correlated keeps the independent
/// interval.
///
/// Checked by simulation (`the_interval_covers_its_percentile_on_correlated_series`):
/// on a lognormal AR(1) series of 120 values the median's 95% interval covers the true
/// median about 95% of the time at lag-1 correlations of 0, 0.3 and 0.6, where resampling
/// values one by one covered about 75% at 0.6 (600 simulated series, numpy). Short
/// series cannot show their own correlation: at 20 values and 0.6 it covers about 86%.
pub fn dependence_inflation(in_order: &[f64], p: f64) -> f64 {
    let n = in_order.len();
    let Some(cut) = percentile(in_order, p) else {
        return 1.0;
    };
    let below = in_order.iter().filter(|&&x| x <= cut).count() as f64 / n as f64;
    let centred: Vec<f64> = in_order
        .iter()
        .map(|&x| f64::from(u8::from(x <= cut)) - below)
        .collect();
    let at_lag = |k: usize| -> f64 { centred.iter().zip(&centred[k..]).map(|(a, b)| a * b).sum() };
    let variance = at_lag(0);
    if variance <= 0.0 {
        return 1.0;
    }
    let mut sum = 0.0;
    let mut k = 1;
    while k + 1 < n / 2 {
        let pair = (at_lag(k) + at_lag(k + 1)) / variance;
        if pair <= 0.0 {
            break;
        }
        sum += pair;
        k += 2;
    }
    (1.0 + 2.0 * sum).max(1.0)
}

/// Percentiles of values that come in clusters (a crowd's runs: the samples of one run
/// share a browser, a network and a minute, so they are not independent), each with a 95%
/// interval from a cluster bootstrap: `resamples` times, draw as many runs as there are,
/// with replacement, pool their values and take the percentile. `ps` must be ascending.
///
/// Resamples are drawn as counts per cluster over the pooled values sorted once, so a
/// resample costs one walk over them. Above [`RESAMPLE_LIMIT`] values the interval is
/// computed instead: the large-sample form the cluster bootstrap converges to (Woodruff's
/// interval with the between-cluster variance, see [`cluster_large_sample_ci`]).
/// Clusters without values are left out; `None` for a percentile when there are none.
pub fn cluster_percentiles(
    clusters: &[&[f64]],
    ps: &[f64],
    resamples: usize,
    seed: u64,
) -> Vec<Option<Estimate>> {
    let clusters: Vec<Vec<f64>> = clusters
        .iter()
        .map(|c| sorted(c))
        .filter(|c| !c.is_empty())
        .collect();
    let mut pooled: Vec<(f64, u32)> = clusters
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.iter().map(move |&v| (v, i as u32)))
        .collect();
    pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
    let values: Vec<f64> = pooled.iter().map(|(v, _)| *v).collect();
    let points: Vec<Option<f64>> = ps.iter().map(|&p| percentile_sorted(&values, p)).collect();
    if values.is_empty() {
        return points.iter().map(|_| None).collect();
    }
    if values.len() > RESAMPLE_LIMIT {
        let sizes: Vec<usize> = clusters.iter().map(Vec::len).collect();
        return ps
            .iter()
            .zip(&points)
            .map(|(&p, value)| Some(cluster_large_sample_ci(&pooled, &sizes, p, (*value)?)))
            .collect();
    }
    let r = clusters.len();
    let mut rng = SplitMix64::new(seed);
    let mut draws = vec![0u32; r];
    let mut stats: Vec<Vec<f64>> = ps.iter().map(|_| Vec::with_capacity(resamples)).collect();
    for _ in 0..resamples {
        draws.iter_mut().for_each(|d| *d = 0);
        for _ in 0..r {
            draws[rng.below(r)] += 1;
        }
        let m: usize = draws
            .iter()
            .zip(&clusters)
            .map(|(&d, c)| d as usize * c.len())
            .sum();
        // The resample, sorted, holds each pooled value as often as its cluster was drawn:
        // walk the pooled values once, to every order statistic the percentiles need.
        let ranks: Vec<(f64, usize, usize)> = ps
            .iter()
            .map(|&p| {
                let rank = p.clamp(0.0, 100.0) / 100.0 * (m - 1) as f64;
                (rank, rank.floor() as usize, rank.ceil() as usize)
            })
            .collect();
        let mut found: Vec<(Option<f64>, Option<f64>)> = vec![(None, None); ps.len()];
        let mut seen = 0usize;
        let mut next = 0usize;
        for &(value, cluster) in &pooled {
            let weight = draws[cluster as usize] as usize;
            if weight == 0 {
                continue;
            }
            seen += weight;
            for (j, &(_, lo, hi)) in ranks.iter().enumerate().skip(next) {
                if found[j].0.is_none() && seen > lo {
                    found[j].0 = Some(value);
                }
                if found[j].1.is_none() && seen > hi {
                    found[j].1 = Some(value);
                }
            }
            while next < ranks.len() && found[next].1.is_some() {
                next += 1;
            }
            if next == ranks.len() {
                break;
            }
        }
        for (j, &(rank, lo, _)) in ranks.iter().enumerate() {
            if let (Some(a), Some(b)) = found[j] {
                stats[j].push(a + (b - a) * (rank - lo as f64));
            }
        }
    }
    points
        .into_iter()
        .zip(stats)
        .map(|(value, mut drawn)| {
            drawn.sort_by(f64::total_cmp);
            Some(Estimate {
                value: value?,
                low: percentile_sorted(&drawn, 2.5)?,
                high: percentile_sorted(&drawn, 97.5)?,
            })
        })
        .collect()
}

/// The cluster bootstrap's large-sample interval for the `p`-th percentile `value` of
/// `pooled` (values sorted ascending, each with its cluster), clusters of `sizes`.
///
/// Woodruff (1952): find an interval for the fraction of values at or below the
/// percentile, then read it back through the pooled values. With `y_r` the values of
/// cluster `r` at or below `value`, `n_r` its size, `N` all values and `q = p/100`, the
/// fraction's variance over resampled clusters is `Σ_r (y_r − q·n_r)² / N²` (for clusters
/// of one value this is `q(1 − q)/N`, and the interval is the order-statistic one of
/// [`percentile_ci`]). The interval's ends are the pooled values at ranks
/// `q(N − 1) ± 1.96·N·√variance`, interpolated.
pub fn cluster_large_sample_ci(
    pooled: &[(f64, u32)],
    sizes: &[usize],
    p: f64,
    value: f64,
) -> Estimate {
    let n = pooled.len() as f64;
    let q = p.clamp(0.0, 100.0) / 100.0;
    let mut at_or_below = vec![0usize; sizes.len()];
    for &(_, cluster) in pooled.iter().take_while(|(v, _)| *v <= value) {
        at_or_below[cluster as usize] += 1;
    }
    let variance: f64 = at_or_below
        .iter()
        .zip(sizes)
        .map(|(&y, &size)| (y as f64 - q * size as f64).powi(2))
        .sum::<f64>()
        / (n * n);
    let spread = Z_975 * n * variance.sqrt();
    let rank = q * (n - 1.0);
    let at = |r: f64| {
        let r = r.clamp(0.0, n - 1.0);
        let (lo, hi) = (r.floor() as usize, r.ceil() as usize);
        let (a, b) = (pooled[lo].0, pooled[hi].0);
        a + (b - a) * (r - lo as f64)
    };
    Estimate {
        value,
        low: at(rank - spread),
        high: at(rank + spread),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each percentile appears at exactly its minimum count: one value fewer, and it is
    /// absent (p90 from 10 values, p95 from 20, p99 from 100).
    #[test]
    fn each_percentile_appears_at_its_minimum_count_and_not_one_value_before() {
        let of = |n: usize| {
            let values: Vec<f64> = (0..n).map(|i| i as f64).collect();
            distribution(&values, BOOTSTRAP_SEED).expect("values")
        };
        assert_eq!(
            (
                min_values_for(90.0),
                min_values_for(95.0),
                min_values_for(99.0)
            ),
            (10, 20, 100)
        );
        assert!(of(9).p90.is_none() && of(10).p90.is_some());
        assert!(of(19).p95.is_none() && of(20).p95.is_some());
        assert!(of(99).p99.is_none() && of(100).p99.is_some());
        assert!(
            of(1).p90.is_none(),
            "one value has a median and nothing more"
        );
    }

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
    fn run_medians_leave_out_empty_runs() {
        let runs = [vec![300.0, 310.0, 900.0], vec![], vec![500.0, 520.0]];
        let (medians, overall) = median_of_run_medians(runs.iter().map(Vec::as_slice));
        assert_eq!(medians, vec![310.0, 510.0]);
        assert_eq!(overall, Some(410.0));
    }

    /// A lognormal series whose logs are AR(1) with lag-1 correlation `rho`, true median
    /// 500 whatever `rho` (the log's stationary variance is kept at 0.25).
    fn correlated(n: usize, rho: f64, rng: &mut SplitMix64) -> Vec<f64> {
        let mut normal = || {
            // Box-Muller from two uniforms in (0, 1].
            let u = |r: &mut SplitMix64| ((r.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
            let (a, b) = (u(rng), u(rng));
            (-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()
        };
        let mut x = normal();
        (0..n)
            .map(|_| {
                let value = 500.0 * (0.5 * x).exp();
                x = rho * x + (1.0 - rho * rho).sqrt() * normal();
                value
            })
            .collect()
    }

    /// Coverage of the median's 95% interval on correlated series, the share of series
    /// whose interval holds the true median: within 92–98% at 120 values (a Session's
    /// steady phase), independent or not. Resampling values one by one, as before, covered
    /// about 75% at a correlation of 0.6.
    #[test]
    fn the_interval_covers_its_percentile_on_correlated_series() {
        let mut rng = SplitMix64::new(7);
        for rho in [0.0, 0.3, 0.6] {
            let series = 600;
            let covered = (0..series)
                .filter(|&i| {
                    let values = correlated(120, rho, &mut rng);
                    let e = run_percentile_ci(&values, &sorted(&values), 50.0, i as u64)
                        .expect("values");
                    e.low <= 500.0 && 500.0 <= e.high
                })
                .count();
            let coverage = covered as f64 / series as f64;
            assert!(
                (0.92..=0.98).contains(&coverage),
                "rho {rho}: coverage {coverage}"
            );
        }
    }

    #[test]
    fn independent_looking_values_keep_the_bootstraps_interval() {
        // Alternating values: anti-correlated indicators, no widening.
        let values: Vec<f64> = (0..40)
            .map(|i| if i % 2 == 0 { 100.0 } else { 200.0 } + i as f64)
            .collect();
        assert_eq!(dependence_inflation(&values, 50.0), 1.0);
        // Two long blocks: strongly correlated, much wider.
        let blocks: Vec<f64> = (0..40)
            .map(|i| if i < 20 { 100.0 } else { 200.0 } + i as f64)
            .collect();
        assert!(dependence_inflation(&blocks, 50.0) > 5.0);
    }
}
