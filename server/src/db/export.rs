//! Exports: the runs with samples matching a filter, each read back from its stored
//! record with the indexes of its matching samples. The runs and the indexes come from
//! the cells (a sample matches a filter exactly when its cell does); every exported value
//! comes from the record, through core's one row (`firsttoken_core::export`).

use anyhow::Context;
use firsttoken_core::Run;
use firsttoken_core::export::Line;
use futures_util::TryStreamExt;
use sqlx::{QueryBuilder, Row};

use super::{Db, Filter, Pool, cells, record};

impl Db {
    /// Sends each run with samples matching `filter` to `runs_out`, oldest first, read
    /// back from its stored record with the indexes of the matching samples; stops when
    /// the receiver is gone (the client hung up). The runs and their matching samples'
    /// indexes come from the cells (a sample matches exactly when its cell does); every
    /// exported value comes from the record, through core's one row.
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
        with_pool!(self, |pool| {
            let mut select = QueryBuilder::new(format!(
                "SELECT r.received_at_ms, r.record, r.record_lz4, m.indexes FROM runs r JOIN \
                 (SELECT run_id, received_at_ms, {aggregate} AS indexes FROM cells"
            ));
            filter.push_where(&mut select);
            select.push(
                " GROUP BY run_id, received_at_ms) m \
                 ON m.run_id = r.run_id AND m.received_at_ms = r.received_at_ms \
                 ORDER BY r.received_at_ms, r.run_id",
            );
            let mut rows = select.build().fetch(pool);
            while let Some(row) = rows.try_next().await? {
                let record = record::json_of(row.try_get("record")?, row.try_get("record_lz4")?)?;
                let run: Run = serde_json::from_str(&record)
                    .context("a stored record that no longer reads as a run")?;
                let listed: Option<String> = row.try_get("indexes")?;
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
                    received_at_ms: row.try_get("received_at_ms")?,
                    run,
                    indexes,
                };
                if runs_out.send(export).await.is_err() {
                    break;
                }
            }
            anyhow::Ok(())
        })
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
