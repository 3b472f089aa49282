//! How much the collector stores, for its storage limit (`--max-storage-bytes`): live
//! data, so a delete or a purge frees what it deleted.
//!
//! - SQLite: the file's pages in use, not those on its free list (a delete frees pages
//!   there, and new rows reuse them).
//! - PostgreSQL: the live bytes of runs and cells, counted by triggers in the
//!   transactions that write and delete them (`migrations/postgres/0015_stored_bytes.sql`:
//!   each row's record or sketches and a fixed amount for the rest of it), and the other
//!   tables' size on disk (run ids, days and folds, sources: a few hundred bytes a run).
//!   A table's size on disk would not do for runs and cells: it shrinks only when whole
//!   months are dropped, so a store filled with junk stayed full after a purge.

use super::{Db, Pool};

/// Serialises the collectors folding the rows of `stored_bytes` (an advisory lock's key).
const FOLDING: i64 = 0x00f1_257f_0062_7974;

impl Db {
    /// Bytes the stored data takes (see the module's notes). On PostgreSQL this also folds
    /// the rows the triggers added since into the first row, so the count stays one
    /// small sum.
    pub async fn storage_bytes(&self) -> anyhow::Result<u64> {
        let bytes: i64 = match self.pool() {
            Pool::Sqlite(pool) => {
                sqlx::query_scalar(
                    "SELECT ((SELECT page_count FROM pragma_page_count()) \
                     - (SELECT freelist_count FROM pragma_freelist_count())) \
                     * (SELECT page_size FROM pragma_page_size())",
                )
                .fetch_one(pool)
                .await?
            }
            Pool::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                // One collector folds at a time: two would each wait for rows the other
                // holds.
                super::partitions::advisory_lock(&mut tx, FOLDING).await?;
                sqlx::query(
                    "WITH first AS (SELECT MIN(id) AS id FROM stored_bytes), \
                     gone AS (DELETE FROM stored_bytes WHERE id > (SELECT id FROM first) \
                              RETURNING bytes) \
                     UPDATE stored_bytes SET bytes = bytes + (SELECT COALESCE(SUM(bytes), 0) FROM gone) \
                     WHERE id = (SELECT id FROM first)",
                )
                .execute(&mut *tx)
                .await?;
                let bytes = sqlx::query_scalar(
                    "SELECT ((SELECT COALESCE(SUM(bytes), 0) FROM stored_bytes) \
                     + COALESCE(pg_total_relation_size(to_regclass('run_ids')), 0) \
                     + COALESCE(pg_total_relation_size(to_regclass('days')), 0) \
                     + COALESCE(pg_total_relation_size(to_regclass('folds')), 0) \
                     + COALESCE(pg_total_relation_size(to_regclass('run_sources')), 0))::BIGINT",
                )
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                bytes
            }
        };
        Ok(bytes.max(0) as u64)
    }
}
