//! The plans a beta user is usually given: requests one after another, Quick (about a
//! minute) and Session (the published investigation's protocol, about twenty minutes).

use crate::plan::{PhasePlan, Plan, TargetPlan};

impl Plan {
    /// The main target with one scenario and no phases yet.
    fn for_target(target: TargetPlan) -> Self {
        Self {
            targets: vec![target],
            phases: Vec::new(),
            timeout_ms: 60_000,
            stall_timeout_ms: None,
            run_tag: None,
            multiplexed: false,
        }
    }

    /// `requests` sequential requests on a warm connection.
    pub fn steady(target: TargetPlan, requests: u32) -> Self {
        Self {
            phases: vec![PhasePlan::Steady { requests }],
            ..Self::for_target(target)
        }
    }

    /// What a beta user can finish in about a minute against a typical chat endpoint: a
    /// few probes (when the target has a probe URL), two warm-up requests (the second,
    /// straight after the first, shows whether a client port the target reports is the
    /// browser's), 10 steady, 5 fresh (when
    /// the target has a fresh URL), concurrency 1 and 3, and one request after 15 s idle.
    pub fn quick(target: TargetPlan) -> Self {
        let mut phases = Vec::new();
        if target.probe_url.is_some() {
            phases.push(PhasePlan::Probe { requests: 3 });
        }
        phases.extend([
            PhasePlan::Warmup { requests: 2 },
            PhasePlan::Steady { requests: 10 },
        ]);
        if target.fresh_url.is_some() {
            phases.push(PhasePlan::Fresh { requests: 5 });
        }
        phases.extend([
            // Three batches at 3 at once: the fewest from which a concurrency reading can
            // be decided (two batches give only three distinct resamples).
            PhasePlan::Concurrency {
                levels: vec![1, 3],
                requests_per_level: 9,
            },
            PhasePlan::Cold {
                idle_ms: vec![15_000],
            },
        ]);
        Self {
            phases,
            ..Self::for_target(target)
        }
    }

    /// The full session protocol of the published investigation: 10 probes (when the
    /// target has a probe URL), 120 steady, 40 fresh (when it has a fresh URL), 30
    /// compare rounds (when there are other targets), 60 concurrency requests at c = 1,
    /// 3, 5, and 3 cold starts (after 30 s, 2 min and 10 min idle).
    pub fn session(target: TargetPlan, others: Vec<TargetPlan>) -> Self {
        let mut phases = Vec::new();
        if target.probe_url.is_some() {
            phases.push(PhasePlan::Probe { requests: 10 });
        }
        phases.extend([
            PhasePlan::Warmup { requests: 2 },
            PhasePlan::Steady { requests: 120 },
        ]);
        if target.fresh_url.is_some() {
            phases.push(PhasePlan::Fresh { requests: 40 });
        }
        if !others.is_empty() {
            phases.push(PhasePlan::Compare { rounds: 30 });
        }
        phases.extend([
            PhasePlan::Concurrency {
                levels: vec![1, 3, 5],
                requests_per_level: 20,
            },
            PhasePlan::Cold {
                idle_ms: vec![30_000, 120_000, 600_000],
            },
        ]);
        let mut plan = Self::for_target(target);
        plan.targets.extend(others);
        plan.phases = phases;
        plan
    }
}
