//! PostgreSQL's monthly partitions of samples: made ahead, rows outside them kept and
//! moved in when their month is made, whole months dropped by an age purge.

use crate::common;

use firsttoken_core::Run;
use firsttoken_server::db::partitions::Month;
use firsttoken_server::db::{DemoSamples, Filter, Pool, Stored, Table};

/// A UTC date's first millisecond.
fn ms(year: i32, month: u8, day: u8) -> i64 {
    Month { year, month }.start_ms() + i64::from(day - 1) * 86_400_000
}

fn run(n: u64) -> Run {
    serde_json::from_value(common::run_with(n, |_| {})).expect("a run")
}

async fn store(t: &common::TestDb, n: u64, received_at_ms: i64) {
    let run = run(n);
    let record = serde_json::to_string(&run).expect("serializes");
    let stored =
        t.db.insert_run(&run, &record, received_at_ms, None)
            .await
            .expect("stored");
    assert!(matches!(stored, Stored::Created { .. }), "{stored:?}");
}

async fn rows_in(t: &common::TestDb, table: &str) -> i64 {
    let Pool::Postgres(pg) = t.db.pool() else {
        unreachable!("PostgreSQL only")
    };
    sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
        .fetch_one(pg)
        .await
        .unwrap_or_else(|e| panic!("count {table}: {e}"))
}

#[tokio::test]
async fn months_are_made_ahead_kept_whole_and_dropped_whole() {
    let Some(t) = common::postgres().await else {
        return;
    };
    // The collector made this month and the two after when it connected.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let this = Month::of(now);
    let months = t.db.partitions().await.expect("partitions");
    assert_eq!(months, [this, this.next(), this.next().next()]);
    // Making them again makes nothing.
    assert!(
        t.db.prepare_partitions(now)
            .await
            .expect("prepare")
            .is_empty()
    );

    // Three runs in March 2024 and one in April, before any partition: kept, in the
    // default partition.
    let (march, april) = (ms(2024, 3, 10), ms(2024, 4, 2));
    for n in 0..3 {
        store(&t, n, march + n as i64).await;
    }
    store(&t, 3, april).await;
    let samples_per_run = run(0).samples.len() as i64;
    assert_eq!(rows_in(&t, "samples_default").await, 4 * samples_per_run);

    // Making March's and April's partitions moves their rows in; nothing is lost.
    let made = t.db.prepare_partitions(march).await.expect("prepare");
    assert_eq!(
        made,
        ["samples_2024_03", "samples_2024_04", "samples_2024_05"]
    );
    assert_eq!(rows_in(&t, "samples_default").await, 0);
    assert_eq!(rows_in(&t, "samples_2024_03").await, 3 * samples_per_run);
    assert_eq!(rows_in(&t, "samples_2024_04").await, samples_per_run);
    assert_eq!(
        t.db.count(Table::Samples).await.expect("count"),
        4 * samples_per_run
    );
    // A run this month lands in this month's partition.
    store(&t, 4, now).await;
    assert_eq!(rows_in(&t, &this.table()).await, samples_per_run);

    // Purging everything before 15 April: March goes as a table, April's run row by row
    // (it was received on the 2nd), and this month's run stays.
    let purge = Filter {
        to_ms: Some(ms(2024, 4, 15)),
        demo: DemoSamples::Include,
        ..Filter::default()
    };
    assert_eq!(t.db.purge(&purge).await.expect("purge"), 4);
    let months = t.db.partitions().await.expect("partitions");
    assert!(
        !months.contains(&Month {
            year: 2024,
            month: 3
        }),
        "{months:?}"
    );
    assert!(months.contains(&Month {
        year: 2024,
        month: 4
    }));
    assert_eq!(t.db.count(Table::Runs).await.expect("count"), 1);
    assert_eq!(
        t.db.count(Table::Samples).await.expect("count"),
        samples_per_run
    );
    assert_eq!(
        rows_in(&t, "cells WHERE received_at_ms < 1750000000000").await,
        0
    );
    // The storage figure counts the partitions' tables.
    assert!(t.db.storage_bytes().await.expect("storage") > 0);
    t.cleanup().await;
}

#[tokio::test]
async fn upgrading_a_database_moves_every_sample_into_its_month() {
    let Some(t) = common::postgres().await else {
        return;
    };
    let Pool::Postgres(pg) = t.db.pool() else {
        unreachable!("PostgreSQL only")
    };
    // A second schema holding the tables as they were before partitioning, with runs
    // from two months in it.
    let schema = format!("{}_upgrade", current_schema(pg).await);
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
        .max_connections(4)
        .connect_with(options.clone())
        .await
        .expect("connect");
    let mut before = sqlx::migrate!("./migrations/postgres");
    let unpartitioned: Vec<_> = before
        .migrations
        .iter()
        .filter(|m| m.version < 4)
        .cloned()
        .collect();
    before.migrations = unpartitioned.into();
    before
        .run(&old)
        .await
        .expect("the schema before partitioning");
    // This version's writer stores the runs; a column it writes that came later (the
    // compressed record) is there for it, and afterwards the rows are as an earlier
    // collector left them: the record's JSON in `record`, and no such column.
    sqlx::query("ALTER TABLE runs ADD COLUMN record_lz4 BYTEA")
        .execute(&old)
        .await
        .expect("a column for the writer");
    let db = firsttoken_server::Db::new(Pool::Postgres(old.clone()));
    let (one, two) = (ms(2025, 7, 20), ms(2025, 9, 1));
    let mut records = Vec::new();
    for (n, at) in [(10, one), (11, one), (12, two)] {
        let run = run(n);
        let record = serde_json::to_string(&run).expect("serializes");
        db.insert_run(&run, &record, at, None)
            .await
            .expect("stored");
        sqlx::query("UPDATE runs SET record = $1 WHERE run_id = $2")
            .bind(&record)
            .bind(&run.run_id)
            .execute(&old)
            .await
            .expect("the record as it was stored");
        records.push((run.run_id, record));
    }
    sqlx::query("ALTER TABLE runs DROP COLUMN record_lz4")
        .execute(&old)
        .await
        .expect("the schema as it was");
    let stored = db.count(Table::Samples).await.expect("count");

    // The collector of this version opens it: every sample is in its month's table.
    let upgraded = firsttoken_server::Db::connect_postgres(options)
        .await
        .expect("upgrades");
    assert_eq!(upgraded.count(Table::Samples).await.expect("count"), stored);
    for (id, record) in &records {
        let read = upgraded.run_record(id).await.expect("read").expect("there");
        assert_eq!(
            read, *record,
            "run {id}, stored before records were compressed"
        );
    }
    let months = upgraded.partitions().await.expect("partitions");
    assert_eq!(
        months.first(),
        Some(&Month {
            year: 2025,
            month: 7
        }),
        "{months:?}"
    );
    let samples_per_run = run(0).samples.len() as i64;
    for (table, want) in [
        ("samples_2025_07", 2 * samples_per_run),
        ("samples_2025_08", 0),
        ("samples_2025_09", samples_per_run),
        ("samples_default", 0),
    ] {
        let got: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {schema}.{table}"))
            .fetch_one(pg)
            .await
            .expect("count");
        assert_eq!(got, want, "{table}");
    }
    upgraded.close().await;
    old.close().await;
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(pg)
        .await
        .expect("drop");
    t.cleanup().await;
}

async fn current_schema(pg: &sqlx::PgPool) -> String {
    sqlx::query_scalar("SELECT current_schema()::TEXT")
        .fetch_one(pg)
        .await
        .expect("schema")
}
