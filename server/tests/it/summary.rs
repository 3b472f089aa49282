//! Summaries equal the core crate's statistics applied to the same samples, on SQLite and
//! on PostgreSQL.

use firsttoken_core::plan::{Phase, PhasePlan};
use firsttoken_core::schema::{ErrorClass, NetworkLabel, Run, Sample};
use firsttoken_crowd::sketch::RELATIVE_ERROR;
use firsttoken_crowd::stats::BOOTSTRAP_SEED;
use firsttoken_crowd::{stats, summary};
use firsttoken_server::db::Pool;
use serde_json::Value;

use crate::common;
use crate::common::App;

/// Runs `$body` with `$p` bound to the test database's pool, whichever backend it is.
macro_rules! with_pool {
    ($db:expr, |$p:ident| $body:expr) => {
        match $db.pool() {
            Pool::Sqlite($p) => $body,
            Pool::Postgres($p) => $body,
        }
    };
}

/// A run of `steady` answered requests (TTFTs from `ttfts`), one failed request, and one
/// warm-up request that must never count.
fn run(n: u64, network: NetworkLabel, version: &str, demo: bool, ttfts: &[f64]) -> Run {
    let mut run: Run = serde_json::from_value(common::run_with(n, |_| {})).expect("example");
    run.client.network = network;
    run.targets[0].version = Some(version.to_owned());
    run.targets[0].demo = demo;
    let template = run.samples[0].clone();
    let failed = Sample {
        status: 500,
        error: Some(ErrorClass::Http),
        error_message: Some("HTTP 500".into()),
        headers_ms: Some(3.2),
        ttfb_ms: Some(3.4),
        ttft_ms: None,
        ttft_any_ms: None,
        last_token_ms: None,
        e2e_ms: Some(3.6),
        itl_ms: Vec::new(),
        output_chunks: 0,
        usage: None,
        done: false,
        ..template.clone()
    };
    let answered = |ttft: f64, phase: Phase| Sample {
        phase,
        headers_ms: Some(2.0),
        ttfb_ms: Some(3.0),
        ttft_any_ms: Some(ttft),
        ttft_ms: Some(ttft),
        last_token_ms: Some(ttft + 900.0),
        e2e_ms: Some(ttft + 910.0),
        ..template.clone()
    };
    let mut samples = vec![answered(5000.0, Phase::Warmup)];
    samples.extend(ttfts.iter().map(|&t| answered(t, Phase::Steady)));
    samples.push(failed);
    for (i, s) in samples.iter_mut().enumerate() {
        s.index = i as u32;
    }
    run.plan.phases = vec![
        PhasePlan::Warmup { requests: 1 },
        PhasePlan::Steady {
            requests: samples.len() as u32 - 1,
        },
    ];
    run.samples = samples;
    run.validate().expect("a valid run");
    run
}

/// Two share links' study ids.
const FIRST_LINK: &str = "firstlinkaaaaaaa";
const SECOND_LINK: &str = "secondlinkbbbbbb";

/// Twelve runs: fiber and cellular, versions v1 and v2, from two links (runs 0–4 and
/// 5–10) and one from a link without an id, plus a demo run.
fn runs() -> Vec<Run> {
    let mut runs = Vec::new();
    for n in 0..12u64 {
        let network = if n % 2 == 0 {
            NetworkLabel::Fiber
        } else {
            NetworkLabel::Cellular
        };
        let base = if network == NetworkLabel::Fiber {
            300.0
        } else {
            700.0
        };
        let version = if n < 6 { "v1" } else { "v2" };
        let ttfts: Vec<f64> = (0..8)
            .map(|i| base + (n * 13 + i * 7 % 11) as f64 * 1.5)
            .collect();
        let mut run = run(n, network, version, false, &ttfts);
        run.study_id = match n {
            0..5 => Some(FIRST_LINK.to_owned()),
            5..11 => Some(SECOND_LINK.to_owned()),
            _ => None,
        };
        run.validate().expect("a valid run");
        runs.push(run);
    }
    runs.push(run(99, NetworkLabel::Fiber, "v1", true, &[10.0; 8]));
    runs
}

/// What the summary must say for `runs`: core's numbers over their steady samples, each
/// run's answered TTFTs and total times in run-id order (as the collector orders runs for
/// its cluster bootstrap), samples, failures and the median of run medians.
struct Expected {
    ttft: Vec<Vec<f64>>,
    e2e: Vec<Vec<f64>>,
    samples: usize,
    failed: usize,
    median_of_medians: Option<f64>,
}

fn expected(runs: &[&Run]) -> Expected {
    let mut runs = runs.to_vec();
    runs.sort_by(|a, b| a.run_id.cmp(&b.run_id));
    let steady = |r: &&Run| {
        r.samples
            .iter()
            .filter(|s| s.phase == Phase::Steady)
            .cloned()
            .collect::<Vec<_>>()
    };
    let answered = |r: &&Run, field: fn(&Sample) -> Option<f64>| -> Vec<f64> {
        steady(r)
            .iter()
            .filter(|s| s.error.is_none())
            .filter_map(field)
            .collect()
    };
    let ttft: Vec<Vec<f64>> = runs.iter().map(|r| answered(r, |s| s.ttft_ms)).collect();
    let e2e: Vec<Vec<f64>> = runs.iter().map(|r| answered(r, |s| s.e2e_ms)).collect();
    let (_, median_of_medians) = stats::median_of_run_medians(ttft.iter().map(Vec::as_slice));
    Expected {
        samples: runs.iter().map(|r| steady(r).len()).sum(),
        failed: runs
            .iter()
            .flat_map(steady)
            .filter(|s| s.error.is_some())
            .count(),
        ttft,
        e2e,
        median_of_medians,
    }
}

/// Compares one summary group with core's statistics over `runs`.
fn check_group(group: &Value, runs: &[&Run], backend: &str) {
    let e = expected(runs);
    let answered: usize = e.ttft.iter().map(Vec::len).sum();
    assert_eq!(group["runs"], runs.len(), "{backend}: {group}");
    assert_eq!(group["samples"], e.samples, "{backend}");
    assert_eq!(group["answered"], answered, "{backend}");
    assert_eq!(
        group["error_rate"].as_f64(),
        Some(e.failed as f64 / e.samples as f64),
        "{backend}"
    );
    assert_eq!(group["errors"]["http"]["count"], e.failed, "{backend}");
    let within = |got: f64, want: f64, what: &str| {
        assert!(
            (got - want).abs() <= RELATIVE_ERROR * want.abs() + 1e-9,
            "{backend} {what}: {got} against exact {want}"
        );
    };
    within(
        group["median_of_run_medians_ttft_ms"]
            .as_f64()
            .expect("median"),
        e.median_of_medians.expect("median"),
        "median of run medians",
    );
    for (key, runs) in [("ttft_ms", &e.ttft), ("e2e_ms", &e.e2e)] {
        let runs: Vec<&[f64]> = runs.iter().map(Vec::as_slice).collect();
        // Summaries read sketches: each number within their relative error of the exact
        // one, the count exactly.
        let want = summary::percentiles(&runs, BOOTSTRAP_SEED).expect("values");
        let got: summary::Percentiles =
            serde_json::from_value(group[key].clone()).expect("percentiles");
        assert_eq!(
            (got.count, got.min, got.max),
            (want.count, want.min, want.max),
            "{backend} {key}"
        );
        within(got.mean, want.mean, key);
        let pairs = [
            (Some(got.p50), Some(want.p50)),
            (got.p90, want.p90),
            (got.p95, want.p95),
            (got.p99, want.p99),
        ];
        for (got, want) in pairs {
            assert_eq!(got.is_some(), want.is_some(), "{backend} {key}");
            let (Some(got), Some(want)) = (got, want) else {
                continue;
            };
            within(got.value, want.value, key);
            assert_eq!(got.low.is_some(), want.low.is_some(), "{backend} {key}");
            for (g, w) in [(got.low, want.low), (got.high, want.high)] {
                if let (Some(g), Some(w)) = (g, w) {
                    within(g, w, key);
                }
            }
        }
        // Intervals resample runs, and only from ten runs on.
        let with_interval = runs.len() >= summary::MIN_RUNS_FOR_INTERVAL;
        assert_eq!(got.p50.low.is_some(), with_interval, "{backend} {key}");
        // 8 answered requests per run: p99 needs 100.
        assert_eq!(got.p99.is_some(), answered >= 100, "{backend} {key}");
    }
}

/// The collector's summary for `query`, which must be answered.
pub(crate) async fn summary(app: &App, query: &str) -> Value {
    let response = app.get(&format!("/api/v1/summary?{query}")).send().await;
    assert_eq!(response.status, 200, "{query}");
    response.json()
}

#[tokio::test]
async fn summaries_equal_core_statistics_over_the_same_samples() {
    let runs = runs();
    for t in common::databases().await {
        let app = App::new(common::state(&t.db));
        for run in &runs {
            let status = app.post("/api/v1/runs").json(run).send().await.status;
            assert_eq!(status, 201);
        }
        let real: Vec<&Run> = runs.iter().filter(|r| !r.main_target().demo).collect();
        let of = |network: NetworkLabel| {
            real.iter()
                .copied()
                .filter(|r| r.client.network == network)
                .collect::<Vec<_>>()
        };

        // Grouped by network: the steady phase, demo runs left out.
        let s = summary(&app, "group_by=network&min_samples=10").await;
        let groups = s["groups"].as_array().expect("groups");
        assert_eq!(groups.len(), 2, "{}: {s}", t.name);
        assert_eq!(groups[0]["key"]["network"], "cellular");
        check_group(&groups[0], &of(NetworkLabel::Cellular), t.name);
        assert_eq!(groups[1]["key"]["network"], "fiber");
        check_group(&groups[1], &of(NetworkLabel::Fiber), t.name);

        // Filtered to cellular, grouped by version: before and after a fix.
        let s = summary(
            &app,
            "group_by=target_version&network=cellular&min_samples=10",
        )
        .await;
        let groups = s["groups"].as_array().expect("groups");
        let version = |v: &str| {
            real.iter()
                .copied()
                .filter(|r| {
                    r.client.network == NetworkLabel::Cellular
                        && r.main_target().version.as_deref() == Some(v)
                })
                .collect::<Vec<_>>()
        };
        check_group(&groups[0], &version("v1"), t.name);
        check_group(&groups[1], &version("v2"), t.name);

        // Everything in one group; the demo run only when asked for.
        let s = summary(&app, "min_samples=10").await;
        check_group(&s["groups"][0], &real, t.name);
        let s = summary(&app, "min_samples=10&include_demo=true").await;
        check_group(&s["groups"][0], &runs.iter().collect::<Vec<_>>(), t.name);

        // One link's runs alone, and every link side by side (a run from a link without
        // an id is a group of its own, keyed null).
        let link = |id: Option<&str>| {
            real.iter()
                .copied()
                .filter(|r| r.study_id.as_deref() == id)
                .collect::<Vec<_>>()
        };
        let s = summary(&app, &format!("study={FIRST_LINK}&min_samples=10")).await;
        assert_eq!(s["groups"].as_array().map(Vec::len), Some(1), "{s}");
        check_group(&s["groups"][0], &link(Some(FIRST_LINK)), t.name);
        let s = summary(&app, "group_by=study&min_samples=8").await;
        let groups = s["groups"].as_array().expect("groups");
        assert_eq!(groups.len(), 3, "{}: {s}", t.name);
        for id in [Some(FIRST_LINK), Some(SECOND_LINK), None] {
            let group = groups
                .iter()
                .find(|g| g["key"]["study"].as_str() == id)
                .unwrap_or_else(|| panic!("{}: no group for {id:?} in {s}", t.name));
            check_group(group, &link(id), t.name);
        }

        // Too few samples: counts, no percentiles, and a note that says why.
        let s = summary(&app, "group_by=network&min_samples=1000").await;
        let group = &s["groups"][0];
        assert_eq!(group["ttft_ms"], Value::Null, "{}", t.name);
        assert!(
            group["note"]
                .as_str()
                .is_some_and(|n| n.contains("at least 1000")),
            "{group}"
        );

        // phase=any pools the warm-up too; grouping by phase keeps them apart.
        let s = summary(&app, "group_by=phase&min_samples=1").await;
        let phases: Vec<&str> = s["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .filter_map(|g| g["key"]["phase"].as_str())
            .collect();
        assert_eq!(phases, ["steady"], "{}: steady unless asked", t.name);
        let s = summary(&app, "group_by=phase&phase=any&min_samples=1").await;
        let phases: Vec<&str> = s["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .filter_map(|g| g["key"]["phase"].as_str())
            .collect();
        assert_eq!(phases, ["steady", "warmup"], "{}", t.name);

        // Cells are kept for summaries, records are the truth: without cells, the
        // collector makes them again from the records, and the answers are the same.
        let before = summary(&app, "group_by=network,study&min_samples=8").await;
        let cells = || async {
            with_pool!(t.db, |p| sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM cells"
            )
            .fetch_one(p)
            .await
            .expect("count cells"))
        };
        let kept = cells().await;
        assert!(kept >= runs.len() as i64, "{}: {kept} cells", t.name);
        with_pool!(t.db, |p| sqlx::query("DELETE FROM cells")
            .execute(p)
            .await
            .expect("delete cells")
            .rows_affected());
        let rebuilt = t.db.rebuild_cells().await.expect("rebuild");
        assert_eq!(rebuilt, runs.len() as u64, "{}", t.name);
        assert_eq!(cells().await, kept, "{}", t.name);
        let fresh = App::new(common::state(&t.db));
        let after = summary(&fresh, "group_by=network,study&min_samples=8").await;
        assert_eq!(after, before, "{}", t.name);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn a_bad_summary_query_names_the_parameter() {
    let t = common::sqlite().await;
    let app = App::new(common::state(&t.db));
    for (query, says) in [
        ("group_by=ip_address", "cannot group by"),
        ("colour=red", "unknown query parameter"),
        ("from=last%20week", "from must be a date"),
        ("min_samples=0", "min_samples must be"),
    ] {
        let response = app.get(&format!("/api/v1/summary?{query}")).send().await;
        assert_eq!(response.status, 400, "{query}");
        let body = response.json();
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(says)),
            "{query}: {body}"
        );
    }
}

/// The smallest group with percentiles is the server's to set: a query can raise it but
/// not lower it, and a group below it shows counts only (no percentiles, no median of
/// run medians). Answers are reused for a few seconds under the normalised query.
#[tokio::test]
async fn the_servers_floor_holds_and_answers_are_kept_briefly() {
    let t = common::sqlite().await;
    let config = firsttoken_server::Config {
        min_samples: 50,
        ..common::config()
    };
    let app = App::new(common::state_with(&t.db, config));
    let upload = |run: Run| {
        let request = app.post("/api/v1/runs").json(&run);
        async move {
            assert_eq!(request.send().await.status, 201);
        }
    };
    upload(run(1, NetworkLabel::Fiber, "v1", false, &[300.0; 8])).await;

    let s = summary(&app, "group_by=network&min_samples=1").await;
    let group = &s["groups"][0];
    assert_eq!(group["runs"], 1);
    assert_eq!(group["ttft_ms"], Value::Null, "{group}");
    assert_eq!(
        group["median_of_run_medians_ttft_ms"],
        Value::Null,
        "{group}"
    );
    assert!(
        group["note"]
            .as_str()
            .is_some_and(|n| n.contains("at least 50")),
        "{group}"
    );

    // A second run arrives; the same question, its parameters in another order, gets
    // the answer computed a moment ago.
    upload(run(2, NetworkLabel::Fiber, "v1", false, &[310.0; 8])).await;
    let s = summary(&app, "min_samples=3&group_by=network").await;
    assert_eq!(s["groups"][0]["runs"], 1, "kept: {s}");
    let s = summary(&app, "group_by=network&include_demo=false").await;
    assert_eq!(s["groups"][0]["runs"], 2, "another question is computed");
}

/// Cold requests after 15 s and after 10 min of idle, fresh requests the browser proved
/// on a new connection and ones it could not: a summary of either phase never pools
/// them, but groups them by their condition, on SQLite and PostgreSQL.
#[tokio::test]
async fn cold_and_fresh_requests_are_never_pooled_across_their_conditions() {
    let run = |n: u64| -> Run {
        let mut run: Run = serde_json::from_value(common::run_with(n, |_| {})).expect("example");
        run.targets[0].demo = false;
        let template = run.samples[0].clone();
        let at = |phase: Phase, ttft: f64| Sample {
            phase,
            ttft_ms: Some(ttft),
            ttft_any_ms: Some(ttft),
            last_token_ms: Some(ttft + 100.0),
            e2e_ms: Some(ttft + 110.0),
            ..template.clone()
        };
        let mut verified = at(Phase::Fresh, 900.0);
        verified.conn = Some(firsttoken_core::schema::Connection {
            reused: Some(true),
            new_connection: Some(true),
            ..Default::default()
        });
        let mut samples = vec![
            at(Phase::Steady, 300.0),
            verified,
            at(Phase::Fresh, 310.0),
            Sample {
                idle_ms: Some(15_000),
                ..at(Phase::Cold, 320.0)
            },
            Sample {
                idle_ms: Some(600_000),
                ..at(Phase::Cold, 1200.0)
            },
        ];
        for (i, s) in samples.iter_mut().enumerate() {
            s.index = i as u32;
            s.conn.get_or_insert_default();
        }
        samples[2].conn = None;
        run.plan.phases = vec![
            PhasePlan::Steady { requests: 1 },
            PhasePlan::Fresh { requests: 2 },
            PhasePlan::Cold {
                idle_ms: vec![15_000, 600_000],
            },
        ];
        run.samples = samples;
        run.validate().expect("a valid run");
        run
    };
    for t in common::databases().await {
        let app = App::new(common::state(&t.db));
        for n in 0..3 {
            let status = app
                .post("/api/v1/runs")
                .json(&run(200 + n))
                .send()
                .await
                .status;
            assert_eq!(status, 201, "{}", t.name);
        }
        let groups = |s: Value| -> Vec<(String, u64, f64)> {
            s["groups"]
                .as_array()
                .expect("groups")
                .iter()
                .map(|g| {
                    (
                        g["key"]["condition"].as_str().unwrap_or("").to_owned(),
                        g["samples"].as_u64().expect("samples"),
                        g["ttft_ms"]["p50"]["value"].as_f64().expect("p50"),
                    )
                })
                .collect()
        };
        let cold = groups(summary(&app, "phase=cold&min_samples=1").await);
        assert_eq!(
            cold,
            vec![
                ("idle 10 min".into(), 3, 1200.0),
                ("idle 15 s".into(), 3, 320.0)
            ],
            "{}",
            t.name
        );
        let fresh = groups(summary(&app, "phase=fresh&min_samples=1").await);
        let conditions: Vec<(&str, u64)> = fresh.iter().map(|(c, n, _)| (c.as_str(), *n)).collect();
        assert_eq!(
            conditions,
            vec![("connection not verified", 3), ("new connection", 3)],
            "{}",
            t.name
        );
        // Filtered to one condition, the others are not in it.
        let only =
            groups(summary(&app, "phase=fresh&condition=new%20connection&min_samples=1").await);
        assert_eq!(only.len(), 1, "{}", t.name);
        assert_eq!(only[0].1, 3, "{}", t.name);
        t.cleanup().await;
    }
}

/// Groups per answer are capped (`--max-summary-groups`): memory and the answer's size
/// grow with each, and uploaders choose how many values a dimension has.
#[tokio::test]
async fn a_summary_of_too_many_groups_is_refused_naming_group_by() {
    let t = common::sqlite().await;
    let config = firsttoken_server::Config {
        max_summary_groups: 2,
        ..common::config()
    };
    let app = App::new(common::state_with(&t.db, config));
    for (n, network) in [
        NetworkLabel::Fiber,
        NetworkLabel::Wifi,
        NetworkLabel::Cellular,
    ]
    .into_iter()
    .enumerate()
    {
        let run = run(n as u64 + 1, network, "v1", false, &[300.0; 4]);
        assert_eq!(app.post("/api/v1/runs").json(&run).send().await.status, 201);
    }
    let refused = app.get("/api/v1/summary?group_by=network").send().await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    assert_eq!(refused.json()["error"]["field"], "group_by");
    assert!(
        refused.text().contains("more than 2 groups"),
        "{}",
        refused.text()
    );
    let narrowed = summary(&app, "group_by=network&network=wifi").await;
    assert_eq!(narrowed["groups"].as_array().map(Vec::len), Some(1));
}
