//! Cells: what summaries read instead of samples, and what exports and purges choose runs
//! by. A cell is one run's samples of one combination of the dimensions summaries group
//! and filter by, with their count, their failures by class, sketches of their times
//! (`firsttoken_crowd::sketch`) and of their wait's layers (of the samples whose wait
//! split whole), and the indexes of its samples in the run. Its samples
//! share every column a filter names, so a sample matches a filter exactly when its cell
//! does: an export takes the matching samples' indexes from the cells and their values
//! from the run's record. The writer stores a run's cells in the transaction that stores
//! the run, so the two never disagree; a run deleted or purged takes its cells with it in
//! the same transaction.
//!
//! The run's record stays the source of truth: [`rebuild_missing`] makes the cells of
//! runs that have none, or whose cells an earlier version made without indexes or
//! layers, from their records when the collector starts.

use std::collections::{BTreeMap, HashMap};

use anyhow::{Context, bail};
use firsttoken_core::plan::Phase;
use firsttoken_core::schema::{Run, Sample};
use firsttoken_crowd::sketch::Sketch;
use firsttoken_crowd::summary::{Cell, Layer, Layers, counted_in_crowd, layer};
use futures_util::TryStreamExt;
use sqlx::{QueryBuilder, Row};

use super::dimensions::Values;
use super::{Dimension, Filter, Piece, Pool, Value};

/// Bound parameters per cell row (a column per dimension and ten more), and the most
/// cell rows per INSERT (`super::statements`: every size is prepared once per connection).
const CELL_COLUMNS: usize = 10 + Dimension::ALL.len();
pub(super) const CELLS_PER_INSERT: usize = 64;
const _: () = assert!(CELLS_PER_INSERT * CELL_COLUMNS <= 32_766);
/// Runs whose cells are rebuilt per transaction when the collector starts.
const REBUILD_RUNS: usize = 200;

/// The values of a cell's dimensions: the same for every sample in it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct CellKey {
    /// Whether its target is the collector's demo (not a dimension: demo samples are
    /// left out of the crowd unless asked for).
    pub target_demo: bool,
    /// Its value of each dimension, at [`Dimension::index`].
    pub values: Values,
}

/// A sample's value of `dimension`: the one place the collector reads a dimension from
/// a run's record.
fn value_of(dimension: Dimension, run: &Run, sample: &Sample) -> Option<Value> {
    let (client, target) = (&run.client, run.target_of(sample));
    let text = |text: &str| Some(Value::Text(text.to_owned()));
    let some_text = |text: &Option<String>| text.clone().map(Value::Text);
    match dimension {
        Dimension::Network => text(client.network.name()),
        Dimension::EffectiveType => some_text(&client.effective_type),
        Dimension::Browser => some_text(&client.browser),
        Dimension::Os => some_text(&client.os),
        Dimension::Mobile => client.mobile.map(Value::Bool),
        Dimension::TargetLabel => text(&target.label),
        Dimension::TargetVersion => some_text(&target.version),
        Dimension::Phase => text(sample.phase.name()),
        // A cold request's idle time, a fresh request's connection.
        Dimension::Condition => firsttoken_core::condition::condition(sample).map(Value::Text),
        Dimension::Concurrency => Some(Value::Int(i64::from(sample.concurrency))),
        Dimension::Scenario => some_text(&sample.scenario),
        Dimension::Study => some_text(&run.study_id),
        #[cfg(feature = "probe-dimension")]
        Dimension::Probe => Some(Value::Int(i64::from(sample.index % 2))),
    }
}

/// One sample as a cell counts it.
pub(super) struct Counted<'a> {
    /// Its index in the run.
    pub index: u32,
    /// Whether the crowd's figures count it (a run counts at most
    /// [`firsttoken_crowd::summary::REQUESTS_PER_RUN_PHASE`] requests of each phase); exports take every sample.
    pub in_crowd: bool,
    pub error: Option<&'a str>,
    pub ttft_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    /// Its wait for the first token in [`Layer`]s, when it split whole.
    pub layers: Option<[f64; 3]>,
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
    pub layers: Layers,
    /// Its samples' indexes in the run, ascending.
    pub indexes: Vec<u32>,
}

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
            layers: Layers::default(),
            indexes: Vec::new(),
        });
        cell.indexes.push(sample.index);
        if !sample.in_crowd {
            continue;
        }
        cell.samples += 1;
        // As summaries always counted: a failed sample's times are not an answer's.
        match sample.error {
            Some(class) => *cell.errors.entry(class.to_owned()).or_default() += 1,
            None => {
                sample.ttft_ms.into_iter().for_each(|v| cell.ttft.add(v));
                sample.e2e_ms.into_iter().for_each(|v| cell.e2e.add(v));
                if let Some(times) = sample.layers {
                    layer::add(&mut cell.layers, times);
                }
            }
        }
    }
    cells
        .into_values()
        .enumerate()
        .map(|(n, mut cell)| {
            cell.indexes.sort_unstable();
            CellRow { cell: n, ..cell }
        })
        .collect()
}

/// Indexes as ranges, the way `cells.indexes` keeps them: `[0, 1, 2, 3, 7, 9, 10]` is
/// `"0-3,7,9-10"`. Most of a protocol's phases are runs of consecutive requests, so a
/// cell's list is a few ranges; where requests take turns (steady and fresh in pairs,
/// concurrency levels, compare rounds) it has about one range per request. `indexes` ascending.
pub(super) fn ranges(indexes: &[u32]) -> String {
    let mut text = String::new();
    let mut at = 0;
    while at < indexes.len() {
        let first = indexes[at];
        let mut last = first;
        while at + 1 < indexes.len() && indexes[at + 1] == last + 1 {
            at += 1;
            last = indexes[at];
        }
        if !text.is_empty() {
            text.push(',');
        }
        text.push_str(&first.to_string());
        if last > first {
            text.push('-');
            text.push_str(&last.to_string());
        }
        at += 1;
    }
    text
}

/// Whether a list of [`ranges`] (several cells' joined by commas, in any order) holds
/// `index`.
pub(super) struct Ranges(Vec<(u32, u32)>);

impl Ranges {
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let mut ranges = Vec::new();
        for part in text.split(',').filter(|p| !p.is_empty()) {
            let (first, last) = part.split_once('-').unwrap_or((part, part));
            let (first, last): (u32, u32) = match (first.parse(), last.parse()) {
                (Ok(first), Ok(last)) if first <= last => (first, last),
                _ => bail!("{part:?} is not a range of sample indexes"),
            };
            ranges.push((first, last));
        }
        ranges.sort_unstable();
        Ok(Self(ranges))
    }

    pub fn contains(&self, index: u32) -> bool {
        // The last range starting at or before `index`; ranges of one run never overlap.
        let after = self.0.partition_point(|(first, _)| *first <= index);
        after > 0 && self.0[after - 1].1 >= index
    }
}

/// The cells of a run as uploaded. Past [`firsttoken_crowd::summary::REQUESTS_PER_RUN_PHASE`] requests of a phase,
/// its cells count that many, evenly spread ([`counted_in_crowd`]), and keep the indexes
/// of all.
pub(super) fn cells_of_run(run: &Run, received_at_ms: i64) -> Vec<CellRow> {
    let mut of_phase: HashMap<Phase, usize> = HashMap::new();
    for s in &run.samples {
        *of_phase.entry(s.phase).or_default() += 1;
    }
    let mut ranked: HashMap<Phase, usize> = HashMap::new();
    cells(
        &run.run_id,
        received_at_ms,
        run.samples.iter().map(|s| {
            let rank = ranked.entry(s.phase).or_default();
            let in_crowd = counted_in_crowd(*rank, of_phase[&s.phase]);
            *rank += 1;
            let key = CellKey {
                target_demo: run.target_of(s).demo,
                values: Dimension::ALL.map(|d| value_of(d, run, s)).to_vec(),
            };
            let counted = Counted {
                index: s.index,
                in_crowd,
                error: s.error.map(|e| e.name()),
                ttft_ms: s.ttft_ms,
                e2e_ms: s.e2e_ms,
                layers: whole_layers(s),
            };
            (key, counted)
        }),
    )
}

/// A sample's wait for its first token in [`Layer`]s, at [`Layer::index`], when it split
/// whole (`firsttoken_core::layers`: the time before sending and the server's whole time
/// known), so its layers add up to its TTFT.
fn whole_layers(sample: &Sample) -> Option<[f64; 3]> {
    let layers = firsttoken_core::layers::Layers::of(sample)?;
    let before = layers.before_send_ms.ok()?;
    let server = layers.server.ok().filter(|s| s.whole())?;
    let mut times = [0.0; 3];
    times[Layer::BeforeSending.index()] = before;
    times[Layer::Server.index()] = server.total_ms();
    times[Layer::Network.index()] = layers.rest_ms;
    Some(times)
}

/// Inserts `rows` with the connection or transaction `conn`.
macro_rules! insert_cells {
    ($conn:expr, $rows:expr) => {{
        for chunk in $crate::db::statements::chunks(&$rows, $crate::db::cells::CELLS_PER_INSERT) {
            let mut insert = QueryBuilder::new(format!(
                "INSERT INTO cells (run_id, cell, received_at_ms, target_demo, {}, samples, \
                 errors, ttft, e2e, layers, indexes) ",
                $crate::db::dimensions::columns()
            ));
            insert.push_values(chunk, |mut row, c| {
                // Rows or references to them.
                let c: &$crate::db::cells::CellRow = c;
                let errors = (!c.errors.is_empty())
                    .then(|| serde_json::to_string(&c.errors).unwrap_or_default());
                row.push_bind(c.run_id.clone())
                    .push_bind(c.cell as i64)
                    .push_bind(c.received_at_ms)
                    .push_bind(c.key.target_demo);
                for d in $crate::db::Dimension::ALL {
                    $crate::db::dimensions::bind(
                        &mut row,
                        d.kind(),
                        c.key.values[d.index()].as_ref(),
                    );
                }
                row.push_bind(c.samples as i64)
                    .push_bind(errors)
                    .push_bind(c.ttft.encode())
                    .push_bind(c.e2e.encode())
                    .push_bind(firsttoken_crowd::summary::layer::encode(&c.layers))
                    .push_bind($crate::db::cells::ranges(&c.indexes));
            });
            insert.push(" ON CONFLICT DO NOTHING");
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

/// Makes the cells of every run that has samples and no cells, or cells an earlier
/// version made without their samples' indexes or their layers, from the run's record;
/// how many runs got cells. The collector does this when it starts, before it serves: runs stored before
/// cells existed, or before cells held indexes, are made whole the first time a
/// collector of this version starts. Collectors starting together on one PostgreSQL
/// database at worst both remake a run's cells, each in one transaction, to the same
/// rows.
pub(super) async fn rebuild_missing(pool: &Pool) -> anyhow::Result<u64> {
    let mut rebuilt = 0u64;
    // Runs in id order, from after the last one done: each pass over the table is one.
    let mut after = String::new();
    with_pool!(pool, |p| loop {
        let mut select = QueryBuilder::new(
            "SELECT r.run_id, r.received_at_ms, r.record, r.record_lz4 FROM runs r \
             WHERE r.sample_count > 0 AND r.run_id > ",
        );
        select.push_bind(after.clone()).push(format!(
            " AND (NOT EXISTS (SELECT 1 FROM cells c WHERE c.run_id = r.run_id \
               AND c.received_at_ms = r.received_at_ms) \
             OR EXISTS (SELECT 1 FROM cells c WHERE c.run_id = r.run_id \
               AND c.received_at_ms = r.received_at_ms \
               AND (c.indexes IS NULL OR c.layers IS NULL))) \
             ORDER BY r.run_id LIMIT {REBUILD_RUNS}"
        ));
        let stored: Vec<(String, i64, String, Option<Vec<u8>>)> = select
            .build_query_as()
            .persistent(false)
            .fetch_all(p)
            .await
            .context("finding runs without whole cells")?;
        let Some((last, ..)) = stored.last() else {
            return Ok(rebuilt);
        };
        after = last.clone();
        let mut all = Vec::new();
        for (run_id, received_at_ms, json, lz4) in &stored {
            let record = super::record::json_of(json.clone(), lz4.clone())
                .with_context(|| format!("the stored record of run {run_id}"))?;
            let run: Run = serde_json::from_str(&record)
                .with_context(|| format!("the stored record of run {run_id} is not a run"))?;
            all.extend(cells_of_run(&run, *received_at_ms));
        }
        let mut tx = p.begin().await?;
        let mut delete = QueryBuilder::new("DELETE FROM cells WHERE run_id IN (");
        let mut ids = delete.separated(", ");
        for (run_id, ..) in &stored {
            ids.push_bind(run_id.clone());
        }
        delete.push(")");
        delete
            .build()
            .persistent(false)
            .execute(&mut *tx)
            .await
            .context("deleting cells without indexes")?;
        insert_cells!(tx, all);
        if let Some(mut touch) = super::days::touch(stored.iter().map(|s| s.1)) {
            touch.build().persistent(false).execute(&mut *tx).await?;
        }
        tx.commit().await.context("storing rebuilt cells")?;
        rebuilt += stored.len() as u64;
        tracing::info!(
            runs = rebuilt,
            "made the cells of runs stored before cells held their samples' indexes and layers, or before a run counted at most 120 requests of a phase"
        );
    })
}

/// Sends the cells matching `filter`, but for those received in the ranges `outside`
/// (days read folded), to `out` in batches of up to `batch` cells, with the
/// values of `group_by` as text (booleans as `true`/`false`, numbers in decimal, absent as
/// ""); stops early, without an error, when the receiver is gone. A full channel makes
/// the scan wait (it yields its thread) until the receiver catches up.
///
/// The cells come run by run, ordered by arrival and run id (a run's cells share its
/// arrival), so the summary folds whole runs as it goes rather than holding every run's
/// sketches (`Accumulator::in_run_order`). Both databases read that order from the
/// cells' index on arrival and run id, without sorting; it is checked as the cells come
/// (a run's cells together within each millisecond), since cells out of it would count
/// a run twice.
pub(super) async fn summary_cells(
    pool: &Pool,
    filter: &Filter,
    outside: &[(i64, i64)],
    group_by: &[Dimension],
    out: &tokio::sync::mpsc::Sender<Vec<Piece>>,
    batch: usize,
) -> anyhow::Result<()> {
    let batch = batch.max(1);
    let mut cells = Vec::with_capacity(batch);
    with_pool!(pool, |pool| {
        let mut select =
            QueryBuilder::new("SELECT run_id, samples, errors, ttft, e2e, received_at_ms, layers");
        for dimension in group_by {
            select.push(", ").push(dimension.name());
        }
        select.push(" FROM cells");
        filter.push_where_outside(&mut select, outside);
        select.push(" ORDER BY received_at_ms, run_id");
        let mut rows = select.build().fetch(pool);
        // The runs of the millisecond being read, the current one last: a run that came
        // back after another would be counted twice.
        let (mut at, mut runs_at) = (i64::MIN, Vec::<String>::new());
        while let Some(row) = rows.try_next().await? {
            let group = super::dimensions::group_values(&row, 7, group_by)?;
            let (received_at_ms, run_id): (i64, String) = (row.try_get(5)?, row.try_get(0)?);
            if received_at_ms != at {
                if received_at_ms < at {
                    bail!("the cells came out of arrival order: a summary would count a run twice");
                }
                (at, runs_at) = (received_at_ms, Vec::new());
            }
            if runs_at.last() != Some(&run_id) {
                if runs_at.contains(&run_id) {
                    bail!("the cells of run {run_id} came apart: a summary would count it twice");
                }
                runs_at.push(run_id.clone());
            }
            let errors: Option<String> = row.try_get(2)?;
            let errors = match errors {
                Some(json) => serde_json::from_str(&json).context("a cell's errors")?,
                None => BTreeMap::new(),
            };
            let ttft: Vec<u8> = row.try_get(3)?;
            let e2e: Vec<u8> = row.try_get(4)?;
            let layers: Option<Vec<u8>> = row.try_get(6)?;
            cells.push(Piece::Cell(Box::new(Cell {
                group,
                run_id,
                samples: row.try_get::<i64, _>(1)?.max(0) as u64,
                errors,
                ttft: Sketch::decode(&ttft).context("a cell's TTFT sketch")?,
                e2e: Sketch::decode(&e2e).context("a cell's end-to-end sketch")?,
                layers: layer::decode(layers.as_deref().unwrap_or_default())
                    .context("a cell's layers")?,
            })));
            if cells.len() == batch {
                let full = std::mem::replace(&mut cells, Vec::with_capacity(batch));
                if out.send(full).await.is_err() {
                    return Ok(());
                }
            }
        }
        if !cells.is_empty() {
            // The receiver may be gone: nothing is left to do either way.
            let _ = out.send(cells).await;
        }
        anyhow::Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_are_kept_as_ranges_and_read_back() {
        assert_eq!(ranges(&[]), "");
        assert_eq!(ranges(&[5]), "5");
        assert_eq!(ranges(&[0, 1, 2, 3, 7, 9, 10]), "0-3,7,9-10");
        // Every subset of 0..12 reads back as itself, alone and joined with its
        // complement's list in either order (an export joins a run's cells' lists).
        for mask in 0u32..(1 << 12) {
            let (ours, rest): (Vec<u32>, Vec<u32>) = (0..12).partition(|i| mask & (1 << i) != 0);
            let alone = Ranges::parse(&ranges(&ours)).expect("reads");
            let joined = format!("{},{}", ranges(&rest), ranges(&ours));
            let joined = Ranges::parse(&joined).expect("reads");
            for i in 0..14 {
                assert_eq!(alone.contains(i), ours.contains(&i), "{mask:b}: {i}");
                assert_eq!(joined.contains(i), i < 12, "{mask:b}: {i}");
            }
        }
    }

    #[test]
    fn damaged_ranges_are_named() {
        for text in ["1-", "x", "5-3", "1-2-3", "-1", "4294967296"] {
            let error = Ranges::parse(text).err().map(|e| e.to_string());
            assert!(
                error
                    .as_deref()
                    .is_some_and(|e| e.contains("range of sample indexes")),
                "{text}: {error:?}"
            );
        }
    }
}
