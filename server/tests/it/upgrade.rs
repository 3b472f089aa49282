//! A database an earlier collector left (every migration before the one that dropped the
//! row per sample) opened by this version, on SQLite and PostgreSQL: runs stored before
//! cells existed, and a run whose cells were made without their samples' indexes, get
//! their cells made from their records before the collector serves, equal row for row to
//! the cells this version stores with a new upload; ids stay unique; records read back;
//! their days are folded as those of the same runs uploaded now; and on PostgreSQL each
//! run lands in its month's partitions.

use firsttoken_core::schema::Run;
use firsttoken_crowd::sketch::Sketch;
use firsttoken_server::Db;
use firsttoken_server::db::partitions::Month;
use firsttoken_server::db::{Pool, Stored, Table};
use sqlx::QueryBuilder;

use crate::common;

/// The last migration before this version's schema.
const BEFORE: i64 = 8;

fn ms(year: i32, month: u8, day: u8) -> i64 {
    Month { year, month }.start_ms() + i64::from(day - 1) * 86_400_000
}

/// The runs the earlier collector stored, and when.
fn old_runs() -> Vec<(Run, String, i64)> {
    [
        (10, ms(2025, 7, 20)),
        (11, ms(2025, 7, 21)),
        (12, ms(2025, 9, 1)),
    ]
    .into_iter()
    .map(|(n, at)| {
        let json = common::run_with(n, |r| r["targets"][0]["demo"] = false.into());
        let run: Run = serde_json::from_value(json).expect("a run");
        let record = serde_json::to_string(&run).expect("serializes");
        (run, record, at)
    })
    .collect()
}

/// Stores `runs` as the collector before this version did (its record's JSON in
/// `record`), and for the second a cell without indexes, as that collector made them.
macro_rules! store_as_before {
    ($pool:expr, $runs:expr) => {{
        for (run, record, at) in $runs {
            let main = run.main_target();
            let mut insert = QueryBuilder::new(
                "INSERT INTO runs (run_id, received_at_ms, started_at_ms, schema_version, \
                 app_version, target_label, target_origin, dialect, demo, network, \
                 sample_count, record_sha256, record) VALUES (",
            );
            let mut values = insert.separated(", ");
            values
                .push_bind(run.run_id.clone())
                .push_bind(*at)
                .push_bind(run.started_at_ms as i64)
                .push_bind(i64::from(run.schema_version))
                .push_bind(run.app_version.clone())
                .push_bind(main.label.clone())
                .push_bind(main.origin.clone())
                .push_bind(main.dialect.name())
                .push_bind(main.demo)
                .push_bind(run.client.network.name())
                .push_bind(run.samples.len() as i64)
                .push_bind(firsttoken_server::db::sha256_hex(record.as_bytes()))
                .push_bind(record.clone());
            insert.push(")");
            insert.build().execute($pool).await.expect("an old run");
        }
        let (run, _, at) = &$runs[1];
        let mut cell = QueryBuilder::new(
            "INSERT INTO cells (run_id, cell, received_at_ms, target_demo, phase, concurrency, \
             target_label, network, samples, ttft, e2e) VALUES (",
        );
        let mut values = cell.separated(", ");
        values
            .push_bind(run.run_id.clone())
            .push_bind(0i64)
            .push_bind(*at)
            .push_bind(false)
            .push_bind("steady")
            .push_bind(1i64)
            .push_bind("made by an earlier version")
            .push_bind("wifi")
            .push_bind(run.samples.len() as i64)
            .push_bind(Sketch::default().encode())
            .push_bind(Sketch::default().encode());
        cell.push(")");
        cell.build().execute($pool).await.expect("an old cell");
    }};
}

/// Every cell, as comparable text: run, number, samples, indexes and sketches.
async fn cells(db: &Db) -> Vec<(String, i64, i64, Option<String>, Vec<u8>, Vec<u8>)> {
    let sql = "SELECT run_id, cell, samples, indexes, ttft, e2e FROM cells ORDER BY run_id, cell";
    match db.pool() {
        Pool::Sqlite(p) => sqlx::query_as(sql).fetch_all(p).await,
        Pool::Postgres(p) => sqlx::query_as(sql).fetch_all(p).await,
    }
    .expect("cells")
}

/// Every row of folds, in one order.
async fn folds(db: &Db) -> Vec<(i64, i64, String, Vec<u8>)> {
    let sql = "SELECT day_ms, merged, network, fold FROM folds \
               ORDER BY day_ms, merged, network, fold";
    match db.pool() {
        Pool::Sqlite(p) => sqlx::query_as(sql).fetch_all(p).await,
        Pool::Postgres(p) => sqlx::query_as(sql).fetch_all(p).await,
    }
    .expect("folds")
}

/// `migrator` with only the migrations an earlier collector had run.
/// The migrations before [`BEFORE`], read from `migrations/<backend>` by sqlx itself (the
/// reader `sqlx::migrate!` expands from): the collector then upgrades with the ones built
/// into it (`db/migrations.rs`), so this also checks that the two agree on every applied
/// migration.
async fn before(backend: &str) -> sqlx::migrate::Migrator {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend);
    let mut migrator = sqlx::migrate::Migrator::new(dir.as_path())
        .await
        .expect("the migrations folder reads");
    migrator.migrations = migrator
        .migrations
        .iter()
        .filter(|m| m.version < BEFORE)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    migrator
}

/// What the upgraded database must hold, checked against `fresh`, where this version
/// stored the same runs as uploads.
async fn check(upgraded: &Db, fresh: &Db, runs: &[(Run, String, i64)], name: &str) {
    for (run, record, at) in runs {
        let stored = fresh.insert_run(run, record, *at, None).await;
        assert!(matches!(stored, Ok(Stored::Created { .. })), "{stored:?}");
    }
    let made = cells(upgraded).await;
    assert_eq!(
        made,
        cells(fresh).await,
        "{name}: cells made from the records"
    );
    assert!(made.iter().all(|c| c.3.is_some()), "{name}");
    let samples: usize = runs.iter().map(|(r, ..)| r.samples.len()).sum();
    assert_eq!(
        upgraded.stored_samples().await.expect("count"),
        samples as i64
    );
    assert_eq!(upgraded.count(Table::RunIds).await.expect("count"), 3);
    for (run, record, at) in runs {
        let read = upgraded.run_record(&run.run_id).await.expect("read");
        assert_eq!(read.as_deref(), Some(record.as_str()), "{name}");
        let again = upgraded.insert_run(run, record, *at, None).await;
        assert_eq!(again.expect("answered"), Stored::AlreadyStored, "{name}");
    }
    // A different record under a stored id is still refused.
    let (run, _, at) = &runs[0];
    let mut other = run.clone();
    other.app_version = "someone else".into();
    let other_record = serde_json::to_string(&other).expect("serializes");
    let taken = upgraded.insert_run(&other, &other_record, *at, None).await;
    assert_eq!(taken.expect("answered"), Stored::IdTaken, "{name}");
    // The runs' days are known, and fold to what the same uploads fold to.
    assert_eq!(
        upgraded.count(Table::Days).await.expect("count"),
        3,
        "{name}"
    );
    let now = ms(2026, 1, 1);
    for db in [upgraded, fresh] {
        let folded = db.fold_closed_days(now).await.expect("fold");
        assert_eq!(folded.days, 3, "{name}");
    }
    let made = folds(upgraded).await;
    assert!(!made.is_empty());
    assert_eq!(made, folds(fresh).await, "{name}: folds");
}

#[tokio::test]
async fn an_earlier_sqlite_database_gets_cells_from_its_records() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("old.db").display());
    let options: sqlx::sqlite::SqliteConnectOptions = url
        .parse::<sqlx::sqlite::SqliteConnectOptions>()
        .expect("url")
        .create_if_missing(true);
    let old = sqlx::SqlitePool::connect_with(options)
        .await
        .expect("opens");
    before("sqlite")
        .await
        .run(&old)
        .await
        .expect("the schema before");
    let runs = old_runs();
    store_as_before!(&old, &runs);
    old.close().await;

    let upgraded = Db::connect(&url).await.expect("upgrades");
    let fresh = common::sqlite().await;
    check(&upgraded, &fresh.db, &runs, "sqlite").await;
    upgraded.close().await;
    fresh.cleanup().await;
}

#[tokio::test]
async fn an_earlier_postgres_database_gets_months_and_cells_from_its_records() {
    let Some(t) = common::postgres().await else {
        return;
    };
    let Pool::Postgres(pg) = t.db.pool() else {
        unreachable!("PostgreSQL only")
    };
    // A second schema holding the tables as the earlier collector left them.
    let current: String = sqlx::query_scalar("SELECT current_schema()::TEXT")
        .fetch_one(pg)
        .await
        .expect("schema");
    let schema = format!("{current}_upgrade");
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(pg)
        .await
        .expect("schema");
    let options = pg
        .connect_options()
        .as_ref()
        .clone()
        .options([("search_path", schema.as_str())]);
    let old = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect_with(options.clone())
        .await
        .expect("connect");
    before("postgres")
        .await
        .run(&old)
        .await
        .expect("the schema before");
    let runs = old_runs();
    store_as_before!(&old, &runs);
    old.close().await;

    let upgraded = Db::connect_postgres(options).await.expect("upgrades");
    check(&upgraded, &t.db, &runs, "postgres").await;
    let months = upgraded.partitions().await.expect("partitions");
    assert_eq!(
        months.first(),
        Some(&Month {
            year: 2025,
            month: 7
        }),
        "{months:?}"
    );
    for (table, want) in [
        ("runs_2025_07", 2),
        ("runs_2025_08", 0),
        ("runs_2025_09", 1),
        ("runs_default", 0),
        ("cells_2025_08", 0),
        ("cells_default", 0),
    ] {
        let got: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {schema}.{table}"))
            .fetch_one(pg)
            .await
            .expect("count");
        assert_eq!(got, want, "{table}");
    }
    for table in ["cells_2025_07", "cells_2025_09"] {
        let got: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {schema}.{table}"))
            .fetch_one(pg)
            .await
            .expect("count");
        assert!(got > 0, "{table}");
    }
    // The live bytes counted for the storage limit: those of the rows stored before,
    // counted when the count began, and of the cells made since.
    let (counted, held): (i64, i64) = sqlx::query_as(&format!(
        "SELECT (SELECT SUM(bytes) FROM {schema}.stored_bytes)::BIGINT, \
         ((SELECT SUM({schema}.stored_run_bytes(record, record_lz4)) FROM {schema}.runs) \
          + (SELECT SUM({schema}.stored_cell_bytes(ttft, e2e, indexes, errors)) FROM {schema}.cells))::BIGINT"
    ))
    .fetch_one(pg)
    .await
    .expect("counted");
    assert_eq!(counted, held);
    upgraded.close().await;
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(pg)
        .await
        .expect("drop");
    t.cleanup().await;
}
