//! The statistics against tables computed outside the code under test, by
//! `tests/reference/stats_reference.py` (numpy 2.4.6, and a bootstrap that resamples and
//! sorts instead of counting). Rerun the script to see where each number comes from.

use firsttoken_core::stats::{
    BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, Estimate, concurrency_degradation, distribution,
    itl_summary, paired_overhead, percentile_ci, sorted,
};

const TTFT: [f64; 60] = [
    550.0, 343.167, 296.778, 273.467, 333.765, 349.439, 293.005, 275.275, 337.866, 322.87, 272.044,
    308.04, 357.492, 316.655, 261.128, 317.862, 342.171, 287.075, 284.866, 598.433, 342.163,
    263.613, 291.713, 346.424, 312.128, 274.157, 326.139, 358.617, 281.667, 270.607, 333.809,
    336.485, 280.495, 300.149, 358.976, 307.565, 263.575, 309.724, 599.724, 301.169, 281.583,
    343.087, 330.226, 273.624, 284.473, 346.18, 327.333, 278.384, 317.747, 339.954, 296.457,
    268.861, 327.371, 347.792, 291.921, 293.8, 332.588, 572.303, 269.567, 301.343,
];

fn close(actual: f64, expected: f64) {
    assert!((actual - expected).abs() < 1e-9, "{actual} != {expected}");
}

fn estimate(actual: Estimate, expected: (f64, f64, f64)) {
    close(actual.value, expected.0);
    close(actual.low, expected.1);
    close(actual.high, expected.2);
}

#[test]
fn percentiles_with_bootstrap_intervals_match_the_reference() {
    let d = distribution(&TTFT, BOOTSTRAP_SEED).expect("values");
    assert_eq!(d.count, 60);
    close(d.mean, 326.7481833333333);
    close(d.min, 261.128);
    close(d.max, 599.724);
    estimate(d.p50, (310.926, 295.289, 327.371));
    estimate(d.p90, (357.60450000000003, 343.09499999999997, 572.303));
    estimate(d.p95, (551.11515, 349.439, 598.49755));
    estimate(d.p99, (598.96231, 446.44006999999925, 599.724));
    // The same numbers however the samples were ordered.
    let mut reversed = TTFT;
    reversed.reverse();
    assert_eq!(distribution(&reversed, BOOTSTRAP_SEED), Some(d));
    assert_eq!(
        percentile_ci(&sorted(&TTFT), 50.0, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED).map(|e| e.value),
        Some(310.926)
    );
}

#[test]
fn paired_overhead_matches_the_reference() {
    let app = [
        310.0, 305.5, 320.25, 298.0, 330.0, 315.5, 309.0, 301.75, 322.0, 318.0,
    ];
    let direct = [
        250.0, 240.5, 262.25, 238.0, 271.0, 249.5, 255.0, 236.75, 260.0, 259.0,
    ];
    estimate(
        paired_overhead(&app, &direct, BOOTSTRAP_SEED).expect("rounds"),
        (60.0, 58.5, 65.0),
    );
}

#[test]
fn degradation_matches_the_reference() {
    let levels = vec![
        (1, vec![300.0, 310.0, 305.0]),
        (3, vec![300.0, 610.0, 905.0]),
        (5, vec![320.0, 300.0, 330.0, 310.0, 315.0]),
    ];
    let d = concurrency_degradation(&levels);
    let got: Vec<(u32, f64, Option<f64>, f64)> = d
        .iter()
        .map(|l| (l.level, l.median_ttft_ms, l.ratio, l.serial_model))
        .collect();
    assert_eq!(got[0], (1, 305.0, Some(1.0), 1.0));
    assert_eq!(got[1], (3, 610.0, Some(2.0), 2.0));
    assert_eq!((got[2].0, got[2].1, got[2].3), (5, 315.0, 3.0));
    close(got[2].2.expect("ratio"), 1.0327868852459017);
}

#[test]
fn itl_summary_matches_the_reference() {
    let gaps = [
        vec![25.0, 24.5, 26.0, 80.0],
        vec![25.5, 25.0],
        vec![24.0, 300.0, 25.0],
    ];
    let s = itl_summary(gaps.iter().map(Vec::as_slice)).expect("gaps");
    assert_eq!(s.gaps, 9);
    close(s.mean, 61.666666666666664);
    close(s.p50, 25.0);
    close(s.p99, 282.4);
    close(s.max, 300.0);
}
