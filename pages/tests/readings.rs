//! The report's readings against tables computed outside the code under test, by
//! `crowd/tests/reference/stats_reference.py` (numpy 2.4.6, and a bootstrap that resamples
//! and sorts instead of counting). Rerun the script to see where each number comes from.

use firsttoken_crowd::stats::{BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, Estimate};
use firsttoken_pages::readings::{concurrency_degradation, itl_summary, paired_overhead};

fn close(actual: f64, expected: f64) {
    assert!((actual - expected).abs() < 1e-9, "{actual} != {expected}");
}

fn estimate(actual: Estimate, expected: (f64, f64, f64)) {
    close(actual.value, expected.0);
    close(actual.low, expected.1);
    close(actual.high, expected.2);
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
    let one = |v: &[f64]| v.iter().map(|&t| vec![Some(t)]).collect::<Vec<_>>();
    let batch = |v: &[Option<f64>]| v.to_vec();
    let levels = vec![
        (
            1,
            one(&[300.0, 310.0, 305.0, 298.0, 302.0, 307.0, 299.0, 303.0]),
        ),
        (
            3,
            vec![
                batch(&[Some(300.0), Some(610.0), Some(905.0)]),
                batch(&[Some(301.0), Some(612.0), Some(903.0)]),
                batch(&[Some(299.0), Some(608.0), Some(910.0)]),
                batch(&[Some(302.0), Some(605.0), Some(899.0)]),
            ],
        ),
        (
            5,
            vec![
                batch(&[
                    Some(320.0),
                    Some(300.0),
                    Some(330.0),
                    Some(310.0),
                    Some(315.0),
                ]),
                batch(&[Some(322.0), Some(318.0), Some(311.0), None, None]),
                batch(&[
                    Some(305.0),
                    Some(900.0),
                    Some(312.0),
                    Some(318.0),
                    Some(309.0),
                ]),
            ],
        ),
    ];
    let d = concurrency_degradation(&levels, 0.0, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED);
    assert_eq!(
        (d[0].level, d[0].median_ttft_ms, d[0].ratio),
        (1, Some(302.5), None)
    );
    assert_eq!((d[1].median_ttft_ms, d[1].serial_model), (Some(609.0), 2.0));
    estimate(
        d[1].ratio.expect("a baseline"),
        (2.013223140495868, 1.9820261437908497, 2.036727879799666),
    );
    assert_eq!(
        (d[2].median_ttft_ms, d[2].failed, d[2].batches),
        (Some(318.0), 2, 3)
    );
    estimate(
        d[2].ratio.expect("a baseline"),
        (1.0512396694214876, 1.0263157894736843, 1.0662251655629138),
    );
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
