//! The readings only a run's report makes, from the crowd's statistics: the gaps between
//! tokens pooled, time per output token, the app's paired overhead, and how the wait grew
//! with requests at once ([`concurrency`]).

mod concurrency;

use firsttoken_crowd::stats::{
    BOOTSTRAP_RESAMPLES, Estimate, mean, percentile_ci, percentile_sorted, sorted,
};

pub use concurrency::{
    Concurrency, LevelDegradation, MIN_BATCHES_FOR_READING, concurrency_degradation,
};

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
    use firsttoken_crowd::stats::BOOTSTRAP_SEED;

    /// A level's requests in batches of `k`, the failures last.
    fn level(k: u32, ttfts: &[f64], failed: usize) -> (u32, Vec<Vec<Option<f64>>>) {
        let mut all: Vec<Option<f64>> = ttfts.iter().copied().map(Some).collect();
        all.extend(std::iter::repeat_n(None, failed));
        (k, all.chunks(k as usize).map(<[_]>::to_vec).collect())
    }

    fn degradation(levels: &[(u32, Vec<Vec<Option<f64>>>)]) -> Vec<LevelDegradation> {
        concurrency_degradation(levels, 0.0, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED)
    }

    #[test]
    fn degradation_reads_plainly_where_the_interval_decides() {
        let alone: Vec<f64> = (0..12).map(|i| 200.0 + f64::from(i % 3)).collect();
        // A one-at-a-time server: each batch of 3 waits 1, 2 and 3 steps.
        let serial: Vec<f64> = (0..12).map(|i| 200.0 * f64::from(i % 3 + 1)).collect();
        let side_by_side: Vec<f64> = (0..15).map(|i| 205.0 + f64::from(i % 4)).collect();
        let d = degradation(&[
            level(1, &alone, 0),
            level(3, &serial, 0),
            level(5, &side_by_side, 0),
        ]);
        assert_eq!(d[0].reading(), None, "level 1 is the baseline");
        let ratio = d[1].ratio.expect("a baseline");
        // Every batch waits 1, 2 and 3 steps: resampling batches keeps that, so only level
        // 1's spread widens the interval.
        assert!(
            (ratio.value - 400.0 / 201.0).abs() < 1e-9 && ratio.low > 1.9 && ratio.high < 2.1,
            "{ratio:?}"
        );
        assert_eq!(d[1].reading(), Some(Concurrency::Serial));
        assert_eq!(d[2].reading(), Some(Concurrency::Parallel));
        assert_eq!(d[2].serial_model, 3.0);
    }

    #[test]
    fn too_few_requests_to_tell_are_said_so() {
        let alone = [200.0, 201.0, 202.0, 199.0, 200.0, 203.0];
        // Two batches of a one-at-a-time server: too few to resample.
        let d = degradation(&[
            level(1, &alone, 0),
            level(3, &[200.0, 400.0, 600.0, 201.0, 401.0, 601.0], 0),
        ]);
        assert_eq!(d[1].batches, 2);
        assert_eq!(d[1].reading(), Some(Concurrency::Undecided));
        // Four batches, two quick and two slow: the interval holds 1 and 2.
        let d = degradation(&[
            level(1, &alone, 0),
            level(
                3,
                &[
                    200.0, 201.0, 202.0, 600.0, 601.0, 602.0, 203.0, 201.0, 200.0, 603.0, 600.0,
                    601.0,
                ],
                0,
            ),
        ]);
        let ratio = d[1].ratio.expect("a baseline");
        assert!(ratio.low <= 1.0 && ratio.high >= 2.0, "{ratio:?}");
        assert_eq!(d[1].reading(), Some(Concurrency::Undecided));
    }

    #[test]
    fn failures_count_against_their_level() {
        // At 5 at once, six of ten requests time out; the four that answered were quick.
        // Dropping the failures would read "side by side".
        let alone = [200.0, 202.0, 201.0, 199.0, 200.0, 203.0, 198.0, 201.0];
        let d = degradation(&[
            level(1, &alone, 0),
            level(5, &[205.0, 206.0, 204.0, 207.0], 6),
        ]);
        let five = d[1];
        assert_eq!((five.requests, five.failed), (10, 6));
        assert_eq!(five.median_ttft_ms, None, "more than half failed");
        let ratio = five.ratio.expect("a baseline");
        assert!(
            ratio.value.is_infinite() && ratio.high.is_infinite(),
            "{ratio:?}"
        );
        assert_ne!(five.reading(), Some(Concurrency::Parallel));
        // One failure in ten moves the median up, not out.
        let d = degradation(&[
            level(1, &alone, 0),
            level(
                5,
                &[
                    205.0, 206.0, 204.0, 207.0, 205.0, 206.0, 204.0, 207.0, 205.0,
                ],
                1,
            ),
        ]);
        assert_eq!(d[1].median_ttft_ms, Some(205.5));
        // A failed baseline gives no ratio at all.
        let d = degradation(&[level(1, &[200.0], 2), level(3, &[400.0], 0)]);
        assert_eq!(d[1].ratio, None);
    }

    #[test]
    fn tpot_needs_two_tokens() {
        assert_eq!(tpot_ms(300.0, 1275.0, 40), Some(25.0));
        assert_eq!(tpot_ms(300.0, 310.0, 1), None);
    }

    /// A strictly one-at-a-time server (600 ms of its own per request) behind a 300 ms
    /// round trip: first tokens at 900, then 900 / 1,500 / 2,100 for a batch of 3. With
    /// the network left in, the ratio reads 1.67× against the serial model's 2×; with the
    /// warm probes' round trip taken out, exactly 2×, and the verdict is "one at a time".
    #[test]
    fn the_networks_round_trip_does_not_dilute_the_serial_reading() {
        let level_1: Vec<Vec<Option<f64>>> =
            (0..4).map(|i| vec![Some(900.0 + f64::from(i))]).collect();
        let level_3: Vec<Vec<Option<f64>>> = (0..4)
            .map(|i| {
                let j = f64::from(i);
                vec![Some(900.0 + j), Some(1_500.0 + j), Some(2_100.0 + j)]
            })
            .collect();
        let levels = vec![(1, level_1), (3, level_3)];
        let diluted = concurrency_degradation(&levels, 0.0, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED);
        let ratio = diluted[1].ratio.expect("a ratio").value;
        assert!((ratio - 1_501.5 / 901.5).abs() < 1e-9, "{ratio}");
        assert_ne!(diluted[1].reading(), Some(Concurrency::Serial));
        let floored = concurrency_degradation(&levels, 300.0, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED);
        let ratio = floored[1].ratio.expect("a ratio").value;
        assert!((ratio - 1_201.5 / 601.5).abs() < 1e-9, "{ratio}");
        assert_eq!(floored[1].reading(), Some(Concurrency::Serial));
        assert_eq!(
            floored[1].median_ttft_ms,
            Some(1_501.5),
            "the median shown is the first token's"
        );
        assert_eq!(floored[1].network_floor_ms, 300.0);
        // A floor as large as a first token is not used.
        let too_big = concurrency_degradation(&levels, 950.0, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED);
        assert_eq!(too_big[1].network_floor_ms, 0.0);
    }
}
