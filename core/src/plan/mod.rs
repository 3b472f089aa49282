//! The benchmark plan: which targets, which request bodies, which phases (ARCHITECTURE.md, "The
//! protocol"), and the presets a beta user is usually given.
//!
//! A plan is what an operator composes and shares; it can hold request headers (a
//! benchmark-only token) and bodies. What a run *records* is [`Plan::recorded`]: the
//! phases and each target's label, origin and dialect, never headers, URLs' paths or
//! bodies.

use std::collections::BTreeMap;

use firsttoken_stream::dialect::Dialect;
use serde::{Deserialize, Serialize};

use crate::url::host_of;

/// The most samples one run may hold: a plan may ask for no more, and a record holds no more.
pub const MAX_SAMPLES: usize = 10_000;

mod presets;
mod validate;

/// The phases of the protocol.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Small GETs to a light endpoint: the network round-trip baseline.
    Probe,
    /// Requests that open the connection; recorded, excluded from statistics.
    Warmup,
    /// Sequential requests on the warm connection.
    #[default]
    Steady,
    /// Requests that must each open a new connection.
    Fresh,
    /// Batches of simultaneous requests.
    Concurrency,
    /// A request after an idle interval.
    Cold,
    /// The same requests against other targets, interleaved with the main one.
    Compare,
}

impl Phase {
    pub const ALL: [Phase; 7] = [
        Phase::Probe,
        Phase::Warmup,
        Phase::Steady,
        Phase::Fresh,
        Phase::Concurrency,
        Phase::Cold,
        Phase::Compare,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Probe => "probe",
            Phase::Warmup => "warmup",
            Phase::Steady => "steady",
            Phase::Fresh => "fresh",
            Phase::Concurrency => "concurrency",
            Phase::Cold => "cold",
            Phase::Compare => "compare",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether the phase's requests are chat requests that stream an answer (probes are
    /// plain GETs).
    pub fn streams(self) -> bool {
        self != Phase::Probe
    }
}

/// One phase of a plan. In JSON: `{"phase": "concurrency", "levels": [1, 3, 5], ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "kebab-case", deny_unknown_fields)]
pub enum PhasePlan {
    Probe {
        requests: u32,
    },
    Warmup {
        requests: u32,
    },
    Steady {
        requests: u32,
    },
    Fresh {
        requests: u32,
    },
    /// For each level k, batches of k simultaneous requests until at least
    /// `requests_per_level` were made (whole batches only).
    Concurrency {
        levels: Vec<u32>,
        requests_per_level: u32,
    },
    /// One request after each idle interval, in order.
    Cold {
        idle_ms: Vec<u32>,
    },
    /// `rounds` rounds of one request to each target, main target first, so that all of
    /// them see the same network minute.
    Compare {
        rounds: u32,
    },
}

impl PhasePlan {
    pub fn phase(&self) -> Phase {
        match self {
            PhasePlan::Probe { .. } => Phase::Probe,
            PhasePlan::Warmup { .. } => Phase::Warmup,
            PhasePlan::Steady { .. } => Phase::Steady,
            PhasePlan::Fresh { .. } => Phase::Fresh,
            PhasePlan::Concurrency { .. } => Phase::Concurrency,
            PhasePlan::Cold { .. } => Phase::Cold,
            PhasePlan::Compare { .. } => Phase::Compare,
        }
    }

    /// Requests the phase makes, given how many targets the plan has.
    pub fn requests(&self, targets: usize) -> u64 {
        match self {
            PhasePlan::Probe { requests }
            | PhasePlan::Warmup { requests }
            | PhasePlan::Steady { requests }
            | PhasePlan::Fresh { requests } => u64::from(*requests),
            PhasePlan::Concurrency {
                levels,
                requests_per_level,
            } => {
                let counted: u64 = levels
                    .iter()
                    .map(|&k| u64::from(batches(*requests_per_level, k)) * u64::from(k))
                    .sum();
                counted + u64::from(opening_batch(levels))
            }
            PhasePlan::Cold { idle_ms } => idle_ms.len() as u64,
            PhasePlan::Compare { rounds } => u64::from(*rounds) * targets as u64,
        }
    }

    /// The idle time the phase spends on purpose, in milliseconds.
    pub fn idle_ms(&self) -> u64 {
        match self {
            PhasePlan::Cold { idle_ms } => idle_ms.iter().map(|&ms| u64::from(ms)).sum(),
            _ => 0,
        }
    }
}

/// The uncounted batch a concurrency phase begins with: as many requests at once as its
/// highest level, recorded as warm-up, so the connections the levels need are open
/// before any level is read (over HTTP/1.1 the first batch at 3 would otherwise open two
/// and pay TCP, TLS and a preflight in its first tokens). None when every level is 1.
pub fn opening_batch(levels: &[u32]) -> u32 {
    levels.iter().copied().max().filter(|&k| k > 1).unwrap_or(0)
}

/// How many batches of `k` make at least `requests` requests.
pub fn batches(requests: u32, k: u32) -> u32 {
    requests.div_ceil(k.max(1))
}

/// A request body and the name its samples carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// `chat`, `retrieval`: what distinguishes this body from the others.
    pub name: String,
    /// The JSON request body, sent as is (with the run tag added when the plan says so).
    pub body: String,
}

/// A streaming endpoint to measure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetPlan {
    /// What the operator calls it: "prod chat", "provider direct".
    pub label: String,
    /// The endpoint, POSTed to with each scenario's body.
    pub url: String,
    pub dialect: Dialect,
    /// Extra request headers. On another origin these cost a CORS preflight; a header a
    /// page may not set (Cookie, Connection, …) is refused.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// At least one.
    pub scenarios: Vec<Scenario>,
    /// Where in an event's JSON the server puts its timing breakdown (custom dialects
    /// name it in the dialect instead).
    #[serde(default)]
    pub timings_pointer: Option<String>,
    /// The operator's version label for before/after comparisons.
    #[serde(default)]
    pub version: Option<String>,
    /// For the fresh phase: the URL with `{n}` where a number goes, on a wildcard host name
    /// that reaches the same server (`https://{n}.fresh.chat.example.com/v1/chat`). A new
    /// host name is a new origin, and only that guarantees a new connection: browsers keep
    /// idle connections and use them whatever `Connection: close` said before.
    #[serde(default)]
    pub fresh_url: Option<String>,
    /// For the probe phase: a light GET endpoint on the target's host.
    #[serde(default)]
    pub probe_url: Option<String>,
    /// Marks the built-in demo target (simulated numbers).
    #[serde(default)]
    pub demo: bool,
    /// Send the page's cookies with the requests (`credentials: "same-origin"`), for a
    /// target on the page's own origin that needs its session. Browsers send them only
    /// to that origin; without this no request carries a cookie (`"omit"`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub send_cookies: bool,
}

/// How every request says it is benchmark traffic, so the target can filter it out of
/// its analytics and purge benchmark accounts by exact id. The value is a random tag made
/// for the run, never its run id: a target that learned the run id could upload a record
/// of its own under it before the real one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum RunTag {
    /// A request header (on another origin it costs a CORS preflight).
    Header(String),
    /// A top-level field added to the JSON body (`"user"` is one OpenAI accepts).
    BodyField(String),
}

/// What a run does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The first target is the one measured; the others are only used by compare phases.
    pub targets: Vec<TargetPlan>,
    pub phases: Vec<PhasePlan>,
    /// A request that has not finished after this long is cancelled and counted as a timeout.
    pub timeout_ms: u32,
    /// A request that receives nothing (no response head, no body byte) for this long is
    /// cancelled and counted as stalled, its own ending: with it, a long answer can have
    /// a long `timeout_ms` and a stuck one still ends early.
    #[serde(default)]
    pub stall_timeout_ms: Option<u32>,
    #[serde(default)]
    pub run_tag: Option<RunTag>,
    /// The targets speak HTTP/2 or HTTP/3, so more than six simultaneous requests to one
    /// origin really are simultaneous (over HTTP/1.1 browsers queue the rest).
    #[serde(default)]
    pub multiplexed: bool,
}

/// The longest per-request timeout a plan may set: ten minutes.
pub const MAX_TIMEOUT_MS: u32 = 600_000;
/// The longest idle interval of a cold phase: thirty minutes.
pub const MAX_IDLE_MS: u32 = 1_800_000;
/// Connections a browser opens to one host over HTTP/1.1 (Chrome, Firefox and Safari).
pub const HTTP1_CONNECTIONS_PER_HOST: u32 = 6;
const MAX_TARGETS: usize = 8;
const MAX_SCENARIOS: usize = 16;
const MAX_HEADERS: usize = 32;
const MAX_BODY_BYTES: usize = 64 * 1024;
const MAX_LEVEL: u32 = 64;

/// Request headers a page cannot set: `fetch` refuses or silently drops them.
const FORBIDDEN_HEADERS: [&str; 21] = [
    "accept-charset",
    "accept-encoding",
    "access-control-request-headers",
    "access-control-request-method",
    "connection",
    "content-length",
    "cookie",
    "cookie2",
    "date",
    "dnt",
    "expect",
    "host",
    "keep-alive",
    "origin",
    "referer",
    "set-cookie",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "via",
];

/// What a run records of its plan: no URL paths, headers or bodies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedPlan {
    pub phases: Vec<PhasePlan>,
    pub timeout_ms: u32,
    #[serde(default)]
    pub stall_timeout_ms: Option<u32>,
    pub multiplexed: bool,
    /// Whether requests carried the run tag.
    pub run_tag: bool,
}

impl Plan {
    /// The target being measured.
    pub fn main_target(&self) -> &TargetPlan {
        &self.targets[0]
    }

    /// How many steady requests of phase `number` wait for the fresh phase right after
    /// it, to go one before each fresh request: each new host name's cost is then read
    /// against a warm request of the same minute, so a network that drifts between the
    /// phases is not read as the cost. As many as the fresh requests, at most all of them;
    /// 0 unless phase `number` is steady and the next is fresh.
    pub fn steady_held_for_fresh(&self, number: usize) -> u32 {
        match (self.phases.get(number), self.phases.get(number + 1)) {
            (Some(PhasePlan::Steady { requests }), Some(PhasePlan::Fresh { requests: fresh })) => {
                (*fresh).min(*requests)
            }
            _ => 0,
        }
    }

    /// How many requests the plan makes in all.
    pub fn total_requests(&self) -> u64 {
        self.phases
            .iter()
            .map(|p| p.requests(self.targets.len()))
            .sum()
    }

    /// How long the plan takes if each request takes `request_s` seconds: the idle waits,
    /// plus one request time for each sequential request and each concurrent batch.
    pub fn expected_seconds(&self, request_s: f64) -> f64 {
        self.phases
            .iter()
            .map(|p| {
                let slots = match p {
                    PhasePlan::Concurrency {
                        levels,
                        requests_per_level,
                    } => {
                        let counted: u64 = levels
                            .iter()
                            .map(|&k| u64::from(batches(*requests_per_level, k)))
                            .sum();
                        counted + u64::from(opening_batch(levels) > 0)
                    }
                    other => other.requests(self.targets.len()),
                };
                slots as f64 * request_s + p.idle_ms() as f64 / 1000.0
            })
            .sum()
    }

    /// Every host a run of this plan contacts, in the order the plan names them, each
    /// once: the measured target's URL, its fresh URL (`{n}` shown as `*`, the wildcard
    /// the fresh requests fill in) when there is a fresh phase, its probe URL when there
    /// is a probe phase, and the other targets' URLs when there is a compare phase. A
    /// beta user is told all of them before agreeing to run, and none it will not.
    pub fn hosts(&self) -> Vec<String> {
        let has = |wanted: Phase| self.phases.iter().any(|p| p.phase() == wanted);
        let mut hosts: Vec<String> = Vec::new();
        for (i, target) in self.targets.iter().enumerate() {
            let main = i == 0;
            let urls = [
                (main || has(Phase::Compare)).then_some(&target.url),
                target
                    .fresh_url
                    .as_ref()
                    .filter(|_| main && has(Phase::Fresh)),
                target
                    .probe_url
                    .as_ref()
                    .filter(|_| main && has(Phase::Probe)),
            ];
            for url in urls.into_iter().flatten() {
                if let Some(host) = host_of(&url.replace("{n}", "*"))
                    && !hosts.contains(&host)
                {
                    hosts.push(host);
                }
            }
        }
        hosts
    }

    /// What a run records of this plan.
    pub fn recorded(&self) -> RecordedPlan {
        RecordedPlan {
            phases: self.phases.clone(),
            timeout_ms: self.timeout_ms,
            stall_timeout_ms: self.stall_timeout_ms,
            multiplexed: self.multiplexed,
            run_tag: self.run_tag.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::ValidationError;
    use crate::plan::MAX_SAMPLES;

    fn target() -> TargetPlan {
        TargetPlan::new(
            "demo",
            "http://127.0.0.1:8080/v1/chat/completions",
            Dialect::OpenaiChat,
            "{}",
        )
    }

    fn refused(plan: &Plan) -> ValidationError {
        plan.validate().expect_err("the plan must be refused")
    }

    #[test]
    fn presets_are_valid_and_the_session_matches_the_protocol() {
        assert_eq!(Plan::quick(target()).validate(), Ok(()));
        let mut probed = target();
        probed.probe_url = Some("http://127.0.0.1:8080/api/v1/ping".into());
        probed.fresh_url = Some("http://{n}.localhost:8080/v1/chat/completions".into());
        let direct = TargetPlan::new(
            "direct",
            "https://api.example.com/v1/chat/completions",
            Dialect::OpenaiChat,
            "{}",
        );
        let session = Plan::session(probed, vec![direct]);
        assert_eq!(session.validate(), Ok(()));
        let count = |phase: Phase| -> u64 {
            session
                .phases
                .iter()
                .filter(|p| p.phase() == phase)
                .map(|p| p.requests(session.targets.len()))
                .sum()
        };
        assert_eq!(count(Phase::Probe), 10);
        assert_eq!(count(Phase::Steady), 120);
        assert_eq!(count(Phase::Fresh), 40);
        // Forty of the steady requests go one before each fresh request.
        let steady = session
            .phases
            .iter()
            .position(|p| p.phase() == Phase::Steady)
            .expect("steady");
        assert_eq!(session.steady_held_for_fresh(steady), 40);
        assert_eq!(session.steady_held_for_fresh(steady + 1), 0);
        assert_eq!(count(Phase::Compare), 60, "30 rounds of 2 targets");
        // Whole batches: 20 at c=1, 7×3 = 21 at c=3, 4×5 = 20 at c=5, after an opening
        // batch of 5 (recorded as warm-up).
        assert_eq!(count(Phase::Concurrency), 66);
        assert_eq!(count(Phase::Cold), 3);
    }

    #[test]
    fn presets_leave_out_what_the_target_cannot_do() {
        let phases = |plan: Plan| plan.phases.iter().map(PhasePlan::phase).collect::<Vec<_>>();
        let quick = phases(Plan::quick(target()));
        assert!(!quick.contains(&Phase::Fresh) && !quick.contains(&Phase::Probe));
        let session = phases(Plan::session(target(), Vec::new()));
        assert!(!session.contains(&Phase::Fresh) && !session.contains(&Phase::Compare));
        let mut fresh = target();
        fresh.fresh_url = Some("https://{n}.fresh.chat.example.com/v1/chat".into());
        assert!(phases(Plan::quick(fresh)).contains(&Phase::Fresh));
    }

    #[test]
    fn a_fresh_phase_needs_a_fresh_url_with_n_in_the_host() {
        let mut plan = Plan::steady(target(), 2);
        plan.phases.push(PhasePlan::Fresh { requests: 3 });
        let err = refused(&plan);
        assert_eq!(err.field, "targets[0].fresh_url");
        assert!(err.message.contains("phases[1]"), "{err}");
        plan.targets[0].fresh_url = Some("http://127.0.0.1:8080/v1/chat?n={n}".into());
        let err = refused(&plan);
        assert_eq!(err.field, "targets[0].fresh_url");
        assert!(err.message.contains("host name"), "{err}");
        plan.targets[0].fresh_url = Some("http://{n}.localhost:8080/v1/chat".into());
        assert_eq!(plan.validate(), Ok(()));
    }

    #[test]
    fn a_url_whose_origin_a_record_cannot_keep_is_refused() {
        let mut t = target();
        t.url = "https://chat_app.internal.example.com/v1/chat".into();
        let err = refused(&Plan::steady(t, 1));
        assert_eq!(err.field, "targets[0].url");
        assert!(err.message.contains("no origin"), "{err}");
    }

    #[test]
    fn a_stall_limit_fits_inside_the_timeout() {
        let mut plan = Plan::steady(target(), 2);
        plan.stall_timeout_ms = Some(500);
        assert_eq!(refused(&plan).field, "stall_timeout_ms");
        plan.stall_timeout_ms = Some(plan.timeout_ms + 1);
        assert_eq!(refused(&plan).field, "stall_timeout_ms");
        plan.stall_timeout_ms = Some(10_000);
        assert_eq!(plan.validate(), Ok(()));
        assert_eq!(plan.recorded().stall_timeout_ms, Some(10_000));
    }

    #[test]
    fn the_quick_preset_takes_about_a_minute() {
        // At 1.5 s a request (a typical chat answer), plus the idle wait.
        let seconds = Plan::quick(target()).expected_seconds(1.5);
        assert!((40.0..=80.0).contains(&seconds), "{seconds} s");
    }

    #[test]
    fn nonsense_is_refused_with_the_field_named() {
        let mut plan = Plan::steady(target(), 0);
        assert_eq!(refused(&plan).field, "phases[0].requests");
        plan = Plan::steady(target(), 5);
        plan.timeout_ms = 10;
        assert_eq!(refused(&plan).field, "timeout_ms");
        plan = Plan::steady(target(), MAX_SAMPLES as u32 + 1);
        assert_eq!(refused(&plan).field, "phases");
        plan.phases.clear();
        assert_eq!(refused(&plan).field, "phases");

        plan = Plan::steady(target(), 5);
        plan.phases.push(PhasePlan::Concurrency {
            levels: vec![1, 8],
            requests_per_level: 8,
        });
        let err = refused(&plan);
        assert_eq!(err.field, "phases[1].levels[1]");
        assert!(err.message.contains("HTTP/1.1"), "{err}");
        plan.multiplexed = true;
        assert_eq!(
            plan.validate(),
            Ok(()),
            "multiplexed targets may go past six"
        );

        plan = Plan::steady(target(), 5);
        plan.phases.push(PhasePlan::Compare { rounds: 3 });
        assert_eq!(refused(&plan).field, "phases[1]");
        plan.phases = vec![PhasePlan::Probe { requests: 3 }];
        assert!(refused(&plan).message.contains("probe_url"));
        plan.phases = vec![PhasePlan::Cold { idle_ms: vec![] }];
        assert_eq!(refused(&plan).field, "phases[0].idle_ms");
    }

    #[test]
    fn every_host_a_run_contacts_is_named_once() {
        let mut main = target();
        main.url = "https://Chat.example.com/v1/chat".into();
        main.fresh_url = Some("https://{n}.fresh.example.com/v1/chat?x=1".into());
        main.probe_url = Some("https://chat.example.com/ping".into());
        let mut direct = target();
        direct.url = "https://key:secret@api.provider.example:8443/v1".into();
        let mut plan = Plan::steady(main, 1);
        plan.targets.push(direct);
        // Only the phases the plan has: a steady plan contacts the target alone.
        assert_eq!(plan.hosts(), ["chat.example.com"]);
        plan.phases.extend([
            PhasePlan::Probe { requests: 1 },
            PhasePlan::Fresh { requests: 1 },
            PhasePlan::Compare { rounds: 1 },
        ]);
        assert_eq!(
            plan.hosts(),
            [
                "chat.example.com",
                "*.fresh.example.com",
                "api.provider.example:8443"
            ]
        );
    }

    #[test]
    fn targets_are_checked() {
        let check = |edit: fn(&mut TargetPlan)| {
            let mut t = target();
            edit(&mut t);
            refused(&Plan::steady(t, 1)).field
        };
        assert_eq!(
            check(|t| t.url = "chat.example.com/v1".into()),
            "targets[0].url"
        );
        assert_eq!(
            check(|t| t.url = "https://user:pw@chat.example.com/".into()),
            "targets[0].url"
        );
        assert_eq!(
            check(|t| t.scenarios[0].body = "{oops".into()),
            "targets[0].scenarios[0].body"
        );
        assert_eq!(check(|t| t.scenarios.clear()), "targets[0].scenarios");
        assert_eq!(
            check(|t| {
                t.headers.insert("Cookie".into(), "x".into());
            }),
            "targets[0].headers.Cookie"
        );
        // A text/plain body would skip the CORS preflight: a link cannot ask for one.
        assert_eq!(
            check(|t| {
                t.headers.insert("Content-Type".into(), "text/plain".into());
            }),
            "targets[0].headers.Content-Type"
        );
        assert_eq!(
            check(|t| {
                t.headers.insert("bad name".into(), "x".into());
            }),
            "targets[0].headers.bad name"
        );
        assert_eq!(
            check(|t| t.fresh_url = Some("https://fresh.example.com/".into())),
            "targets[0].fresh_url"
        );
        assert_eq!(
            check(|t| t.timings_pointer = Some("timings".into())),
            "targets[0].timings_pointer"
        );
        assert_eq!(
            check(
                |t| t.dialect = Dialect::Custom(firsttoken_stream::dialect::CustomDialect {
                    token_event: "token".into(),
                    token_pointer: "t".into(),
                    done_event: None,
                    timings_pointer: None,
                    error_pointer: None,
                })
            ),
            "targets[0].dialect.custom.token_pointer"
        );
    }

    #[test]
    fn plans_round_trip_through_json_and_unknown_things_are_named() {
        let plan = Plan::quick(target());
        let json = serde_json::to_string(&plan).expect("serializes");
        assert_eq!(serde_json::from_str::<Plan>(&json).expect("parses"), plan);
        let bad_dialect = json.replace("\"openai-chat\"", "\"grpc\"");
        let err = serde_json::from_str::<Plan>(&bad_dialect).expect_err("unknown dialect");
        assert!(err.to_string().contains("unknown variant `grpc`"), "{err}");
        let negative = json.replace("\"requests\":10", "\"requests\":-10");
        let err = serde_json::from_str::<Plan>(&negative).expect_err("negative count");
        assert!(err.to_string().contains("-10"), "{err}");
        let unknown_phase = json.replace("\"phase\":\"steady\"", "\"phase\":\"soak\"");
        assert!(serde_json::from_str::<Plan>(&unknown_phase).is_err());
    }

    #[test]
    fn the_recorded_plan_keeps_no_secrets() {
        let mut t = target();
        t.headers
            .insert("Authorization".into(), "Bearer benchmark-only".into());
        let plan = Plan::steady(t, 3);
        let recorded = serde_json::to_string(&plan.recorded()).expect("serializes");
        assert!(!recorded.contains("Bearer"));
        assert!(!recorded.contains("/v1/chat"));
    }
}
