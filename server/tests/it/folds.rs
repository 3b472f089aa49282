//! Folded days give the answers their runs' cells give, on SQLite and on PostgreSQL: for
//! every grouping and filter, before and after folding, with a run stored late into a
//! folded day, a run deleted from one, and runs purged. Runs here vary within themselves
//! as real ones do (warm-up, steady and concurrency phases, two scenarios, a second
//! target), which is what folds must keep apart.

use firsttoken_core::plan::{Phase, PhasePlan};
use firsttoken_core::schema::{ErrorClass, NetworkLabel, Run, Target};
use firsttoken_server::db::{
    DAY_MS, Db, Dimension, Filter, Pool, Stored, Table, Value as FilterValue, day_of,
};
use serde_json::Value;

use crate::common::{self, App};

/// Run `n`: its network, browser, version and link by `n`, one warm-up request, eight
/// steady ones (one failed; for every third run half of them in a second scenario), two
/// at concurrency 2, and for every fifth run three against a second target.
fn run(n: u64) -> Run {
    let mut run: Run = serde_json::from_value(common::run_with(n, |_| {})).expect("example");
    run.client.network = [
        NetworkLabel::Fiber,
        NetworkLabel::Cellular,
        NetworkLabel::Wifi,
    ][(n % 3) as usize];
    run.client.browser = Some(["Chrome", "Firefox"][(n % 2) as usize].to_owned());
    run.study_id = (!n.is_multiple_of(4)).then(|| "foldslinkaaaaaaa".to_owned());
    run.targets[0].label = "app".into();
    run.targets[0].demo = false;
    run.targets[0].version = Some(format!("v{}", n % 2));
    run.targets[0].scenarios = vec!["default".into(), "rag".into()];
    let direct = Target {
        label: "direct".into(),
        version: None,
        scenarios: vec!["default".into()],
        ..run.targets[0].clone()
    };
    let template = run.samples[0].clone();
    let base = [300.0, 900.0, 500.0][(n % 3) as usize];
    let answered = |i: u64, phase: Phase| {
        let ttft = base + ((n * 13 + i * 37) % 200) as f64;
        // Two requests in three split whole into layers (the time before sending known,
        // and the server's whole time to its first token), so folds keep layers of some
        // requests and not of others.
        let mut conn = template.conn.clone().unwrap_or_default();
        conn.sent_ms = (!i.is_multiple_of(3)).then_some((i % 4) as f64 * 10.0);
        firsttoken_core::schema::Sample {
            phase,
            ttft_any_ms: Some(ttft),
            ttft_ms: Some(ttft),
            last_token_ms: Some(ttft + 700.0),
            e2e_ms: Some(ttft + 720.0),
            scenario: Some("default".into()),
            conn: Some(conn),
            stream_timings: Some(
                [("first_token_written_ms".to_owned(), (0.6 * ttft).round())].into(),
            ),
            ..template.clone()
        }
    };
    let mut samples = vec![answered(0, Phase::Warmup)];
    for i in 1..=8 {
        let mut s = answered(i, Phase::Steady);
        if n % 3 == 1 && i % 2 == 0 {
            s.scenario = Some("rag".into());
        }
        if i == 8 {
            s.error = Some(ErrorClass::Http);
            s.status = 500;
            (s.ttft_ms, s.ttft_any_ms, s.last_token_ms) = (None, None, None);
        }
        samples.push(s);
    }
    for i in 9..=10 {
        samples.push(firsttoken_core::schema::Sample {
            concurrency: 2,
            ..answered(i * 3, Phase::Concurrency)
        });
    }
    run.plan.phases = vec![
        PhasePlan::Warmup { requests: 1 },
        PhasePlan::Steady { requests: 8 },
        PhasePlan::Concurrency {
            levels: vec![2],
            requests_per_level: 2,
        },
    ];
    if n.is_multiple_of(5) {
        run.targets.push(direct);
        for i in 11..=13 {
            samples.push(firsttoken_core::schema::Sample {
                target: 1,
                ..answered(i, Phase::Compare)
            });
        }
        run.plan.phases.push(PhasePlan::Compare { rounds: 3 });
    }
    for (i, s) in samples.iter_mut().enumerate() {
        s.index = i as u32;
    }
    run.samples = samples;
    run.validate().expect("a valid run");
    run
}

/// The questions asked before and after folding: every kind of grouping and filter,
/// including dates that cut days in two.
fn queries(today: i64) -> Vec<String> {
    let mut queries: Vec<String> = [
        "group_by=network",
        "",
        "group_by=phase&phase=any",
        "group_by=concurrency&phase=any",
        "group_by=scenario",
        "group_by=target_label&phase=any",
        "group_by=target_label,target_version&phase=compare",
        "group_by=network,browser,target_version",
        "network=cellular&group_by=study",
        "scenario=rag&group_by=network",
        "phase=any&include_demo=true",
        "group_by=network&include_demo=only",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    queries.push(format!(
        "group_by=network&from={}&to={}",
        today - 3 * DAY_MS + 5 * 3_600_000,
        today - DAY_MS + 3 * 3_600_000
    ));
    queries.push(format!(
        "group_by=phase&phase=any&from={}",
        today - 2 * DAY_MS
    ));
    queries
        .into_iter()
        .map(|q| format!("{q}&min_samples=1"))
        .collect()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

async fn answers(db: &Db, queries: &[String]) -> Vec<Value> {
    // A fresh collector each time: answers are reused for a few seconds otherwise.
    let app = App::new(common::state(db));
    let mut out = Vec::new();
    for query in queries {
        let response = app.get(&format!("/api/v1/summary?{query}")).send().await;
        assert_eq!(response.status, 200, "{query}");
        out.push(response.json());
    }
    out
}

/// Equal answers: every number the same but means (and the layers' shares, made of means),
/// which add the same values in another order (equal to rounding).
pub(crate) fn same(a: &Value, b: &Value, path: &str) {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().expect("number"), y.as_f64().expect("number"));
            // A layer's share is its mean over the others'.
            let tolerance = if path.ends_with("mean") || path.ends_with("share") {
                1e-12 * y.abs()
            } else {
                0.0
            };
            assert!((x - y).abs() <= tolerance, "{path}: {x} against {y}");
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{path}: {a} against {b}");
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                same(x, y, &format!("{path}[{i}]"));
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(
                x.keys().collect::<Vec<_>>(),
                y.keys().collect::<Vec<_>>(),
                "{path}"
            );
            for (key, x) in x {
                same(x, &y[key], &format!("{path}.{key}"));
            }
        }
        _ => assert_eq!(a, b, "{path}"),
    }
}

fn all_same(a: &[Value], b: &[Value], queries: &[String], what: &str) {
    for ((a, b), query) in a.iter().zip(b).zip(queries) {
        same(a, b, &format!("{what}: {query}"));
    }
}

/// Runs in the summary grouped by nothing, every phase, demo targets too.
fn runs_in(answers: &[Value]) -> u64 {
    answers[10]["groups"][0]["runs"].as_u64().expect("runs")
}

async fn execute(db: &Db, sql: &str) -> u64 {
    match db.pool() {
        Pool::Sqlite(p) => sqlx::query(sql).execute(p).await.map(|r| r.rows_affected()),
        Pool::Postgres(p) => sqlx::query(sql).execute(p).await.map(|r| r.rows_affected()),
    }
    .expect(sql)
}

#[tokio::test]
async fn folded_days_give_the_answers_their_cells_give() {
    let now = now_ms();
    let today = day_of(now);
    let queries = queries(today);
    for t in common::databases().await {
        let db = &t.db;
        // Runs over three closed days and today, at hours through each day.
        let mut tokens = Vec::new();
        for n in 0..64u64 {
            let run = run(n);
            let day = today - (n % 4) as i64 * DAY_MS;
            let at = (day + 3_600_000 + (n as i64 * 7_919_000) % (20 * 3_600_000)).min(now);
            let record = serde_json::to_string(&run).expect("json");
            match db.insert_run(&run, &record, at, None).await.expect("store") {
                Stored::Created { delete_token } => tokens.push((run.run_id, at, delete_token)),
                other => panic!("{other:?}"),
            }
        }
        let by_cells = answers(db, &queries).await;
        assert_eq!(runs_in(&by_cells), 64, "{}", t.name);
        // The layers are among what folds must give back.
        let layers = &by_cells[10]["groups"][0]["layers"];
        assert_eq!(
            layers.as_array().map(Vec::len),
            Some(3),
            "{}: {layers}",
            t.name
        );
        assert_eq!(db.count(Table::Folds).await.expect("count"), 0);

        // Folded: three closed days, today left to its cells; the same answers.
        let folded = db.fold_closed_days(now).await.expect("fold");
        assert_eq!((folded.days, folded.changed), (3, 0), "{}", t.name);
        assert!(folded.rows > 0);
        all_same(&answers(db, &queries).await, &by_cells, &queries, t.name);
        let again = db.fold_closed_days(now).await.expect("fold");
        assert_eq!(again.days, 0, "{}: nothing changed, nothing folded", t.name);

        // The answers come from the folds: without the cells of the closed day every
        // question reads whole (gone behind the collector's back) they are the same.
        let gone = execute(
            db,
            &format!(
                "DELETE FROM cells WHERE received_at_ms >= {} AND received_at_ms < {}",
                today - 2 * DAY_MS,
                today - DAY_MS
            ),
        )
        .await;
        assert!(gone > 0);
        all_same(&answers(db, &queries).await, &by_cells, &queries, t.name);
        // Made again from the records, which sends their day back to its cells.
        db.rebuild_cells().await.expect("rebuild");
        all_same(&answers(db, &queries).await, &by_cells, &queries, t.name);
        assert_eq!(db.fold_closed_days(now).await.expect("fold").days, 1);

        // A run stored late into a folded day counts at once, from its cells, and the
        // same once the day is folded again.
        let late = run(1_000);
        let record = serde_json::to_string(&late).expect("json");
        db.insert_run(&late, &record, today - 2 * DAY_MS + 60_000, None)
            .await
            .expect("store");
        let with_late = answers(db, &queries).await;
        assert_eq!(runs_in(&with_late), 65, "{}", t.name);
        assert_eq!(db.fold_closed_days(now).await.expect("fold").days, 1);
        all_same(&answers(db, &queries).await, &with_late, &queries, t.name);

        // A run deleted from a folded day leaves the answers at once.
        let (id, at, token) = tokens
            .iter()
            .find(|(_, at, _)| *at < today)
            .expect("a run on a closed day");
        assert!(*at < today);
        let token = token.as_deref().expect("a token");
        db.delete_run(id, token).await.expect("delete");
        let day = day_of(*at);
        let kept = execute(db, &format!("DELETE FROM folds WHERE day_ms = {day}")).await;
        assert_eq!(kept, 0, "{}: the deleted run's day keeps its folds", t.name);
        let without = answers(db, &queries).await;
        assert_eq!(runs_in(&without), 64, "{}", t.name);
        assert_eq!(db.fold_closed_days(now).await.expect("fold").days, 1);
        all_same(&answers(db, &queries).await, &without, &queries, t.name);

        // Purged by a filter: the Wi-Fi runs leave the folded days' answers too.
        let wifi = Filter {
            equals: vec![(Dimension::Network, FilterValue::Text("wifi".into()))],
            ..Filter::default()
        };
        let purged = db.purge(&wifi).await.expect("purge");
        assert!(purged > 0);
        let after_purge = answers(db, &queries).await;
        assert_eq!(runs_in(&after_purge), 64 - purged, "{}", t.name);
        assert!(
            after_purge[0]["groups"]
                .as_array()
                .expect("groups")
                .iter()
                .all(|g| g["key"]["network"] != "wifi"),
            "{}",
            t.name
        );
        db.fold_closed_days(now).await.expect("fold");
        all_same(&answers(db, &queries).await, &after_purge, &queries, t.name);

        // Purged by date: the days wholly before it go with their folds.
        db.purge(&Filter {
            to_ms: Some(today - DAY_MS),
            demo: firsttoken_server::db::DemoSamples::Include,
            ..Filter::default()
        })
        .await
        .expect("purge");
        let left = execute(
            db,
            &format!("DELETE FROM folds WHERE day_ms < {}", today - DAY_MS),
        )
        .await;
        assert_eq!(left, 0, "{}: folds of purged days remain", t.name);
        t.cleanup().await;
    }
}

/// A day whose runs make more rows of folds than the bound is left to its cells, with the
/// same answers, and is not tried again until it changes.
#[tokio::test]
async fn a_day_of_too_many_combinations_stays_with_its_cells() {
    let now = now_ms();
    let yesterday = day_of(now) - DAY_MS;
    let queries: Vec<String> = ["group_by=network", "group_by=phase&phase=any"]
        .into_iter()
        .map(|q| format!("{q}&min_samples=1"))
        .collect();
    for t in common::databases().await {
        let db = &t.db;
        for n in 0..6u64 {
            let run = run(n);
            let record = serde_json::to_string(&run).expect("json");
            let at = yesterday + 3_600_000 * (n as i64 + 1);
            db.insert_run(&run, &record, at, None).await.expect("store");
        }
        let by_cells = answers(db, &queries).await;
        // Six runs of six combinations: more than one row.
        let folded = db.fold_closed_days_within(now, 1).await.expect("fold");
        assert_eq!((folded.days, folded.too_varied), (0, 1), "{}", t.name);
        assert_eq!(db.count(Table::Folds).await.expect("count"), 0);
        all_same(&answers(db, &queries).await, &by_cells, &queries, t.name);
        let again = db.fold_closed_days_within(now, 1).await.expect("fold");
        assert_eq!(
            (again.days, again.too_varied),
            (0, 0),
            "{}: not retried",
            t.name
        );
        // A run more, and the day is folded within the collector's own bound.
        let late = run(6);
        let record = serde_json::to_string(&late).expect("json");
        db.insert_run(&late, &record, yesterday + 60_000, None)
            .await
            .expect("store");
        let with_late = answers(db, &queries).await;
        let folded = db.fold_closed_days(now).await.expect("fold");
        assert_eq!((folded.days, folded.too_varied), (1, 0), "{}", t.name);
        assert!(folded.rows > 1);
        all_same(&answers(db, &queries).await, &with_late, &queries, t.name);
        t.cleanup().await;
    }
}

/// Two collectors fold the same days at once while runs are stored late into them: every
/// answer is still the one the cells give, before and after the days are folded again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_collectors_folding_while_runs_arrive_lose_nothing() {
    let now = now_ms();
    let today = day_of(now);
    let queries: Vec<String> = ["group_by=network", "group_by=phase&phase=any", ""]
        .into_iter()
        .map(|q| format!("{q}&min_samples=1"))
        .collect();
    for t in common::databases().await {
        // The second collector opens the same database through a pool of its own.
        let second = t.second_instance().await;
        let at = |n: u64| today - (1 + n % 3) as i64 * DAY_MS + 3_600_000 + n as i64 * 60_000;
        let store = |db: Db, runs: std::ops::Range<u64>| async move {
            for n in runs {
                let run = run(n);
                let record = serde_json::to_string(&run).expect("json");
                db.insert_run(&run, &record, at(n), None)
                    .await
                    .expect("store");
            }
        };
        store(t.db.clone(), 0..40).await;
        let (a, b, ()) = tokio::join!(
            t.db.fold_closed_days(now),
            second.fold_closed_days(now),
            store(t.db.clone(), 40..50),
        );
        let (a, b) = (a.expect("fold"), b.expect("fold"));
        assert!(a.days + a.changed + b.days + b.changed >= 3, "{a:?} {b:?}");
        let now_read = answers(&t.db, &queries).await;
        assert_eq!(runs_in_first(&now_read), 50, "{}", t.name);
        // Every day back to its cells: the reference.
        execute(&t.db, "UPDATE days SET folded = NULL").await;
        let by_cells = answers(&t.db, &queries).await;
        all_same(&now_read, &by_cells, &queries, t.name);
        let (a, b) = tokio::join!(t.db.fold_closed_days(now), second.fold_closed_days(now));
        let (a, b) = (a.expect("fold"), b.expect("fold"));
        assert!(a.days + b.days >= 3, "{}: {a:?} {b:?}", t.name);
        all_same(&answers(&t.db, &queries).await, &by_cells, &queries, t.name);
        second.close().await;
        t.cleanup().await;
    }
}

/// Runs in the first query's groups together.
fn runs_in_first(answers: &[Value]) -> u64 {
    answers[0]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| g["runs"].as_u64().expect("runs"))
        .sum()
}
