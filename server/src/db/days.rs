//! The `days` table's count of changes: every transaction that stores or deletes a run
//! (or remakes its cells) counts a change to the run's day, and a day's folds are read
//! only while its count is the one they were made at (`folds.rs`).

use sqlx::{Database, Encode, QueryBuilder, Type};

/// A day, in milliseconds.
pub const DAY_MS: i64 = 86_400_000;
/// A day is folded once it has been over for this long (uploads in flight at midnight
/// land first; one landing later only sends the day back to its cells for a while).
pub const SETTLE_MS: i64 = 10 * 60 * 1000;

/// The UTC day `ms` falls in, by its first millisecond.
pub fn day_of(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS) * DAY_MS
}

/// The statement that counts a change to each of `days` (first milliseconds, any order,
/// repeats allowed); `None` without days.
pub(super) fn touch<'a, DB: Database>(
    days: impl IntoIterator<Item = i64>,
) -> Option<QueryBuilder<'a, DB>>
where
    i64: 'a + Encode<'a, DB> + Type<DB>,
{
    let mut days: Vec<i64> = days.into_iter().map(day_of).collect();
    days.sort_unstable();
    days.dedup();
    if days.is_empty() {
        return None;
    }
    let mut upsert = QueryBuilder::new("INSERT INTO days (day_ms, changes) ");
    upsert.push_values(days, |mut row, day| {
        row.push_bind(day).push("1");
    });
    upsert.push(" ON CONFLICT (day_ms) DO UPDATE SET changes = days.changes + 1");
    Some(upsert)
}

/// The statements that count a change to each of `days` and delete their folds, for a
/// transaction that deletes runs received on them: the runs' ids and histograms go with
/// them, not at the next folding.
pub(super) fn forget<'a, DB: Database>(days: Vec<i64>) -> Vec<QueryBuilder<'a, DB>>
where
    i64: 'a + Encode<'a, DB> + Type<DB>,
{
    let mut days: Vec<i64> = days.into_iter().map(day_of).collect();
    days.sort_unstable();
    days.dedup();
    let Some(touch) = touch(days.iter().copied()) else {
        return Vec::new();
    };
    let mut delete = QueryBuilder::new("DELETE FROM folds WHERE day_ms IN (");
    let mut list = delete.separated(", ");
    for day in days {
        list.push_bind(day);
    }
    delete.push(")");
    vec![touch, delete]
}
