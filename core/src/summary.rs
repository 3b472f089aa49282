//! Crowd summaries, as the collector answers them and the app reads them: samples grouped
//! by any of the [`Dimension`]s, each group's TTFT and end-to-end percentiles with
//! bootstrap intervals, error rates by class and the median of per-run medians.
//!
//! The collector streams rows into an [`Accumulator`], which keeps only their numbers, so a
//! summary over a million samples holds a few tens of megabytes.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::stats::{self, BOOTSTRAP_SEED, Distribution, Estimate};

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
}

impl Dimension {
    pub const ALL: [Dimension; 10] = [
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
    /// The median of each run's median TTFT: networks drift between sessions.
    pub median_of_run_medians_ttft_ms: Option<f64>,
    /// Failed samples over all samples.
    pub error_rate: f64,
    /// Failed samples by error class.
    pub errors: BTreeMap<String, ErrorCount>,
    /// The TTFT distribution: `[ms, fraction of answered samples at or below it]`.
    pub ttft_cdf: Vec<[f64; 2]>,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ErrorCount {
    pub count: usize,
    pub rate: f64,
}

/// A distribution's numbers, each percentile with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: usize,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub p50: Interval,
    pub p90: Interval,
    pub p95: Interval,
    pub p99: Interval,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

impl From<Estimate> for Interval {
    fn from(e: Estimate) -> Self {
        Self {
            value: e.value,
            low: e.low,
            high: e.high,
        }
    }
}

impl From<Distribution> for Percentiles {
    fn from(d: Distribution) -> Self {
        Self {
            count: d.count,
            mean: d.mean,
            min: d.min,
            max: d.max,
            p50: d.p50.into(),
            p90: d.p90.into(),
            p95: d.p95.into(),
            p99: d.p99.into(),
        }
    }
}

/// Collects rows into groups.
#[derive(Debug, Default)]
pub struct Accumulator {
    groups: HashMap<Vec<String>, GroupAcc>,
}

#[derive(Debug, Default)]
struct GroupAcc {
    samples: usize,
    /// Each run's answered TTFTs, by run id.
    runs: HashMap<String, Vec<f64>>,
    e2e: Vec<f64>,
    errors: BTreeMap<String, usize>,
}

impl Accumulator {
    pub fn add(&mut self, row: Row) {
        let group = self.groups.entry(row.group).or_default();
        group.samples += 1;
        let run = group.runs.entry(row.run_id).or_default();
        match row.error {
            Some(class) => *group.errors.entry(class).or_default() += 1,
            None => {
                if let Some(ttft) = row.ttft_ms {
                    run.push(ttft);
                }
                if let Some(e2e) = row.e2e_ms {
                    group.e2e.push(e2e);
                }
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
    let ttft: Vec<f64> = acc.runs.values().flatten().copied().collect();
    let answered = ttft.len();
    let failed: usize = acc.errors.values().sum();
    let rate = |count: usize| count as f64 / acc.samples.max(1) as f64;
    let enough = answered >= min_samples;
    let (_, median_of_run_medians) =
        stats::median_of_run_medians(acc.runs.values().map(Vec::as_slice));
    Group {
        key,
        runs: acc.runs.len(),
        samples: acc.samples,
        answered,
        ttft_ms: enough
            .then(|| stats::distribution(&ttft, BOOTSTRAP_SEED))
            .flatten()
            .map(Percentiles::from),
        e2e_ms: enough
            .then(|| stats::distribution(&acc.e2e, BOOTSTRAP_SEED))
            .flatten()
            .map(Percentiles::from),
        median_of_run_medians_ttft_ms: median_of_run_medians,
        error_rate: rate(failed),
        errors: acc
            .errors
            .iter()
            .map(|(class, &count)| (class.clone(), ErrorCount { count, rate: rate(count) }))
            .collect(),
        ttft_cdf: cdf(&ttft),
        note: (!enough).then(|| {
            format!("percentiles need at least {min_samples} answered requests; this group has {answered}")
        }),
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
        assert!(fiber.ttft_ms.is_some());
        assert_eq!(fiber.ttft_cdf.first(), Some(&[300.0, 0.0]));
        assert_eq!(fiber.ttft_cdf.last(), Some(&[339.0, 1.0]));
    }
}
