//! What one run found (ARCHITECTURE.md, "The statistics"): percentiles per phase (each
//! only where the count supports it), concurrency degradation beside the serial model
//! with its interval, what a new connection costs (from verified connections only), cold
//! requests as single values, the app's overhead over the targets it was compared with,
//! and the network round trip from warm probes.

use std::collections::BTreeMap;

use firsttoken_core::connections::PortOff;
use firsttoken_core::plan::Phase;
use firsttoken_core::schema::{Run, Sample};
use firsttoken_crowd::stats;
use firsttoken_crowd::stats::{
    BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, Distribution, Estimate, median,
};

use crate::readings::{self, ItlSummary, LevelDegradation, tpot_ms};

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
    /// Median time per answer token after the first, where the stream reported how many
    /// of its tokens were the answer (reasoning tokens are left out).
    pub tpot_ms: Option<f64>,
    pub itl: Option<ItlSummary>,
    /// Of the requests on a connection already open, how many waited for a CORS preflight
    /// before they were sent ([`paid_preflight`]); `None` without the timing detail to
    /// tell.
    pub preflighted: Option<usize>,
}

/// What a new host name added to the time to first token, read only from requests whose
/// connection was verified: fresh requests verified new against steady requests verified
/// reused. A fresh request goes to a host name the browser has never used, so it pays
/// for everything a first visit does: a DNS lookup, a TCP connection, a full TLS
/// handshake, and the CORS preflight a new origin needs, before its request is even sent.
/// A returning user reconnecting to the same host name pays less (DNS cached, TLS
/// resumed, the preflight cached for its max-age), so this is named a new host name's
/// cost, not a reconnect's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConnectionCost {
    /// Requests of the fresh phase.
    pub fresh_requests: usize,
    /// Of those, how many were verified to run on a new connection.
    pub verified_new: usize,
    /// How many ran on a connection an earlier request had used (the browser reused or
    /// coalesced one): labelled so, and left out.
    pub reused: usize,
    /// And how many could not be verified either way.
    pub unverifiable: usize,
    /// Steady requests verified to run on a reused connection.
    pub verified_warm: usize,
    /// Median TTFT of the fresh requests verified new that answered.
    pub median_fresh_ttft_ms: Option<f64>,
    /// Median TTFT of the steady requests verified reused that answered.
    pub median_warm_ttft_ms: Option<f64>,
    /// Fresh minus warm TTFT with its 95% interval: the median of the differences of
    /// [`Self::pairs`] (each fresh request verified new against the steady request sent
    /// right before it, verified warm: the same minute of the network), resampled by
    /// pair; with fewer than [`MIN_PAIRS`] pairs, the median fresh minus the median warm,
    /// each group resampled on its own. `None` without values on both sides.
    pub difference: Option<Estimate>,
    /// The pairs the difference is read from; 0 when it is read unpaired.
    pub pairs: usize,
    /// Median time from `fetch()` to the request sent (`conn.sent_ms`) of the fresh
    /// requests verified new, and of the steady ones verified warm: the part of the
    /// difference the browser spent before the request left (DNS, connection, TLS,
    /// preflight). `None` without Resource Timing detail.
    pub median_fresh_sent_ms: Option<f64>,
    pub median_warm_sent_ms: Option<f64>,
    /// Why the client port the target reported was not used, if it was not.
    pub port_off: Option<PortOff>,
}

impl ConnectionCost {
    /// The median difference, only where its interval tells it from zero.
    pub fn extra_ms(&self) -> Option<f64> {
        self.difference
            .filter(|d| d.low > 0.0 || d.high < 0.0)
            .map(|d| d.value)
    }

    /// What the browser spent before the request left, fresh over warm: the connection
    /// set-up and preflight part of the difference, as Resource Timing timed it.
    pub fn extra_sent_ms(&self) -> Option<f64> {
        Some(self.median_fresh_sent_ms? - self.median_warm_sent_ms?)
    }

    /// Why there is no number, when there is none.
    pub fn missing(&self) -> Option<String> {
        let port = self
            .port_off
            .map(|off| format!(" (the client port was not used: {})", off.reason()))
            .unwrap_or_default();
        if self.extra_ms().is_some() {
            None
        } else if let Some(d) = self.difference {
            Some(format!(
                "the difference cannot be told from zero: its 95% interval runs from {:.0} to {:.0} ms; more fresh and steady requests would narrow it",
                d.low, d.high
            ))
        } else if self.verified_new == 0 && self.unverifiable > 0 {
            Some(format!(
                "no fresh request could be verified to open a new connection: the target does not report the \
                 client's port (X-Firsttoken-Client-Port), and a cross-origin request with a JSON body opens its \
                 connection in the CORS preflight, out of Resource Timing's sight{port}"
            ))
        } else if self.verified_new == 0 && self.reused > 0 && self.unverifiable == 0 {
            Some(format!(
                "no fresh request ran on a new connection: the browser put every fresh host name on a connection \
                 already open (HTTP/2 coalescing: the names share an address and a certificate), so each paid only \
                 a new origin's CORS preflight. Close each connection on the fresh host names after its preflight \
                 and request (nginx: keepalive_requests 2 in their server block), or serve them from another address{port}"
            ))
        } else if self.verified_new == 0 {
            Some(format!("no fresh request ran on a new connection{port}"))
        } else if self.median_fresh_ttft_ms.is_none() {
            Some("no fresh request verified new gave a first token".into())
        } else if self.verified_warm == 0 {
            Some(format!(
                "no steady request could be verified to reuse its connection: Resource Timing cannot show \
                 it for a request that needs a CORS preflight or one without Timing-Allow-Origin, and the target \
                 does not report the browser's own client port{port}"
            ))
        } else {
            Some("no steady request verified warm gave a first token".into())
        }
    }
}

/// The fewest fresh–warm pairs a new host name's cost is read from pair by pair.
pub const MIN_PAIRS: usize = 3;

/// Each answered fresh request verified new with the steady request sent right before it
/// with the same scenario (the runner sends them so), verified warm and answered: their
/// TTFTs.
fn fresh_pairs(run: &Run) -> Vec<(f64, f64)> {
    let by_index: BTreeMap<u32, &Sample> = run.samples.iter().map(|s| (s.index, s)).collect();
    let answered = |s: &Sample| s.ttft_ms.filter(|_| s.error.is_none() && s.target == 0);
    run.samples
        .iter()
        .filter(|s| s.phase == Phase::Fresh && new_connection(s) == Some(true))
        .filter_map(|fresh| {
            let warm = by_index.get(&fresh.index.checked_sub(1)?)?;
            if warm.phase != Phase::Steady
                || new_connection(warm) != Some(false)
                || warm.scenario != fresh.scenario
            {
                return None;
            }
            Some((answered(fresh)?, answered(warm)?))
        })
        .collect()
}

/// One cold request: a single value, never pooled into statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct ColdStart {
    /// The idle time the plan asked for.
    pub idle_ms: u32,
    /// The idle time actually spent before the request.
    pub idle_spent_ms: Option<f64>,
    /// The page was hidden during the wait or the request (the browser may have
    /// throttled or frozen it).
    pub hidden: bool,
    /// How late the wait's timer came back at worst: seconds mean the page was paused.
    pub idle_timer_late_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub error: Option<String>,
    /// Whether it ran on a new connection (`None`: cannot be told): after an idle wait a
    /// server's keep-alive timeout may have closed the connection, so the request pays a
    /// TCP and TLS handshake (and, past the preflight's max-age, a CORS preflight) that
    /// is no part of a server's cold start.
    pub new_connection: Option<bool>,
    /// What the browser spent before the request left (`conn.sent_ms`): the reconnect and
    /// preflight, when there was one.
    pub sent_ms: Option<f64>,
}

/// The main target's TTFT over another target's, paired round by round.
#[derive(Debug, Clone, PartialEq)]
pub struct Overhead {
    pub target: String,
    /// The rounds the difference is read from.
    pub rounds: usize,
    /// Rounds left out because either request opened a new connection or waited for a
    /// CORS preflight: a target whose idle connection was closed during the other's
    /// request (a short keep-alive) would otherwise be charged with a reconnect that is
    /// no part of its overhead. Only when at least 3 rounds are left; else 0, and
    /// `setup_included` says so.
    pub left_out: usize,
    /// The difference had to include rounds with a reconnect or a preflight (fewer than 3
    /// rounds were free of both).
    pub setup_included: bool,
    /// Median of `main − other` per round, with its interval.
    pub difference_ms: Option<Estimate>,
}

/// The network round trip measured by the probes.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeRoundTrip {
    /// Over the warm probes only: the first one, or any seen opening a connection, pays
    /// for DNS, TCP and TLS too, and one that was redirected paid a round trip per hop.
    pub rtt: Option<Distribution>,
    /// How many probes the run sent.
    pub probes: usize,
    /// Probes left out as not warm.
    pub cold_probes: usize,
    /// Probes left out because the probe URL redirected them.
    pub redirected: usize,
    /// The round trip is Resource Timing's, from each probe sent to its answer's first
    /// byte (`conn.wait_ms`); otherwise the page's own, from `fetch()` to the response
    /// head, which adds the page's hops to and from the browser's network stack.
    pub from_stack: bool,
    /// Of the warm probes, those counted warm only because they came after the first:
    /// the browser showed nothing of their connection (no `Timing-Allow-Origin`, no
    /// client port), so one that opened a connection of its own cannot be told.
    pub unverified: usize,
}

impl ProbeRoundTrip {
    /// Every probe after the first was seen opening a connection of its own: the probe
    /// endpoint closes its connections (`Connection: close`, or a keep-alive of zero).
    pub fn each_opened_a_connection(&self) -> bool {
        self.probes > 1 && self.cold_probes == self.probes
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunReport {
    pub phases: Vec<PhaseReport>,
    pub degradation: Vec<LevelDegradation>,
    /// Failed requests per concurrency level, by error class (level, class, count).
    pub level_failures: Vec<(u32, String, usize)>,
    /// Present when the run had a fresh phase.
    pub connection: Option<ConnectionCost>,
    pub cold: Vec<ColdStart>,
    pub overhead: Vec<Overhead>,
    pub probes: Option<ProbeRoundTrip>,
    /// The steady requests' wait in layers.
    pub split: Option<crate::split::RunSplit>,
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
        .filter_map(|s| tpot_ms(s.ttft_ms?, s.e2e_ms?, s.answer_tokens()?))
        .collect();
    PhaseReport {
        phase,
        target: target.to_owned(),
        requests: samples.len(),
        failed: samples.len() - ok.len(),
        ttft: stats::distribution(&ttft, BOOTSTRAP_SEED),
        e2e: stats::distribution(&e2e, BOOTSTRAP_SEED),
        tpot_ms: median(&tpot),
        itl: readings::itl_summary(ok.iter().map(|s| s.itl_ms.as_slice())),
        preflighted: None,
    }
}

/// Whether a request on a connection already open waited for a CORS preflight before it
/// was sent: what the browser spent before sending it (`sent_ms`), over the least any
/// warm request of the run spent (`baseline_ms`, the browser's own dispatch), is at least
/// three quarters of the network's round trip and at least 5 ms. On a warm connection
/// only a preflight's round trip takes that long. A browser's own hiccups take a
/// millisecond or a few (more on a busy machine): where the round trip itself is under
/// [`VISIBLE_PREFLIGHT_MS`] (loopback), a preflight would cost less than a hiccup, so
/// nothing can be read. `None` when it cannot be told (a round trip that short, a new
/// connection, no timing detail, no round trip).
pub fn paid_preflight(s: &Sample, round_trip_ms: f64, baseline_ms: f64) -> Option<bool> {
    let conn = s.conn.as_ref()?;
    if conn.new_connection == Some(true)
        || conn.reused != Some(true)
        || round_trip_ms < VISIBLE_PREFLIGHT_MS
    {
        return None;
    }
    Some(conn.sent_ms? - baseline_ms >= (0.75 * round_trip_ms).max(5.0))
}

/// The shortest round trip on which a preflight can be told from the browser's own
/// hiccups: the 5 ms floor of [`paid_preflight`]'s threshold.
pub const VISIBLE_PREFLIGHT_MS: f64 = 5.0;

/// What the run verified about a sample's connection.
fn new_connection(s: &Sample) -> Option<bool> {
    s.conn.as_ref().and_then(|c| c.new_connection)
}

/// The network round trip from the run's probes, if it had any.
fn probe_round_trip(run: &Run) -> Option<ProbeRoundTrip> {
    let probes: Vec<&Sample> = run
        .samples
        .iter()
        .filter(|s| s.phase == Phase::Probe && s.target == 0)
        .collect();
    if probes.is_empty() {
        return None;
    }
    // Warm: verified on a reused connection, or, where that cannot be told, any but the
    // first (which opened the connection).
    let warm = |(i, s): &(usize, &&Sample)| match new_connection(s) {
        Some(new) => !new,
        None => *i > 0,
    };
    let counted: Vec<&Sample> = probes
        .iter()
        .enumerate()
        .filter(warm)
        .filter(|(_, s)| s.error.is_none() && !s.redirected)
        .map(|(_, s)| *s)
        .collect();
    // The network stack's own timing where every counted probe has it (the page's hops
    // to and from the network stack are no part of a round trip), else the page's.
    let stack: Option<Vec<f64>> = counted
        .iter()
        .map(|s| s.conn.as_ref().and_then(|c| c.wait_ms))
        .collect();
    let from_stack = stack.as_ref().is_some_and(|w| !w.is_empty());
    let warm_rtt: Vec<f64> = match stack.filter(|w| !w.is_empty()) {
        Some(waits) => waits,
        None => counted.iter().filter_map(|s| s.headers_ms).collect(),
    };
    Some(ProbeRoundTrip {
        rtt: stats::distribution(&warm_rtt, BOOTSTRAP_SEED),
        probes: probes.len(),
        cold_probes: probes.iter().enumerate().filter(|p| !warm(p)).count(),
        redirected: probes.iter().filter(|s| s.redirected).count(),
        from_stack,
        unverified: counted
            .iter()
            .filter(|s| new_connection(s).is_none())
            .count(),
    })
}

impl RunReport {
    /// Reads `run`. Warm-up requests count nowhere; probes only as round trips; cold
    /// requests only as single values.
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
        for phase in [Phase::Steady, Phase::Fresh, Phase::Concurrency] {
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

        let concurrency = of(Phase::Concurrency, 0);
        let mut levels: Vec<u32> = concurrency.iter().map(|s| s.concurrency).collect();
        levels.sort_unstable();
        levels.dedup();
        // Each level's batches; a request without a first token (an error, or a stream
        // that sent none) counts against its level.
        let by_level: Vec<(u32, Vec<Vec<Option<f64>>>)> = levels
            .iter()
            .map(|&k| {
                let mut batches: BTreeMap<Option<u32>, Vec<Option<f64>>> = BTreeMap::new();
                // A batch in which a request was seen opening a connection of its own paid
                // TCP, TLS and a preflight there, which is no part of waiting behind other
                // requests, and shifted who waited for whom: the whole batch is left out
                // (leaving out only that request would keep its batch's first in line and
                // read a one-at-a-time server as faster than it is). The phase's opening
                // batch opens the connections first, so this is rare.
                let mut opened = std::collections::BTreeSet::new();
                for s in concurrency.iter().filter(|s| s.concurrency == k) {
                    if new_connection(s) == Some(true) {
                        opened.insert(s.batch);
                    }
                    batches
                        .entry(s.batch)
                        .or_default()
                        .push(s.ttft_ms.filter(|_| s.error.is_none()));
                }
                batches.retain(|batch, _| !opened.contains(batch));
                (k, batches.into_values().collect())
            })
            .collect();
        // The network's round trip, from the warm probes, is taken out of each first token
        // before levels are compared: it is not queued behind other requests.
        let floor = probe_round_trip(run)
            .and_then(|p| p.rtt)
            .map_or(0.0, |d| d.p50.value);
        report.degradation = readings::concurrency_degradation(
            &by_level,
            floor,
            BOOTSTRAP_RESAMPLES,
            BOOTSTRAP_SEED,
        );
        for &k in &levels {
            let mut classes: Vec<&str> = concurrency
                .iter()
                .filter(|s| s.concurrency == k)
                .filter_map(|s| s.error.map(|e| e.name()))
                .collect();
            classes.sort_unstable();
            for class in classes.chunk_by(|a, b| a == b) {
                report
                    .level_failures
                    .push((k, class[0].to_owned(), class.len()));
            }
        }

        let fresh = of(Phase::Fresh, 0);
        if !fresh.is_empty() {
            let steady = of(Phase::Steady, 0);
            let verified_new: Vec<&Sample> = fresh
                .iter()
                .copied()
                .filter(|s| new_connection(s) == Some(true))
                .collect();
            let verified_warm: Vec<&Sample> = steady
                .iter()
                .copied()
                .filter(|s| new_connection(s) == Some(false))
                .collect();
            let fresh_ttft = answered_ttft(verified_new.iter().copied());
            let warm_ttft = answered_ttft(verified_warm.iter().copied());
            let sent = |samples: &[&Sample]| -> Vec<f64> {
                samples
                    .iter()
                    .filter_map(|s| s.conn.as_ref().and_then(|c| c.sent_ms))
                    .collect()
            };
            let pairs = fresh_pairs(run);
            let difference = if pairs.len() >= MIN_PAIRS {
                let (fresh, warm): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
                readings::paired_overhead(&fresh, &warm, BOOTSTRAP_SEED)
            } else {
                stats::difference_of_medians(&fresh_ttft, &warm_ttft, BOOTSTRAP_SEED)
            };
            report.connection = Some(ConnectionCost {
                fresh_requests: fresh.len(),
                verified_new: verified_new.len(),
                reused: fresh
                    .iter()
                    .filter(|s| new_connection(s) == Some(false))
                    .count(),
                unverifiable: fresh.iter().filter(|s| new_connection(s).is_none()).count(),
                verified_warm: verified_warm.len(),
                median_fresh_ttft_ms: median(&fresh_ttft),
                median_warm_ttft_ms: median(&warm_ttft),
                difference,
                pairs: if pairs.len() >= MIN_PAIRS {
                    pairs.len()
                } else {
                    0
                },
                median_fresh_sent_ms: median(&sent(&verified_new)),
                median_warm_sent_ms: median(&sent(&verified_warm)),
                port_off: run.engine.client_port_off,
            });
        }

        report.cold = of(Phase::Cold, 0)
            .iter()
            .map(|s| ColdStart {
                idle_ms: s.idle_ms.unwrap_or(0),
                idle_spent_ms: s.idle_spent_ms,
                hidden: s.hidden,
                idle_timer_late_ms: s.idle_timer_late_ms,
                ttft_ms: s.ttft_ms.filter(|_| s.error.is_none()),
                error: s.error.map(|e| e.name().to_owned()),
                new_connection: new_connection(s),
                sent_ms: s.conn.as_ref().and_then(|c| c.sent_ms),
            })
            .collect();

        // The round trip a preflight costs: the warm probes', else the quickest response
        // head of a request on a warm connection (a round trip and whatever the server
        // does before its headers).
        let round_trip = probe_round_trip(run)
            .and_then(|p| p.rtt)
            .map(|d| d.p50.value)
            .or_else(|| {
                run.samples
                    .iter()
                    .filter(|s| new_connection(s) == Some(false))
                    .filter_map(|s| s.headers_ms)
                    .min_by(f64::total_cmp)
            })
            .unwrap_or(0.0);
        let baseline = run
            .samples
            .iter()
            .filter(|s| s.conn.as_ref().is_some_and(|c| c.reused == Some(true)))
            .filter(|s| new_connection(s) != Some(true))
            .filter_map(|s| s.conn.as_ref()?.sent_ms)
            .min_by(f64::total_cmp)
            .unwrap_or(0.0);
        for phase in &mut report.phases {
            let marks: Vec<bool> = run
                .samples
                .iter()
                .filter(|s| {
                    s.phase == phase.phase
                        && run
                            .targets
                            .get(s.target as usize)
                            .is_some_and(|t| t.label == phase.target)
                })
                .filter_map(|s| paid_preflight(s, round_trip, baseline))
                .collect();
            phase.preflighted = (!marks.is_empty()).then(|| marks.iter().filter(|m| **m).count());
        }

        // Compare rounds: the main target's request and each other's, in the order run.
        let compare: Vec<&Sample> = run
            .samples
            .iter()
            .filter(|s| s.phase == Phase::Compare)
            .collect();
        let targets = run.targets.len();
        for other in 1..targets as u32 {
            // Each round's pair, and whether both ran on a warm connection with no
            // preflight (as far as can be told: unknown counts as clean).
            let mut pairs: Vec<(f64, f64, bool)> = Vec::new();
            for round in compare.chunks(targets) {
                let find = |t: u32| {
                    round
                        .iter()
                        .find(|s| s.target == t && s.error.is_none())
                        .and_then(|s| Some((s.ttft_ms?, *s)))
                };
                if let (Some((a, sa)), Some((b, sb))) = (find(0), find(other)) {
                    let clean = |s: &Sample| {
                        new_connection(s) != Some(true)
                            && paid_preflight(s, round_trip, baseline) != Some(true)
                    };
                    pairs.push((a, b, clean(sa) && clean(sb)));
                }
            }
            let clean = pairs.iter().filter(|p| p.2).count();
            let setup_included = clean < 3 && clean < pairs.len();
            let used: Vec<&(f64, f64, bool)> =
                pairs.iter().filter(|p| p.2 || setup_included).collect();
            let main: Vec<f64> = used.iter().map(|p| p.0).collect();
            let theirs: Vec<f64> = used.iter().map(|p| p.1).collect();
            if !compare.is_empty() {
                report.overhead.push(Overhead {
                    target: label(other),
                    rounds: used.len(),
                    left_out: pairs.len() - used.len(),
                    setup_included,
                    difference_ms: readings::paired_overhead(&main, &theirs, BOOTSTRAP_SEED),
                });
            }
        }

        report.probes = probe_round_trip(run);
        report.split = crate::split::RunSplit::of(run);
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use firsttoken_core::schema::{Connection, ErrorClass};

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
            usage: Some(firsttoken_stream::dialect::Usage {
                input_tokens: Some(10),
                output_tokens: Some(11),
                reasoning_tokens: None,
            }),
            ..Sample::default()
        }
    }

    fn run(samples: Vec<Sample>, targets: usize) -> Run {
        let mut run: Run =
            serde_json::from_str(include_str!("../../core/schema/example-run.v1.json"))
                .expect("example");
        let target = run.targets[0].clone();
        run.targets = (0..targets)
            .map(|i| firsttoken_core::schema::Target {
                label: format!("t{i}"),
                ..target.clone()
            })
            .collect();
        run.samples = samples;
        run
    }

    fn on(new: Option<bool>, s: Sample) -> Sample {
        Sample {
            conn: Some(Connection {
                reused: Some(new != Some(true)),
                new_connection: new,
                ..Connection::default()
            }),
            ..s
        }
    }

    #[test]
    fn phases_degradation_connections_and_cold_starts_are_read() {
        let mut samples = vec![sample(0, Phase::Warmup, 0, 9000.0)];
        samples.extend((0..4).map(|i| {
            on(
                Some(false),
                sample(0, Phase::Steady, 0, 300.0 + f64::from(i)),
            )
        }));
        for i in 0..4 {
            let new = if i == 3 { None } else { Some(true) };
            samples.push(on(new, sample(0, Phase::Fresh, 0, 400.0 + f64::from(i))));
        }
        for (k, batch, ttft) in [(1, 0, 300.0), (3, 0, 300.0), (3, 0, 600.0), (3, 0, 900.0)] {
            samples.push(Sample {
                concurrency: k,
                batch: Some(batch),
                ..sample(0, Phase::Concurrency, 0, ttft)
            });
        }
        samples.push(Sample {
            idle_ms: Some(30_000),
            idle_spent_ms: Some(30_004.5),
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
            [Phase::Steady, Phase::Fresh, Phase::Concurrency],
            "cold requests are single values, not a phase's statistics"
        );
        let steady = &report.phases[0];
        assert_eq!((steady.requests, steady.failed), (4, 0));
        let ttft = steady.ttft.as_ref().expect("answered");
        assert_eq!(ttft.p50.value, 301.5);
        assert_eq!(ttft.p90, None, "p90 needs 10 values");
        assert_eq!(
            steady.tpot_ms,
            Some(11.0),
            "(e2e − ttft) / (tokens − 1) = 110 / 10"
        );
        assert_eq!(report.degradation[1].ratio.map(|r| r.value), Some(2.0));
        assert_eq!(report.degradation[1].requests, 3);
        let c = report.connection.expect("a fresh phase");
        assert_eq!(
            (c.fresh_requests, c.verified_new, c.reused, c.unverifiable),
            (4, 3, 0, 1)
        );
        assert_eq!(c.median_fresh_ttft_ms, Some(401.0), "verified new only");
        assert_eq!(c.extra_ms(), Some(401.0 - 301.5));
        assert_eq!(c.missing(), None);
        assert_eq!(
            report.cold[0],
            ColdStart {
                idle_ms: 30_000,
                idle_spent_ms: Some(30_004.5),
                hidden: false,
                idle_timer_late_ms: None,
                ttft_ms: Some(2500.0),
                error: None,
                new_connection: None,
                sent_ms: None,
            }
        );
        assert_eq!(report.cold[1].error.as_deref(), Some("timeout"));
    }

    #[test]
    fn a_connection_cost_comes_only_from_verified_connections() {
        // Every "fresh" request ran on a reused connection (no fresh URL, or a browser
        // that coalesced): no cost is read from them.
        let mut samples: Vec<Sample> = (0..5)
            .map(|i| {
                on(
                    Some(false),
                    sample(0, Phase::Steady, 0, 300.0 + f64::from(i)),
                )
            })
            .collect();
        samples.extend((0..5).map(|i| {
            on(
                Some(false),
                sample(0, Phase::Fresh, 0, 302.0 + f64::from(i)),
            )
        }));
        let c = RunReport::of(&run(samples.clone(), 1))
            .connection
            .expect("a fresh phase");
        assert_eq!((c.verified_new, c.reused), (0, 5));
        assert_eq!(c.extra_ms(), None);
        let why = c.missing().expect("a reason");
        assert!(
            why.starts_with(
                "no fresh request ran on a new connection: the browser put every fresh host name"
            ) && why.contains("keepalive_requests 2"),
            "coalescing is named, with the fix: {why}"
        );
        // None could be told either way.
        for s in samples.iter_mut().filter(|s| s.phase == Phase::Fresh) {
            s.conn = None;
        }
        let c = RunReport::of(&run(samples.clone(), 1))
            .connection
            .expect("a fresh phase");
        assert!(
            c.missing().is_some_and(|m| m.contains("could be verified")),
            "{c:?}"
        );
        // New connections, but no steady request verified warm.
        for s in samples.iter_mut() {
            s.conn = None;
            if s.phase == Phase::Fresh {
                *s = on(Some(true), s.clone());
            }
        }
        let c = RunReport::of(&run(samples, 1))
            .connection
            .expect("a fresh phase");
        assert_eq!(c.verified_new, 5);
        // The reason names both ways the reuse could have been seen (behind a proxy the
        // target may well send Timing-Allow-Origin; the preflight is what hides it).
        let why = c.missing().expect("a reason");
        assert!(why.contains("steady"), "{why}");
        assert!(why.contains("CORS preflight"), "{why}");
        assert!(why.contains("browser's own client port"), "{why}");
    }

    #[test]
    fn the_round_trip_comes_from_warm_probes() {
        let probe = |ms: f64, new: Option<bool>| {
            let mut s = sample(0, Phase::Probe, 0, 0.0);
            s.headers_ms = Some(ms);
            s.ttft_ms = None;
            match new {
                Some(_) => on(new, s),
                None => s,
            }
        };
        // The first probe opened the connection.
        let with_conn = vec![
            probe(90.0, Some(true)),
            probe(30.0, Some(false)),
            probe(32.0, Some(false)),
        ];
        let p = RunReport::of(&run(with_conn, 1)).probes.expect("probes");
        assert_eq!(p.cold_probes, 1);
        assert_eq!(p.rtt.map(|d| d.p50.value), Some(31.0));
        // Without connection details the first probe is left out.
        let without = vec![probe(90.0, None), probe(30.0, None), probe(34.0, None)];
        let p = RunReport::of(&run(without, 1)).probes.expect("probes");
        assert_eq!(p.cold_probes, 1);
        assert_eq!(p.unverified, 2);
        assert_eq!(p.rtt.map(|d| d.p50.value), Some(32.0));
    }

    /// Over HTTP/1.1 a batch at 3 at once that opens the two connections it lacks pays
    /// TCP, TLS and a preflight in two of its requests (here 500 ms), and on a server that
    /// handles one request at a time the warm request goes first: the whole batch is left
    /// out, so the level reads one at a time (2×), neither slower for the set-up nor, as
    /// leaving out only the two would, faster for the warm one's lone 1 turn.
    #[test]
    fn a_batch_that_opened_connections_is_left_out_of_its_level() {
        let mut samples = Vec::new();
        for batch in 0..6 {
            let wobble = f64::from(batch);
            samples.push(on(
                Some(false),
                Sample {
                    concurrency: 1,
                    batch: Some(batch),
                    ..sample(0, Phase::Concurrency, 0, 300.0 + wobble)
                },
            ));
            for turn in 1..=3 {
                let new = batch == 0 && turn > 1;
                let ttft = 300.0 * f64::from(turn) + wobble + if new { 500.0 } else { 0.0 };
                samples.push(on(
                    Some(new),
                    Sample {
                        concurrency: 3,
                        batch: Some(batch),
                        ..sample(0, Phase::Concurrency, 0, ttft)
                    },
                ));
            }
        }
        let report = RunReport::of(&run(samples, 1));
        let at3 = report
            .degradation
            .iter()
            .find(|d| d.level == 3)
            .expect("level 3");
        assert_eq!(
            at3.requests, 15,
            "the batch that opened connections left out"
        );
        let ratio = at3.ratio.expect("a ratio");
        assert!((ratio.value - 2.0).abs() < 0.02, "{ratio:?}");
    }

    /// Each fresh request is read against the steady request sent right before it: a
    /// network that slowed by 200 ms between the steady phase and the fresh one (a
    /// drift, not a connection's cost) adds 200 ms to a median-against-median reading,
    /// and nothing to the paired one.
    #[test]
    fn a_new_host_names_cost_is_read_pair_by_pair() {
        let mut samples = Vec::new();
        // Steady requests before the drift, at 300 ms.
        for i in 0..10 {
            samples.push(on(Some(false), sample(i, Phase::Steady, 0, 300.0)));
        }
        // Then the network slows by 200 ms; pairs of warm (500) and fresh (500 + 150).
        for p in 0..5u32 {
            let at = 10 + 2 * p;
            let wobble = f64::from(p);
            samples.push(on(
                Some(false),
                sample(at, Phase::Steady, 0, 500.0 + wobble),
            ));
            samples.push(on(
                Some(true),
                sample(at + 1, Phase::Fresh, 0, 650.0 + wobble),
            ));
        }
        let c = RunReport::of(&run(samples.clone(), 1))
            .connection
            .expect("fresh");
        assert_eq!(c.pairs, 5);
        let d = c.difference.expect("a difference");
        assert_eq!(d.value, 150.0);
        assert!(d.low <= 150.0 && d.high >= 150.0, "{d:?}");
        // Unpaired (the fresh requests after the whole steady phase), the drift would be
        // read as cost: median fresh 652 against median warm 300.
        let unpaired: Vec<Sample> = samples
            .into_iter()
            .map(|mut s| {
                if s.phase == Phase::Fresh {
                    s.index += 100;
                }
                s
            })
            .collect();
        let c = RunReport::of(&run(unpaired, 1)).connection.expect("fresh");
        assert_eq!(c.pairs, 0);
        assert!(c.difference.expect("a difference").value > 340.0);
    }

    /// A probe URL that redirects pays a round trip per hop (at 100 ms, 200 ms read as
    /// the round trip), and one whose endpoint closes each connection pays TCP and TLS
    /// every time: neither gives a round trip, and each says why.
    #[test]
    fn probes_that_redirect_or_reconnect_give_no_round_trip() {
        let probe = |ms: f64, new: bool, redirected: bool| {
            let mut s = on(Some(new), sample(0, Phase::Probe, 0, 0.0));
            s.headers_ms = Some(ms);
            s.ttft_ms = None;
            s.redirected = redirected;
            s
        };
        let redirected = vec![
            probe(410.0, true, true),
            probe(205.0, false, true),
            probe(203.0, false, true),
        ];
        let p = RunReport::of(&run(redirected, 1)).probes.expect("probes");
        assert_eq!(p.redirected, 3);
        assert_eq!(p.rtt, None);
        let closing = vec![
            probe(310.0, true, false),
            probe(305.0, true, false),
            probe(308.0, true, false),
        ];
        let p = RunReport::of(&run(closing, 1)).probes.expect("probes");
        assert!(p.each_opened_a_connection());
        assert_eq!(p.rtt, None);
        // One redirected probe among warm ones is left out, the rest stand.
        let one = vec![
            probe(310.0, true, false),
            probe(205.0, false, true),
            probe(101.0, false, false),
            probe(103.0, false, false),
        ];
        let p = RunReport::of(&run(one.clone(), 1)).probes.expect("probes");
        assert!(!p.from_stack);
        assert_eq!((p.redirected, p.unverified), (1, 0));
        // With the network stack's own timing, that is the round trip: the page's hops
        // to and from it are left out.
        let stacked: Vec<Sample> = one
            .into_iter()
            .map(|mut s| {
                let page = s.headers_ms.unwrap_or_default();
                if let Some(c) = s.conn.as_mut() {
                    c.wait_ms = Some(page - 2.5);
                }
                s
            })
            .collect();
        let q = RunReport::of(&run(stacked, 1)).probes.expect("probes");
        assert!(q.from_stack);
        assert_eq!(q.rtt.map(|d| d.p50.value), Some(99.5));
        assert!(!p.each_opened_a_connection());
        assert_eq!(p.rtt.map(|d| d.p50.value), Some(102.0));
    }

    #[test]
    fn time_per_token_counts_answer_tokens_only() {
        let mut reasoning = sample(0, Phase::Steady, 0, 1000.0);
        // 41 output tokens of which 30 reasoning: 11 answer tokens over 110 ms.
        reasoning.usage = Some(firsttoken_stream::dialect::Usage {
            input_tokens: Some(10),
            output_tokens: Some(41),
            reasoning_tokens: Some(30),
        });
        reasoning.reasoning_chunks = 30;
        let report = RunReport::of(&run(vec![reasoning.clone()], 1));
        assert_eq!(report.phases[0].tpot_ms, Some(11.0));
        // Reasoning without a count of its tokens: no honest TPOT.
        reasoning.usage = Some(firsttoken_stream::dialect::Usage {
            reasoning_tokens: None,
            ..reasoning.usage.expect("usage")
        });
        let report = RunReport::of(&run(vec![reasoning], 1));
        assert_eq!(report.phases[0].tpot_ms, None);
    }

    /// A stream cut off after part of its answer keeps its TTFT in the record, but in the
    /// report it is one of the phase's failures, and its TTFT is not in the phase's figures.
    #[test]
    fn a_cut_off_stream_is_a_failure_of_its_phase() {
        let mut samples: Vec<Sample> = (0..10)
            .map(|i| sample(i, Phase::Steady, 0, 300.0 + f64::from(i)))
            .collect();
        samples.push(Sample {
            error: Some(ErrorClass::Truncated),
            ..sample(10, Phase::Steady, 0, 1.0)
        });
        let report = RunReport::of(&run(samples, 1));
        let steady = &report.phases[0];
        assert_eq!((steady.requests, steady.failed), (11, 1));
        let ttft = steady.ttft.as_ref().expect("ten answers");
        assert_eq!(ttft.count, 10);
        assert!(ttft.min >= 300.0, "the cut-off TTFT of 1 ms is left out");
    }

    #[test]
    fn concurrency_failures_are_counted_by_class() {
        let mut samples: Vec<Sample> = (0..3)
            .map(|i| Sample {
                concurrency: 1,
                batch: Some(i),
                ..sample(0, Phase::Concurrency, 0, 300.0 + f64::from(i))
            })
            .collect();
        for class in [
            ErrorClass::Timeout,
            ErrorClass::Timeout,
            ErrorClass::Truncated,
        ] {
            samples.push(Sample {
                concurrency: 3,
                batch: Some(0),
                error: Some(class),
                ttft_ms: None,
                ..sample(0, Phase::Concurrency, 0, 0.0)
            });
        }
        let report = RunReport::of(&run(samples, 1));
        assert_eq!(
            report.level_failures,
            vec![(3, "timeout".to_owned(), 2), (3, "truncated".to_owned(), 1)]
        );
        assert_eq!(report.degradation[1].failed, 3);
        assert_eq!(report.degradation[1].median_ttft_ms, None);
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

    /// The difference of two medians of model TTFTs, unpaired, from a Quick run's five
    /// fresh and ten steady requests, spreads by hundreds of milliseconds: a figure whose
    /// interval holds zero is not shown, and the reason gives the interval.
    #[test]
    fn a_cost_that_cannot_be_told_from_zero_gives_no_figure() {
        // Steady and fresh from the same spread, no cost at all.
        let ttfts = [
            900.0, 400.0, 1500.0, 700.0, 1100.0, 500.0, 1300.0, 800.0, 600.0, 1000.0,
        ];
        let mut samples: Vec<Sample> = ttfts
            .iter()
            .map(|&t| on(Some(false), sample(0, Phase::Steady, 0, t)))
            .collect();
        samples.extend(
            [1200.0, 450.0, 950.0, 650.0, 1400.0]
                .iter()
                .map(|&t| on(Some(true), sample(0, Phase::Fresh, 0, t))),
        );
        let c = RunReport::of(&run(samples, 1)).connection.expect("fresh");
        let d = c.difference.expect("values on both sides");
        assert!(d.low < 0.0 && d.high > 0.0, "{d:?}");
        assert_eq!(c.extra_ms(), None);
        assert!(
            c.missing()
                .is_some_and(|m| m.contains("cannot be told from zero")),
            "{:?}",
            c.missing()
        );
    }

    /// A run whose client port was switched off says so where the figure is missing.
    #[test]
    fn a_port_switched_off_is_named_in_the_reason() {
        let mut samples: Vec<Sample> = (0..5)
            .map(|i| sample(0, Phase::Steady, 0, 300.0 + f64::from(i)))
            .collect();
        samples.extend((0..5).map(|i| sample(0, Phase::Fresh, 0, 600.0 + f64::from(i))));
        let mut r = run(samples, 1);
        r.engine.client_port_off = Some(PortOff::Zero);
        let c = RunReport::of(&r).connection.expect("fresh");
        assert!(
            c.missing().is_some_and(|m| m.contains("port 0")),
            "{:?}",
            c.missing()
        );
    }

    fn warm_with_sent(s: Sample, sent_ms: f64) -> Sample {
        Sample {
            conn: Some(Connection {
                reused: Some(true),
                new_connection: Some(false),
                sent_ms: Some(sent_ms),
                ..Connection::default()
            }),
            ..s
        }
    }

    /// A steady request on a warm connection that waited half a round trip or more before
    /// it was sent waited for a preflight: the cache had expired (no max-age).
    #[test]
    fn steady_requests_that_paid_a_preflight_are_counted() {
        let mut samples: Vec<Sample> = (0..3)
            .map(|_| {
                let mut p = sample(0, Phase::Probe, 0, 0.0);
                p.headers_ms = Some(90.0);
                p.ttft_ms = None;
                p
            })
            .collect();
        for (i, sent) in [0.3, 0.4, 95.0, 0.2, 101.0].into_iter().enumerate() {
            samples.push(warm_with_sent(
                sample(0, Phase::Steady, 0, 400.0 + i as f64),
                sent,
            ));
        }
        let report = RunReport::of(&run(samples.clone(), 1));
        assert_eq!(report.phases[0].phase, Phase::Steady);
        assert_eq!(report.phases[0].preflighted, Some(2));
        // On loopback (a round trip of 4.8 ms) a browser's own hiccup is no preflight,
        // and nothing can be told: a run once read "2 of 10" from sent_ms of 1–4 ms, and
        // on a busy machine one read "1 of 10" from a 5 ms hiccup.
        let mut loopback = samples.clone();
        for s in loopback.iter_mut() {
            if s.phase == Phase::Probe {
                s.headers_ms = Some(4.8);
            } else if let Some(c) = s.conn.as_mut() {
                c.sent_ms = c.sent_ms.map(|ms| if ms > 50.0 { 6.5 } else { 1.0 + ms });
            }
        }
        assert_eq!(RunReport::of(&run(loopback, 1)).phases[0].preflighted, None);
        // Without Resource Timing detail nothing is said.
        for s in samples.iter_mut() {
            s.conn = None;
        }
        assert_eq!(RunReport::of(&run(samples, 1)).phases[0].preflighted, None);
    }

    /// Two targets with the same server time, one of which reconnects every other round
    /// (its idle connection closed while the other answered): the rounds with the
    /// reconnect are left out, and the difference holds zero.
    #[test]
    fn compare_rounds_with_a_reconnect_are_left_out() {
        let mut samples = Vec::new();
        for round in 0..8 {
            let jitter = f64::from(round % 3);
            let mut a = warm_with_sent(sample(0, Phase::Compare, 0, 500.0 + jitter), 0.2);
            if round % 2 == 0 {
                a.ttft_ms = Some(800.0 + jitter);
                a.conn.as_mut().expect("conn").new_connection = Some(true);
            }
            samples.push(a);
            samples.push(warm_with_sent(
                sample(0, Phase::Compare, 1, 500.0 + (2.0 - jitter)),
                0.2,
            ));
        }
        let report = RunReport::of(&run(samples, 2));
        let o = &report.overhead[0];
        assert_eq!((o.rounds, o.left_out, o.setup_included), (4, 4, false));
        let d = o.difference_ms.expect("a difference");
        assert!(d.low <= 0.0 && d.high >= 0.0, "{d:?}");
    }
}
