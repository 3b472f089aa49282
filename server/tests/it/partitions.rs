//! PostgreSQL's monthly partitions of runs and cells: made ahead, rows outside them kept
//! and moved in when their month is made, whole months dropped by an age purge.

use firsttoken_core::schema::Run;
use firsttoken_server::db::partitions::Month;
use firsttoken_server::db::{DemoSamples, Filter, Pool, Stored, Table};

use crate::common;

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

fn pg(t: &common::TestDb) -> &sqlx::PgPool {
    let Pool::Postgres(pg) = t.db.pool() else {
        unreachable!("PostgreSQL only")
    };
    pg
}

async fn rows_in(t: &common::TestDb, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
        .fetch_one(pg(t))
        .await
        .unwrap_or_else(|e| panic!("count {table}: {e}"))
}

/// The live bytes the triggers counted (`stored_bytes`) and those the rows hold now,
/// worked out again from them: equal after every write, move and drop.
async fn live_bytes(t: &common::TestDb) -> (i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT SUM(bytes) FROM stored_bytes)::BIGINT, \
         ((SELECT COALESCE(SUM(stored_run_bytes(record, record_lz4)), 0) FROM runs) \
          + (SELECT COALESCE(SUM(stored_cell_bytes(ttft, e2e, indexes, errors)), 0) FROM cells))::BIGINT",
    )
    .fetch_one(pg(t))
    .await
    .expect("counted")
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
    // default partitions.
    let (march, april) = (ms(2024, 3, 10), ms(2024, 4, 2));
    for n in 0..3 {
        store(&t, n, march + n as i64).await;
    }
    store(&t, 3, april).await;
    let cells_per_run = rows_in(&t, "cells_default").await / 4;
    assert!(cells_per_run > 0);
    assert_eq!(rows_in(&t, "runs_default").await, 4);
    assert_eq!(rows_in(&t, "cells_default").await, 4 * cells_per_run);
    let (four, held) = live_bytes(&t).await;
    assert_eq!(four, held);
    assert!(four > 0);

    // Making March's and April's partitions moves their rows in; nothing is lost.
    let made = t.db.prepare_partitions(march).await.expect("prepare");
    assert_eq!(
        made,
        [
            "cells_2024_03",
            "runs_2024_03",
            "cells_2024_04",
            "runs_2024_04",
            "cells_2024_05",
            "runs_2024_05"
        ]
    );
    // Moved between tables, the rows are still counted once.
    assert_eq!(live_bytes(&t).await, (four, four));
    for (table, rows) in [
        ("runs_default", 0),
        ("cells_default", 0),
        ("runs_2024_03", 3),
        ("cells_2024_03", 3 * cells_per_run),
        ("runs_2024_04", 1),
        ("cells_2024_04", cells_per_run),
    ] {
        assert_eq!(rows_in(&t, table).await, rows, "{table}");
    }
    let samples_per_run = run(0).samples.len() as i64;
    assert_eq!(
        t.db.stored_samples().await.expect("count"),
        4 * samples_per_run
    );
    // A moved run reads back, and a repeated upload of it is still the same run.
    let moved = run(1);
    let record = serde_json::to_string(&moved).expect("serializes");
    let read = t.db.run_record(&moved.run_id).await.expect("read");
    assert_eq!(read.as_deref(), Some(record.as_str()));
    let again = t.db.insert_run(&moved, &record, now, None).await;
    assert_eq!(again.expect("answered"), Stored::AlreadyStored);
    // A run this month lands in this month's partitions.
    store(&t, 4, now).await;
    assert_eq!(rows_in(&t, &this.table("runs")).await, 1);
    assert_eq!(rows_in(&t, &this.table("cells")).await, cells_per_run);

    // March's and April's days folded; today's is not over.
    let folded = t.db.fold_closed_days(now).await.expect("fold");
    assert_eq!(folded.days, 2);
    assert!(t.db.count(Table::Folds).await.expect("count") > 0);

    // Purging everything before 15 April: March goes as tables, April's run row by row
    // (it was received on the 2nd), and this month's run stays; the days before go with
    // their folds.
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
    for table in ["runs_2024_03", "cells_2024_03"] {
        let gone: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NULL")
            .bind(table)
            .fetch_one(pg(&t))
            .await
            .expect("looked up");
        assert!(gone, "{table} is still there");
    }
    assert_eq!(t.db.count(Table::Runs).await.expect("count"), 1);
    assert_eq!(t.db.count(Table::RunIds).await.expect("count"), 1);
    assert_eq!(
        t.db.count(Table::Cells).await.expect("count"),
        cells_per_run
    );
    assert_eq!(t.db.stored_samples().await.expect("count"), samples_per_run);
    // The dropped month's bytes and the deleted run's left the count: one run is left.
    let (counted, held) = live_bytes(&t).await;
    assert_eq!(counted, held);
    assert!(
        (4 * held - four).abs() < four / 10,
        "{held} left of {four} for four runs"
    );
    assert_eq!(t.db.count(Table::Days).await.expect("count"), 1, "today's");
    assert_eq!(t.db.count(Table::Folds).await.expect("count"), 0);
    // A purged run's id is free again: uploaded anew, it is stored anew.
    let again = t.db.insert_run(&moved, &record, now, None).await;
    assert!(
        matches!(again.expect("answered"), Stored::Created { .. }),
        "a purged run's id"
    );
    // Measuring the storage folds the counted rows into one, and keeps their sum.
    let before = live_bytes(&t).await;
    assert!(t.db.storage_bytes().await.expect("storage") > before.0 as u64);
    assert_eq!(live_bytes(&t).await, before);
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM stored_bytes")
        .fetch_one(pg(&t))
        .await
        .expect("counted");
    assert_eq!(rows, 1);
    t.cleanup().await;
}
