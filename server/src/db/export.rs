//! Exports: the runs with samples matching a filter, each read back from its stored
//! record with the indexes of its matching samples. The runs and the indexes come from
//! the cells (a sample matches a filter exactly when its cell does); every exported value
//! comes from the record, through core's one row (`firsttoken_core::export`).

use anyhow::Context;
use firsttoken_core::Run;
use firsttoken_core::export::Line;
use sqlx::QueryBuilder;

use super::{Db, Filter, Pool, cells, record};

/// Runs an export reads the ids and matching indexes of at a time, each page in a
/// statement of its own.
const PAGE: i64 = 256;

impl Db {
    /// Sends each run with samples matching `filter` to `runs_out`, oldest first, read
    /// back from its stored record with the indexes of the matching samples; stops when
    /// the receiver is gone (the client hung up). The runs and their matching samples'
    /// indexes come from the cells (a sample matches exactly when its cell does); every
    /// exported value comes from the record, through core's one row.
    ///
    /// The runs are read a page at a time (their ids and indexes, by the cells' index on
    /// arrival and run id), and each record by itself, so no statement stays open while
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
            for (run_id, received_at_ms, listed) in page {
                let stored: Option<(String, Option<Vec<u8>>)> = with_pool!(self, |pool| {
                    let mut select =
                        QueryBuilder::new("SELECT record, record_lz4 FROM runs WHERE run_id = ");
                    select
                        .push_bind(run_id.clone())
                        .push(" AND received_at_ms = ")
                        .push_bind(received_at_ms);
                    select.build_query_as().fetch_optional(pool).await
                })
                .with_context(|| format!("reading the record of run {run_id}"))?;
                // Deleted since its page was read.
                let Some((json, lz4)) = stored else {
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
                    received_at_ms,
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
