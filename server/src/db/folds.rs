//! Folds: each closed day's runs folded ahead from their cells, so a summary over a year
//! reads a few thousand rows instead of a million runs' cells (`firsttoken_crowd::fold`
//! says what a fold keeps and why its numbers are the ones its runs give one by one).
//!
//! A fold adds up only with folds of other runs, and a summary groups and filters by any
//! dimensions. Most are the same for all of a run's samples (its network, its browser,
//! its link); those the dimension table marks `within_run` (phase, condition, concurrency,
//! scenario, target label and version; `dimensions.rs`), and whether the target is the
//! demo, can differ between a run's samples. So each day is folded once for every choice of which
//! of the dimensions that do differ within some run of that day (`varies`, usually only
//! the phase) to merge, per combination of the other dimensions' values: each run lands in
//! one row per choice, and a summary reads the rows that merge exactly the varying
//! dimensions it neither groups nor filters by. Rows it puts in one group then differ
//! only in dimensions that are the same for each run that day, so no run is in two.
//!
//! Which days are read folded is decided by the `days` table: every transaction that
//! stores or deletes a run (or remakes its cells) counts a change to the run's day, and a
//! day's folds are read only while its count of changes is the one they were made at.
//! Folding compares and sets that count in the transaction that writes the folds, so a
//! run stored while its day was being folded sends the day back to its cells, never out
//! of the summary. A summary reads each run once: from the folds of the days it reads
//! folded, from its cells everywhere else. The writer counts its change last in its
//! transaction, so on PostgreSQL the day's row is locked only for the commit.
//!
//! What folding takes is bounded: a day is read as a stream of cells by run, runs are
//! folded into their rows a few thousand at a time, and a day whose runs make more than
//! [`MOST_ROWS`] rows (combinations nobody's crowd has, or someone's attack) is left to
//! its cells, marked so that it is not tried again until it changes.
//!
//! This file is the fold job; a summary reads the folds through `folded.rs`, and the
//! `days` table's counts are kept by `days.rs`.

use std::collections::{BTreeMap, HashMap};

use anyhow::Context;
use firsttoken_crowd::fold::{Fold, Listed};
use firsttoken_crowd::sketch::Sketch;
use firsttoken_crowd::summary::{Layers, layer};
use futures_util::TryStreamExt;
use sqlx::{QueryBuilder, Row};

use super::days::{DAY_MS, SETTLE_MS, day_of};
use super::dimensions::{self, DEMO, Values};
use super::{Dimension, Pool, Value};

/// Runs folded at a time into a row's fold while a day is folded.
const RUNS_PER_STEP: usize = 4_096;
/// Rows per INSERT of folds (a parameter per dimension and four more each).
const ROWS_PER_INSERT: usize = 500;
const _: () = assert!(ROWS_PER_INSERT * (4 + Dimension::ALL.len()) <= 32_766);
/// The most rows of folds a day may have; past them it is read from its cells (its
/// `varies` is [`TOO_VARIED`]).
pub const MOST_ROWS: usize = 50_000;
/// `days.varies` of a day left unfolded for having too many combinations.
const TOO_VARIED: i64 = -1;
/// A row of `folds`: its choice of dimensions merged, and its values (`None` for a merged
/// dimension, and for one without a value; `merged` tells them apart).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Key {
    merged: i64,
    target_demo: Option<bool>,
    /// At [`Dimension::index`].
    values: Values,
}

/// One cell of the day being folded.
struct DayCell {
    key: Key,
    samples: u64,
    errors: BTreeMap<String, u64>,
    ttft: Sketch,
    e2e: Sketch,
    layers: Layers,
}

/// A row's fold as it is made: runs waiting to be folded, and those folded.
#[derive(Default)]
struct Folding {
    runs: Vec<Listed>,
    fold: Fold,
}

impl Folding {
    fn step(&mut self) {
        if !self.runs.is_empty() {
            let runs = std::mem::take(&mut self.runs);
            self.fold.merge(Fold::of_runs(runs));
        }
    }
}

/// What [`fold_closed_days`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Folded {
    /// Days folded.
    pub days: u64,
    /// Days left for later: a run was stored or deleted while they were folded.
    pub changed: u64,
    /// Days left to their cells for having more combinations than the bound.
    pub too_varied: u64,
    /// Rows of folds written.
    pub rows: u64,
}

/// Folds every day that ended [`SETTLE_MS`] before `now_ms` and has changed since it was
/// last folded (or never was), oldest first, each into at most `most_rows` rows
/// ([`MOST_ROWS`] but in tests).
pub(super) async fn fold_closed_days(
    pool: &Pool,
    now_ms: i64,
    most_rows: usize,
) -> anyhow::Result<Folded> {
    let before = day_of(now_ms - SETTLE_MS);
    let stale: Vec<(i64, i64)> = with_pool!(pool, |p| {
        let mut select = QueryBuilder::new(
            "SELECT day_ms, changes FROM days WHERE (folded IS NULL OR folded <> changes) \
             AND day_ms < ",
        );
        select.push_bind(before).push(" ORDER BY day_ms");
        select.build_query_as().fetch_all(p).await
    })
    .context("finding days to fold")?;
    let mut done = Folded::default();
    for (day, changes) in stale {
        match fold_day(pool, day, changes, most_rows).await? {
            DayFold::Folded(rows) => {
                done.days += 1;
                done.rows += rows;
            }
            DayFold::TooVaried => done.too_varied += 1,
            DayFold::Changed => done.changed += 1,
        }
    }
    Ok(done)
}

/// What became of a day.
enum DayFold {
    /// Folded into this many rows.
    Folded(u64),
    /// Left to its cells: more than the bound's rows.
    TooVaried,
    /// Changed meanwhile: it stays with its cells until folded again.
    Changed,
}

/// Folds the runs of `day` as they are at `changes`, into at most `most_rows` rows.
async fn fold_day(
    pool: &Pool,
    day: i64,
    changes: i64,
    most_rows: usize,
) -> anyhow::Result<DayFold> {
    let varies = varies(pool, day).await?;
    let mut rows: HashMap<Key, Folding> = HashMap::new();
    // A run's cells together, runs by id (as a summary orders them: byte order).
    let mut run: Option<(String, Vec<DayCell>)> = None;
    with_pool!(pool, |p| {
        let mut select = QueryBuilder::new(format!(
            "SELECT run_id, samples, errors, ttft, e2e, layers, target_demo, {} \
             FROM cells WHERE received_at_ms >= ",
            dimensions::columns()
        ));
        select
            .push_bind(day)
            .push(" AND received_at_ms < ")
            .push_bind(day + DAY_MS)
            .push(match pool {
                Pool::Postgres(_) => " ORDER BY run_id COLLATE \"C\"",
                Pool::Sqlite(_) => " ORDER BY run_id",
            });
        let mut cells = select.build().fetch(p);
        while let Some(row) = cells.try_next().await? {
            let run_id: String = row.try_get(0)?;
            let errors: Option<String> = row.try_get(2)?;
            let (ttft, e2e): (Vec<u8>, Vec<u8>) = (row.try_get(3)?, row.try_get(4)?);
            let layers: Option<Vec<u8>> = row.try_get(5)?;
            let cell = DayCell {
                samples: row.try_get::<i64, _>(1)?.max(0) as u64,
                errors: match errors {
                    Some(json) => serde_json::from_str(&json).context("a cell's errors")?,
                    None => BTreeMap::new(),
                },
                ttft: Sketch::decode(&ttft).context("a cell's TTFT sketch")?,
                e2e: Sketch::decode(&e2e).context("a cell's end-to-end sketch")?,
                layers: layer::decode(layers.as_deref().unwrap_or_default())
                    .context("a cell's layers")?,
                key: Key {
                    merged: 0,
                    target_demo: Some(row.try_get(6)?),
                    values: Dimension::ALL
                        .into_iter()
                        .enumerate()
                        .map(|(i, d)| dimensions::read(&row, 7 + i, d.kind()))
                        .collect::<Result<_, _>>()?,
                },
            };
            match &mut run {
                Some((id, cells)) if *id == run_id => cells.push(cell),
                _ => {
                    if let Some((id, cells)) = run.take() {
                        add_run(&mut rows, varies, id, cells);
                    }
                    if rows.len() > most_rows {
                        break;
                    }
                    run = Some((run_id, vec![cell]));
                }
            }
        }
        anyhow::Ok(())
    })
    .with_context(|| format!("reading the cells of the day from {day} ms"))?;
    if let Some((id, cells)) = run.take() {
        add_run(&mut rows, varies, id, cells);
    }
    // A day of too many combinations stays with its cells: its folds would hold about
    // as much, in the memory of the task that makes them.
    let too_varied = rows.len() > most_rows;
    let (varies, rows) = if too_varied {
        tracing::warn!(
            day_ms = day,
            "a day's runs have more than {most_rows} combinations: left unfolded, read from their cells"
        );
        (TOO_VARIED, HashMap::new())
    } else {
        (varies, rows)
    };
    let mut rows: Vec<(Key, Fold)> = rows
        .into_iter()
        .map(|(key, mut folding)| {
            folding.step();
            (key, folding.fold)
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let written = rows.len() as u64;
    let stored = with_pool!(pool, |p| async {
        let mut tx = p.begin().await?;
        // Compare and set: nothing stored or deleted for the day since `changes` was read
        // (a writer counting a change waits for this transaction, or this for it).
        let mut claim = QueryBuilder::new("UPDATE days SET varies = ");
        claim
            .push_bind(varies)
            .push(", folded = ")
            .push_bind(changes)
            .push(" WHERE day_ms = ")
            .push_bind(day)
            .push(" AND changes = ")
            .push_bind(changes);
        let claimed = claim.build().execute(&mut *tx).await?.rows_affected() == 1;
        if !claimed {
            // Dropped, the transaction rolls back.
            return anyhow::Ok(false);
        }
        let mut delete = QueryBuilder::new("DELETE FROM folds WHERE day_ms = ");
        delete.push_bind(day);
        delete.build().execute(&mut *tx).await?;
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            let mut insert = QueryBuilder::new(format!(
                "INSERT INTO folds (day_ms, merged, target_demo, {}, fold) ",
                dimensions::columns()
            ));
            insert.push_values(chunk, |mut row, (key, fold)| {
                row.push_bind(day)
                    .push_bind(key.merged)
                    .push_bind(key.target_demo);
                for d in Dimension::ALL {
                    dimensions::bind(&mut row, d.kind(), key.values[d.index()].as_ref());
                }
                row.push_bind(fold.encode());
            });
            insert.build().persistent(false).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        anyhow::Ok(true)
    }
    .await)
    .with_context(|| format!("storing the folds of the day from {day} ms"))?;
    Ok(match (stored, too_varied) {
        (false, _) => DayFold::Changed,
        (true, true) => DayFold::TooVaried,
        (true, false) => DayFold::Folded(written),
    })
}

/// The varying dimensions (bits as `varies`) some run of `day` has more than one value
/// of, from a pass over the cells' dimensions alone.
async fn varies(pool: &Pool, day: i64) -> anyhow::Result<i64> {
    let varying: Vec<(Dimension, i64)> = dimensions::varying().collect();
    let mut varies = 0;
    // The run being read, its first cell's demo flag and values of the varying dimensions.
    let mut first: Option<(String, bool, Vec<Option<Value>>)> = None;
    with_pool!(pool, |p| {
        let mut select = QueryBuilder::new("SELECT run_id, target_demo");
        for (d, _) in &varying {
            select.push(", ").push(d.name());
        }
        select
            .push(" FROM cells WHERE received_at_ms >= ")
            .push_bind(day)
            .push(" AND received_at_ms < ")
            .push_bind(day + DAY_MS)
            .push(" ORDER BY run_id");
        let mut cells = select.build().fetch(p);
        while let Some(row) = cells.try_next().await? {
            let run_id: String = row.try_get(0)?;
            let demo: bool = row.try_get(1)?;
            let values = varying
                .iter()
                .enumerate()
                .map(|(i, (d, _))| dimensions::read(&row, 2 + i, d.kind()))
                .collect::<Result<Vec<_>, _>>()?;
            match &first {
                Some((id, first_demo, first_values)) if *id == run_id => {
                    for (at, (_, bit)) in varying.iter().enumerate() {
                        if first_values[at] != values[at] {
                            varies |= bit;
                        }
                    }
                    if *first_demo != demo {
                        varies |= DEMO;
                    }
                }
                _ => first = Some((run_id, demo, values)),
            }
        }
        anyhow::Ok(())
    })
    .with_context(|| format!("reading what varies within runs on the day from {day} ms"))?;
    Ok(varies)
}

/// Adds one run (its cells of the day) to the row of each choice of the dimensions in
/// `varies` to merge its samples are in.
fn add_run(rows: &mut HashMap<Key, Folding>, varies: i64, run_id: String, cells: Vec<DayCell>) {
    // Every subset of `varies`, by counting down through its bits.
    let mut merged = varies;
    loop {
        let mut parts: BTreeMap<Key, (u64, BTreeMap<String, u64>, Listed)> = BTreeMap::new();
        for cell in &cells {
            let mut key = cell.key.clone();
            key.merged = merged;
            for (d, bit) in dimensions::varying() {
                if merged & bit != 0 {
                    key.values[d.index()] = None;
                }
            }
            if merged & DEMO != 0 {
                key.target_demo = None;
            }
            let part = parts.entry(key).or_insert_with(|| {
                let listed = Listed {
                    run_id: run_id.clone(),
                    ttft: Sketch::default(),
                    e2e: Sketch::default(),
                    layers: Layers::default(),
                };
                (0, BTreeMap::new(), listed)
            });
            part.0 += cell.samples;
            for (class, count) in &cell.errors {
                *part.1.entry(class.clone()).or_default() += count;
            }
            part.2.ttft.merge(&cell.ttft);
            part.2.e2e.merge(&cell.e2e);
            for (into, from) in part.2.layers.iter_mut().zip(&cell.layers) {
                into.merge(from);
            }
        }
        for (key, (samples, errors, run)) in parts {
            let folding = rows.entry(key).or_default();
            folding.fold.samples += samples;
            for (class, count) in errors {
                *folding.fold.errors.entry(class).or_default() += count;
            }
            folding.runs.push(run);
            if folding.runs.len() == RUNS_PER_STEP {
                folding.step();
            }
        }
        if merged == 0 {
            break;
        }
        merged = (merged - 1) & varies;
    }
}
