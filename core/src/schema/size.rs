//! How large a run may be. Its requests are bounded one by one (10,000 at most, each
//! with 8,192 inter-token gaps and 32 `Server-Timing` entries at most), which alone
//! would let one record reach gigabytes; so a run is bounded as a whole too:
//! [`MAX_RUN_ITL_GAPS`] gaps in all, and [`MAX_RECORD_BYTES`] of JSON. [`Run::fit`]
//! (part of [`Run::clean`], which the page applies before it keeps or sends a run)
//! brings any run within both, counting what it leaves out in each sample's `dropped`;
//! the collector refuses a record over either, and takes bodies up to
//! [`MAX_RECORD_BYTES`]: exactly the largest run the page makes.

use super::{Run, Sample};

/// Inter-token gaps one run keeps in all. Past it each request keeps an equal share (its
/// first gaps), and a request with fewer than the share keeps all of its own: the
/// shares are water-filled ([`fair_share`]). The session plan's 260 requests of 500
/// tokens each keep every gap.
pub const MAX_RUN_ITL_GAPS: usize = 500_000;

/// The largest run record, as compact JSON: the body limit the collector starts with.
pub const MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;

/// `Server-Timing` and stream timing entries a request keeps when its run is over
/// [`MAX_RECORD_BYTES`] with all of them.
const TIMING_ENTRIES_WHEN_LARGE: usize = 4;

/// The most each of several lists (of lengths `lens`) may keep so that together they
/// keep at most `budget`, each keeping all of its own if it is shorter: `None` when
/// they fit as they are.
pub fn fair_share(lens: &[usize], budget: usize) -> Option<usize> {
    if lens.iter().sum::<usize>() <= budget {
        return None;
    }
    let mut sorted = lens.to_vec();
    sorted.sort_unstable();
    let mut left = budget;
    for (i, &len) in sorted.iter().enumerate() {
        let lists_left = sorted.len() - i;
        if len * lists_left > left {
            return Some(left / lists_left);
        }
        left -= len;
    }
    None
}

impl Run {
    /// Brings the run within [`MAX_RUN_ITL_GAPS`] and [`MAX_RECORD_BYTES`], leaving
    /// out the least of what it measured first: inter-token gaps past the run's share,
    /// then (only for a record still too large, which no honest target makes)
    /// `Server-Timing` descriptions, timing entries past 4 a request and error messages,
    /// every timing entry, and finally more gaps. Every value left out is counted in its sample's `dropped`.
    pub fn fit(&mut self) {
        share_gaps(&mut self.samples, MAX_RUN_ITL_GAPS);
        if self.record_bytes() <= MAX_RECORD_BYTES {
            return;
        }
        for sample in &mut self.samples {
            let mut dropped = 0;
            for entry in &mut sample.server_timing {
                dropped += u32::from(entry.description.take().is_some());
            }
            sample.dropped = sample.dropped.saturating_add(dropped);
        }
        if self.record_bytes() <= MAX_RECORD_BYTES {
            return;
        }
        for sample in &mut self.samples {
            let mut dropped = sample
                .server_timing
                .len()
                .saturating_sub(TIMING_ENTRIES_WHEN_LARGE);
            sample.server_timing.truncate(TIMING_ENTRIES_WHEN_LARGE);
            if let Some(timings) = &mut sample.stream_timings {
                while timings.len() > TIMING_ENTRIES_WHEN_LARGE {
                    timings.pop_last();
                    dropped += 1;
                }
            }
            dropped += usize::from(sample.error_message.take().is_some());
            sample.dropped = sample.dropped.saturating_add(dropped as u32);
        }
        if self.record_bytes() > MAX_RECORD_BYTES {
            for sample in &mut self.samples {
                let entries = sample.server_timing.len()
                    + sample.stream_timings.as_ref().map_or(0, |t| t.len());
                sample.server_timing.clear();
                sample.stream_timings = None;
                sample.dropped = sample.dropped.saturating_add(entries as u32);
            }
        }
        let mut gaps = self.itl_gaps();
        while gaps > 0 && self.record_bytes() > MAX_RECORD_BYTES {
            gaps /= 2;
            share_gaps(&mut self.samples, gaps);
        }
    }

    /// The record's size as compact JSON, as the page sends it and the collector stores it.
    pub fn record_bytes(&self) -> usize {
        let mut counted = Counted(0);
        match serde_json::to_writer(&mut counted, self) {
            Ok(()) => counted.0,
            Err(_) => usize::MAX,
        }
    }

    /// Inter-token gaps in all the run's samples.
    pub fn itl_gaps(&self) -> usize {
        self.samples.iter().map(|s| s.itl_ms.len()).sum()
    }
}

/// The largest run the page can make, for tests and benchmarks: `template`'s first
/// sample repeated over 10,000 steady requests, each with more gaps than its share and
/// every text at its longest in four-byte characters, then cleaned ([`Sample::clean`],
/// [`Run::clean`]).
pub fn largest_run(template: &Run) -> Run {
    let mut run = template.clone();
    let requests = crate::plan::MAX_SAMPLES;
    run.plan.phases = vec![crate::plan::PhasePlan::Steady {
        requests: requests as u32,
    }];
    let long = |chars: usize| "\u{1d11e}".repeat(chars);
    let scenario = long(64);
    run.targets[0].scenarios = vec![scenario.clone()];
    let first = run.samples[0].clone();
    run.samples = (0..requests)
        .map(|i| {
            let mut s = first.clone();
            s.index = i as u32;
            s.start_ms = i as f64 * 1000.0;
            s.scenario = Some(scenario.clone());
            s.error_message = Some(long(500));
            s.itl_ms = vec![86_399_999.99; 100];
            s.last_token_ms = Some(86_399_999.99);
            s.e2e_ms = Some(86_399_999.99);
            s.server_timing = (0..32)
                .map(|n| super::ServerTimingEntry {
                    name: format!("{n}{}", long(62)),
                    duration_ms: 86_399_999.99,
                    description: Some(long(128)),
                })
                .collect();
            s.clean();
            s
        })
        .collect();
    run.clean();
    run
}

/// A writer that only counts: a record's size without the record in memory.
struct Counted(usize);

impl std::io::Write for Counted {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Keeps at most `budget` gaps over `samples`, water-filled ([`fair_share`]).
fn share_gaps(samples: &mut [Sample], budget: usize) {
    let lens: Vec<usize> = samples.iter().map(|s| s.itl_ms.len()).collect();
    if let Some(share) = fair_share(&lens, budget) {
        for sample in samples {
            let over = sample.itl_ms.len().saturating_sub(share);
            sample.itl_ms.truncate(share);
            sample.dropped = sample.dropped.saturating_add(over as u32);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Run {
        serde_json::from_str(include_str!("../../schema/example-run.v1.json")).expect("a run")
    }

    #[test]
    fn shares_are_water_filled() {
        assert_eq!(fair_share(&[10, 20, 30], 60), None);
        assert_eq!(fair_share(&[10, 20, 30], 50), Some(20));
        assert_eq!(fair_share(&[10, 100, 100], 110), Some(50));
        assert_eq!(fair_share(&[5, 5, 1000], 20), Some(10));
        assert_eq!(fair_share(&[3, 3], 0), Some(0));
    }

    /// The largest run the page can make, cleaned, is within both bounds and valid, so
    /// the collector's default body limit takes it.
    #[test]
    fn the_largest_run_fits_the_record_bound_and_is_valid() {
        let run = largest_run(&example());
        assert!(run.itl_gaps() <= MAX_RUN_ITL_GAPS, "{}", run.itl_gaps());
        let bytes = run.record_bytes();
        eprintln!("the largest run: {bytes} bytes, {} gaps", run.itl_gaps());
        assert!(bytes <= MAX_RECORD_BYTES, "{bytes} bytes");
        run.validate().expect("valid");
        assert!(run.samples.iter().all(|s| s.dropped > 0));
    }

    /// An honest long session (260 requests of 500 tokens each) keeps every gap and
    /// every entry: the bounds never touch what a real target sends.
    #[test]
    fn an_honest_session_keeps_everything() {
        let mut run = example();
        let first = run.samples[0].clone();
        run.plan.phases = vec![crate::plan::PhasePlan::Steady { requests: 260 }];
        run.samples = (0..260)
            .map(|i| {
                let mut s = first.clone();
                s.index = i;
                s.itl_ms = vec![25.31; 499];
                s.last_token_ms = Some(20_000.0);
                s.e2e_ms = Some(20_001.0);
                s
            })
            .collect();
        let before = run.clone();
        run.clean();
        assert_eq!(run.itl_gaps(), 260 * 499);
        assert_eq!(run.samples, before.samples);
    }
}
