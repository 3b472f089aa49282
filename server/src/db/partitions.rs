//! PostgreSQL keeps `runs` and `cells` in monthly partitions on `received_at_ms` (UTC
//! months): `runs_2026_12` and `cells_2026_12`. A year of a busy collector's runs is
//! twelve tables of each, and dropping a month is dropping two tables rather than
//! deleting a million runs (and their records) one by one.
//!
//! The collector creates the partitions of this month and the next [`MONTHS_AHEAD`] when
//! it starts and every [`PREPARE_EVERY`] after. A run outside every monthly partition (a
//! clock far off, or a month whose partition is not made yet) lands in the default
//! partitions `runs_default` and `cells_default`, never refused; when that month's
//! partitions are made, its rows move into them in the same transaction.
//!
//! An age purge that takes every run before a date (`purge?to=…&include_demo=true`) drops
//! the months wholly before it and deletes the rest row by row. `run_ids`, which keeps
//! each run's id unique across the months, is one small row per run and is not
//! partitioned: the purge deletes its rows.

use std::time::Duration;

use anyhow::Context;
use sqlx::PgPool;
use time::{Date, Month as CalendarMonth, OffsetDateTime};

/// Months made ahead of the current one.
pub const MONTHS_AHEAD: u32 = 2;
/// How often a running collector makes the months ahead.
pub const PREPARE_EVERY: Duration = Duration::from_secs(3600);
/// Serialises partition changes between collectors sharing the database.
const LOCK: i64 = 0x00f1_257f_7061_7274;
/// The partitioned tables, each with a partition per month: a month's runs and their
/// cells come and go together. Cells are dropped before runs.
pub const TABLES: [&str; 2] = ["cells", "runs"];

/// A calendar month in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Month {
    pub year: i32,
    pub month: u8,
}

impl Month {
    /// The month `ms` (Unix milliseconds) falls in.
    pub fn of(ms: i64) -> Self {
        let at = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        Self {
            year: at.year(),
            month: u8::from(at.month()),
        }
    }

    pub fn next(self) -> Self {
        if self.month == 12 {
            Self {
                year: self.year + 1,
                month: 1,
            }
        } else {
            Self {
                year: self.year,
                month: self.month + 1,
            }
        }
    }

    /// Its first millisecond (Unix).
    pub fn start_ms(self) -> i64 {
        let month = CalendarMonth::try_from(self.month).unwrap_or(CalendarMonth::January);
        Date::from_calendar_date(self.year, month, 1)
            .map(|d| d.midnight().assume_utc().unix_timestamp() * 1000)
            .unwrap_or(0)
    }

    /// The name of `parent`'s partition for this month: `runs_2026_12`.
    pub fn table(self, parent: &str) -> String {
        format!("{parent}_{:04}_{:02}", self.year, self.month)
    }

    /// The month of one of `parent`'s partitions, by its name, when it is one.
    pub fn from_table(parent: &str, name: &str) -> Option<Self> {
        let rest = name.strip_prefix(parent)?.strip_prefix('_')?;
        let (year, month) = rest.split_once('_')?;
        let (year, month) = (year.parse().ok()?, month.parse().ok()?);
        (year > 0 && (1..=12).contains(&month) && rest.len() == 7).then_some(Self { year, month })
    }
}

/// Makes the partitions of `now_ms`'s month and the [`MONTHS_AHEAD`] after it; the tables
/// it made.
pub async fn prepare(pool: &PgPool, now_ms: i64) -> anyhow::Result<Vec<String>> {
    let mut month = Month::of(now_ms);
    let mut made = Vec::new();
    for _ in 0..=MONTHS_AHEAD {
        made.extend(create(pool, month).await?);
        month = month.next();
    }
    Ok(made)
}

/// Makes `month`'s partitions of [`TABLES`] unless they exist, moving their rows out of
/// the default partitions; the tables it made.
pub async fn create(pool: &PgPool, month: Month) -> anyhow::Result<Vec<String>> {
    let (from, to) = (month.start_ms(), month.next().start_ms());
    let mut tx = pool.begin().await?;
    lock(&mut tx).await?;
    let mut made = Vec::new();
    for parent in TABLES {
        let table = month.table(parent);
        let exists: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
            .bind(&table)
            .fetch_one(&mut *tx)
            .await?;
        if exists {
            continue;
        }
        let stranded: bool = sqlx::query_scalar(&format!(
            "SELECT EXISTS (SELECT 1 FROM {parent}_default \
             WHERE received_at_ms >= $1 AND received_at_ms < $2)"
        ))
        .bind(from)
        .bind(to)
        .fetch_one(&mut *tx)
        .await?;
        if stranded {
            // The default partition holds rows of this month: a partition cannot be made
            // over them, so they move into a table of their own, which then becomes it
            // (with the parent's storage settings, as PARTITION OF would give it).
            sqlx::query(&format!(
                "CREATE TABLE {table} \
                 (LIKE {parent} INCLUDING DEFAULTS INCLUDING STORAGE INCLUDING COMPRESSION)"
            ))
            .execute(&mut *tx)
            .await?;
            sqlx::query(&format!(
                "WITH moved AS (DELETE FROM {parent}_default \
                 WHERE received_at_ms >= {from} AND received_at_ms < {to} RETURNING *) \
                 INSERT INTO {table} SELECT * FROM moved"
            ))
            .execute(&mut *tx)
            .await
            .with_context(|| format!("moving {table}'s rows out of the default partition"))?;
            sqlx::query(&format!(
                "ALTER TABLE {parent} ATTACH PARTITION {table} FOR VALUES FROM ({from}) TO ({to})"
            ))
            .execute(&mut *tx)
            .await?;
        } else {
            sqlx::query(&format!(
                "CREATE TABLE {table} PARTITION OF {parent} FOR VALUES FROM ({from}) TO ({to})"
            ))
            .execute(&mut *tx)
            .await?;
        }
        made.push(table);
    }
    tx.commit()
        .await
        .with_context(|| format!("making the partitions of {month:?}"))?;
    if !made.is_empty() {
        tracing::info!(partitions = ?made, "made monthly partitions");
    }
    Ok(made)
}

/// Waits for the other collectors' partition changes; held until `tx` ends.
async fn lock(tx: &mut sqlx::Transaction<'_, sqlx::Postgres>) -> anyhow::Result<()> {
    advisory_lock(tx, LOCK).await
}

/// Waits for the other collectors holding the advisory lock `key`; held until `tx` ends.
pub(super) async fn advisory_lock(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    key: i64,
) -> anyhow::Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(key)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The months `runs` is partitioned into, oldest first.
pub async fn months(pool: &PgPool) -> anyhow::Result<Vec<Month>> {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::TEXT FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
         WHERE i.inhparent = to_regclass('runs')",
    )
    .fetch_all(pool)
    .await?;
    let mut months: Vec<Month> = names
        .iter()
        .filter_map(|n| Month::from_table("runs", n))
        .collect();
    months.sort();
    Ok(months)
}

/// What dropping whole months took.
#[derive(Debug, Default)]
pub struct Dropped {
    /// The tables dropped.
    pub tables: Vec<String>,
    /// The runs they held.
    pub runs: u64,
}

/// Drops the monthly partitions that end at or before `to_ms`, each month's cells and
/// runs in one transaction. The ids of their runs stay in `run_ids` for the caller to
/// delete, with the rows before `to_ms` left in the months it did not drop.
pub async fn drop_before(pool: &PgPool, to_ms: i64) -> anyhow::Result<Dropped> {
    let mut dropped = Dropped::default();
    for month in months(pool).await? {
        if month.next().start_ms() > to_ms {
            break;
        }
        let mut tx = pool.begin().await?;
        lock(&mut tx).await?;
        let runs = month.table("runs");
        let held: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {runs}"))
            .fetch_one(&mut *tx)
            .await
            .with_context(|| format!("counting the runs in {runs}"))?;
        // The month's live bytes leave the storage count with it (`db/storage.rs`).
        sqlx::query(&format!(
            "INSERT INTO stored_bytes (bytes) SELECT              - (SELECT COALESCE(SUM(stored_run_bytes(record, record_lz4)), 0) FROM {runs})              - (SELECT COALESCE(SUM(stored_cell_bytes(ttft, e2e, indexes, errors)), 0) FROM {cells})",
            cells = month.table("cells"),
        ))
        .execute(&mut *tx)
        .await
        .with_context(|| format!("counting the bytes {runs} held"))?;
        for parent in TABLES {
            sqlx::query(&format!("DROP TABLE IF EXISTS {}", month.table(parent)))
                .execute(&mut *tx)
                .await?;
        }
        // The month's days and their folds: a few rows each, made from what just went.
        for table in ["folds", "days"] {
            sqlx::query(&format!(
                "DELETE FROM {table} WHERE day_ms >= $1 AND day_ms < $2"
            ))
            .bind(month.start_ms())
            .bind(month.next().start_ms())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        dropped.runs += held.max(0) as u64;
        dropped
            .tables
            .extend(TABLES.iter().map(|parent| month.table(parent)));
    }
    Ok(dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_in_utc() {
        // 2026-12-04T23:59:59.999Z, and the first millisecond of 2027.
        let december = Month::of(1_796_428_799_999);
        assert_eq!(
            december,
            Month {
                year: 2026,
                month: 12
            }
        );
        assert_eq!(
            december.next(),
            Month {
                year: 2027,
                month: 1
            }
        );
        assert_eq!(december.next().start_ms(), 1_798_761_600_000);
        assert_eq!(Month::of(1_798_761_600_000), december.next());
        assert_eq!(Month::of(1_798_761_599_999), december);
        assert_eq!(december.table("runs"), "runs_2026_12");
        assert_eq!(Month::from_table("runs", "runs_2026_12"), Some(december));
        assert_eq!(Month::from_table("cells", "cells_2026_12"), Some(december));
        for name in [
            "runs_default",
            "runs_2026_13",
            "runs_2026_1",
            "cells_2026_12",
            "runs",
        ] {
            assert_eq!(Month::from_table("runs", name), None, "{name}");
        }
    }
}
