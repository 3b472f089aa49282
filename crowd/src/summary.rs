//! Crowd summaries, as the collector answers them and the app reads them: samples grouped
//! by any of the [`Dimension`]s, each group's TTFT and end-to-end percentiles with
//! cluster-bootstrap intervals (whole runs resampled: the samples of one run share a
//! browser, a network and a minute), error rates by class and the median of per-run
//! medians.
//!
//! The collector keeps each run's samples of each combination of dimensions ready as a
//! [`Cell`]: counts, and sketches of the times with a bounded relative error
//! ([`crate::sketch`]), and whole days' runs folded together ([`crate::fold`]). A summary
//! adds cells and folds up in an [`Accumulator`], so one over a million samples reads
//! small histograms, not a million values, and its percentiles are within
//! [`crate::sketch::RELATIVE_ERROR`] (0.25%) of the exact ones.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::fold::{Fold, Listed, Spread};
use crate::sketch::Sketch;
use crate::stats::{self, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, Estimate};

mod accumulator;
mod dimension;
pub mod layer;
mod weight;
pub use accumulator::Accumulator;
pub use dimension::{Dimension, Kind, Spec};
pub use layer::{Layer, Layers};
pub use weight::{REQUESTS_PER_RUN_PHASE, counted_in_crowd};

/// One sample as a summary reads it: its value of each grouping dimension (as text, ""
/// when it had none), and its numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub group: Vec<String>,
    pub run_id: String,
    /// The error class, when the request failed.
    pub error: Option<String>,
    pub ttft_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
}
/// Groups with fewer answered requests than this show counts, not percentiles.
pub const DEFAULT_MIN_SAMPLES: usize = 30;
/// Groups from fewer runs than this publish nothing but their key: no count, no
/// percentile, no error rate, so no one's run can be read out of a small group. A run
/// record carries no device identity (by design), so runs are what is counted. The
/// server's `--min-runs` may raise it, never lower it.
pub const DEFAULT_MIN_RUNS: usize = 5;
/// Intervals resample runs; with fewer runs than this they would mostly describe those
/// few runs (a cluster bootstrap's spread shrinks as (R − 1)/R and its ends come from a
/// handful of distinct resamples), so a group shows its percentiles without intervals.
pub const MIN_RUNS_FOR_INTERVAL: usize = 10;
/// Points on each group's TTFT distribution curve.
const CDF_POINTS: usize = 41;

/// A summary's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub group_by: Vec<Dimension>,
    pub min_samples: usize,
    /// Groups from fewer runs than this are withheld ([`DEFAULT_MIN_RUNS`]).
    pub min_runs: usize,
    /// The most requests of each phase a run counts with ([`REQUESTS_PER_RUN_PHASE`]).
    #[serde(default = "requests_per_run_phase")]
    pub requests_per_run_phase: usize,
    /// The time window the numbers cover (Unix ms, `to` excluded), as the collector
    /// applied it: widened to whole hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_ms: Option<i64>,
    pub groups: Vec<Group>,
}

fn requests_per_run_phase() -> usize {
    REQUESTS_PER_RUN_PHASE
}

/// One group of samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// The group's value of each grouping dimension (`null` where the sample had none).
    pub key: BTreeMap<Dimension, Option<String>>,
    /// Whether the group's numbers are withheld: it has fewer runs than `min_runs`, or
    /// its numbers subtracted from a total would give a withheld group's ([`Summary`]'s
    /// complementary suppression). Then every count and number below is `null` or empty.
    #[serde(default)]
    pub withheld: bool,
    pub runs: Option<usize>,
    pub samples: Option<usize>,
    /// Samples that answered (no error, a first token).
    pub answered: Option<usize>,
    /// `None` when the group has fewer answered samples than `min_samples`; then `note`
    /// says so.
    pub ttft_ms: Option<Percentiles>,
    pub e2e_ms: Option<Percentiles>,
    /// The median of each run's median TTFT: networks drift between sessions. `None`
    /// below `min_samples`, like the percentiles.
    pub median_of_run_medians_ttft_ms: Option<f64>,
    /// Failed samples over all samples.
    pub error_rate: Option<f64>,
    /// Failed samples by error class.
    pub errors: BTreeMap<String, ErrorCount>,
    /// The TTFT distribution: `[ms, fraction of answered samples at or below it]`; empty
    /// below `min_samples` (a curve of a few values shows every one of them).
    pub ttft_cdf: Vec<[f64; 2]>,
    /// Answered samples whose wait for the first token split whole into [`Layer`]s (the
    /// target reported its own time; the browser showed the time before sending).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<usize>,
    /// The TTFT of those samples in layers: each layer's percentiles with intervals, and
    /// its share of their mean TTFT. Empty below `min_samples` such samples; then
    /// `split_note` says why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<LayerFigure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_note: Option<String>,
    pub note: Option<String>,
}

/// One layer of a group's TTFT.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LayerFigure {
    pub layer: Layer,
    pub ms: Percentiles,
    /// Its mean over the mean TTFT of the same samples: the layers' shares add up to 1.
    pub share: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ErrorCount {
    pub count: usize,
    pub rate: f64,
}

/// A distribution's numbers, each percentile with its 95% interval. A percentile is
/// `null` where the count does not support it (p90 needs 10 values, p95 20, p99 100).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: usize,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub p50: Interval,
    pub p90: Option<Interval>,
    pub p95: Option<Interval>,
    pub p99: Option<Interval>,
}

/// A percentile and its 95% interval; the interval is `null` with fewer than
/// [`MIN_RUNS_FOR_INTERVAL`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub value: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

impl Interval {
    fn of(e: Estimate, with_interval: bool) -> Self {
        Self {
            value: e.value,
            low: with_interval.then_some(e.low),
            high: with_interval.then_some(e.high),
        }
    }
}

/// The percentiles of runs' values, pooled, with cluster-bootstrap intervals when there
/// are enough runs; `None` without values. Exact: the reference [`sketch_percentiles`],
/// which summaries use, is tested against.
pub fn percentiles(runs: &[&[f64]], seed: u64) -> Option<Percentiles> {
    let all = stats::sorted(
        &runs
            .iter()
            .flat_map(|r| r.iter().copied())
            .collect::<Vec<_>>(),
    );
    let with_interval = runs.iter().filter(|r| !r.is_empty()).count() >= MIN_RUNS_FOR_INTERVAL;
    let ps = [50.0, 90.0, 95.0, 99.0];
    let estimates = stats::cluster_percentiles(runs, &ps, BOOTSTRAP_RESAMPLES, seed);
    let at = |i: usize| {
        let estimate = estimates[i]?;
        (all.len() >= stats::min_values_for(ps[i])).then(|| Interval::of(estimate, with_interval))
    };
    Some(Percentiles {
        count: all.len(),
        mean: stats::mean(&all)?,
        min: *all.first()?,
        max: *all.last()?,
        p50: at(0)?,
        p90: at(1),
        p95: at(2),
        p99: at(3),
    })
}

/// The percentiles of runs' values counted in sketches, pooled, with cluster-bootstrap
/// intervals when there are enough runs; `None` without values. Each number is within
/// [`crate::sketch::RELATIVE_ERROR`] of what [`percentiles`] gives for the values themselves
/// (count, mean, minimum and maximum exactly): up to [`stats::RESAMPLE_LIMIT`] values the
/// bootstrap resamples runs of representatives, past it the large-sample interval counts
/// each run's values at or below the percentile by their buckets ([`crate::fold`]).
pub fn sketch_percentiles(runs: &[&Sketch], seed: u64) -> Option<Percentiles> {
    let mut spread = Spread::default();
    runs.iter().for_each(|r| spread.add_run(r));
    spread_percentiles(&spread, Some(runs), seed)
}

/// [`sketch_percentiles`] for runs folded into `spread`; `runs` are their sketches, which
/// the bootstrap needs up to [`stats::RESAMPLE_LIMIT`] values (a [`Fold`] keeps them that
/// long).
fn spread_percentiles(spread: &Spread, runs: Option<&[&Sketch]>, seed: u64) -> Option<Percentiles> {
    let all = spread.all();
    let (lo, hi) = (all.min()?, all.max()?);
    let count = all.count() as usize;
    let with_interval = spread.runs() as usize >= MIN_RUNS_FOR_INTERVAL;
    let ps = [50.0, 90.0, 95.0, 99.0];
    let estimates: Vec<Option<Estimate>> = match runs {
        Some(runs) if count <= stats::RESAMPLE_LIMIT => {
            let values: Vec<Vec<f64>> = runs.iter().map(|r| r.expand()).collect();
            let slices: Vec<&[f64]> = values.iter().map(Vec::as_slice).collect();
            stats::cluster_percentiles(&slices, &ps, BOOTSTRAP_RESAMPLES, seed)
        }
        _ => ps
            .iter()
            .map(|&p| Some(spread.large_sample_interval(p, all.percentile(p)?)))
            .collect(),
    };
    let at = |i: usize| {
        let estimate = estimates[i]?;
        (count >= stats::min_values_for(ps[i])).then(|| Interval::of(estimate, with_interval))
    };
    Some(Percentiles {
        count,
        mean: all.mean()?,
        min: lo,
        max: hi,
        p50: at(0)?,
        p90: at(1),
        p95: at(2),
        p99: at(3),
    })
}

/// One run's samples of one group, as the collector keeps them ready for summaries: how
/// many, their failures by class, and sketches of the answered ones' times.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cell {
    pub group: Vec<String>,
    pub run_id: String,
    pub samples: u64,
    pub errors: BTreeMap<String, u64>,
    pub ttft: Sketch,
    pub e2e: Sketch,
    /// The layers of the answered samples whose wait split whole.
    pub layers: Layers,
}

/// Complementary suppression: when an answer withholds a small group and publishes
/// others, the total (another query, with no grouping) minus the published groups would
/// give the small group's counts and errors. So the published group with the fewest runs
/// is withheld too: the difference then spans it as well, at least `min_runs` runs.
pub fn withhold_complement(groups: &mut [Group], min_runs: usize) {
    if !groups.iter().any(|g| g.withheld) {
        return;
    }
    let smallest = groups
        .iter_mut()
        .filter(|g| !g.withheld)
        .min_by_key(|g| g.runs.unwrap_or(usize::MAX));
    if let Some(g) = smallest {
        *g = Group::withheld(
            std::mem::take(&mut g.key),
            format!(
                "withheld with a group of fewer than {min_runs} runs: its numbers subtracted from the total would give that group's"
            ),
        );
    }
}

impl Group {
    /// A group that publishes its key and why, nothing else.
    pub fn withheld(key: BTreeMap<Dimension, Option<String>>, note: String) -> Self {
        Group {
            key,
            withheld: true,
            runs: None,
            samples: None,
            answered: None,
            ttft_ms: None,
            e2e_ms: None,
            median_of_run_medians_ttft_ms: None,
            error_rate: None,
            errors: BTreeMap::new(),
            ttft_cdf: Vec::new(),
            split: None,
            layers: Vec::new(),
            split_note: None,
            note: Some(note),
        }
    }
}

/// A group's numbers from its runs folded together; withheld below `min_runs` runs.
pub fn group(
    key: BTreeMap<Dimension, Option<String>>,
    fold: &Fold,
    min_samples: usize,
    min_runs: usize,
) -> Group {
    if (fold.runs as usize) < min_runs {
        return Group::withheld(
            key,
            format!(
                "fewer than {min_runs} runs: nothing about this group is published, so no one's run can be singled out"
            ),
        );
    }
    let answered = fold.ttft.all().count() as usize;
    let runs_answered = fold.ttft.runs() as usize;
    let failed: u64 = fold.errors.values().sum();
    let rate = |count: u64| count as f64 / fold.samples.max(1) as f64;
    let enough = answered >= min_samples;
    let note = if !enough {
        Some(format!(
            "percentiles need at least {min_samples} answered requests; this group has {answered}"
        ))
    } else if runs_answered < MIN_RUNS_FOR_INTERVAL {
        Some(format!(
            "intervals need at least {MIN_RUNS_FOR_INTERVAL} runs, since they resample whole runs; this group has {runs_answered}"
        ))
    } else {
        None
    };
    let listed = fold.listed();
    let sketches = |pick: fn(&Listed) -> &Sketch| -> Option<Vec<&Sketch>> {
        listed.map(|runs| runs.iter().map(pick).collect())
    };
    let (ttft_runs, e2e_runs) = (sketches(|r| &r.ttft), sketches(|r| &r.e2e));
    let (split, layers, split_note) = layer_figures(fold, min_samples);
    let (ttft_ms, e2e_ms) = if enough {
        (
            spread_percentiles(&fold.ttft, ttft_runs.as_deref(), BOOTSTRAP_SEED),
            spread_percentiles(&fold.e2e, e2e_runs.as_deref(), BOOTSTRAP_SEED),
        )
    } else {
        (None, None)
    };
    Group {
        key,
        withheld: false,
        runs: Some(fold.runs as usize),
        samples: Some(fold.samples as usize),
        answered: Some(answered),
        ttft_ms,
        e2e_ms,
        median_of_run_medians_ttft_ms: fold.median_of_run_medians().filter(|_| enough),
        error_rate: Some(rate(failed)),
        errors: fold
            .errors
            .iter()
            .map(|(class, &count)| {
                (
                    class.clone(),
                    ErrorCount {
                        count: count as usize,
                        rate: rate(count),
                    },
                )
            })
            .collect(),
        ttft_cdf: if enough {
            cdf(fold.ttft.all())
        } else {
            Vec::new()
        },
        split: Some(split),
        layers,
        split_note,
        note,
    }
}

/// A group's TTFT in layers, from the samples whose wait split whole; or why not.
fn layer_figures(fold: &Fold, min_samples: usize) -> (usize, Vec<LayerFigure>, Option<String>) {
    let split = fold.layers[Layer::Network.index()].all().count() as usize;
    if split < min_samples {
        let note = format!(
            "the wait's layers need at least {min_samples} requests whose wait split whole (the target reporting its own time to the first token, the browser its time before sending); this group has {split}"
        );
        return (split, Vec::new(), Some(note));
    }
    let listed = fold.listed();
    let figures: Vec<(Layer, Percentiles)> = Layer::ALL
        .iter()
        .filter_map(|&layer| {
            let runs: Option<Vec<&Sketch>> =
                listed.map(|runs| runs.iter().map(|r| &r.layers[layer.index()]).collect());
            let ms =
                spread_percentiles(&fold.layers[layer.index()], runs.as_deref(), BOOTSTRAP_SEED)?;
            Some((layer, ms))
        })
        .collect();
    let total: f64 = figures.iter().map(|(_, ms)| ms.mean).sum();
    let layers = figures
        .into_iter()
        .map(|(layer, ms)| LayerFigure {
            layer,
            ms,
            share: if total > 0.0 { ms.mean / total } else { 0.0 },
        })
        .collect();
    (split, layers, None)
}

/// Points of the distribution: the value at evenly spaced fractions.
fn cdf(values: &Sketch) -> Vec<[f64; 2]> {
    (0..CDF_POINTS)
        .filter_map(|i| {
            let fraction = i as f64 / (CDF_POINTS - 1) as f64;
            Some([values.percentile(fraction * 100.0)?, fraction])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group's layers against the exact percentiles of their values ([`percentiles`],
    /// itself held to numpy), within the sketch's error, and their shares against their
    /// means: the layers' means add up to the mean TTFT of the same requests.
    #[test]
    fn a_groups_layers_are_the_percentiles_of_their_values_and_their_shares_add_up() {
        let mut accumulator = Accumulator::default();
        let mut by_layer: [Vec<Vec<f64>>; 3] = Default::default();
        let mut ttfts = Vec::new();
        for r in 0..12 {
            let (mut layers, mut ttft) = (Layers::default(), Sketch::default());
            let mut values: [Vec<f64>; 3] = Default::default();
            for i in 0..8 {
                let n = f64::from(r * 8 + i);
                // Warm requests leave at once: a third of them 0 ms before sending.
                let times = [f64::from(i % 3) * 20.0, 300.0 + 2.0 * n, 80.0 + n % 13.0];
                layer::add(&mut layers, times);
                ttft.add(times.iter().sum());
                ttfts.push(times.iter().sum::<f64>());
                for (column, t) in values.iter_mut().zip(times) {
                    column.push(t);
                }
            }
            for (column, run) in by_layer.iter_mut().zip(values) {
                column.push(run);
            }
            accumulator.add_cell(Cell {
                group: Vec::new(),
                run_id: format!("run {r:02}"),
                samples: 8,
                errors: BTreeMap::new(),
                ttft,
                e2e: Sketch::default(),
                layers,
            });
        }
        let group = accumulator.finish(&[], 30, 5).groups.remove(0);
        assert_eq!((group.split, group.split_note.as_deref()), (Some(96), None));
        let mean_ttft = ttfts.iter().sum::<f64>() / 96.0;
        let alpha = crate::sketch::RELATIVE_ERROR;
        for ((figure, runs), layer) in group.layers.iter().zip(&by_layer).zip(Layer::ALL) {
            assert_eq!(figure.layer, layer);
            let runs: Vec<&[f64]> = runs.iter().map(Vec::as_slice).collect();
            let exact = percentiles(&runs, BOOTSTRAP_SEED).expect("values");
            for (got, want) in [
                (figure.ms.p50.value, exact.p50.value),
                (
                    figure.ms.p90.expect("p90").value,
                    exact.p90.expect("p90").value,
                ),
            ] {
                assert!(
                    (got - want).abs() <= alpha * want.abs() + 1e-9,
                    "{layer:?}: {got} against {want}"
                );
            }
            assert!(figure.ms.p50.low.is_some(), "12 runs: an interval");
            assert!((figure.ms.mean - exact.mean).abs() < 1e-9);
            assert!(
                (figure.share - exact.mean / mean_ttft).abs() < 1e-12,
                "{figure:?}"
            );
        }
        let shares: f64 = group.layers.iter().map(|l| l.share).sum();
        assert!((shares - 1.0).abs() < 1e-12);

        // Below min_samples split requests, no layers, and the note says why.
        let group = {
            let mut accumulator = Accumulator::default();
            let mut layers = Layers::default();
            layer::add(&mut layers, [1.0, 2.0, 3.0]);
            for r in 0..5 {
                let mut ttft = Sketch::default();
                (0..10).for_each(|_| ttft.add(6.0));
                accumulator.add_cell(Cell {
                    group: Vec::new(),
                    run_id: format!("run {r}"),
                    samples: 10,
                    errors: BTreeMap::new(),
                    ttft,
                    e2e: Sketch::default(),
                    layers: layers.clone(),
                });
            }
            accumulator.finish(&[], 30, 5).groups.remove(0)
        };
        assert!(group.ttft_ms.is_some() && group.layers.is_empty());
        assert_eq!(group.split, Some(5));
        assert!(
            group
                .split_note
                .is_some_and(|n| n.contains("this group has 5"))
        );
    }

    fn row(group: &str, run: &str, error: Option<&str>, ttft: Option<f64>) -> Row {
        Row {
            group: vec![group.to_owned()],
            run_id: run.to_owned(),
            error: error.map(str::to_owned),
            ttft_ms: ttft,
            e2e_ms: ttft.map(|t| t + 1000.0),
        }
    }

    /// A stream cut off before its end is a failure of its own class in the crowd's error
    /// rates, and its TTFT (kept in the record) is not pooled with the answered requests'.
    #[test]
    fn cut_off_streams_are_rated_as_failures_and_their_ttft_is_not_pooled() {
        let mut acc = Accumulator::default();
        for i in 0..20 {
            acc.add(row("wifi", &format!("r{}", i % 2), None, Some(500.0)));
        }
        acc.add(row("wifi", "r0", Some("truncated"), Some(50.0)));
        acc.add(row("wifi", "r1", Some("truncated"), None));
        let summary = acc.finish(&[Dimension::Network], 10, 1);
        let wifi = &summary.groups[0];
        assert_eq!((wifi.samples, wifi.answered), (Some(22), Some(20)));
        assert_eq!(wifi.errors["truncated"].count, 2);
        assert!((wifi.error_rate.expect("published") - 2.0 / 22.0).abs() < 1e-12);
        let ttft = wifi.ttft_ms.expect("20 answered");
        assert_eq!(
            ttft.p50.value, 500.0,
            "the cut-off stream's 50 ms is not pooled"
        );
    }

    #[test]
    fn small_groups_say_so_and_errors_are_rated() {
        let mut acc = Accumulator::default();
        for i in 0..40 {
            acc.add(row(
                "fiber",
                &format!("r{}", i % 4),
                None,
                Some(300.0 + f64::from(i)),
            ));
        }
        acc.add(row("fiber", "r0", Some("http"), None));
        for i in 0..5 {
            acc.add(row("cellular", "c", None, Some(900.0 + f64::from(i))));
        }
        let summary = acc.finish(&[Dimension::Network], 30, 1);
        let cellular = &summary.groups[0];
        assert_eq!(
            cellular.key[&Dimension::Network].as_deref(),
            Some("cellular")
        );
        assert_eq!(
            (cellular.runs, cellular.samples, cellular.answered),
            (Some(1), Some(5), Some(5))
        );
        assert!(cellular.ttft_ms.is_none());
        assert!(
            cellular
                .note
                .as_deref()
                .is_some_and(|n| n.contains("has 5"))
        );
        let fiber = &summary.groups[1];
        assert_eq!(
            (fiber.runs, fiber.samples, fiber.answered),
            (Some(4), Some(41), Some(40))
        );
        assert_eq!(fiber.errors["http"].count, 1);
        assert!((fiber.error_rate.expect("published") - 1.0 / 41.0).abs() < 1e-12);
        let ttft = fiber.ttft_ms.expect("40 answered");
        assert_eq!(
            (ttft.p50.low, ttft.p50.high),
            (None, None),
            "4 runs: no interval"
        );
        assert!(ttft.p90.is_some() && ttft.p95.is_some());
        assert_eq!(ttft.p99, None, "p99 needs 100 values");
        assert!(
            fiber
                .note
                .as_deref()
                .is_some_and(|n| n.contains("at least 10 runs") && n.contains("has 4")),
            "{:?}",
            fiber.note
        );
        assert_eq!(fiber.ttft_cdf.first(), Some(&[300.0, 0.0]));
        assert_eq!(fiber.ttft_cdf.last(), Some(&[339.0, 1.0]));
    }

    /// A group from fewer than k runs publishes its key and nothing else, however many
    /// requests its runs made; the smallest published group goes with it, so a total
    /// minus the published groups never gives it.
    #[test]
    fn a_group_of_fewer_than_k_runs_is_withheld_with_its_complement() {
        let mut acc = Accumulator::default();
        // One run of 200 requests: enough for every percentile, one person's run.
        for i in 0..200 {
            acc.add(row("satellite", "alone", None, Some(700.0 + f64::from(i))));
        }
        for (network, runs) in [("wifi", 9), ("fiber", 6)] {
            for run in 0..runs {
                for i in 0..10 {
                    acc.add(row(
                        network,
                        &format!("{network}-{run}"),
                        None,
                        Some(300.0 + f64::from(i)),
                    ));
                }
            }
        }
        let summary = acc.finish(&[Dimension::Network], 30, DEFAULT_MIN_RUNS);
        assert_eq!(summary.min_runs, 5);
        let by = |name: &str| {
            summary
                .groups
                .iter()
                .find(|g| g.key[&Dimension::Network].as_deref() == Some(name))
                .expect("a group")
        };
        let alone = by("satellite");
        assert!(alone.withheld);
        assert_eq!(
            (alone.runs, alone.samples, alone.answered, alone.error_rate),
            (None, None, None, None)
        );
        assert!(alone.ttft_ms.is_none() && alone.ttft_cdf.is_empty() && alone.errors.is_empty());
        assert!(
            alone
                .note
                .as_deref()
                .is_some_and(|n| n.starts_with("fewer than 5 runs")),
            "{:?}",
            alone.note
        );
        // Fiber (6 runs) is the smallest published group: withheld with it.
        let fiber = by("fiber");
        assert!(fiber.withheld && fiber.runs.is_none());
        assert!(
            fiber
                .note
                .as_deref()
                .is_some_and(|n| n.starts_with("withheld with a group"))
        );
        let wifi = by("wifi");
        assert_eq!(
            (wifi.withheld, wifi.runs, wifi.samples),
            (false, Some(9), Some(90))
        );
        assert!(wifi.ttft_ms.is_some());
        // Nothing withheld: nothing more is.
        let mut acc = Accumulator::default();
        for run in 0..5 {
            acc.add(row("wifi", &format!("w{run}"), None, Some(300.0)));
        }
        let summary = acc.finish(&[Dimension::Network], 1, DEFAULT_MIN_RUNS);
        assert!(!summary.groups[0].withheld);
        // The serialized group says `null`, not a made-up zero.
        let json = serde_json::to_value(alone).expect("json");
        assert_eq!(json["runs"], serde_json::Value::Null);
        assert_eq!(json["withheld"], true);
    }

    /// Asked to stop, finishing stops before the next group: a summary past its time
    /// limit once went on working out every group's intervals for nobody.
    #[test]
    fn finishing_stops_when_told_to() {
        let mut acc = Accumulator::default();
        for g in 0..50 {
            for run in 0..10 {
                acc.add(row(
                    &format!("g{g}"),
                    &format!("{g}-{run}"),
                    None,
                    Some(300.0),
                ));
            }
        }
        assert_eq!(acc.groups(), 50);
        let asked = std::cell::Cell::new(0);
        let stopped = acc.finish_unless(&[Dimension::Network], 1, 1, || {
            asked.set(asked.get() + 1);
            asked.get() > 3
        });
        assert_eq!(stopped, None);
        // Asked before each group (three worked out, the fourth not begun) and once more
        // before the answer is put together.
        assert_eq!(asked.get(), 5);
    }

    #[test]
    fn intervals_resample_whole_runs() {
        // Twelve runs on networks of different speeds, ten requests each, tightly bunched
        // within each run: the pooled values look like 120 independent ones, but only
        // twelve runs vary independently.
        let mut acc = Accumulator::default();
        for run in 0..12 {
            for i in 0..10 {
                let ttft = 200.0 + 40.0 * f64::from(run) + f64::from(i);
                acc.add(row("wifi", &format!("run-{run:02}"), None, Some(ttft)));
            }
        }
        let group = &acc.finish(&[Dimension::Network], 30, 1).groups[0];
        let p50 = group.ttft_ms.expect("120 answered").p50;
        let (low, high) = (p50.low.expect("12 runs"), p50.high.expect("12 runs"));
        let values: Vec<f64> = (0..12)
            .flat_map(|run| (0..10).map(move |i| 200.0 + 40.0 * f64::from(run) + f64::from(i)))
            .collect();
        let naive = stats::percentile_ci(
            &stats::sorted(&values),
            50.0,
            BOOTSTRAP_RESAMPLES,
            BOOTSTRAP_SEED,
        )
        .expect("values");
        assert!(
            high - low > 1.5 * (naive.high - naive.low),
            "cluster {low}–{high} against independent {}–{}",
            naive.low,
            naive.high
        );
        assert_eq!(group.note, None);
    }

    /// `count` values with known percentiles (`100 + 5000·(k/(count − 1))²` ms, so with
    /// `count − 1` a multiple of 100 the
    /// p-th of p50, p90, p95 and p99 is `100 + 5000·(p/100)²` exactly), dealt over `runs` runs.
    fn known(runs: usize, count: usize) -> Vec<Vec<f64>> {
        let mut out = vec![Vec::new(); runs];
        for k in 0..count {
            let x = k as f64 / (count - 1) as f64;
            out[(k * 7919) % runs].push(100.0 + 5000.0 * x * x);
        }
        out
    }

    #[test]
    fn sketches_give_the_exact_numbers_within_their_relative_error() {
        let alpha = crate::sketch::RELATIVE_ERROR;
        // 2,000 values take the bootstrap, 40,000 the large-sample interval.
        for (runs, count) in [(40, 2_001), (400, 40_001)] {
            let values = known(runs, count);
            let slices: Vec<&[f64]> = values.iter().map(Vec::as_slice).collect();
            let sketches: Vec<Sketch> = values
                .iter()
                .map(|run| {
                    let mut s = Sketch::default();
                    run.iter().for_each(|&v| s.add(v));
                    s
                })
                .collect();
            let refs: Vec<&Sketch> = sketches.iter().collect();
            let exact = percentiles(&slices, BOOTSTRAP_SEED).expect("values");
            let read = sketch_percentiles(&refs, BOOTSTRAP_SEED).expect("values");
            assert_eq!((read.count, read.min, read.max), (count, 100.0, 5100.0));
            assert!((read.mean - exact.mean).abs() < 1e-9 * exact.mean);
            let pairs = [
                (50.0, exact.p50, read.p50),
                (90.0, exact.p90.expect("p90"), read.p90.expect("p90")),
                (95.0, exact.p95.expect("p95"), read.p95.expect("p95")),
                (99.0, exact.p99.expect("p99"), read.p99.expect("p99")),
            ];
            for (p, exact, read) in pairs {
                let known = 100.0 + 5000.0 * (p / 100.0_f64).powi(2);
                assert!(
                    (exact.value - known).abs() < 1e-6,
                    "p{p}: {} vs {known}",
                    exact.value
                );
                let within = |a: f64, b: f64| (a - b).abs() <= alpha * b;
                assert!(
                    within(read.value, exact.value),
                    "{count}: p{p} {read:?} vs {exact:?}"
                );
                for (a, b) in [(read.low, exact.low), (read.high, exact.high)] {
                    let (a, b) = (a.expect("interval"), b.expect("interval"));
                    // The bootstrap's ends are percentiles of representatives: within α.
                    // The large-sample ends also move with the runs' counts at or below the
                    // percentile, which a bucket can shift by its own width: within 2α.
                    let bound = if count <= stats::RESAMPLE_LIMIT {
                        alpha
                    } else {
                        2.0 * alpha
                    };
                    assert!((a - b).abs() <= bound * b, "{count}: p{p} end {a} vs {b}");
                }
            }
        }
    }

    /// A group large enough to work out its two distributions side by side gives exactly
    /// what each gives worked out alone.
    #[test]
    fn a_large_group_gives_the_same_numbers_side_by_side() {
        let values = known(crate::fold::RUNS_SIDE_BY_SIDE + 500, 60_001);
        let mut accumulator = Accumulator::default();
        let (mut ttft_runs, mut e2e_runs) = (Vec::new(), Vec::new());
        for (i, run) in values.iter().enumerate() {
            let (mut ttft, mut e2e) = (Sketch::default(), Sketch::default());
            for &v in run {
                ttft.add(v);
                e2e.add(3.0 * v + 50.0);
            }
            accumulator.add_cell(Cell {
                group: Vec::new(),
                // In the order the group sorts its runs by.
                run_id: format!("run {i:05}"),
                samples: run.len() as u64,
                errors: BTreeMap::new(),
                ttft: ttft.clone(),
                e2e: e2e.clone(),
                layers: Layers::default(),
            });
            ttft_runs.push(ttft);
            e2e_runs.push(e2e);
        }
        let summary = accumulator.finish(&[], 1, 1);
        let group = &summary.groups[0];
        let alone =
            |runs: &[Sketch]| sketch_percentiles(&runs.iter().collect::<Vec<_>>(), BOOTSTRAP_SEED);
        assert!(group.ttft_ms.is_some());
        assert_eq!(group.ttft_ms, alone(&ttft_runs));
        assert_eq!(group.e2e_ms, alone(&e2e_runs));
    }
}
