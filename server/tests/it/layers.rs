//! The crowd's wait for the first token in layers (before sending, the server, network
//! and delivery), on SQLite and PostgreSQL: each layer's percentiles equal the exact ones
//! of the same requests' layers (`summary::percentiles`, held to numpy) within the
//! sketches' error, the shares add up, requests whose wait did not split whole count in
//! no layer, and cells an earlier version made without layers are made again from the
//! records when the collector starts.

use firsttoken_core::layers::Layers;
use firsttoken_core::plan::{Phase, PhasePlan};
use firsttoken_core::schema::{Connection, NetworkLabel, Run, Sample, ServerTimingEntry};
use firsttoken_crowd::sketch::RELATIVE_ERROR;
use firsttoken_crowd::stats::BOOTSTRAP_SEED;
use firsttoken_crowd::summary::{self, Layer, LayerFigure};
use firsttoken_server::db::Pool;
use serde_json::Value;

use crate::common::{self, App};
use crate::summary::summary;

/// Run `n` on `network`: eight steady requests; all but the last split whole (Resource
/// Timing's time before sending, the target's auth step and its time to its first token
/// written), the last reports only its steps.
fn run(n: u64, network: NetworkLabel, version: &str, server_ms: f64) -> Run {
    let mut run: Run = serde_json::from_value(common::run_with(n, |_| {})).expect("example");
    run.client.network = network;
    run.targets[0].version = Some(version.to_owned());
    run.targets[0].demo = false;
    let template = run.samples[0].clone();
    let samples: Vec<Sample> = (0..8u32)
        .map(|i| {
            let k = f64::from(i) + (n % 10) as f64;
            let (sent, server, network) = (
                if i % 3 == 0 { 0.0 } else { 20.0 + k },
                server_ms + 7.0 * k,
                80.0 + (k * 5.0) % 17.0,
            );
            let ttft = sent + server + network;
            Sample {
                index: i,
                phase: Phase::Steady,
                headers_ms: Some(sent + 60.0 + 40.0),
                ttfb_ms: Some(sent + 60.0 + 41.0),
                ttft_ms: Some(ttft),
                ttft_any_ms: Some(ttft),
                last_token_ms: Some(ttft + 500.0),
                e2e_ms: Some(ttft + 510.0),
                conn: Some(Connection {
                    sent_ms: Some(sent),
                    ..template.conn.clone().unwrap_or_default()
                }),
                server_timing: vec![ServerTimingEntry {
                    name: "auth".into(),
                    duration_ms: 40.0,
                    description: None,
                }],
                stream_timings: (i != 7)
                    .then(|| [("first_token_written_ms".to_owned(), server)].into()),
                ..template.clone()
            }
        })
        .collect();
    run.plan.phases = vec![PhasePlan::Steady { requests: 8 }];
    run.samples = samples;
    run.validate().expect("a valid run");
    run
}

/// The runs' layers of each request that split whole, by run in run-id order (as the
/// collector orders runs for its cluster bootstrap), at [`Layer::index`].
fn expected(runs: &[&Run]) -> [Vec<Vec<f64>>; 3] {
    let mut runs = runs.to_vec();
    runs.sort_by(|a, b| a.run_id.cmp(&b.run_id));
    let mut out: [Vec<Vec<f64>>; 3] = Default::default();
    for run in runs {
        let mut of_run: [Vec<f64>; 3] = Default::default();
        for s in &run.samples {
            let layers = Layers::of(s).expect("a first token");
            let (Ok(before), Ok(server)) = (layers.before_send_ms, layers.server) else {
                continue;
            };
            if server.whole() {
                for (column, v) in
                    of_run
                        .iter_mut()
                        .zip([before, server.total_ms(), layers.rest_ms])
                {
                    column.push(v);
                }
            }
        }
        for (column, values) in out.iter_mut().zip(of_run) {
            column.push(values);
        }
    }
    out
}

fn check_layers(group: &Value, runs: &[&Run], what: &str) {
    let expected = expected(runs);
    let split: usize = expected[0].iter().map(Vec::len).sum();
    assert_eq!(split, runs.len() * 7, "{what}");
    assert_eq!(group["split"], split, "{what}: {group}");
    let figures: Vec<LayerFigure> =
        serde_json::from_value(group["layers"].clone()).expect("layers");
    let layers: Vec<Layer> = figures.iter().map(|f| f.layer).collect();
    assert_eq!(layers, Layer::ALL, "{what}");
    let within = |got: f64, want: f64, name: &str| {
        assert!(
            (got - want).abs() <= RELATIVE_ERROR * want.abs() + 1e-9,
            "{what} {name}: {got} against exact {want}"
        );
    };
    let means: Vec<f64> = expected
        .iter()
        .map(|runs| {
            let all: Vec<f64> = runs.iter().flatten().copied().collect();
            all.iter().sum::<f64>() / all.len() as f64
        })
        .collect();
    let total: f64 = means.iter().sum();
    for ((figure, runs), mean) in figures.iter().zip(&expected).zip(&means) {
        let runs: Vec<&[f64]> = runs.iter().map(Vec::as_slice).collect();
        let want = summary::percentiles(&runs, BOOTSTRAP_SEED).expect("values");
        let name = format!("{:?}", figure.layer);
        assert_eq!(figure.ms.count, want.count, "{what} {name}");
        within(figure.ms.mean, want.mean, &name);
        within(figure.ms.p50.value, want.p50.value, &name);
        for (g, w) in [
            (figure.ms.p50.low, want.p50.low),
            (figure.ms.p50.high, want.p50.high),
        ] {
            assert_eq!(g.is_some(), w.is_some(), "{what} {name}");
            if let (Some(g), Some(w)) = (g, w) {
                within(g, w, &name);
            }
        }
        assert!((figure.share - mean / total).abs() < 1e-9, "{what} {name}");
    }
    let shares: f64 = figures.iter().map(|f| f.share).sum();
    assert!((shares - 1.0).abs() < 1e-9, "{what}");
}

#[tokio::test]
async fn each_groups_wait_splits_into_layers_that_match_the_exact_percentiles() {
    // Ten runs a network, five a version: the fix takes 200 ms off the server.
    let runs: Vec<Run> = (0..20u64)
        .map(|n| {
            let network = [NetworkLabel::Fiber, NetworkLabel::Cellular][(n % 2) as usize];
            let (version, server) = if n < 10 { ("v1", 600.0) } else { ("v2", 400.0) };
            run(n, network, version, server)
        })
        .collect();
    for t in common::databases().await {
        let app = App::new(common::state(&t.db));
        for run in &runs {
            assert_eq!(app.post("/api/v1/runs").json(run).send().await.status, 201);
        }
        let of = |pick: &dyn Fn(&Run) -> bool| runs.iter().filter(|r| pick(r)).collect::<Vec<_>>();
        let s = summary(&app, "group_by=network&min_samples=10").await;
        let groups = s["groups"].as_array().expect("groups");
        assert_eq!(groups[0]["key"]["network"], "cellular", "{}", t.name);
        check_layers(
            &groups[0],
            &of(&|r| r.client.network == NetworkLabel::Cellular),
            t.name,
        );
        check_layers(
            &groups[1],
            &of(&|r| r.client.network == NetworkLabel::Fiber),
            t.name,
        );

        // Before and after the fix: the server's layer moved, by its own 200 ms.
        let s = summary(&app, "group_by=target_version&min_samples=10").await;
        let groups = s["groups"].as_array().expect("groups");
        let server_median = |g: &Value| {
            g["layers"][Layer::Server.index()]["ms"]["p50"]["value"]
                .as_f64()
                .expect("a median")
        };
        let moved = server_median(&groups[0]) - server_median(&groups[1]);
        assert!((moved - 200.0).abs() <= 0.01 * 600.0, "{}: {moved}", t.name);
        check_layers(
            &groups[1],
            &of(&|r| r.targets[0].version.as_deref() == Some("v2")),
            t.name,
        );

        // Too few split requests for a group: no layers, and the note says why.
        let s = summary(&app, "group_by=network&min_samples=100").await;
        let group = &s["groups"][0];
        assert!(group.get("layers").is_none(), "{}: {group}", t.name);
        assert!(
            group["split_note"]
                .as_str()
                .expect("a note")
                .contains("this group has 70")
        );

        // Cells made before layers (the column empty) are made again from the records
        // when the collector starts, and answer as before.
        let sql = "UPDATE cells SET layers = NULL";
        match t.db.pool() {
            Pool::Sqlite(p) => sqlx::query(sql).execute(p).await.map(|_| ()),
            Pool::Postgres(p) => sqlx::query(sql).execute(p).await.map(|_| ()),
        }
        .expect(sql);
        assert_eq!(
            t.db.rebuild_cells().await.expect("rebuilt"),
            20,
            "{}",
            t.name
        );
        let app = App::new(common::state(&t.db));
        let s = summary(&app, "group_by=network&min_samples=10").await;
        check_layers(
            &s["groups"][1],
            &of(&|r| r.client.network == NetworkLabel::Fiber),
            t.name,
        );
        t.cleanup().await;
    }
}
