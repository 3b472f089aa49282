//! Crowd summaries, as the collector answers them and the app reads them: samples grouped
//! by any of the [`Dimension`]s, each group's TTFT and end-to-end percentiles with
//! cluster-bootstrap intervals (whole runs resampled: the samples of one run share a
//! browser, a network and a minute), error rates by class and the median of per-run
//! medians.
//!
//! The collector streams rows into an [`Accumulator`], which keeps only their numbers, so a
//! summary over a million samples holds a few tens of megabytes.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::stats::{self, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, Estimate};

/// What samples can be grouped and filtered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// The network the user picked.
    Network,
    /// What the Network Information API reported.
    EffectiveType,
    Browser,
    Os,
    Mobile,
    TargetLabel,
    TargetVersion,
    Phase,
    Concurrency,
    Scenario,
    /// The share link the run came from (its study id).
    Study,
}

impl Dimension {
    pub const ALL: [Dimension; 11] = [
        Dimension::Network,
        Dimension::EffectiveType,
        Dimension::Browser,
        Dimension::Os,
        Dimension::Mobile,
        Dimension::TargetLabel,
        Dimension::TargetVersion,
        Dimension::Phase,
        Dimension::Concurrency,
        Dimension::Scenario,
        Dimension::Study,
    ];

    /// The name in query strings and answers.
    pub fn name(self) -> &'static str {
        match self {
            Dimension::Network => "network",
            Dimension::EffectiveType => "effective_type",
            Dimension::Browser => "browser",
            Dimension::Os => "os",
            Dimension::Mobile => "mobile",
            Dimension::TargetLabel => "target_label",
            Dimension::TargetVersion => "target_version",
            Dimension::Phase => "phase",
            Dimension::Concurrency => "concurrency",
            Dimension::Scenario => "scenario",
            Dimension::Study => "study",
        }
    }

    /// What a person reads.
    pub fn title(self) -> &'static str {
        match self {
            Dimension::Network => "Network",
            Dimension::EffectiveType => "Effective type",
            Dimension::Browser => "Browser",
            Dimension::Os => "OS",
            Dimension::Mobile => "Mobile",
            Dimension::TargetLabel => "Target",
            Dimension::TargetVersion => "Version",
            Dimension::Phase => "Phase",
            Dimension::Concurrency => "Concurrency",
            Dimension::Scenario => "Scenario",
            Dimension::Study => "Link",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }
}

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
    pub groups: Vec<Group>,
}

/// One group of samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// The group's value of each grouping dimension (`null` where the sample had none).
    pub key: BTreeMap<Dimension, Option<String>>,
    pub runs: usize,
    pub samples: usize,
    /// Samples that answered (no error, a first token).
    pub answered: usize,
    /// `None` when the group has fewer answered samples than `min_samples`; then `note`
    /// says so.
    pub ttft_ms: Option<Percentiles>,
    pub e2e_ms: Option<Percentiles>,
    /// The median of each run's median TTFT: networks drift between sessions. `None`
    /// below `min_samples`, like the percentiles.
    pub median_of_run_medians_ttft_ms: Option<f64>,
    /// Failed samples over all samples.
    pub error_rate: f64,
    /// Failed samples by error class.
    pub errors: BTreeMap<String, ErrorCount>,
    /// The TTFT distribution: `[ms, fraction of answered samples at or below it]`; empty
    /// below `min_samples` (a curve of a few values shows every one of them).
    pub ttft_cdf: Vec<[f64; 2]>,
    pub note: Option<String>,
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
/// are enough runs; `None` without values.
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

/// Collects rows into groups.
#[derive(Debug, Default)]
pub struct Accumulator {
    groups: HashMap<Vec<String>, GroupAcc>,
}

#[derive(Debug, Default)]
struct GroupAcc {
    samples: usize,
    /// Each run's answered requests, by run id: intervals resample whole runs.
    runs: HashMap<String, RunValues>,
    errors: BTreeMap<String, usize>,
}

#[derive(Debug, Default)]
struct RunValues {
    ttft: Vec<f64>,
    e2e: Vec<f64>,
}

impl Accumulator {
    pub fn add(&mut self, row: Row) {
        let group = self.groups.entry(row.group).or_default();
        group.samples += 1;
        let run = group.runs.entry(row.run_id).or_default();
        match row.error {
            Some(class) => *group.errors.entry(class).or_default() += 1,
            None => {
                run.ttft.extend(row.ttft_ms);
                run.e2e.extend(row.e2e_ms);
            }
        }
    }

    /// The groups' numbers, sorted by their keys.
    pub fn finish(self, group_by: &[Dimension], min_samples: usize) -> Summary {
        let mut groups: Vec<Group> = self
            .groups
            .into_iter()
            .map(|(values, acc)| {
                let key = group_by
                    .iter()
                    .zip(values)
                    .map(|(d, v)| (*d, (!v.is_empty()).then_some(v)))
                    .collect();
                group(key, acc, min_samples)
            })
            .collect();
        groups.sort_by(|a, b| a.key.cmp(&b.key));
        Summary {
            group_by: group_by.to_vec(),
            min_samples,
            groups,
        }
    }
}

fn group(key: BTreeMap<Dimension, Option<String>>, acc: GroupAcc, min_samples: usize) -> Group {
    // Runs in a fixed order (by id), so the same rows always give the same intervals.
    let mut runs: Vec<(&String, &RunValues)> = acc.runs.iter().collect();
    runs.sort_by(|a, b| a.0.cmp(b.0));
    let ttft_runs: Vec<&[f64]> = runs.iter().map(|(_, r)| r.ttft.as_slice()).collect();
    let e2e_runs: Vec<&[f64]> = runs.iter().map(|(_, r)| r.e2e.as_slice()).collect();
    let ttft: Vec<f64> = ttft_runs.iter().flat_map(|r| r.iter().copied()).collect();
    let answered = ttft.len();
    let runs_answered = ttft_runs.iter().filter(|r| !r.is_empty()).count();
    let failed: usize = acc.errors.values().sum();
    let rate = |count: usize| count as f64 / acc.samples.max(1) as f64;
    let enough = answered >= min_samples;
    let (_, median_of_run_medians) = stats::median_of_run_medians(ttft_runs.iter().copied());
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
    Group {
        key,
        runs: acc.runs.len(),
        samples: acc.samples,
        answered,
        ttft_ms: enough
            .then(|| percentiles(&ttft_runs, BOOTSTRAP_SEED))
            .flatten(),
        e2e_ms: enough
            .then(|| percentiles(&e2e_runs, BOOTSTRAP_SEED))
            .flatten(),
        median_of_run_medians_ttft_ms: median_of_run_medians.filter(|_| enough),
        error_rate: rate(failed),
        errors: acc
            .errors
            .iter()
            .map(|(class, &count)| {
                (
                    class.clone(),
                    ErrorCount {
                        count,
                        rate: rate(count),
                    },
                )
            })
            .collect(),
        ttft_cdf: if enough { cdf(&ttft) } else { Vec::new() },
        note,
    }
}

/// Points of the empirical distribution: the value at evenly spaced fractions.
fn cdf(values: &[f64]) -> Vec<[f64; 2]> {
    let sorted = stats::sorted(values);
    if sorted.is_empty() {
        return Vec::new();
    }
    (0..CDF_POINTS)
        .filter_map(|i| {
            let fraction = i as f64 / (CDF_POINTS - 1) as f64;
            Some([
                stats::percentile_sorted(&sorted, fraction * 100.0)?,
                fraction,
            ])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(group: &str, run: &str, error: Option<&str>, ttft: Option<f64>) -> Row {
        Row {
            group: vec![group.to_owned()],
            run_id: run.to_owned(),
            error: error.map(str::to_owned),
            ttft_ms: ttft,
            e2e_ms: ttft.map(|t| t + 1000.0),
        }
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
        let summary = acc.finish(&[Dimension::Network], 30);
        let cellular = &summary.groups[0];
        assert_eq!(
            cellular.key[&Dimension::Network].as_deref(),
            Some("cellular")
        );
        assert_eq!(
            (cellular.runs, cellular.samples, cellular.answered),
            (1, 5, 5)
        );
        assert!(cellular.ttft_ms.is_none());
        assert!(
            cellular
                .note
                .as_deref()
                .is_some_and(|n| n.contains("has 5"))
        );
        let fiber = &summary.groups[1];
        assert_eq!((fiber.runs, fiber.samples, fiber.answered), (4, 41, 40));
        assert_eq!(fiber.errors["http"].count, 1);
        assert!((fiber.error_rate - 1.0 / 41.0).abs() < 1e-12);
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
        let group = &acc.finish(&[Dimension::Network], 30).groups[0];
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
}
