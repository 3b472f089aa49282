//! Exports: the runs with samples matching a filter, each read back from its stored
//! record with the indexes of its matching samples. The runs and the indexes come from
//! the cells (a sample matches a filter exactly when its cell does); every exported value
//! comes from the record, through core's one row (`firsttoken_core::export`).

use std::collections::HashMap;

use anyhow::Context;
use firsttoken_core::export::Line;
use firsttoken_core::schema::Run;
use sqlx::QueryBuilder;

use super::{Db, Filter, Pool, cells, record};

/// Runs an export reads the ids and matching indexes of at a time, each page in a
/// statement of its own.
const PAGE: i64 = 256;
/// Records read at once, in a statement of their own. An export of 20,000 runs of 3
/// requests (55 MB of NDJSON, SQLite) took 0.9–1.0 s in one statement, 1.6–1.8 s with
/// each record read by itself, 1.1–1.4 s eight at a time (2026-12-07, 2 cores). A batch
/// holds at most this many records (16 MiB each at most) in memory.
const RECORDS_AT_ONCE: usize = 8;

impl Db {
    /// Sends each run with samples matching `filter` to `runs_out`, oldest first, read
    /// back from its stored record with the indexes of the matching samples; stops when
    /// the receiver is gone (the client hung up). The runs and their matching samples'
    /// indexes come from the cells (a sample matches exactly when its cell does); every
    /// exported value comes from the record, through core's one row.
    ///
    /// The runs are read a page at a time (their ids and indexes, by the cells' index on
    /// arrival and run id), and their records a few at a time, so no statement stays open while
    /// the client reads: a download that stalls holds no read transaction (on SQLite one
    /// would keep the write-ahead log from being checkpointed for as long as it lasted).
    /// A run deleted between its page and its record is left out; one stored meanwhile
    /// is in the export when it arrived after the page being read.
    pub async fn export_runs(
        &self,
        filter: &Filter,
        runs_out: tokio::sync::mpsc::Sender<ExportRun>,
    ) -> anyhow::Result<()> {
        // The matching cells' indexes, one text per run: the only SQL the two databases
        // spell differently here.
        let aggregate = match self.as_pool() {
            Pool::Sqlite(_) => "group_concat(indexes, ',')",
            Pool::Postgres(_) => "string_agg(indexes, ',')",
        };
        let mut after: Option<(i64, String)> = None;
        loop {
            let page: Vec<(String, i64, Option<String>)> = with_pool!(self, |pool| {
                let mut select = QueryBuilder::new(format!(
                    "SELECT run_id, received_at_ms, {aggregate} FROM cells"
                ));
                filter.push_where_after(&mut select, after.clone());
                select.push(format!(
                    " GROUP BY received_at_ms, run_id ORDER BY received_at_ms, run_id LIMIT {PAGE}"
                ));
                select.build_query_as().fetch_all(pool).await
            })
            .context("reading a page of the runs to export")?;
            let Some((last, at, _)) = page.last() else {
                return Ok(());
            };
            after = Some((*at, last.clone()));
            for batch in page.chunks(RECORDS_AT_ONCE) {
                // The batch's records, by id, in a statement of its own.
                let rows: Vec<(String, String, Option<Vec<u8>>)> = with_pool!(self, |pool| {
                    let mut select = QueryBuilder::new(
                        "SELECT run_id, record, record_lz4 FROM runs WHERE run_id IN (",
                    );
                    let mut ids = select.separated(", ");
                    for (run_id, ..) in batch {
                        ids.push_bind(run_id.clone());
                    }
                    select.push(")");
                    select.build_query_as().fetch_all(pool).await
                })
                .context("reading the records of runs to export")?;
                let mut records: HashMap<String, (String, Option<Vec<u8>>)> = rows
                    .into_iter()
                    .map(|(id, json, lz4)| (id, (json, lz4)))
                    .collect();
                for (run_id, received_at_ms, listed) in batch {
                    // Deleted since its page was read.
                    let Some((json, lz4)) = records.remove(run_id) else {
                        continue;
                    };
                    let record = record::json_of(json, lz4)?;
                    let run: Run = serde_json::from_str(&record)
                        .context("a stored record that no longer reads as a run")?;
                    let matching = cells::Ranges::parse(listed.as_deref().unwrap_or_default())
                        .with_context(|| format!("the sample indexes of run {}", run.run_id))?;
                    let mut indexes: Vec<u32> = run
                        .samples
                        .iter()
                        .map(|s| s.index)
                        .filter(|i| matching.contains(*i))
                        .collect();
                    indexes.sort_unstable();
                    let export = ExportRun {
                        received_at_ms: *received_at_ms,
                        run,
                        indexes,
                    };
                    if runs_out.send(export).await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// A stored run and which of its samples an export takes.
#[derive(Debug, Clone)]
pub struct ExportRun {
    pub run: Run,
    pub received_at_ms: i64,
    /// The matching samples' indexes, ascending.
    pub indexes: Vec<u32>,
}

impl ExportRun {
    /// The matching samples as core's rows, in index order.
    pub fn lines(&self) -> impl Iterator<Item = Line<'_>> {
        self.run
            .samples
            .iter()
            .filter(|s| self.indexes.binary_search(&s.index).is_ok())
            .map(|sample| Line {
                run: &self.run,
                sample,
                // To the hour: a finer time could be matched with a proxy's access log,
                // which names the address. (Stored to the millisecond: the cells'
                // index on it stays selective.)
                received_at_ms: Some(self.received_at_ms - self.received_at_ms % HOUR_MS),
            })
    }
}

/// An hour in milliseconds: exports give a run's arrival to the hour.
const HOUR_MS: i64 = 3_600_000;
