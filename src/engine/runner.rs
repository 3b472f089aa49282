//! Runs a plan's phases in order: probes, warm-up, steady, fresh connections (each right
//! after a steady request held back for it), concurrency batches (the levels taking
//! turns), cold waits and interleaved comparisons. Each finished request is handed to
//! the caller at once; nothing is drawn here.

use std::collections::HashSet;

use firsttoken_core::connections::{ConnectionLog, Witness};
use firsttoken_core::outcome::Position;
use firsttoken_core::plan::{Phase, PhasePlan, Plan, RunTag, batches, opening_batch};
use firsttoken_core::schema::{Connection, EngineReport, MAX_RETRY_WAIT_MS, Sample};
use firsttoken_core::url::origin_of;
use futures_util::future::join_all;

use super::control::{Cancel, Drawn, Visibility};
use super::features;
use super::health::{TimerProbe, clock_step_ms};
use super::protocol::{Finished, FromEngine, Progress};
use super::request::{Observed, RequestSpec, RunContext, prepare, send};
use super::timing;
use crate::platform::Scope;

/// Everything the page can reach while a run goes on.
#[derive(Debug, Clone, Default)]
pub struct Controls {
    pub cancel: Cancel,
    pub visibility: Visibility,
    pub drawn: Drawn,
}

/// Runs `plan`, sending every [`FromEngine`] message to `emit` (samples as they finish,
/// progress, and at last [`FromEngine::Finished`]). The samples it hands over are the
/// run's only copy: it keeps none, and a label it withdraws later is named in
/// [`FromEngine::Finished`] for their holder to take away ([`apply_withdrawn`]). `tag` is
/// the run's random tag ([`crate::engine::ToEngine::Start`]), never its run id.
pub async fn run_plan(
    scope: &Scope,
    plan: &Plan,
    tag: &str,
    controls: &Controls,
    mut emit: impl FnMut(FromEngine),
) {
    // A page that draws the run may still be drawing its first view.
    controls.drawn.wait(scope, &controls.cancel).await;
    let performance = scope.performance();
    timing::enlarge_buffer(&performance);
    timing::clear(&performance);
    let clock_step_ms = clock_step_ms(scope);
    let probe = TimerProbe::start(scope);
    let run_start = performance.now();
    let mut run = Runner {
        scope,
        plan,
        context: RunContext {
            cancel: controls.cancel.clone(),
            visibility: controls.visibility.clone(),
            run_start,
        },
        made: 0,
        protocol_unnamed: false,
        demo: vec![false; plan.targets.len()],
        rotation: vec![0; plan.targets.len()],
        connections: ConnectionLog::default(),
        origins: HashSet::new(),
        by_port: Vec::new(),
        withdrawn: Vec::new(),
        last_alone: None,
        fresh_base: fresh_base(tag),
        fresh_count: 0,
        bodies: bodies(plan, tag),
        headers: headers(plan, tag),
        total: plan.total_requests() as u32,
        last_end: run_start,
        drawn: controls.drawn.clone(),
        clock_step_ms: clock_step_ms.unwrap_or(1.0),
    };
    let phases = plan.phases.len() as u32;
    for (number, phase) in plan.phases.iter().enumerate() {
        if controls.cancel.is_cancelled() {
            break;
        }
        let progress = |run: &Runner, idle_ms| Progress {
            phase: phase.phase(),
            phase_number: number as u32 + 1,
            phases,
            done: run.made,
            total: run.total,
            idle_ms,
        };
        emit(FromEngine::Progress(progress(&run, None)));
        match phase {
            PhasePlan::Probe { requests } => {
                run.sequential(Phase::Probe, *requests, &mut emit).await
            }
            PhasePlan::Warmup { requests } => {
                run.sequential(Phase::Warmup, *requests, &mut emit).await
            }
            PhasePlan::Steady { requests } => {
                let held = plan.steady_held_for_fresh(number);
                run.sequential(Phase::Steady, requests - held, &mut emit)
                    .await
            }
            PhasePlan::Fresh { requests } => {
                // Each fresh request right after a steady one held back for it: the pair
                // shares the network's minute.
                let held = number
                    .checked_sub(1)
                    .map_or(0, |before| plan.steady_held_for_fresh(before));
                for i in 0..*requests {
                    if i < held {
                        run.pair(&mut emit).await;
                    } else {
                        run.sequential(Phase::Fresh, 1, &mut emit).await;
                    }
                }
            }
            PhasePlan::Concurrency {
                levels,
                requests_per_level,
            } => {
                // The levels take turns, a batch of each in every round, so a network or
                // server that drifts during the phase falls on every level alike instead
                // of reading as the higher levels' slowdown.
                let most = levels
                    .iter()
                    .map(|&k| batches(*requests_per_level, k))
                    .max()
                    .unwrap_or(0);
                // First, uncounted, a batch as large as the highest level: it opens the
                // connections the levels will use.
                let opening = opening_batch(levels);
                if opening > 0 && !controls.cancel.is_cancelled() {
                    let at = (0..opening)
                        .map(|_| run.position(Phase::Warmup, 0, opening, None, None))
                        .collect();
                    run.batch(at, &mut emit).await;
                }
                for batch in 0..most {
                    for &k in levels {
                        if controls.cancel.is_cancelled() {
                            break;
                        }
                        if batch >= batches(*requests_per_level, k) {
                            continue;
                        }
                        let at = (0..k)
                            .map(|_| run.position(Phase::Concurrency, 0, k, Some(batch), None))
                            .collect();
                        run.batch(at, &mut emit).await;
                    }
                }
            }
            PhasePlan::Cold { idle_ms } => {
                for &idle in idle_ms {
                    emit(FromEngine::Progress(progress(&run, Some(idle))));
                    if !run.cold(idle, &mut emit).await {
                        break;
                    }
                }
            }
            PhasePlan::Compare { rounds } => {
                for _ in 0..*rounds {
                    for target in 0..plan.targets.len() as u32 {
                        if controls.cancel.is_cancelled() {
                            break;
                        }
                        let at = run.position(Phase::Compare, target, 1, None, None);
                        run.batch(vec![at], &mut emit).await;
                    }
                }
            }
        }
    }
    let (timer_lateness_p99_ms, timer_lateness_max_ms, timer_ticks) = probe.report();
    emit(FromEngine::Finished(Finished {
        demo: run.demo,
        cancelled: controls.cancel.is_cancelled(),
        engine: EngineReport {
            in_worker: scope.is_worker(),
            timer_lateness_p99_ms,
            timer_lateness_max_ms,
            timer_ticks,
            hidden_ms: controls.visibility.hidden_ms(performance.now()),
            clock_step_ms,
            cross_origin_isolated: features::cross_origin_isolated(),
            unavailable: features::resource_timing_unavailable(run.protocol_unnamed),
            client_port_off: run.connections.port_off(0),
        },
        withdrawn: run.withdrawn.clone(),
    }));
}

/// Takes away the labels a run withdrew ([`Finished::withdrawn`]) from the samples it
/// handed over, as their holder keeps them.
pub fn apply_withdrawn(samples: &mut [Sample], withdrawn: &[u32]) {
    for s in samples.iter_mut().filter(|s| withdrawn.contains(&s.index)) {
        withdraw_label(s);
    }
}

/// Takes away a sample's new-or-reused label; a connection that said nothing else (the
/// label came from the client port, Resource Timing gave no detail) goes with it.
pub fn withdraw_label(sample: &mut Sample) {
    if let Some(conn) = sample.conn.as_mut() {
        conn.new_connection = None;
    }
    if sample.conn.as_ref() == Some(&Connection::default()) {
        sample.conn = None;
    }
}

/// Where a run's fresh host names are numbered from: a number unique to the run, so a
/// second run within the browser's idle-socket lifetime does not find old connections.
/// Fresh request `i` (from 1) goes to `{n}` = base + i.
pub fn fresh_base(tag: &str) -> u64 {
    u64::from_str_radix(&tag[..6.min(tag.len())], 16).unwrap_or(0) * 1000
}

/// The headers a request of `phase` carries. A probe is a plain GET with none: any header
/// would add a CORS preflight, a second round trip, to the round trip it measures.
/// The request a steady phase would send first to target `t` of `plan`: its first
/// scenario's body and its headers, with the run tag where the plan puts one.
pub fn first_request(plan: &Plan, t: usize, tag: &str) -> Option<RequestSpec> {
    let target = plan.targets.get(t)?;
    Some(RequestSpec {
        url: target.url.clone(),
        body: bodies(plan, tag)[t].first().cloned(),
        headers: headers(plan, tag)[t].clone(),
        dialect: target.dialect.clone(),
        timings_pointer: target.timings_pointer.clone(),
        timeout_ms: plan.timeout_ms,
        stall_ms: plan.stall_timeout_ms,
        send_cookies: target.send_cookies,
        keep_body: false,
    })
}

fn request_headers(phase: Phase, headers: &[(String, String)]) -> Vec<(String, String)> {
    if phase == Phase::Probe {
        Vec::new()
    } else {
        headers.to_vec()
    }
}

struct Runner<'a> {
    scope: &'a Scope,
    plan: &'a Plan,
    context: RunContext,
    /// Samples made so far (the next one's index): each is made once its batch is kept,
    /// handed over, and not kept here.
    made: u32,
    /// Whether Resource Timing told a reused connection from a new one but named no
    /// protocol for it, for some request ([`features::resource_timing_unavailable`]).
    protocol_unnamed: bool,
    /// Which targets said they were the demo.
    demo: Vec<bool>,
    /// The next scenario of each target.
    rotation: Vec<usize>,
    /// The connections the run's requests have used, to tell new ones from reused ones.
    connections: ConnectionLog,
    /// The origins the run has sent a request to: a new one's first request over
    /// HTTP/1.1 opens a connection of its own.
    origins: HashSet<String>,
    /// Samples (target, index) labelled new or reused by the client port alone.
    by_port: Vec<(u32, u32)>,
    /// Of those, the ones withdrawn when their target's port was switched off.
    withdrawn: Vec<u32>,
    /// The target and URL of the latest request, when it ran alone and not after an idle
    /// wait: the next request alone to the same URL is back to back with it.
    last_alone: Option<(u32, String)>,
    fresh_base: u64,
    fresh_count: u64,
    /// Each target's scenario bodies, run tag included.
    bodies: Vec<Vec<String>>,
    /// Each target's request headers, run tag included.
    headers: Vec<Vec<(String, String)>>,
    total: u32,
    /// `performance.now()` when the latest request (or batch) ended: a cold request's
    /// idle time runs from there.
    last_end: f64,
    /// The page's word that it has drawn what it was sent.
    drawn: Drawn,
    /// The clock's grain (1 ms when it could not be read): starts or ends closer than
    /// this tie.
    clock_step_ms: f64,
}

impl Runner<'_> {
    /// Where the next request sits; takes the target's next scenario.
    fn position(
        &mut self,
        phase: Phase,
        target: u32,
        concurrency: u32,
        batch: Option<u32>,
        idle_ms: Option<u32>,
    ) -> Position {
        let t = target as usize;
        let scenarios = &self.plan.targets[t].scenarios;
        let scenario = if phase.streams() {
            let s = self.rotation[t] % scenarios.len();
            self.rotation[t] += 1;
            Some(scenarios[s].name.clone())
        } else {
            None
        };
        Position {
            index: 0, // set when the sample is kept, in the order requests started
            phase,
            target,
            scenario,
            concurrency,
            batch,
            idle_ms,
            start_ms: 0.0,
        }
    }

    /// The request a position stands for.
    fn spec(&mut self, at: &Position) -> RequestSpec {
        let t = at.target as usize;
        let target = &self.plan.targets[t];
        let url = match at.phase {
            Phase::Probe => target
                .probe_url
                .clone()
                .unwrap_or_else(|| target.url.clone()),
            Phase::Fresh => {
                self.fresh_count += 1;
                // A validated plan has a fresh URL wherever it has a fresh phase.
                target
                    .fresh_url_for(self.fresh_base + self.fresh_count)
                    .unwrap_or_else(|| target.url.clone())
            }
            _ => target.url.clone(),
        };
        let body = at.scenario.as_ref().map(|name| {
            let s = target
                .scenarios
                .iter()
                .position(|s| &s.name == name)
                .unwrap_or(0);
            self.bodies[t][s].clone()
        });
        RequestSpec {
            url,
            body,
            headers: request_headers(at.phase, &self.headers[t]),
            dialect: target.dialect.clone(),
            timings_pointer: target.timings_pointer.clone(),
            timeout_ms: self.plan.timeout_ms,
            stall_ms: self.plan.stall_timeout_ms,
            send_cookies: target.send_cookies,
            keep_body: false,
        }
    }

    async fn sequential(&mut self, phase: Phase, requests: u32, emit: &mut impl FnMut(FromEngine)) {
        for _ in 0..requests {
            if self.context.cancel.is_cancelled() {
                return;
            }
            let at = self.position(phase, 0, 1, None, None);
            self.batch(vec![at], emit).await;
        }
    }

    /// A steady request, then a fresh one with the same scenario straight after it: the
    /// two differ only in the fresh request's new host name, and share the network's
    /// minute.
    async fn pair(&mut self, emit: &mut impl FnMut(FromEngine)) {
        if self.context.cancel.is_cancelled() {
            return;
        }
        let steady = self.position(Phase::Steady, 0, 1, None, None);
        let fresh = Position {
            phase: Phase::Fresh,
            ..steady.clone()
        };
        self.batch(vec![steady], emit).await;
        if !self.context.cancel.is_cancelled() {
            self.batch(vec![fresh], emit).await;
        }
    }

    /// Waits `idle` ms, then sends one request; says whether the run goes on. The sample
    /// records the idle time actually spent, how late the wait's timer came back, and
    /// whether the page was hidden during the wait.
    async fn cold(&mut self, idle: u32, emit: &mut impl FnMut(FromEngine)) -> bool {
        let visibility = self.context.visibility.mark();
        let Some(late) = self.context.cancel.sleep(self.scope, idle).await else {
            return false;
        };
        let at = self.position(Phase::Cold, 0, 1, None, Some(idle));
        let spec = self.spec(&at);
        let mut o = send(self.scope, &spec, at, &self.context).await.finish();
        o.observation.idle_spent_ms = Some(o.exchange.t0 - self.last_end);
        o.observation.idle_timer_late_ms = Some(late);
        o.observation.hidden |= self.context.visibility.hidden_since(visibility);
        // Idle first: whatever connection it finds, it is not back to back.
        self.last_alone = None;
        self.keep(vec![o], emit).await;
        self.last_alone = None;
        true
    }

    /// Sends the requests at once (one, for a sequential phase) and keeps them when all
    /// have ended.
    async fn batch(&mut self, at: Vec<Position>, emit: &mut impl FnMut(FromEngine)) {
        let requests: Vec<(Position, RequestSpec)> = at
            .into_iter()
            .map(|at| {
                let spec = self.spec(&at);
                (at, spec)
            })
            .collect();
        // Every request is set up first, then all are sent back to back.
        let prepared: Vec<_> = requests
            .iter()
            .map(|(at, spec)| prepare(self.scope, spec, at.clone(), &self.context))
            .collect();
        let ended = join_all(prepared.into_iter().map(|p| p.send())).await;
        // Parsed only now that none of the batch is in flight: a parse can delay no stamp.
        let observed = ended.into_iter().map(|e| e.finish()).collect();
        self.keep(observed, emit).await;
    }

    /// Finishes a batch whose requests have all ended: gives each its own Resource Timing
    /// entry, honours a `429`'s `Retry-After`, tells new connections from reused ones,
    /// numbers the requests in the order they started, makes their samples (once each),
    /// hands them over, clears the Resource Timing buffer (nothing is in flight now) and
    /// lets the page draw them.
    async fn keep(&mut self, mut observed: Vec<Observed>, emit: &mut impl FnMut(FromEngine)) {
        let performance = self.scope.performance();
        self.last_end = performance.now();
        observed.sort_by(|a, b| a.exchange.t0.total_cmp(&b.exchange.t0));
        let requested: Vec<_> = observed.iter().map(Observed::requested).collect();
        let timings = timing::read_batch(self.scope, &requested, self.clock_step_ms).await;
        // The server asked for a pause: take it before the next request, so that no
        // latency includes it, and record it.
        let retry_after = observed
            .iter()
            .fold(0.0, |wait, o| longer_wait(wait, o.exchange.retry_after_ms));
        let mut retry_wait_ms = None;
        if retry_after > 0.0 {
            let start = performance.now();
            let _ = self
                .context
                .cancel
                .sleep(self.scope, retry_after.ceil() as u32)
                .await;
            retry_wait_ms = Some(performance.now() - start);
            self.last_end = performance.now();
        }
        let alone = observed.len() == 1;
        // The batch's samples, until they are handed over.
        let mut batch: Vec<Sample> = Vec::with_capacity(observed.len());
        for (o, (conn, server_timing)) in observed.into_iter().zip(timings) {
            let Observed {
                mut observation,
                exchange,
            } = o;
            let target = observation.at.target;
            let url = exchange.timing_name.clone().unwrap_or_default();
            let back_to_back = alone && self.last_alone.as_ref() == Some(&(target, url.clone()));
            let new_origin = origin_of(&url).is_some_and(|o| self.origins.insert(o));
            let port_was_off = self.connections.port_off(target).is_some();
            let new_connection = self.connections.new_connection(Witness {
                target,
                port: exchange.client_port,
                timing_reused: conn.as_ref().and_then(|c| c.reused),
                preflighted: exchange.preflighted,
                new_origin,
                http1: conn.as_ref().and_then(|c| c.protocol.as_deref()) == Some("http/1.1"),
                back_to_back,
            });
            self.last_alone = alone.then_some((target, url));
            let index = self.made;
            if self.connections.last_by_port() {
                self.by_port.push((target, index));
            }
            if !port_was_off && self.connections.port_off(target).is_some() {
                // The port is not the browser's after all: what it alone said goes, from
                // this batch's samples now and from those handed over at the run's end.
                for &(_, i) in self.by_port.iter().filter(|(t, _)| *t == target) {
                    self.withdrawn.push(i);
                    if let Some(earlier) = batch.iter_mut().find(|s| s.index == i) {
                        withdraw_label(earlier);
                    }
                }
                self.by_port.retain(|(t, _)| *t != target);
            }
            observation.conn = match (conn, new_connection) {
                (Some(conn), new_connection) => Some(Connection {
                    new_connection,
                    ..conn
                }),
                // No Resource Timing detail, but the port the target reported.
                (None, Some(new)) => Some(Connection {
                    new_connection: Some(new),
                    ..Connection::default()
                }),
                (None, None) => None,
            };
            observation.server_timing = server_timing;
            observation.at.index = index;
            if observation.head.as_ref().is_some_and(|h| h.status == 429) {
                observation.retry_wait_ms = retry_wait_ms;
            }
            self.demo[target as usize] |= exchange.demo;
            self.made += 1;
            let sample = observation.into_sample();
            self.protocol_unnamed |= sample
                .conn
                .as_ref()
                .is_some_and(|c| c.reused.is_some() && c.protocol.is_none());
            batch.push(sample);
        }
        self.drawn.sent();
        for sample in batch {
            emit(FromEngine::Sample(Box::new(sample)));
        }
        timing::clear(&performance);
        // The page draws now, before the next request starts, not while it is dispatched.
        self.drawn.wait(self.scope, &self.context.cancel).await;
    }
}

/// Each target's scenario bodies, with the run tag added when the plan puts it in the body.
fn bodies(plan: &Plan, tag: &str) -> Vec<Vec<String>> {
    plan.targets
        .iter()
        .map(|target| {
            target
                .scenarios
                .iter()
                .map(|scenario| match &plan.run_tag {
                    Some(RunTag::BodyField(field)) => {
                        match serde_json::from_str::<serde_json::Value>(&scenario.body) {
                            Ok(serde_json::Value::Object(mut object)) => {
                                object.insert(field.clone(), tag.into());
                                serde_json::Value::Object(object).to_string()
                            }
                            _ => scenario.body.clone(),
                        }
                    }
                    _ => scenario.body.clone(),
                })
                .collect()
        })
        .collect()
}

/// Each target's headers, with the run tag added when the plan puts it in a header.
fn headers(plan: &Plan, tag: &str) -> Vec<Vec<(String, String)>> {
    plan.targets
        .iter()
        .map(|target| {
            let mut headers: Vec<(String, String)> = target
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if let Some(RunTag::Header(name)) = &plan.run_tag {
                headers.push((name.clone(), tag.to_owned()));
            }
            headers
        })
        .collect()
}

/// The wait before the next request after a batch, as its answers so far ask
/// (`so_far`) and as one more asks (`asked_ms`, its `Retry-After`): the longest, each cut
/// to [`MAX_RETRY_WAIT_MS`], so that a server asking for an hour cannot hold the run.
fn longer_wait(so_far: f64, asked_ms: Option<f64>) -> f64 {
    asked_ms.map_or(so_far, |ms| so_far.max(ms.min(MAX_RETRY_WAIT_MS)))
}

#[cfg(test)]
mod tests {
    use firsttoken_core::plan::TargetPlan;
    use firsttoken_stream::dialect::Dialect;
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    const TAG: &str = "0f8fad5bd9cb469fa16570867728950e";

    #[wasm_bindgen_test(unsupported = test)]
    fn the_longest_retry_after_of_a_batch_is_waited_for_up_to_a_minute() {
        let wait = |asked: &[Option<f64>]| asked.iter().fold(0.0, |w, a| longer_wait(w, *a));
        assert_eq!(wait(&[]), 0.0);
        assert_eq!(wait(&[None, None]), 0.0);
        assert_eq!(wait(&[None, Some(2_000.0), Some(500.0)]), 2_000.0);
        // A server asking for an hour gets a minute, recorded as the minute waited.
        assert_eq!(
            wait(&[Some(2_000.0), Some(3_600_000.0), None]),
            MAX_RETRY_WAIT_MS
        );
        assert_eq!(MAX_RETRY_WAIT_MS, 60_000.0);
    }

    fn plan(tag: Option<RunTag>) -> Plan {
        let mut target = TargetPlan::new(
            "t",
            "https://chat.example.com/v1",
            Dialect::OpenaiChat,
            r#"{"model":"m"}"#,
        );
        target
            .headers
            .insert("Authorization".into(), "Bearer benchmark".into());
        let mut plan = Plan::steady(target, 1);
        plan.run_tag = tag;
        plan
    }

    #[wasm_bindgen_test(unsupported = test)]
    fn a_body_run_tag_is_a_top_level_field() {
        let bodies = bodies(&plan(Some(RunTag::BodyField("user".into()))), TAG);
        let body: serde_json::Value = serde_json::from_str(&bodies[0][0]).expect("JSON");
        assert_eq!(body["user"], TAG);
        assert_eq!(body["model"], "m");
        assert_eq!(
            headers(&plan(Some(RunTag::BodyField("user".into()))), TAG)[0].len(),
            1
        );
    }

    #[wasm_bindgen_test(unsupported = test)]
    fn probes_carry_no_headers_and_other_requests_all_of_them() {
        let plan = plan(Some(RunTag::Header("X-Benchmark-Run".into())));
        let headers = headers(&plan, TAG);
        assert_eq!(request_headers(Phase::Probe, &headers[0]), Vec::new());
        for phase in [Phase::Warmup, Phase::Steady, Phase::Fresh, Phase::Cold] {
            assert_eq!(request_headers(phase, &headers[0]).len(), 2, "{phase:?}");
        }
    }

    #[wasm_bindgen_test(unsupported = test)]
    fn fresh_numbers_are_unique_to_the_run() {
        assert_eq!(fresh_base(TAG), 0x0f8fad * 1000);
        assert_ne!(
            fresh_base(TAG),
            fresh_base("1f8fad5bd9cb469fa16570867728950e")
        );
    }

    #[wasm_bindgen_test(unsupported = test)]
    fn a_header_run_tag_joins_the_targets_headers() {
        let plan = plan(Some(RunTag::Header("X-Benchmark-Run".into())));
        let headers = headers(&plan, TAG);
        assert!(headers[0].contains(&("X-Benchmark-Run".to_owned(), TAG.to_owned())));
        assert!(headers[0].contains(&("Authorization".to_owned(), "Bearer benchmark".to_owned())));
        assert_eq!(
            bodies(&plan, TAG)[0][0],
            r#"{"model":"m"}"#,
            "the body is sent as written"
        );
    }
}
