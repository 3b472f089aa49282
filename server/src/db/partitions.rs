//! PostgreSQL keeps `samples` in monthly partitions on `received_at_ms` (UTC months), so
//! a year of a busy collector's requests is twelve tables, and dropping a month is
//! dropping a table rather than deleting a hundred million rows one by one.
//!
//! The collector creates the partitions of this month and the next [`MONTHS_AHEAD`] when
//! it starts and every [`PREPARE_EVERY`] after. A sample outside every monthly partition
//! (a clock far off, or a month whose partition is not made yet) lands in the default
//! partition `samples_default`, never refused; when that month's partition is made, its
//! rows move into it in the same transaction.
//!
//! An age purge that takes every run before a date (`purge?to=…&include_demo=true`) drops
//! the partitions wholly before it and deletes the rest row by row.

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

    /// The partition's table name: `samples_2026_12`.
    pub fn table(self) -> String {
        format!("samples_{:04}_{:02}", self.year, self.month)
    }

    /// The month of a partition's table name, when it is one.
    pub fn from_table(name: &str) -> Option<Self> {
        let rest = name.strip_prefix("samples_")?;
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
        if create(pool, month).await? {
            made.push(month.table());
        }
        month = month.next();
    }
    Ok(made)
}

/// Makes `month`'s partition unless it exists, moving its rows out of the default
/// partition; whether it made it.
pub async fn create(pool: &PgPool, month: Month) -> anyhow::Result<bool> {
    let (table, from, to) = (month.table(), month.start_ms(), month.next().start_ms());
    let mut tx = pool.begin().await?;
    lock(&mut tx).await?;
    let exists: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
        .bind(&table)
        .fetch_one(&mut *tx)
        .await?;
    if exists {
        return Ok(false);
    }
    let stranded: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM samples_default \
         WHERE received_at_ms >= $1 AND received_at_ms < $2)",
    )
    .bind(from)
    .bind(to)
    .fetch_one(&mut *tx)
    .await?;
    if stranded {
        // The default partition holds rows of this month: a partition cannot be made
        // over them, so they move into a table of their own, which then becomes it.
        sqlx::query(&format!(
            "CREATE TABLE {table} (LIKE samples INCLUDING DEFAULTS)"
        ))
        .execute(&mut *tx)
        .await?;
        sqlx::query(&format!(
            "WITH moved AS (DELETE FROM samples_default \
             WHERE received_at_ms >= {from} AND received_at_ms < {to} RETURNING *) \
             INSERT INTO {table} SELECT * FROM moved"
        ))
        .execute(&mut *tx)
        .await
        .with_context(|| format!("moving {table}'s rows out of the default partition"))?;
        sqlx::query(&format!(
            "ALTER TABLE samples ATTACH PARTITION {table} FOR VALUES FROM ({from}) TO ({to})"
        ))
        .execute(&mut *tx)
        .await?;
    } else {
        sqlx::query(&format!(
            "CREATE TABLE {table} PARTITION OF samples FOR VALUES FROM ({from}) TO ({to})"
        ))
        .execute(&mut *tx)
        .await?;
    }
    tx.commit()
        .await
        .with_context(|| format!("making the partition {table}"))?;
    tracing::info!(partition = table, "made a monthly partition of samples");
    Ok(true)
}

/// Waits for the other collectors' partition changes; held until `tx` ends.
async fn lock(tx: &mut sqlx::Transaction<'_, sqlx::Postgres>) -> anyhow::Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(LOCK)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The monthly partitions there are, oldest first.
pub async fn months(pool: &PgPool) -> anyhow::Result<Vec<Month>> {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::TEXT FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
         WHERE i.inhparent = to_regclass('samples')",
    )
    .fetch_all(pool)
    .await?;
    let mut months: Vec<Month> = names.iter().filter_map(|n| Month::from_table(n)).collect();
    months.sort();
    Ok(months)
}

/// Drops the monthly partitions that end at or before `to_ms`; the tables dropped. Their
/// runs stay for the caller to delete (with what remains of theirs elsewhere).
pub async fn drop_before(pool: &PgPool, to_ms: i64) -> anyhow::Result<Vec<String>> {
    let mut dropped = Vec::new();
    for month in months(pool).await? {
        if month.next().start_ms() > to_ms {
            break;
        }
        let mut tx = pool.begin().await?;
        lock(&mut tx).await?;
        sqlx::query(&format!("DROP TABLE IF EXISTS {}", month.table()))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        dropped.push(month.table());
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
        assert_eq!(december.table(), "samples_2026_12");
        assert_eq!(Month::from_table("samples_2026_12"), Some(december));
        for name in [
            "samples_default",
            "samples_2026_13",
            "samples_2026_1",
            "runs",
        ] {
            assert_eq!(Month::from_table(name), None, "{name}");
        }
    }
}
