//! The `samples` table, as each database's migrations leave it, has exactly the stored
//! columns of core's one sample row (`firsttoken_core::export::COLUMNS`), so the INSERT
//! made from that list can never name a column the table lacks, and no column of the
//! table is left unwritten; and no index but its primary key. And how a run's record is
//! kept: compressed, readable back as it was sent.

use crate::common;

use firsttoken_server::db::Pool;

#[tokio::test]
async fn the_samples_table_is_the_stored_columns_of_the_row() {
    let mut stored: Vec<String> = firsttoken_core::export::stored_columns()
        .filter_map(|c| c.stored_as.map(str::to_owned))
        .collect();
    stored.sort();
    for t in common::databases().await {
        let mut table: Vec<String> = match t.db.pool() {
            Pool::Sqlite(pool) => {
                sqlx::query_scalar("SELECT name FROM pragma_table_info('samples')")
                    .fetch_all(pool)
                    .await
                    .expect("SQLite's columns")
            }
            Pool::Postgres(pool) => sqlx::query_scalar(
                "SELECT column_name::text FROM information_schema.columns \
                 WHERE table_name = 'samples' AND table_schema = current_schema()",
            )
            .fetch_all(pool)
            .await
            .expect("PostgreSQL's columns"),
        };
        table.sort();
        assert_eq!(table, stored, "{}", t.name);
        t.cleanup().await;
    }
}

/// Every upload writes a row per sample, and each index on `samples` is written with it.
/// Exports and purges choose runs by their cells and a run's samples by its id, so the
/// primary key (which starts with the run's id) is the one index `samples` keeps.
#[tokio::test]
async fn samples_keep_only_their_primary_key() {
    for t in common::databases().await {
        let indexes: Vec<String> = match t.db.pool() {
            Pool::Sqlite(pool) => sqlx::query_scalar(
                "SELECT name FROM pragma_index_list('samples') WHERE origin <> 'pk'",
            )
            .fetch_all(pool)
            .await
            .expect("SQLite's indexes"),
            // On the partitioned table itself: each month's partition has the same.
            Pool::Postgres(pool) => sqlx::query_scalar(
                "SELECT indexname::text FROM pg_indexes WHERE tablename = 'samples' \
                 AND schemaname = current_schema() AND indexname <> 'samples_pkey'",
            )
            .fetch_all(pool)
            .await
            .expect("PostgreSQL's indexes"),
        };
        assert_eq!(indexes, Vec::<String>::new(), "{}", t.name);
        t.cleanup().await;
    }
}

/// What an upload stores in `samples` is core's row, value for value, in every stored
/// column: the SQLite INSERT and PostgreSQL's arrays (one per column) are written apart,
/// so a column bound in the wrong place or of the wrong type shows here. Two runs go in
/// one transaction, as under load.
#[tokio::test]
async fn each_sample_row_holds_cores_values() {
    use firsttoken_core::Run;
    use firsttoken_core::export::{self, Line, Value};

    let mut runs: Vec<Run> = [common::example_run(), common::run_with(7, |_| {})]
        .into_iter()
        .map(|json| serde_json::from_value(json).expect("a run"))
        .collect();
    // The second has 150 samples, each a little different, so on SQLite the rows go in
    // statements of several sizes (153 rows with the first run's 3: 128, 16, 8 and 1).
    let kinds = runs[1].samples.clone();
    runs[1].samples = (0..150u32)
        .map(|i| {
            let mut sample = kinds[i as usize % kinds.len()].clone();
            sample.index = i;
            sample.start_ms += f64::from(i);
            sample
        })
        .collect();
    let received_at_ms = 1_796_000_000_000;
    let stored: Vec<&export::Column> = export::stored_columns().collect();
    let select = format!(
        "SELECT {} FROM samples WHERE run_id = $1 ORDER BY idx",
        stored
            .iter()
            .filter_map(|c| c.stored_as)
            .collect::<Vec<_>>()
            .join(", ")
    );
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
        for run in &runs {
            let rows = match t.db.pool() {
                Pool::Sqlite(pool) => read(pool, &select, run, &stored).await,
                Pool::Postgres(pool) => read(pool, &select, run, &stored).await,
            };
            assert_eq!(rows.len(), run.samples.len(), "{}", t.name);
            for (sample, row) in run.samples.iter().zip(&rows) {
                let line = Line {
                    run,
                    sample,
                    received_at_ms: Some(received_at_ms),
                };
                for (column, got) in stored.iter().zip(row) {
                    let expected = match column.value(&line) {
                        Value::Text(v) => Stored::Text(v.map(str::to_owned)),
                        Value::Int(v) => Stored::Int(v),
                        Value::Real(v) => Stored::Real(v),
                        Value::Bool(v) => Stored::Bool(v),
                        Value::Reals(_) => panic!("{} is a list", column.name),
                    };
                    assert_eq!(
                        *got, expected,
                        "{}: sample {} column {}",
                        t.name, sample.index, column.name
                    );
                }
            }
        }
        t.cleanup().await;
    }
}

/// A stored value read back.
#[derive(Debug, PartialEq)]
enum Stored {
    Text(Option<String>),
    Int(Option<i64>),
    Real(Option<f64>),
    Bool(Option<bool>),
}

/// The run's sample rows, each column read as core's row says it is typed.
async fn read<DB>(
    pool: &sqlx::Pool<DB>,
    select: &str,
    run: &firsttoken_core::Run,
    columns: &[&firsttoken_core::export::Column],
) -> Vec<Vec<Stored>>
where
    DB: sqlx::Database,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'c> &'c mut <DB as sqlx::Database>::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Decode<'q, DB>,
    String: sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Decode<'q, DB>,
    i64: sqlx::Type<DB>,
    for<'q> f64: sqlx::Decode<'q, DB>,
    f64: sqlx::Type<DB>,
    for<'q> bool: sqlx::Decode<'q, DB>,
    bool: sqlx::Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    use firsttoken_core::export::{Line, Value};
    use sqlx::Row;

    let line = Line {
        run,
        sample: &run.samples[0],
        received_at_ms: None,
    };
    let rows = sqlx::query(select)
        .bind(run.run_id.clone())
        .fetch_all(pool)
        .await
        .expect("the run's samples");
    rows.iter()
        .map(|row| {
            columns
                .iter()
                .enumerate()
                .map(|(i, column)| match column.value(&line) {
                    Value::Text(_) => Stored::Text(row.try_get(i).expect("text")),
                    Value::Int(_) => Stored::Int(row.try_get(i).expect("a whole number")),
                    Value::Real(_) => Stored::Real(row.try_get(i).expect("a number")),
                    Value::Bool(_) => Stored::Bool(row.try_get(i).expect("true or false")),
                    Value::Reals(_) => panic!("{} is a list", column.name),
                })
                .collect()
        })
        .collect()
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
            let run: firsttoken_core::Run = serde_json::from_value(run).expect("a run");
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
