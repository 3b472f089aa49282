//! What one run found, read the way DESIGN.md reads a session: percentiles per phase,
//! concurrency degradation beside the serial model, what a new connection costs, cold
//! starts as single values, and the app's overhead over the targets it was compared with.

use crate::plan::Phase;
use crate::schema::{Run, Sample};
use crate::stats::{
    self, BOOTSTRAP_SEED, Distribution, Estimate, ItlSummary, LevelDegradation, median, tpot_ms,
};

/// One phase of the main target (or, for compare, one target).
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseReport {
    pub phase: Phase,
    /// The target's label (the compare phase has one report per target).
    pub target: String,
    pub requests: usize,
    pub failed: usize,
    pub ttft: Option<Distribution>,
    pub e2e: Option<Distribution>,
    /// Median time per output token after the first, where the stream reported tokens.
    pub tpot_ms: Option<f64>,
    pub itl: Option<ItlSummary>,
}

/// What a new connection added to the time to first token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConnectionCost {
    /// Requests of the fresh phase.
    pub fresh_requests: usize,
    /// Of those, how many were verified to run on a new connection.
    pub verified_new: usize,
    /// And how many could not be verified either way.
    pub unverifiable: usize,
    pub median_fresh_ttft_ms: f64,
    pub median_warm_ttft_ms: f64,
}

impl ConnectionCost {
    /// Median fresh minus median warm TTFT.
    pub fn extra_ms(&self) -> f64 {
        self.median_fresh_ttft_ms - self.median_warm_ttft_ms
    }
}

/// One cold request: single values, not statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct ColdStart {
    pub idle_ms: u32,
    pub ttft_ms: Option<f64>,
    pub error: Option<String>,
}

/// The main target's TTFT over another target's, paired round by round.
#[derive(Debug, Clone, PartialEq)]
pub struct Overhead {
    pub target: String,
    pub rounds: usize,
    /// Median of `main − other` per round, with its interval.
    pub difference_ms: Option<Estimate>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunReport {
    pub phases: Vec<PhaseReport>,
    pub degradation: Vec<LevelDegradation>,
    pub connection: Option<ConnectionCost>,
    pub cold: Vec<ColdStart>,
    pub overhead: Vec<Overhead>,
    /// Round trips measured by the probes (time to the response head).
    pub probe_rtt: Option<Distribution>,
}

fn answered_ttft<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Vec<f64> {
    samples
        .into_iter()
        .filter(|s| s.error.is_none())
        .filter_map(|s| s.ttft_ms)
        .collect()
}

fn phase_report(phase: Phase, target: &str, samples: &[&Sample]) -> PhaseReport {
    let ok: Vec<&&Sample> = samples.iter().filter(|s| s.error.is_none()).collect();
    let ttft: Vec<f64> = ok.iter().filter_map(|s| s.ttft_ms).collect();
    let e2e: Vec<f64> = ok.iter().filter_map(|s| s.e2e_ms).collect();
    let tpot: Vec<f64> = ok
        .iter()
        .filter_map(|s| tpot_ms(s.ttft_ms?, s.e2e_ms?, s.usage?.output_tokens?))
        .collect();
    PhaseReport {
        phase,
        target: target.to_owned(),
        requests: samples.len(),
        failed: samples.len() - ok.len(),
        ttft: stats::distribution(&ttft, BOOTSTRAP_SEED),
        e2e: stats::distribution(&e2e, BOOTSTRAP_SEED),
        tpot_ms: median(&tpot),
        itl: stats::itl_summary(ok.iter().map(|s| s.itl_ms.as_slice())),
    }
}

impl RunReport {
    /// Reads `run`. Warm-up requests count nowhere; probes only as round trips.
    pub fn of(run: &Run) -> Self {
        let label = |t: u32| {
            run.targets
                .get(t as usize)
                .map_or_else(|| format!("target {t}"), |t| t.label.clone())
        };
        let of = |phase: Phase, target: u32| -> Vec<&Sample> {
            run.samples
                .iter()
                .filter(|s| s.phase == phase && s.target == target)
                .collect()
        };
        let mut report = RunReport::default();
        for phase in [Phase::Steady, Phase::Fresh, Phase::Concurrency, Phase::Cold] {
            let samples = of(phase, 0);
            if !samples.is_empty() {
                report.phases.push(phase_report(phase, &label(0), &samples));
            }
        }
        for target in 0..run.targets.len() as u32 {
            let samples = of(Phase::Compare, target);
            if !samples.is_empty() {
                report
                    .phases
                    .push(phase_report(Phase::Compare, &label(target), &samples));
            }
        }

        let mut levels: Vec<u32> = of(Phase::Concurrency, 0)
            .iter()
            .map(|s| s.concurrency)
            .collect();
        levels.sort_unstable();
        levels.dedup();
        let by_level: Vec<(u32, Vec<f64>)> = levels
            .iter()
            .map(|&k| {
                (
                    k,
                    answered_ttft(
                        of(Phase::Concurrency, 0)
                            .into_iter()
                            .filter(|s| s.concurrency == k),
                    ),
                )
            })
            .collect();
        report.degradation = stats::concurrency_degradation(&by_level);

        let fresh = of(Phase::Fresh, 0);
        let warm = answered_ttft(of(Phase::Steady, 0));
        if let (Some(fresh_median), Some(warm_median)) =
            (median(&answered_ttft(fresh.iter().copied())), median(&warm))
        {
            let new = |s: &&&Sample| s.conn.as_ref().and_then(|c| c.new_connection);
            report.connection = Some(ConnectionCost {
                fresh_requests: fresh.len(),
                verified_new: fresh.iter().filter(|s| new(s) == Some(true)).count(),
                unverifiable: fresh.iter().filter(|s| new(s).is_none()).count(),
                median_fresh_ttft_ms: fresh_median,
                median_warm_ttft_ms: warm_median,
            });
        }

        report.cold = of(Phase::Cold, 0)
            .iter()
            .map(|s| ColdStart {
                idle_ms: s.idle_ms.unwrap_or(0),
                ttft_ms: s.ttft_ms.filter(|_| s.error.is_none()),
                error: s.error.map(|e| e.name().to_owned()),
            })
            .collect();

        // Compare rounds: the main target's request and each other's, in the order run.
        let compare: Vec<&Sample> = run
            .samples
            .iter()
            .filter(|s| s.phase == Phase::Compare)
            .collect();
        let targets = run.targets.len();
        for other in 1..targets as u32 {
            let (mut main, mut theirs) = (Vec::new(), Vec::new());
            for round in compare.chunks(targets) {
                let find = |t: u32| {
                    round
                        .iter()
                        .find(|s| s.target == t && s.error.is_none())
                        .and_then(|s| s.ttft_ms)
                };
                if let (Some(a), Some(b)) = (find(0), find(other)) {
                    main.push(a);
                    theirs.push(b);
                }
            }
            if !compare.is_empty() {
                report.overhead.push(Overhead {
                    target: label(other),
                    rounds: main.len(),
                    difference_ms: stats::paired_overhead(&main, &theirs, BOOTSTRAP_SEED),
                });
            }
        }

        let probes: Vec<f64> = of(Phase::Probe, 0)
            .iter()
            .filter(|s| s.error.is_none())
            .filter_map(|s| s.headers_ms)
            .collect();
        report.probe_rtt = stats::distribution(&probes, BOOTSTRAP_SEED);
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Connection, ErrorClass};

    fn sample(index: u32, phase: Phase, target: u32, ttft: f64) -> Sample {
        Sample {
            index,
            phase,
            target,
            concurrency: 1,
            status: 200,
            headers_ms: Some(5.0),
            ttfb_ms: Some(6.0),
            ttft_any_ms: Some(ttft),
            ttft_ms: Some(ttft),
            last_token_ms: Some(ttft + 100.0),
            e2e_ms: Some(ttft + 110.0),
            usage: Some(crate::Usage {
                input_tokens: Some(10),
                output_tokens: Some(11),
            }),
            ..Sample::default()
        }
    }

    fn run(samples: Vec<Sample>, targets: usize) -> Run {
        let mut run: Run =
            serde_json::from_str(include_str!("../schema/example-run.v1.json")).expect("example");
        let target = run.targets[0].clone();
        run.targets = (0..targets)
            .map(|i| crate::Target {
                label: format!("t{i}"),
                ..target.clone()
            })
            .collect();
        run.samples = samples;
        run
    }

    #[test]
    fn phases_degradation_connections_and_cold_starts_are_read() {
        let mut samples = vec![sample(0, Phase::Warmup, 0, 9000.0)];
        samples.extend((0..4).map(|i| sample(0, Phase::Steady, 0, 300.0 + f64::from(i))));
        for i in 0..4 {
            let mut s = sample(0, Phase::Fresh, 0, 400.0 + f64::from(i));
            s.conn = Some(Connection {
                reused: i == 3,
                new_connection: if i == 3 { None } else { Some(true) },
                ..Connection::default()
            });
            samples.push(s);
        }
        for (k, ttft) in [(1, 300.0), (3, 300.0), (3, 600.0), (3, 900.0)] {
            samples.push(Sample {
                concurrency: k,
                ..sample(0, Phase::Concurrency, 0, ttft)
            });
        }
        samples.push(Sample {
            idle_ms: Some(30_000),
            ..sample(0, Phase::Cold, 0, 2500.0)
        });
        samples.push(Sample {
            idle_ms: Some(120_000),
            error: Some(ErrorClass::Timeout),
            ttft_ms: None,
            ..sample(0, Phase::Cold, 0, 0.0)
        });
        let report = RunReport::of(&run(samples, 1));
        let phases: Vec<Phase> = report.phases.iter().map(|p| p.phase).collect();
        assert_eq!(
            phases,
            [Phase::Steady, Phase::Fresh, Phase::Concurrency, Phase::Cold]
        );
        let steady = &report.phases[0];
        assert_eq!((steady.requests, steady.failed), (4, 0));
        assert_eq!(steady.ttft.as_ref().map(|d| d.p50.value), Some(301.5));
        assert_eq!(
            steady.tpot_ms,
            Some(11.0),
            "(e2e − ttft) / (tokens − 1) = 110 / 10"
        );
        assert_eq!(report.degradation[1].ratio, Some(2.0));
        let c = report.connection.expect("fresh and steady");
        assert_eq!(
            (c.fresh_requests, c.verified_new, c.unverifiable),
            (4, 3, 1)
        );
        assert_eq!(c.extra_ms(), 100.0);
        assert_eq!(
            report.cold[0],
            ColdStart {
                idle_ms: 30_000,
                ttft_ms: Some(2500.0),
                error: None
            }
        );
        assert_eq!(report.cold[1].error.as_deref(), Some("timeout"));
    }

    #[test]
    fn overhead_pairs_rounds() {
        let mut samples = Vec::new();
        for round in 0..6 {
            samples.push(sample(0, Phase::Compare, 0, 500.0 + f64::from(round)));
            samples.push(sample(0, Phase::Compare, 1, 300.0 + f64::from(round)));
        }
        // A failed round pairs nothing.
        samples.push(Sample {
            error: Some(ErrorClass::Http),
            ttft_ms: None,
            ..sample(0, Phase::Compare, 0, 0.0)
        });
        samples.push(sample(0, Phase::Compare, 1, 300.0));
        let report = RunReport::of(&run(samples, 2));
        assert_eq!(report.overhead.len(), 1);
        assert_eq!(report.overhead[0].rounds, 6);
        assert_eq!(
            report.overhead[0].difference_ms.map(|d| d.value),
            Some(200.0)
        );
        assert_eq!(report.phases.len(), 2, "one compare report per target");
    }
}
