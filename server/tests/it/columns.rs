//! What the collector keeps of a run: its record, compressed, readable back as it was
//! sent; no row per request; and cells whose sample indexes are exactly the samples each
//! stands for, so an export takes exactly the samples its filter names.

use std::collections::BTreeSet;

use firsttoken_core::plan::Phase;
use firsttoken_core::schema::Run;
use firsttoken_server::db::{Dimension, ExportRun, Filter, Pool, Value};

use crate::common;

/// Every request was a row of `samples` until an upload's cost was mostly those rows:
/// no table holds one now, on either database (days and their folds hold a row per day
/// and combination).
#[tokio::test]
async fn no_table_holds_a_row_per_sample() {
    for t in common::databases().await {
        let mut tables: Vec<String> = match t.db.pool() {
            Pool::Sqlite(pool) => sqlx::query_scalar(
                "SELECT name FROM sqlite_master WHERE type = 'table' \
                 AND name NOT LIKE '\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite%'",
            )
            .fetch_all(pool)
            .await
            .expect("SQLite's tables"),
            // The partitioned tables themselves, not their months.
            Pool::Postgres(pool) => sqlx::query_scalar(
                "SELECT c.relname::TEXT FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') \
                 AND NOT c.relispartition AND c.relname NOT LIKE '\\_%'",
            )
            .fetch_all(pool)
            .await
            .expect("PostgreSQL's tables"),
        };
        tables.sort();
        // The dimensions hold a row each (what the cells' columns were made for), the
        // signing key and the studies signed hold a row each, the source keys a row
        // a day and the run sources a row a run; PostgreSQL's count of stored bytes a
        // row a write until folded into one: never one a sample.
        let mut expected = vec![
            "cells",
            "days",
            "dimensions",
            "folds",
            "run_ids",
            "run_sources",
            "runs",
            "signed_studies",
            "signing_key",
            "source_keys",
        ];
        if matches!(t.db.pool(), Pool::Postgres(_)) {
            expected.push("stored_bytes");
        }
        assert_eq!(tables, expected, "{}", t.name);
        t.cleanup().await;
    }
}

/// Two runs stored in one transaction, as under load: the second has 150 samples of
/// several phases, levels and scenarios. Each run's cells hold each of its samples once,
/// each cell's indexes are the samples of its combination, and an export filtered by a
/// dimension takes exactly the samples whose value it is, read independently from the run.
#[tokio::test]
async fn cells_list_their_samples_and_exports_take_exactly_the_filtered_ones() {
    let mut runs: Vec<Run> = [common::example_run(), common::run_with(7, |_| {})]
        .into_iter()
        .map(|json| serde_json::from_value(json).expect("a run"))
        .collect();
    for run in &mut runs {
        run.targets[0].demo = false;
    }
    let kinds = runs[1].samples.clone();
    runs[1].samples = (0..150u32)
        .map(|i| {
            let mut sample = kinds[(i as usize / 7) % kinds.len()].clone();
            sample.index = i;
            sample.phase = match i {
                0..10 => Phase::Warmup,
                140.. => Phase::Fresh,
                _ => Phase::Steady,
            };
            sample.concurrency = 1 + (i / 20) % 3;
            sample.scenario = (i % 11 == 0).then(|| "long".to_owned());
            sample.start_ms += f64::from(i);
            sample
        })
        .collect();
    let received_at_ms = 1_796_000_000_000;
    for t in common::databases().await {
        let records: Vec<String> = runs
            .iter()
            .map(|r| serde_json::to_string(r).expect("serializes"))
            .collect();
        let commits = t.db.commits();
        let (a, b) = tokio::join!(
            t.db.insert_run(&runs[0], &records[0], received_at_ms, None),
            t.db.insert_run(&runs[1], &records[1], received_at_ms, None)
        );
        a.expect("stored");
        b.expect("stored");
        assert!(t.db.commits() - commits <= 2, "{}", t.name);
        let total: usize = runs.iter().map(|r| r.samples.len()).sum();
        assert_eq!(
            t.db.stored_samples().await.expect("count"),
            total as i64,
            "{}",
            t.name
        );

        // Everything, then one phase, one level and one scenario at a time.
        let mut filters = vec![(Filter::default(), None)];
        for phase in ["steady", "warmup", "fresh"] {
            filters.push((
                equals(Dimension::Phase, phase),
                Some((Dimension::Phase, phase.to_owned())),
            ));
        }
        for level in ["1", "2", "3"] {
            filters.push((
                equals(Dimension::Concurrency, level),
                Some((Dimension::Concurrency, level.to_owned())),
            ));
        }
        filters.push((
            equals(Dimension::Scenario, "long"),
            Some((Dimension::Scenario, "long".to_owned())),
        ));
        for (filter, only) in filters {
            let expected: BTreeSet<(String, u32)> = runs
                .iter()
                .flat_map(|run| {
                    run.samples.iter().filter_map(|s| {
                        let keep = match &only {
                            None => true,
                            Some((Dimension::Phase, p)) => s.phase.name() == p,
                            Some((Dimension::Concurrency, c)) => s.concurrency.to_string() == *c,
                            Some((_, scenario)) => s.scenario.as_ref() == Some(scenario),
                        };
                        keep.then(|| (run.run_id.clone(), s.index))
                    })
                })
                .collect();
            let (tx, mut rx) = tokio::sync::mpsc::channel::<ExportRun>(4);
            let export = t.db.export_runs(&filter, tx);
            let read = async {
                let mut got = BTreeSet::new();
                while let Some(run) = rx.recv().await {
                    for line in run.lines() {
                        assert!(
                            got.insert((line.run.run_id.clone(), line.sample.index)),
                            "{}: sample {} twice",
                            t.name,
                            line.sample.index
                        );
                    }
                }
                got
            };
            let (done, got) = tokio::join!(export, read);
            done.expect("exports");
            assert_eq!(got, expected, "{}: {only:?}", t.name);
            assert!(only.is_none() || got.len() < total, "{}: {only:?}", t.name);
        }
        t.cleanup().await;
    }
}

fn equals(dimension: Dimension, text: &str) -> Filter {
    Filter {
        equals: vec![(dimension, Value::parse(dimension, text).expect("a value"))],
        ..Filter::default()
    }
}

/// A new run's record is stored compressed by the collector (`record_lz4`, with `record`
/// empty) and reads back as the JSON it was, by id and in exports; a run stored before
/// records were compressed (its JSON in `record`, `record_lz4` NULL) reads as it did.
#[tokio::test]
async fn records_are_stored_compressed_and_old_ones_still_read() {
    for t in common::databases().await {
        let app = common::App::new(common::state(&t.db));
        let mut records = Vec::new();
        for n in [1, 2] {
            let run = common::run_with(n, |r| r["targets"][0]["demo"] = false.into());
            let run: firsttoken_core::schema::Run = serde_json::from_value(run).expect("a run");
            let record = serde_json::to_string(&run).expect("serializes");
            t.db.insert_run(&run, &record, 1_796_000_000_000, None)
                .await
                .expect("stored");
            records.push((run.run_id, record));
        }
        let (old_id, old_record) = &records[1];
        let stored: Vec<(String, String, Option<Vec<u8>>)> = match t.db.pool() {
            Pool::Sqlite(pool) => {
                sqlx::query("UPDATE runs SET record = ?, record_lz4 = NULL WHERE run_id = ?")
                    .bind(old_record)
                    .bind(old_id)
                    .execute(pool)
                    .await
                    .expect("a run as stored before");
                sqlx::query_as("SELECT run_id, record, record_lz4 FROM runs ORDER BY run_id")
                    .fetch_all(pool)
                    .await
                    .expect("the stored records")
            }
            Pool::Postgres(pool) => {
                sqlx::query("UPDATE runs SET record = $1, record_lz4 = NULL WHERE run_id = $2")
                    .bind(old_record)
                    .bind(old_id)
                    .execute(pool)
                    .await
                    .expect("a run as stored before");
                sqlx::query_as("SELECT run_id, record, record_lz4 FROM runs ORDER BY run_id")
                    .fetch_all(pool)
                    .await
                    .expect("the stored records")
            }
        };
        let (new_id, new_record) = &records[0];
        let (_, json, lz4) = stored
            .iter()
            .find(|(id, _, _)| id == new_id)
            .expect("the new run");
        assert_eq!(json, "", "{}", t.name);
        let lz4 = lz4.as_deref().expect("its compressed record");
        assert!(
            lz4.len() < new_record.len(),
            "{}: {} bytes",
            t.name,
            lz4.len()
        );
        let unpacked = lz4_flex::decompress_size_prepended(lz4).expect("LZ4");
        assert_eq!(
            String::from_utf8(unpacked).expect("UTF-8"),
            *new_record,
            "{}",
            t.name
        );

        for (id, record) in &records {
            let read = t.db.run_record(id).await.expect("read").expect("there");
            assert_eq!(read, *record, "{}: run {id}", t.name);
        }
        let export = app
            .get("/api/v1/export")
            .bearer_auth(common::ADMIN_TOKEN)
            .send()
            .await;
        assert_eq!(export.status, 200, "{}", t.name);
        let ids: std::collections::BTreeSet<String> = export
            .text()
            .lines()
            .map(|l| {
                let row: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
                row["run_id"].as_str().expect("a run id").to_owned()
            })
            .collect();
        assert_eq!(
            ids,
            records.iter().map(|(id, _)| id.clone()).collect(),
            "{}",
            t.name
        );
        t.cleanup().await;
    }
}
