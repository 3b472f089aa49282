//! Cells: what summaries read instead of samples, and what exports and purges choose runs
//! by. A cell is one run's samples of one combination of the dimensions summaries group
//! and filter by, with their count, their failures by class and sketches of their times
//! (`firsttoken_core::sketch`). Its samples share every column a filter names, so a
//! sample matches a filter exactly when its cell does. The writer
//! stores a run's cells in the transaction that stores its samples, so the two never
//! disagree; a run deleted or purged takes its cells with it (`ON DELETE CASCADE`).
//!
//! Samples stay the source of truth: [`rebuild_missing`] makes the cells of runs that
//! have none (stored before cells existed) from their samples when the collector starts.

use std::collections::BTreeMap;

use anyhow::Context;
use firsttoken_core::Run;
use firsttoken_core::sketch::Sketch;
use firsttoken_core::summary::Cell;
use futures_util::TryStreamExt;
use sqlx::{QueryBuilder, Row};

use super::{Dimension, Filter, Kind, Pool};

/// Bound parameters per cell row, and the most cell rows per INSERT
/// (`super::statements`: every size is prepared once per connection).
const CELL_COLUMNS: usize = 19;
pub(super) const CELLS_PER_INSERT: usize = 64;
const _: () = assert!(CELLS_PER_INSERT * CELL_COLUMNS <= 32_766);
/// Runs whose cells are rebuilt per transaction when the collector starts.
const REBUILD_RUNS: usize = 200;

/// The values of a cell's dimensions: the same for every sample in it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct CellKey {
    pub phase: String,
    pub concurrency: i64,
    pub scenario: Option<String>,
    pub target_label: String,
    pub target_version: Option<String>,
    pub target_demo: bool,
    pub network: String,
    pub effective_type: Option<String>,
    pub browser: Option<String>,
    pub os: Option<String>,
    pub mobile: Option<bool>,
    pub study: Option<String>,
}

/// One sample as a cell counts it.
pub(super) struct Counted<'a> {
    pub error: Option<&'a str>,
    pub ttft_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
}

/// A cell ready to store.
#[derive(Debug)]
pub(super) struct CellRow {
    pub run_id: String,
    /// Its number within the run, from 0.
    pub cell: usize,
    pub received_at_ms: i64,
    pub key: CellKey,
    pub samples: u64,
    pub errors: BTreeMap<String, u64>,
    pub ttft: Sketch,
    pub e2e: Sketch,
}

/// A run's samples as read back to rebuild its cells: when it was received, and each
/// sample's key, error class, TTFT and end-to-end time.
type StoredRun = (
    i64,
    Vec<(CellKey, Option<String>, Option<f64>, Option<f64>)>,
);

/// The cells of one run's samples, in key order.
pub(super) fn cells<'a>(
    run_id: &str,
    received_at_ms: i64,
    samples: impl IntoIterator<Item = (CellKey, Counted<'a>)>,
) -> Vec<CellRow> {
    let mut cells: BTreeMap<CellKey, CellRow> = BTreeMap::new();
    for (key, sample) in samples {
        let cell = cells.entry(key.clone()).or_insert_with(|| CellRow {
            run_id: run_id.to_owned(),
            cell: 0,
            received_at_ms,
            key,
            samples: 0,
            errors: BTreeMap::new(),
            ttft: Sketch::default(),
            e2e: Sketch::default(),
        });
        cell.samples += 1;
        // As summaries always counted: a failed sample's times are not an answer's.
        match sample.error {
            Some(class) => *cell.errors.entry(class.to_owned()).or_default() += 1,
            None => {
                sample.ttft_ms.into_iter().for_each(|v| cell.ttft.add(v));
                sample.e2e_ms.into_iter().for_each(|v| cell.e2e.add(v));
            }
        }
    }
    cells
        .into_values()
        .enumerate()
        .map(|(n, cell)| CellRow { cell: n, ..cell })
        .collect()
}

/// The cells of a run as uploaded.
pub(super) fn cells_of_run(run: &Run, received_at_ms: i64) -> Vec<CellRow> {
    let client = &run.client;
    cells(
        &run.run_id,
        received_at_ms,
        run.samples.iter().map(|s| {
            let target = run.target_of(s);
            let key = CellKey {
                phase: s.phase.name().to_owned(),
                concurrency: i64::from(s.concurrency),
                scenario: s.scenario.clone(),
                target_label: target.label.clone(),
                target_version: target.version.clone(),
                target_demo: target.demo,
                network: client.network.name().to_owned(),
                effective_type: client.effective_type.clone(),
                browser: client.browser.clone(),
                os: client.os.clone(),
                mobile: client.mobile,
                study: run.study_id.clone(),
            };
            let counted = Counted {
                error: s.error.map(|e| e.name()),
                ttft_ms: s.ttft_ms,
                e2e_ms: s.e2e_ms,
            };
            (key, counted)
        }),
    )
}

/// Inserts `rows` with the connection or transaction `conn`.
macro_rules! insert_cells {
    ($conn:expr, $rows:expr) => {{
        for chunk in $crate::db::statements::chunks(&$rows, $crate::db::cells::CELLS_PER_INSERT) {
            let mut insert = QueryBuilder::new(
                "INSERT INTO cells (run_id, cell, received_at_ms, target_demo, phase, concurrency, \
                 scenario, target_label, target_version, network, effective_type, browser, os, \
                 mobile, study, samples, errors, ttft, e2e) ",
            );
            insert.push_values(chunk, |mut row, c| {
                // Rows or references to them.
                let c: &$crate::db::cells::CellRow = c;
                let errors = (!c.errors.is_empty())
                    .then(|| serde_json::to_string(&c.errors).unwrap_or_default());
                row.push_bind(c.run_id.clone())
                    .push_bind(c.cell as i64)
                    .push_bind(c.received_at_ms)
                    .push_bind(c.key.target_demo)
                    .push_bind(c.key.phase.clone())
                    .push_bind(c.key.concurrency)
                    .push_bind(c.key.scenario.clone())
                    .push_bind(c.key.target_label.clone())
                    .push_bind(c.key.target_version.clone())
                    .push_bind(c.key.network.clone())
                    .push_bind(c.key.effective_type.clone())
                    .push_bind(c.key.browser.clone())
                    .push_bind(c.key.os.clone())
                    .push_bind(c.key.mobile)
                    .push_bind(c.key.study.clone())
                    .push_bind(c.samples as i64)
                    .push_bind(errors)
                    .push_bind(c.ttft.encode())
                    .push_bind(c.e2e.encode());
            });
            insert.push(" ON CONFLICT (run_id, cell) DO NOTHING");
            // The same text for the same size: sqlx finds it prepared.
            insert
                .build()
                .persistent(true)
                .execute(&mut *$conn)
                .await
                .context("inserting cells")?;
        }
    }};
}
pub(super) use insert_cells;

/// Makes the cells of every run that has samples and no cells, from its samples. Runs
/// stored before cells existed get them the first time a collector of this version
/// starts; a run that has cells is never touched, so collectors starting together on
/// one PostgreSQL database at worst both rebuild a run, and the second insert is a no-op.
pub(super) async fn rebuild_missing(pool: &Pool) -> anyhow::Result<u64> {
    let mut rebuilt = 0u64;
    with_pool!(pool, |p| loop {
        let ids: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT r.run_id FROM runs r WHERE r.sample_count > 0 \
             AND NOT EXISTS (SELECT 1 FROM cells c WHERE c.run_id = r.run_id) \
             ORDER BY r.run_id LIMIT {REBUILD_RUNS}"
        ))
        .fetch_all(p)
        .await
        .context("finding runs without cells")?;
        if ids.is_empty() {
            return Ok(rebuilt);
        }
        let mut select = QueryBuilder::new(
            "SELECT run_id, received_at_ms, phase, concurrency, scenario, target_label, \
             target_version, target_demo, network, effective_type, browser, os, mobile, study, \
             error, ttft_ms, e2e_ms FROM samples WHERE run_id IN (",
        );
        let mut list = select.separated(", ");
        for id in &ids {
            list.push_bind(id.clone());
        }
        select.push(") ORDER BY run_id, idx");
        let mut runs: BTreeMap<String, StoredRun> = BTreeMap::new();
        for row in select
            .build()
            .persistent(false)
            .fetch_all(p)
            .await
            .context("reading samples to rebuild cells")?
        {
            let key = CellKey {
                phase: row.try_get(2)?,
                concurrency: row.try_get(3)?,
                scenario: row.try_get(4)?,
                target_label: row.try_get(5)?,
                target_version: row.try_get(6)?,
                target_demo: row.try_get(7)?,
                network: row.try_get(8)?,
                effective_type: row.try_get(9)?,
                browser: row.try_get(10)?,
                os: row.try_get(11)?,
                mobile: row.try_get(12)?,
                study: row.try_get(13)?,
            };
            let run = runs
                .entry(row.try_get(0)?)
                .or_insert_with(|| (0, Vec::new()));
            run.0 = row.try_get(1)?;
            run.1
                .push((key, row.try_get(14)?, row.try_get(15)?, row.try_get(16)?));
        }
        let all: Vec<CellRow> = runs
            .iter()
            .flat_map(|(run_id, (received_at_ms, samples))| {
                cells(
                    run_id,
                    *received_at_ms,
                    samples.iter().map(|(key, error, ttft_ms, e2e_ms)| {
                        let counted = Counted {
                            error: error.as_deref(),
                            ttft_ms: *ttft_ms,
                            e2e_ms: *e2e_ms,
                        };
                        (key.clone(), counted)
                    }),
                )
            })
            .collect();
        let mut tx = p.begin().await?;
        insert_cells!(tx, all);
        tx.commit().await.context("storing rebuilt cells")?;
        rebuilt += ids.len() as u64;
        tracing::info!(
            runs = rebuilt,
            "rebuilt the cells of runs stored before cells existed"
        );
    })
}

/// Streams the cells matching `filter` to `each`, with the values of `group_by` as text
/// (booleans as `true`/`false`, numbers in decimal, absent as "").
pub(super) async fn summary_cells(
    pool: &Pool,
    filter: &Filter,
    group_by: &[Dimension],
    mut each: impl FnMut(Cell),
) -> anyhow::Result<()> {
    with_pool!(pool, |pool| {
        let mut select = QueryBuilder::new("SELECT run_id, samples, errors, ttft, e2e");
        for dimension in group_by {
            select.push(", ").push(super::Column::column(*dimension));
        }
        select.push(" FROM cells");
        filter.push_where(&mut select);
        let mut rows = select.build().fetch(pool);
        while let Some(row) = rows.try_next().await? {
            let group = group_by
                .iter()
                .enumerate()
                .map(|(i, dimension)| {
                    let at = i + 5;
                    Ok(match super::Column::kind(*dimension) {
                        Kind::Text => row.try_get::<Option<String>, _>(at)?.unwrap_or_default(),
                        Kind::Bool => row
                            .try_get::<Option<bool>, _>(at)?
                            .map(|b| b.to_string())
                            .unwrap_or_default(),
                        Kind::Int => row
                            .try_get::<Option<i64>, _>(at)?
                            .map(|n| n.to_string())
                            .unwrap_or_default(),
                    })
                })
                .collect::<Result<Vec<String>, sqlx::Error>>()?;
            let errors: Option<String> = row.try_get(2)?;
            let errors = match errors {
                Some(json) => serde_json::from_str(&json).context("a cell's errors")?,
                None => BTreeMap::new(),
            };
            let ttft: Vec<u8> = row.try_get(3)?;
            let e2e: Vec<u8> = row.try_get(4)?;
            each(Cell {
                group,
                run_id: row.try_get(0)?,
                samples: row.try_get::<i64, _>(1)?.max(0) as u64,
                errors,
                ttft: Sketch::decode(&ttft).context("a cell's TTFT sketch")?,
                e2e: Sketch::decode(&e2e).context("a cell's end-to-end sketch")?,
            });
        }
        anyhow::Ok(())
    })
}
