//! Exports read a page of runs at a time, each page and each record in a statement of
//! its own: every run once, in arrival order, across pages whose boundaries split runs
//! that arrived in the same millisecond; and a download that stalls holds no read
//! transaction.

use firsttoken_core::schema::Run;
use firsttoken_server::db::{DemoSamples, ExportRun, Filter, Pool};

use crate::common;

/// `count` runs, three to a millisecond, stored straight into the database; their ids
/// in the order an export gives them (arrival, then id).
async fn store(t: &common::TestDb, count: u64) -> Vec<(i64, String)> {
    let mut stored = Vec::new();
    for n in 0..count {
        let run: Run = serde_json::from_value(common::run_with(n, |_| {})).expect("a run");
        let record = serde_json::to_string(&run).expect("json");
        // Ids not in the order they arrive, so the order is the export's doing.
        let at = 1_796_000_000_000 + ((count - n) / 3) as i64;
        t.db.insert_run(&run, &record, at, None)
            .await
            .expect("stored");
        stored.push((at, run.run_id));
    }
    stored.sort();
    stored
}

fn everything() -> Filter {
    Filter {
        demo: DemoSamples::Include,
        ..Filter::default()
    }
}

/// 600 runs, more than two pages of 256, a page boundary falling inside a millisecond:
/// each run exported once, in arrival order, on both databases.
#[tokio::test]
async fn an_export_reads_every_run_once_in_arrival_order_across_pages() {
    for t in common::databases().await {
        let stored = store(&t, 600).await;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<ExportRun>(4);
        let filter = everything();
        let export = t.db.export_runs(&filter, tx);
        let read = async {
            let mut got = Vec::new();
            while let Some(run) = rx.recv().await {
                assert!(!run.indexes.is_empty(), "{}", t.name);
                got.push((run.received_at_ms, run.run.run_id));
            }
            got
        };
        let (done, got) = tokio::join!(export, read);
        done.expect("exported");
        assert_eq!(got, stored, "{}", t.name);
        t.cleanup().await;
    }
}

/// An export whose reader stops after one run, while uploads go on: SQLite can still
/// checkpoint its write-ahead log to nothing, since no statement of the export stays
/// open. Read in one statement, the export held a read transaction for as long as the
/// download stalled, and the log grew for as long.
#[tokio::test]
async fn a_stalled_export_holds_no_read_transaction() {
    let t = common::sqlite().await;
    store(&t, 300).await;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<ExportRun>(1);
    let db = t.db.clone();
    let export = tokio::spawn(async move { db.export_runs(&everything(), tx).await });
    rx.recv().await.expect("the first run");
    // The export now waits for its reader, with its next run in hand.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let run: Run = serde_json::from_value(common::run_with(5000, |_| {})).expect("a run");
    let record = serde_json::to_string(&run).expect("json");
    t.db.insert_run(&run, &record, 1_796_000_100_000, None)
        .await
        .expect("stored while the export waits");
    let Pool::Sqlite(pool) = t.db.pool() else {
        unreachable!("SQLite")
    };
    let (busy, log, done): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
        .fetch_one(pool)
        .await
        .expect("checkpoint");
    assert_eq!(
        (busy, log, done),
        (0, 0, 0),
        "busy, log frames, checkpointed"
    );
    drop(rx);
    export
        .await
        .expect("joined")
        .expect("ends when its reader goes");
    t.cleanup().await;
}
