//! Before and after a fix: one target's two versions side by side, split by a dimension,
//! and what the intervals of their median TTFTs allow saying about the change, in all and
//! layer by layer (the layer a fix moved is the one whose median moved).

use firsttoken_crowd::summary::{Dimension, Group, Interval, Layer, Summary};

/// What two medians' 95% intervals allow saying about `after` against `before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// After's interval lies wholly below before's.
    Faster,
    /// After's interval lies wholly above before's.
    Slower,
    /// The intervals overlap: the difference may be noise.
    NoClearDifference,
    /// One of the two has no interval (too few runs for one).
    TooFewRunsToTell,
}

impl Reading {
    /// Reads `after` against `before`.
    pub fn of(before: &Interval, after: &Interval) -> Self {
        match (before.low, before.high, after.low, after.high) {
            (Some(b_low), Some(_), Some(_), Some(a_high)) if a_high < b_low => Reading::Faster,
            (Some(_), Some(b_high), Some(a_low), Some(_)) if a_low > b_high => Reading::Slower,
            (Some(_), Some(_), Some(_), Some(_)) => Reading::NoClearDifference,
            _ => Reading::TooFewRunsToTell,
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            Reading::Faster => "faster",
            Reading::Slower => "slower",
            Reading::NoClearDifference => "no clear difference",
            Reading::TooFewRunsToTell => "too few runs to tell",
        }
    }
}

/// How the median moved from one version to the other.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    /// After's median minus before's, in ms (negative: faster).
    pub ms: f64,
    /// The same relative to before's median, in percent; `None` when before's is 0.
    pub percent: Option<f64>,
    pub reading: Reading,
}

impl Change {
    pub fn of(before: &Interval, after: &Interval) -> Self {
        let ms = after.value - before.value;
        Change {
            ms,
            percent: (before.value > 0.0).then(|| ms / before.value * 100.0),
            reading: Reading::of(before, after),
        }
    }
}

/// One value of the split dimension: each version's group there, and the change when
/// both have percentiles.
#[derive(Debug, Clone, PartialEq)]
pub struct Row<'a> {
    /// The split dimension's value (`None`: samples that had none).
    pub value: Option<String>,
    pub before: Option<&'a Group>,
    pub after: Option<&'a Group>,
    /// `None` unless both versions have TTFT percentiles at this value.
    pub change: Option<Change>,
    /// The change of each layer's median, for the layers both versions have here.
    pub layers: Vec<(Layer, Change)>,
}

/// The rows of a summary grouped by target version and `split`: one per value of `split`
/// that either version has, in order, whatever other versions the summary holds.
pub fn rows<'a>(summary: &'a Summary, before: &str, after: &str, split: Dimension) -> Vec<Row<'a>> {
    let key = |g: &Group, d: Dimension| g.key.get(&d).cloned().flatten();
    let find = |version: &str, value: &Option<String>| {
        summary.groups.iter().find(|g| {
            key(g, Dimension::TargetVersion).as_deref() == Some(version) && key(g, split) == *value
        })
    };
    let mut values: Vec<Option<String>> = summary
        .groups
        .iter()
        .filter(|g| {
            let version = key(g, Dimension::TargetVersion);
            version.as_deref() == Some(before) || version.as_deref() == Some(after)
        })
        .map(|g| key(g, split))
        .collect();
    values.sort();
    values.dedup();
    values
        .into_iter()
        .map(|value| {
            let (b, a) = (find(before, &value), find(after, &value));
            let change = match (
                b.and_then(|g| g.ttft_ms.as_ref()),
                a.and_then(|g| g.ttft_ms.as_ref()),
            ) {
                (Some(pb), Some(pa)) => Some(Change::of(&pb.p50, &pa.p50)),
                _ => None,
            };
            let p50 = |g: Option<&Group>, layer: Layer| {
                let figure = g?.layers.iter().find(|f| f.layer == layer)?;
                Some(figure.ms.p50)
            };
            let layers = Layer::ALL
                .into_iter()
                .filter_map(|layer| Some((layer, Change::of(&p50(b, layer)?, &p50(a, layer)?))))
                .collect();
            Row {
                value,
                before: b,
                after: a,
                change,
                layers,
            }
        })
        .collect()
}

/// A version's group in a summary grouped by target version alone.
pub fn version_group<'a>(summary: &'a Summary, version: &str) -> Option<&'a Group> {
    summary.groups.iter().find(|g| {
        g.key
            .get(&Dimension::TargetVersion)
            .cloned()
            .flatten()
            .as_deref()
            == Some(version)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use firsttoken_crowd::summary::Percentiles;
    use std::collections::BTreeMap;

    fn interval(value: f64, bounds: Option<(f64, f64)>) -> Interval {
        Interval {
            value,
            low: bounds.map(|b| b.0),
            high: bounds.map(|b| b.1),
        }
    }

    #[test]
    fn a_change_is_read_only_where_the_intervals_do_not_overlap() {
        let before = interval(300.0, Some((280.0, 320.0)));
        let cases = [
            (interval(200.0, Some((190.0, 279.0))), Reading::Faster),
            (
                interval(200.0, Some((190.0, 280.0))),
                Reading::NoClearDifference,
            ),
            (interval(400.0, Some((321.0, 420.0))), Reading::Slower),
            (
                interval(400.0, Some((320.0, 420.0))),
                Reading::NoClearDifference,
            ),
            (
                interval(305.0, Some((290.0, 330.0))),
                Reading::NoClearDifference,
            ),
            (interval(100.0, None), Reading::TooFewRunsToTell),
        ];
        for (after, reading) in cases {
            assert_eq!(Reading::of(&before, &after), reading, "{after:?}");
        }
        assert_eq!(
            Reading::of(
                &interval(300.0, None),
                &interval(100.0, Some((90.0, 110.0)))
            ),
            Reading::TooFewRunsToTell
        );
        let change = Change::of(&before, &interval(240.0, Some((230.0, 250.0))));
        assert_eq!(change.ms, -60.0);
        assert_eq!(change.percent, Some(-20.0));
        assert_eq!(change.reading, Reading::Faster);
        assert_eq!(Change::of(&interval(0.0, None), &before).percent, None);
    }

    fn group(version: &str, network: Option<&str>, p50: Option<Interval>) -> Group {
        Group {
            key: BTreeMap::from([
                (Dimension::TargetVersion, Some(version.to_owned())),
                (Dimension::Network, network.map(str::to_owned)),
            ]),
            withheld: false,
            runs: Some(12),
            samples: Some(40),
            answered: Some(40),
            ttft_ms: p50.map(|p50| Percentiles {
                count: 40,
                mean: p50.value,
                min: p50.value / 2.0,
                max: p50.value * 2.0,
                p50,
                p90: None,
                p95: None,
                p99: None,
            }),
            e2e_ms: None,
            median_of_run_medians_ttft_ms: None,
            error_rate: Some(0.0),
            errors: BTreeMap::new(),
            split: None,
            layers: Vec::new(),
            split_note: None,
            ttft_cdf: Vec::new(),
            note: None,
        }
    }

    #[test]
    fn rows_pair_each_value_of_the_split_and_skip_other_versions() {
        let summary = Summary {
            group_by: vec![Dimension::TargetVersion, Dimension::Network],
            min_samples: 30,
            min_runs: 5,
            requests_per_run_phase: firsttoken_crowd::summary::REQUESTS_PER_RUN_PHASE,
            from_ms: None,
            to_ms: None,
            groups: vec![
                group(
                    "v1",
                    Some("wifi"),
                    Some(interval(300.0, Some((280.0, 320.0)))),
                ),
                group("v1", None, Some(interval(500.0, None))),
                group(
                    "v2",
                    Some("wifi"),
                    Some(interval(200.0, Some((190.0, 210.0)))),
                ),
                group("v2", Some("cellular"), None),
                group("v3", Some("ethernet"), Some(interval(1.0, None))),
            ],
        };
        let rows = rows(&summary, "v1", "v2", Dimension::Network);
        let values: Vec<_> = rows.iter().map(|r| r.value.as_deref()).collect();
        assert_eq!(values, [None, Some("cellular"), Some("wifi")]);
        // Only v1 has samples without a network; only v2 has cellular, without percentiles.
        assert!(rows[0].before.is_some() && rows[0].after.is_none() && rows[0].change.is_none());
        assert!(rows[1].before.is_none() && rows[1].after.is_some() && rows[1].change.is_none());
        let wifi = rows[2]
            .change
            .expect("both versions have percentiles on wifi");
        assert_eq!((wifi.ms, wifi.reading), (-100.0, Reading::Faster));
        assert!(rows[2].layers.is_empty(), "no layers in either version");
        assert_eq!(
            version_group(&summary, "v3").map(|g| g.samples),
            Some(Some(40))
        );
        assert!(version_group(&summary, "v4").is_none());
    }

    /// The fix took 100 ms off the server's layer and left the network's: the rows say so
    /// layer by layer, each read from its own intervals.
    #[test]
    fn each_layer_is_compared_on_its_own() {
        let layered = |version: &str, server: f64| {
            let mut g = group(
                version,
                Some("wifi"),
                Some(interval(
                    server + 100.0,
                    Some((server + 90.0, server + 110.0)),
                )),
            );
            let figure = |layer: Layer, value: f64| firsttoken_crowd::summary::LayerFigure {
                layer,
                ms: Percentiles {
                    count: 40,
                    mean: value,
                    min: value,
                    max: value,
                    p50: interval(value, Some((value - 5.0, value + 5.0))),
                    p90: None,
                    p95: None,
                    p99: None,
                },
                share: 0.0,
            };
            g.layers = vec![
                figure(Layer::BeforeSending, 2.0),
                figure(Layer::Server, server),
                figure(Layer::Network, 98.0),
            ];
            g
        };
        let summary = Summary {
            group_by: vec![Dimension::TargetVersion, Dimension::Network],
            min_samples: 30,
            min_runs: 5,
            requests_per_run_phase: firsttoken_crowd::summary::REQUESTS_PER_RUN_PHASE,
            from_ms: None,
            to_ms: None,
            groups: vec![layered("v1", 400.0), layered("v2", 300.0)],
        };
        let rows = rows(&summary, "v1", "v2", Dimension::Network);
        let readings: Vec<(Layer, f64, Reading)> = rows[0]
            .layers
            .iter()
            .map(|(layer, change)| (*layer, change.ms, change.reading))
            .collect();
        assert_eq!(
            readings,
            [
                (Layer::BeforeSending, 0.0, Reading::NoClearDifference),
                (Layer::Server, -100.0, Reading::Faster),
                (Layer::Network, 0.0, Reading::NoClearDifference),
            ]
        );
    }
}
