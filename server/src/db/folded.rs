//! The summary's read side of the folds: which whole days within a summary's dates have
//! current folds (their count of changes is the one they were folded at), and their rows
//! that merge exactly the varying dimensions the summary neither groups nor filters by
//! (`folds.rs` makes them; `days.rs` counts the changes).

use anyhow::Context;
use firsttoken_crowd::fold::Fold;
use futures_util::TryStreamExt;
use sqlx::{QueryBuilder, Row};

use super::days::{DAY_MS, day_of};
use super::dimensions::{self, ALL_VARYING, DEMO};
use super::{Dimension, Filter, Piece, Pool};

/// The most separate ranges of days a summary reads folded; past it, the shortest are
/// read from their cells (slower, the same numbers).
const MOST_RANGES: usize = 64;
/// Which of the varying dimensions (bits as `varies`) a summary grouping by `group_by`
/// and filtering by `filter` names: it reads rows that merge all others.
fn named(filter: &Filter, group_by: &[Dimension]) -> i64 {
    let named = |d: Dimension| group_by.contains(&d) || filter.equals.iter().any(|(e, _)| *e == d);
    let demo = if filter.demo == super::DemoSamples::Include {
        0
    } else {
        DEMO
    };
    dimensions::varying()
        .filter(|&(d, _)| named(d))
        .fold(demo, |mask, (_, bit)| mask | bit)
}

/// The whole days within `filter`'s dates whose folds are current, as ranges of
/// milliseconds (from, to), at most [`MOST_RANGES`] of them.
pub(super) async fn folded_days(pool: &Pool, filter: &Filter) -> anyhow::Result<Vec<(i64, i64)>> {
    let days: Vec<i64> = with_pool!(pool, |p| {
        let mut select =
            QueryBuilder::new("SELECT day_ms FROM days WHERE folded = changes AND varies >= 0");
        if let Some(from) = filter.from_ms {
            // The first whole day at or after `from`.
            select
                .push(" AND day_ms >= ")
                .push_bind(day_of(from + DAY_MS - 1));
        }
        if let Some(to) = filter.to_ms {
            select
                .push(" AND day_ms <= ")
                .push_bind(to.saturating_sub(DAY_MS));
        }
        select.push(" ORDER BY day_ms");
        select.build_query_scalar().fetch_all(p).await
    })
    .context("reading which days are folded")?;
    let mut ranges: Vec<(i64, i64)> = Vec::new();
    for day in days {
        match ranges.last_mut() {
            Some(last) if last.1 == day => last.1 = day + DAY_MS,
            _ => ranges.push((day, day + DAY_MS)),
        }
    }
    if ranges.len() > MOST_RANGES {
        ranges.sort_by_key(|r| std::cmp::Reverse(r.1 - r.0));
        ranges.truncate(MOST_RANGES);
        ranges.sort_unstable();
    }
    Ok(ranges)
}

/// Sends the folds of the days in `days` (from [`folded_days`]) matching `filter`'s
/// dimensions to `out` in batches of up to `batch`, with their values of `group_by` as
/// text; stops early, without an error, when the receiver is gone.
pub(super) async fn summary_folds(
    pool: &Pool,
    filter: &Filter,
    days: &[(i64, i64)],
    group_by: &[Dimension],
    out: &tokio::sync::mpsc::Sender<Vec<Piece>>,
    batch: usize,
) -> anyhow::Result<()> {
    if days.is_empty() {
        return Ok(());
    }
    let batch = batch.max(1);
    let mut pieces = Vec::with_capacity(batch);
    with_pool!(pool, |p| {
        let mut select = QueryBuilder::new("SELECT fold");
        for dimension in group_by {
            select.push(", ").push(dimension.name());
        }
        // Of each day, the rows that merge every varying dimension the summary does not
        // name, and no other.
        select.push(" FROM folds");
        // Always a condition on the days, so more follow with AND.
        filter.push_where_days(&mut select, days);
        select
            .push(" AND merged = (SELECT varies FROM days WHERE days.day_ms = folds.day_ms) & ")
            .push_bind(ALL_VARYING & !named(filter, group_by));
        let mut rows = select.build().fetch(p);
        while let Some(row) = rows.try_next().await? {
            let bytes: Vec<u8> = row.try_get(0)?;
            let fold = Fold::decode(&bytes).context("a day's fold")?;
            pieces.push(Piece::Fold(
                super::dimensions::group_values(&row, 1, group_by)?,
                Box::new(fold),
            ));
            if pieces.len() == batch {
                let full = std::mem::replace(&mut pieces, Vec::with_capacity(batch));
                if out.send(full).await.is_err() {
                    return Ok(());
                }
            }
        }
        if !pieces.is_empty() {
            let _ = out.send(pieces).await;
        }
        anyhow::Ok(())
    })
}
