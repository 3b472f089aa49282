//! A dimension added to the crowd's table in one place (`Dimension::Probe`, whether a
//! sample's index is odd, compiled in by the `probe-dimension` feature) reaches every
//! part of the collector on SQLite and PostgreSQL: the collector adds its columns when
//! it starts, uploads store it in their cells, a summary groups and filters by it, the
//! folds keep it apart (and merge it when a summary does not name it), and an export
//! filtered by it takes exactly its samples. A database made before the dimension
//! existed gets its columns and its runs' cells made again, with the dimension's values,
//! before the collector serves.

use firsttoken_core::plan::{Phase, PhasePlan};
use firsttoken_core::schema::Run;
use firsttoken_server::db::{DAY_MS, Db, Pool, Stored, Table, day_of};
use serde_json::Value;

use crate::common::{self, App};
use crate::folds::same;

/// Run `n`: six steady requests, TTFT 200 ms plus 30 ms per index plus `n`, the fourth
/// one failed; its network by `n`.
fn run(n: u64) -> Run {
    let mut run: Run = serde_json::from_value(common::run_with(n, |_| {})).expect("example");
    run.targets[0].demo = false;
    let template = run.samples[0].clone();
    run.samples = (0..6u32)
        .map(|i| {
            let ttft = 200.0 + 30.0 * f64::from(i) + n as f64;
            let mut s = firsttoken_core::schema::Sample {
                index: i,
                phase: Phase::Steady,
                ttft_any_ms: Some(ttft),
                ttft_ms: Some(ttft),
                last_token_ms: Some(ttft + 500.0),
                e2e_ms: Some(ttft + 520.0),
                ..template.clone()
            };
            if i == 3 {
                s.error = Some(firsttoken_core::schema::ErrorClass::Http);
                s.status = 500;
                (s.ttft_ms, s.ttft_any_ms, s.last_token_ms) = (None, None, None);
            }
            s
        })
        .collect();
    run.plan.phases = vec![PhasePlan::Steady { requests: 6 }];
    run.client.network = [
        firsttoken_core::schema::NetworkLabel::Fiber,
        firsttoken_core::schema::NetworkLabel::Cellular,
    ][(n % 2) as usize];
    run.validate().expect("a valid run");
    run
}

async fn summary(db: &Db, query: &str) -> Value {
    // A fresh collector each time: answers are reused for a few seconds otherwise.
    let app = App::new(common::state(db));
    let response = app
        .get(&format!("/api/v1/summary?{query}&min_samples=1"))
        .send()
        .await;
    assert_eq!(response.status, 200, "{query}: {}", response.text());
    response.json()
}

/// Each group's key and its counts, in the answer's order.
fn counts(answer: &Value) -> Vec<(Value, Value, Value)> {
    answer["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            (
                g["key"].clone(),
                g["samples"].clone(),
                g["answered"].clone(),
            )
        })
        .collect()
}

async fn rows(db: &Db, sql: &str) -> Vec<(Option<i64>, i64)> {
    match db.pool() {
        Pool::Sqlite(p) => sqlx::query_as(sql).fetch_all(p).await,
        Pool::Postgres(p) => sqlx::query_as(sql).fetch_all(p).await,
    }
    .expect(sql)
}

async fn execute(db: &Db, sql: &str) {
    match db.pool() {
        Pool::Sqlite(p) => sqlx::query(sql).execute(p).await.map(drop),
        Pool::Postgres(p) => sqlx::query(sql).execute(p).await.map(drop),
    }
    .expect(sql)
}

const QUERIES: [&str; 4] = [
    "group_by=probe",
    "group_by=probe,network",
    "probe=1&group_by=network",
    // The probe merged: the folds' rows that merge it.
    "group_by=network",
];

#[tokio::test]
async fn a_dimension_added_to_the_table_reaches_cells_folds_summaries_and_exports() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64;
    let yesterday = day_of(now) - DAY_MS;
    for t in common::databases().await {
        let db = &t.db;
        // Uploaded as a browser does: eight runs today.
        let app = App::new(common::state(db));
        for n in 0..8 {
            let response = app.post("/api/v1/runs").json(&run(n)).send().await;
            assert_eq!(response.status, 201, "{}: {}", t.name, response.text());
        }
        // Eight more on a closed day, to be folded.
        for n in 8..16 {
            let run = run(n);
            let record = serde_json::to_string(&run).expect("json");
            let at = yesterday + 3_600_000 + n as i64 * 60_000;
            let stored = db.insert_run(&run, &record, at, None).await.expect("store");
            assert!(matches!(stored, Stored::Created { .. }), "{stored:?}");
        }

        // The cells hold it: each run has a cell of its even samples and one of its odd.
        let cells = rows(
            db,
            "SELECT probe, COUNT(*) FROM cells GROUP BY probe ORDER BY probe",
        )
        .await;
        assert_eq!(cells, vec![(Some(0), 16), (Some(1), 16)], "{}", t.name);

        // A summary groups by it: three samples of each run in each group, one of the
        // odd ones failed.
        let by_cells: Vec<Value> = {
            let mut answers = Vec::new();
            for query in QUERIES {
                answers.push(summary(db, query).await);
            }
            answers
        };
        assert_eq!(
            counts(&by_cells[0]),
            vec![
                (serde_json::json!({"probe": "0"}), 48.into(), 48.into()),
                (serde_json::json!({"probe": "1"}), 48.into(), 32.into()),
            ],
            "{}",
            t.name
        );
        // Filtered by it: the odd samples' TTFTs, from 230 ms (index 1 of run 0) up.
        let odd = &by_cells[2]["groups"];
        assert_eq!(odd.as_array().map(Vec::len), Some(2), "{}", t.name);
        for group in odd.as_array().expect("groups") {
            assert_eq!(group["samples"], 24, "{}: {group}", t.name);
            assert!(group["ttft_ms"]["min"].as_f64().expect("min") >= 230.0);
        }

        // Folded, the same answers; the folds keep it, and merge it where not named.
        let folded = db.fold_closed_days(now).await.expect("fold");
        assert_eq!(folded.days, 1, "{}", t.name);
        assert!(db.count(Table::Folds).await.expect("count") > 0);
        let in_folds = rows(
            db,
            "SELECT probe, COUNT(*) FROM folds GROUP BY probe ORDER BY probe",
        )
        .await;
        let values: Vec<Option<i64>> = in_folds.iter().map(|r| r.0).collect();
        assert_eq!(values.len(), 3, "{}: {in_folds:?}", t.name);
        for value in [Some(0), Some(1), None] {
            assert!(values.contains(&value), "{}: {in_folds:?}", t.name);
        }
        for (query, before) in QUERIES.iter().zip(&by_cells) {
            let after = summary(db, query).await;
            assert_eq!(counts(&after), counts(before), "{}: {query}", t.name);
            same(
                &after["groups"],
                &before["groups"],
                &format!("{}: {query}", t.name),
            );
        }

        // An export filtered by it takes exactly the odd samples.
        let export = app
            .get("/api/v1/export?probe=1")
            .bearer_auth(common::ADMIN_TOKEN)
            .send()
            .await;
        assert_eq!(export.status, 200, "{}", t.name);
        let indexes: Vec<i64> = export
            .text()
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).expect("a JSON line")["index"]
                    .as_i64()
                    .expect("index")
            })
            .collect();
        assert_eq!(indexes.len(), 48, "{}", t.name);
        assert!(
            indexes.iter().all(|i| i % 2 == 1),
            "{}: {indexes:?}",
            t.name
        );

        // A database from before the dimension: without its columns and its row of the
        // `dimensions` table. The next collector adds them and remakes every run's cells
        // from its record before it serves, with the same answers.
        for sql in [
            "ALTER TABLE cells DROP COLUMN probe",
            "ALTER TABLE folds DROP COLUMN probe",
            "DELETE FROM dimensions WHERE name = 'probe'",
        ] {
            execute(db, sql).await;
        }
        let reopened = t.second_instance().await;
        let cells = rows(
            &reopened,
            "SELECT probe, COUNT(*) FROM cells GROUP BY probe ORDER BY probe",
        )
        .await;
        assert_eq!(cells, vec![(Some(0), 16), (Some(1), 16)], "{}", t.name);
        assert_eq!(
            reopened.count(Table::Folds).await.expect("count"),
            0,
            "{}",
            t.name
        );
        for (query, before) in QUERIES.iter().zip(&by_cells) {
            let again = summary(&reopened, query).await;
            same(
                &again["groups"],
                &before["groups"],
                &format!("{}: {query}", t.name),
            );
        }
        assert_eq!(reopened.fold_closed_days(now).await.expect("fold").days, 1);
        for (query, before) in QUERIES.iter().zip(&by_cells) {
            let again = summary(&reopened, query).await;
            same(
                &again["groups"],
                &before["groups"],
                &format!("{}: {query}", t.name),
            );
        }
        t.cleanup().await;
    }
}
