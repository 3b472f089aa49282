//! Folds against their definition: runs folded in any split and merged give what the runs
//! folded together give, and a fold's large-sample interval is the one worked out run by
//! run from the values themselves (each standing for its bucket), with floating point
//! and nothing kept ahead.

use std::collections::BTreeMap;

use firsttoken_crowd::fold::{Fold, FoldError, Listed};
use firsttoken_crowd::sketch::{Sketch, bucket, representative};
use firsttoken_crowd::stats::{RESAMPLE_LIMIT, SplitMix64};
use firsttoken_crowd::summary::{Accumulator, Cell, Dimension};
use firsttoken_crowd::{stats, summary};

/// `runs` runs of 1 to `most` values each, spread over two decades, each run around a
/// level of its own (the samples of a run share a network).
fn runs(runs: usize, most: u64, seed: u64) -> Vec<(String, Vec<f64>)> {
    let mut rng = SplitMix64::new(seed);
    (0..runs)
        .map(|r| {
            let level = 80.0 * (1.0 + (rng.next_u64() % 20) as f64);
            let n = 1 + rng.next_u64() % most;
            let values = (0..n)
                .map(|_| level * (1.0 + (rng.next_u64() % 1000) as f64 / 400.0))
                .collect();
            (format!("run-{r:06}"), values)
        })
        .collect()
}

fn sketch(values: &[f64]) -> Sketch {
    let mut s = Sketch::default();
    values.iter().for_each(|&v| s.add(v));
    s
}

/// The runs as [`Fold::of_runs`] takes them; total times are TTFTs plus a second; every
/// other request's wait in [`layers`], so folds merge and keep layers of some requests
/// and not others.
fn folded(runs: &[(String, Vec<f64>)]) -> Fold {
    let e2e = |v: &[f64]| v.iter().map(|t| t + 1000.0).collect::<Vec<_>>();
    Fold::of_runs(
        runs.iter()
            .map(|(id, v)| Listed {
                run_id: id.clone(),
                ttft: sketch(v),
                e2e: sketch(&e2e(v)),
                layers: layers(v),
            })
            .collect(),
    )
}

/// Every other value's wait in layers: a tenth before sending, half the server's, the rest
/// the network's.
fn layers(values: &[f64]) -> summary::Layers {
    let mut layers = summary::Layers::default();
    for t in values.iter().step_by(2) {
        summary::layer::add(&mut layers, [0.1 * t, 0.5 * t, 0.4 * t]);
    }
    layers
}

/// The interval's definition, run by run: `y_r` counts run r's values whose bucket's
/// representative is at or below the percentile.
fn interval_by_runs(runs: &[(String, Vec<f64>)], p: f64) -> (f64, f64, f64) {
    let all = sketch(&runs.iter().flat_map(|r| r.1.clone()).collect::<Vec<_>>());
    let value = all.percentile(p).expect("values");
    let n = all.count() as f64;
    let q = p / 100.0;
    let variance = runs
        .iter()
        .map(|(_, values)| {
            let y = values
                .iter()
                .filter(|&&v| representative(bucket(v)) <= value)
                .count() as f64;
            (y - q * values.len() as f64).powi(2)
        })
        .sum::<f64>()
        / (n * n);
    let spread = stats::Z_975 * n * variance.sqrt();
    let rank = q * (n - 1.0);
    let at = |r: f64| all.at_rank(r).expect("values");
    (value, at(rank - spread), at(rank + spread))
}

#[test]
fn a_folds_interval_is_the_one_its_runs_give_one_by_one() {
    let runs = runs(3_000, 40, 7);
    let fold = folded(&runs);
    assert!(fold.ttft.all().count() > RESAMPLE_LIMIT as u64);
    for p in [50.0, 90.0, 95.0, 99.0] {
        let (value, low, high) = interval_by_runs(&runs, p);
        let got = fold.ttft.large_sample_interval(p, value);
        assert_eq!(got.value, value);
        // Sums of squares in integers against the same in floating point: the ranks agree
        // to far below one value, so the ends are the same interpolation.
        assert!(
            (got.low - low).abs() <= 1e-9 * low,
            "p{p} low {got:?} vs {low}"
        );
        assert!(
            (got.high - high).abs() <= 1e-9 * high,
            "p{p} high {got:?} vs {high}"
        );
        assert!(got.low < value && value < got.high, "p{p}: {got:?}");
    }
}

#[test]
fn folds_merged_in_any_split_give_the_folds_of_all_runs() {
    // Small and large: with few values a fold keeps its runs for the bootstrap.
    for (count, most) in [(40, 20), (2_500, 40)] {
        let runs = runs(count, most, count as u64);
        let whole = folded(&runs);
        // Split by a stride, so each part's runs interleave with the others' by id.
        let mut merged = Fold::default();
        for part in 0..3 {
            let mine: Vec<_> = runs.iter().skip(part).step_by(3).cloned().collect();
            merged.merge(folded(&mine));
        }
        assert_eq!(merged.runs, whole.runs);
        assert_eq!(
            merged.median_of_run_medians(),
            whole.median_of_run_medians()
        );
        assert_eq!(merged.listed(), whole.listed());
        assert_eq!(whole.listed().is_some(), count == 40);
        let medians: Vec<f64> = runs
            .iter()
            .filter_map(|r| sketch(&r.1).percentile(50.0))
            .collect();
        assert_eq!(whole.median_of_run_medians(), stats::median(&medians));
        for p in [50.0, 90.0, 99.0] {
            let value = whole.ttft.all().percentile(p).expect("values");
            assert_eq!(merged.ttft.all().percentile(p), Some(value));
            assert_eq!(
                merged.ttft.large_sample_interval(p, value),
                whole.ttft.large_sample_interval(p, value)
            );
        }
        // And a summary reading the folds gives the one reading the runs as cells.
        let group = |fold: Fold| {
            let mut acc = Accumulator::default();
            acc.add_fold(vec!["wifi".into()], fold);
            acc.finish(&[Dimension::Network], 30, 1).groups.remove(0)
        };
        let mut by_cells = Accumulator::default();
        for (id, values) in &runs {
            by_cells.add_cell(Cell {
                group: vec!["wifi".into()],
                run_id: id.clone(),
                samples: values.len() as u64,
                errors: BTreeMap::new(),
                ttft: sketch(values),
                e2e: sketch(&values.iter().map(|t| t + 1000.0).collect::<Vec<_>>()),
                layers: layers(values),
            });
        }
        merged.samples = runs.iter().map(|r| r.1.len() as u64).sum();
        let (a, b) = (
            group(merged),
            by_cells
                .finish(&[Dimension::Network], 30, 1)
                .groups
                .remove(0),
        );
        // The means add the same values in another order: equal to rounding.
        let (ta, tb) = (a.ttft_ms.expect("ttft"), b.ttft_ms.expect("ttft"));
        assert!((ta.mean - tb.mean).abs() <= 1e-12 * tb.mean);
        let (ea, eb) = (a.e2e_ms.expect("e2e"), b.e2e_ms.expect("e2e"));
        assert!((ea.mean - eb.mean).abs() <= 1e-12 * eb.mean);
        let but_means = |mut x: summary::Group| {
            for t in [x.ttft_ms.as_mut(), x.e2e_ms.as_mut()]
                .into_iter()
                .flatten()
                .chain(x.layers.iter_mut().map(|l| &mut l.ms))
            {
                t.mean = 0.0;
            }
            x.layers.iter_mut().for_each(|l| l.share = 0.0);
            x
        };
        assert_eq!(but_means(a), but_means(b));
    }
}

#[test]
fn folds_read_back_what_they_wrote_and_name_damage() {
    for count in [0, 30, 2_500] {
        let mut fold = folded(&runs(count, 30, 3));
        fold.samples = 12_345;
        fold.errors.insert("http".into(), 17);
        fold.errors.insert("timeout".into(), 2);
        let bytes = fold.encode();
        assert_eq!(Fold::decode(&bytes), Ok(fold.clone()), "{count} runs");
        assert!(matches!(
            Fold::decode(&bytes[..bytes.len() - 1]),
            Err(FoldError::Truncated | FoldError::Sketch(_))
        ));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(
            Fold::decode(&longer).is_err_and(|e| e.to_string().contains("bytes follow the fold"))
        );
        let mut other = bytes;
        other[0] = 9;
        assert_eq!(Fold::decode(&other), Err(FoldError::Format(9)));
    }
}

/// A summary read from folds (a crowd's runs over seven days, each day folded apart) gives
/// percentiles within the sketch's error of values whose percentiles are known, and
/// intervals within twice it of the exact cluster bootstrap's.
#[test]
fn a_summary_of_folds_gives_known_percentiles_within_the_sketchs_error() {
    let alpha = firsttoken_crowd::sketch::RELATIVE_ERROR;
    let (runs, count) = (400, 40_001);
    // 100 + 5000·(k/(count − 1))²: with count − 1 a multiple of 100, the p-th percentile
    // of p50, p90, p95 and p99 is 100 + 5000·(p/100)² exactly.
    let mut values = vec![Vec::new(); runs];
    for k in 0..count {
        let x = k as f64 / (count - 1) as f64;
        values[(k * 7919) % runs].push(100.0 + 5000.0 * x * x);
    }
    let named: Vec<(String, Vec<f64>)> = values
        .iter()
        .enumerate()
        .map(|(r, v)| (format!("run-{r:04}"), v.clone()))
        .collect();
    let mut acc = Accumulator::default();
    for day in 0..7 {
        let mine: Vec<_> = named.iter().skip(day).step_by(7).cloned().collect();
        let mut fold = folded(&mine);
        fold.samples = mine.iter().map(|r| r.1.len() as u64).sum();
        acc.add_fold(Vec::new(), fold);
    }
    let group = acc.finish(&[], 30, 1).groups.remove(0);
    assert_eq!(
        (group.runs, group.samples, group.answered),
        (Some(runs), Some(count), Some(count))
    );
    let slices: Vec<&[f64]> = values.iter().map(Vec::as_slice).collect();
    let exact = summary::percentiles(&slices, stats::BOOTSTRAP_SEED).expect("values");
    let read = group.ttft_ms.expect("percentiles");
    assert_eq!((read.count, read.min, read.max), (count, 100.0, 5100.0));
    let pairs = [
        (50.0, exact.p50, read.p50),
        (90.0, exact.p90.expect("p90"), read.p90.expect("p90")),
        (95.0, exact.p95.expect("p95"), read.p95.expect("p95")),
        (99.0, exact.p99.expect("p99"), read.p99.expect("p99")),
    ];
    for (p, exact, read) in pairs {
        let known = 100.0 + 5000.0 * (p / 100.0_f64).powi(2);
        assert!((exact.value - known).abs() < 1e-6, "p{p}: {exact:?}");
        assert!(
            (read.value - known).abs() <= alpha * known,
            "p{p}: {read:?}"
        );
        for (a, b) in [(read.low, exact.low), (read.high, exact.high)] {
            let (a, b) = (a.expect("interval"), b.expect("interval"));
            assert!((a - b).abs() <= 2.0 * alpha * b, "p{p} end {a} vs {b}");
        }
    }
}
