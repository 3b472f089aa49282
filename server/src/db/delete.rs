//! Deleting runs: one by its delete token, or every run a filter matches (an age purge
//! on PostgreSQL drops whole months as tables). A run goes with its record, its cells
//! and its id in one transaction, and the folds of its day with it (they hold its
//! histograms; the day is read from its cells until folded again). Each transaction
//! takes SQLite's write lock at its start ([`BeginWrite`]): it reads before it writes.

use sqlx::QueryBuilder;

use super::{
    BeginWrite, Deleted, DemoSamples, Filter, Pool, constant_time_eq, days, filter, partitions,
    sha256_hex,
};

/// Deletes a run (its record and its cells; its id stays as a tombstone, so the same
/// record is never stored again) when `token` is the one its upload was answered with.
pub(super) async fn delete_run(pool: &Pool, run_id: &str, token: &str) -> anyhow::Result<Deleted> {
    let token_sha = sha256_hex(token.as_bytes());
    with_pool!(pool, |pool| {
        let mut tx = pool.begin_write().await?;
        let mut select = QueryBuilder::new(
            "SELECT delete_token_sha256, received_at_ms FROM runs WHERE run_id = ",
        );
        select.push_bind(run_id.to_owned());
        let stored: Option<(Option<String>, i64)> =
            select.build_query_as().fetch_optional(&mut *tx).await?;
        let outcome = match stored {
            None => Deleted::NotFound,
            Some((Some(sha), received_at_ms))
                if constant_time_eq(sha.as_bytes(), token_sha.as_bytes()) =>
            {
                // Its day's folds hold it: they go, the day back to its cells.
                for mut statement in days::forget(vec![received_at_ms]) {
                    statement.build().execute(&mut *tx).await?;
                }
                for table in ["cells", "runs", "run_sources"] {
                    let mut delete =
                        QueryBuilder::new(format!("DELETE FROM {table} WHERE run_id = "));
                    delete.push_bind(run_id.to_owned());
                    delete.build().execute(&mut *tx).await?;
                }
                // The id stays, as a tombstone: the record sent again is refused.
                let mut tombstone = QueryBuilder::new("UPDATE run_ids SET deleted_at_ms = ");
                tombstone.push_bind(super::now_ms());
                tombstone.push(" WHERE run_id = ");
                tombstone.push_bind(run_id.to_owned());
                tombstone.build().execute(&mut *tx).await?;
                Deleted::Deleted
            }
            Some(_) => Deleted::WrongToken,
        };
        tx.commit().await?;
        Ok(outcome)
    })
}

/// Runs deleted by one statement of a filtered purge.
const PURGED_AT_ONCE: usize = 500;

/// Deletes every run with a sample matching `filter` (its record, its cells and its
/// id); returns how many runs went. A filter of only an end date, demo runs included,
/// takes every run received before it (with no samples too), and on PostgreSQL drops
/// the months wholly before it.
pub(super) async fn purge(pool: &Pool, filter: &Filter) -> anyhow::Result<u64> {
    // Every run before a date: on PostgreSQL the months wholly before it go as
    // tables first; the rest, row by row.
    if let Some(to) = filter.to_ms
        && filter.source_tags.is_none()
        && filter.equals.is_empty()
        && filter.from_ms.is_none()
        && filter.demo == DemoSamples::Include
    {
        let mut purged = 0;
        if let Pool::Postgres(pg) = pool {
            let dropped = partitions::drop_before(pg, to).await?;
            if !dropped.tables.is_empty() {
                tracing::info!(tables = ?dropped.tables, runs = dropped.runs,
                    "purge dropped whole months");
            }
            purged += dropped.runs;
        }
        return with_pool!(pool, |pool| {
            let mut tx = pool.begin_write().await?;
            // The days wholly before `to` go with their folds; the day `to` falls in
            // loses its folds (they hold purged runs) and goes back to its cells.
            let mut delete = QueryBuilder::new("DELETE FROM folds WHERE day_ms < ");
            delete.push_bind(to);
            delete.build().execute(&mut *tx).await?;
            let mut delete = QueryBuilder::new("DELETE FROM days WHERE day_ms <= ");
            delete.push_bind(to.saturating_sub(days::DAY_MS));
            delete.build().execute(&mut *tx).await?;
            let mut touch =
                QueryBuilder::new("UPDATE days SET changes = changes + 1 WHERE day_ms = ");
            touch.push_bind(days::day_of(to - 1));
            touch.build().execute(&mut *tx).await?;
            for table in ["cells", "runs", "run_ids", "run_sources"] {
                let mut delete =
                    QueryBuilder::new(format!("DELETE FROM {table} WHERE received_at_ms < "));
                delete.push_bind(to);
                let deleted = delete.build().execute(&mut *tx).await?.rows_affected();
                if table == "runs" {
                    purged += deleted;
                }
            }
            tx.commit().await?;
            Ok(purged)
        });
    }
    // A sample matches exactly when its cell does (a cell's samples share every
    // column a filter names), so the runs are chosen by their cells, once: every table
    // then loses exactly those runs. Chosen again by each statement, on PostgreSQL (read
    // committed) an upload committed between two of them lost its id but kept its
    // record, or its record but not its cells.
    with_pool!(pool, |pool| {
        let mut tx = pool.begin_write().await?;
        let mut choose = match &filter.source_tags {
            // One source's runs, every one (those without samples too), unless the
            // filter narrows them by their samples.
            Some(tags) if !filter.narrows_samples() => {
                let mut choose = QueryBuilder::new("SELECT run_id FROM run_sources");
                filter::push_tags(&mut choose, " WHERE ", tags);
                choose
            }
            _ => {
                let mut choose = QueryBuilder::new("SELECT DISTINCT run_id FROM cells");
                filter.push_where(&mut choose);
                choose
            }
        };
        let chosen: Vec<String> = choose.build_query_scalar().fetch_all(&mut *tx).await?;
        let mut purged = 0;
        for ids in chosen.chunks(PURGED_AT_ONCE) {
            let of_these = |start: &str| {
                let mut query = QueryBuilder::new(start);
                query.push(" WHERE run_id IN (");
                let mut list = query.separated(", ");
                for id in ids {
                    list.push_bind(id.clone());
                }
                query.push(")");
                query
            };
            // The folds of the days of the runs going hold them: they go, the days
            // back to their cells.
            let days: Vec<i64> = of_these(&format!(
                "SELECT DISTINCT (received_at_ms / {day}) * {day} FROM runs",
                day = days::DAY_MS
            ))
            .build_query_scalar()
            .fetch_all(&mut *tx)
            .await?;
            for mut statement in days::forget(days) {
                statement.build().execute(&mut *tx).await?;
            }
            for table in ["cells", "runs", "run_ids", "run_sources"] {
                let deleted = of_these(&format!("DELETE FROM {table}"))
                    .build()
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if table == "runs" {
                    purged += deleted;
                }
            }
        }
        tx.commit().await?;
        Ok(purged)
    })
}
