//! The crowd's dimensions as the collector stores them, all made from the one table
//! (`firsttoken_crowd::summary::Dimension`): a column of `cells` and of `folds` each,
//! named as the dimension; keys holding a value per dimension, at its index; the column
//! lists of inserts and selects; and the bits of `days.varies` and `folds.merged`, one
//! per dimension that may differ within a run, in the table's order, then one for the
//! demo target.
//!
//! [`ensure`] is the migration the table makes: when the collector starts, after sqlx's
//! migrations, it compares the table with the one the database was last made for (the
//! `dimensions` table), adds each missing column to `cells` and `folds`, and then lets
//! what was made from the old table go: the cells of every run when a column was added
//! (remade from the records before the collector serves, `cells::rebuild_missing`), and
//! every day's folds (remade by the fold job; summaries read cells meanwhile).

use anyhow::Context;
use firsttoken_crowd::summary::{Dimension, Kind};
use sqlx::query_builder::Separated;
use sqlx::{Database, Encode, QueryBuilder, Row, Type};

use super::{Pool, Value};

/// A value of each dimension, at [`Dimension::index`]; `None` where there is none, and
/// in a fold's key where the dimension is merged.
pub(super) type Values = Vec<Option<Value>>;

/// The dimensions' columns, in the table's order, for a column list.
pub(super) fn columns() -> String {
    Dimension::ALL.map(Dimension::name).join(", ")
}

/// How many dimensions may differ within a run.
const fn varying_count() -> usize {
    let mut count = 0;
    let mut at = 0;
    while at < Dimension::ALL.len() {
        if Dimension::ALL[at].spec().within_run {
            count += 1;
        }
        at += 1;
    }
    count
}

/// The bit of `varies` and `merged` for the demo target, after the dimensions' bits.
pub(super) const DEMO: i64 = 1 << varying_count();
/// Every bit of `varies` and `merged`.
pub(super) const ALL_VARYING: i64 = (DEMO << 1) - 1;

/// The dimensions that may differ within a run, each with its bit of `varies` and
/// `merged`.
pub(super) fn varying() -> impl Iterator<Item = (Dimension, i64)> {
    Dimension::ALL
        .into_iter()
        .filter(|d| d.within_run())
        .enumerate()
        .map(|(bit, d)| (d, 1 << bit))
}

/// Binds `value` as a value of a dimension of `kind` (its NULL typed by the kind).
pub(super) fn bind<'a, DB: Database>(
    row: &mut Separated<'_, 'a, DB, &'static str>,
    kind: Kind,
    value: Option<&Value>,
) where
    Option<String>: 'a + Encode<'a, DB> + Type<DB>,
    Option<bool>: 'a + Encode<'a, DB> + Type<DB>,
    Option<i64>: 'a + Encode<'a, DB> + Type<DB>,
{
    match (value, kind) {
        (Some(Value::Text(text)), _) => row.push_bind(Some(text.clone())),
        (Some(Value::Bool(flag)), _) => row.push_bind(Some(*flag)),
        (Some(Value::Int(number)), _) => row.push_bind(Some(*number)),
        (None, Kind::Text) => row.push_bind(None::<String>),
        (None, Kind::Bool) => row.push_bind(None::<bool>),
        (None, Kind::Int) => row.push_bind(None::<i64>),
    };
}

/// Reads the value of a dimension of `kind` from column `at` of `row`.
pub(super) fn read<R>(row: &R, at: usize, kind: Kind) -> Result<Option<Value>, sqlx::Error>
where
    R: Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<bool>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    Ok(match kind {
        Kind::Text => row.try_get::<Option<String>, _>(at)?.map(Value::Text),
        Kind::Bool => row.try_get::<Option<bool>, _>(at)?.map(Value::Bool),
        Kind::Int => row.try_get::<Option<i64>, _>(at)?.map(Value::Int),
    })
}

/// A value as a summary's group key holds it: booleans as `true`/`false`, numbers in
/// decimal, none as "".
pub(super) fn text(value: Option<Value>) -> String {
    match value {
        None => String::new(),
        Some(Value::Text(text)) => text,
        Some(Value::Bool(flag)) => flag.to_string(),
        Some(Value::Int(number)) => number.to_string(),
    }
}

/// The values of `group_by` in the columns from `first` on, as text (booleans as
/// `true`/`false`, numbers in decimal, absent as "").
pub(super) fn group_values<R>(
    row: &R,
    first: usize,
    group_by: &[Dimension],
) -> Result<Vec<String>, sqlx::Error>
where
    R: Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<bool>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    group_by
        .iter()
        .enumerate()
        .map(|(i, d)| Ok(text(read(row, first + i, d.kind())?)))
        .collect()
}

/// A row of the `dimensions` table: position, name, kind, whether it varies within runs.
type Stored = (i64, String, String, bool);

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Text => "text",
        Kind::Bool => "bool",
        Kind::Int => "int",
    }
}

/// The table as the `dimensions` table keeps it.
fn wanted() -> Vec<Stored> {
    Dimension::ALL
        .into_iter()
        .enumerate()
        .map(|(at, d)| {
            let name = d.name().to_owned();
            (
                at as i64,
                name,
                kind_name(d.kind()).to_owned(),
                d.within_run(),
            )
        })
        .collect()
}

/// What [`ensure`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ensured {
    /// Columns added, as `table.column`.
    pub added: Vec<String>,
    /// Whether the folds were let go (the table differed from the database's).
    pub refold: bool,
}

/// Brings the `cells` and `folds` tables to the dimension table (see the module's
/// comment). Collectors starting together on one PostgreSQL database take turns.
pub(super) async fn ensure(pool: &Pool) -> anyhow::Result<Ensured> {
    let postgres = matches!(pool, Pool::Postgres(_));
    let wanted = wanted();
    with_pool!(pool, |p| async {
        let mut tx = p.begin().await?;
        if postgres {
            sqlx::query("LOCK TABLE dimensions IN EXCLUSIVE MODE")
                .execute(&mut *tx)
                .await?;
        }
        let stored: Vec<Stored> = sqlx::query_as(
            "SELECT position, name, kind, within_run FROM dimensions ORDER BY position",
        )
        .fetch_all(&mut *tx)
        .await
        .context("reading the dimensions the database was made for")?;
        if stored == wanted {
            return anyhow::Ok(Ensured::default());
        }
        let mut ensured = Ensured {
            added: Vec::new(),
            refold: true,
        };
        for table in ["cells", "folds"] {
            let mut have = QueryBuilder::new(if postgres {
                "SELECT column_name::TEXT FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = "
            } else {
                "SELECT name FROM pragma_table_info("
            });
            have.push_bind(table).push(if postgres { "" } else { ")" });
            let have: Vec<String> = have
                .build_query_scalar()
                .fetch_all(&mut *tx)
                .await
                .with_context(|| format!("reading the columns of {table}"))?;
            for d in Dimension::ALL {
                if have.iter().any(|c| c == d.name()) {
                    continue;
                }
                let sql_type = match (d.kind(), postgres) {
                    (Kind::Text, _) => "TEXT",
                    (Kind::Bool, true) => "BOOLEAN",
                    (Kind::Int, true) => "BIGINT",
                    (Kind::Bool | Kind::Int, false) => "INTEGER",
                };
                let add = format!("ALTER TABLE {table} ADD COLUMN {} {sql_type}", d.name());
                sqlx::query(&add)
                    .execute(&mut *tx)
                    .await
                    .with_context(|| format!("adding the column {}.{}", table, d.name()))?;
                ensured.added.push(format!("{table}.{}", d.name()));
            }
        }
        if ensured.added.iter().any(|c| c.starts_with("cells.")) {
            // Every cell lacks the new value: remade from the records before serving.
            sqlx::query("DELETE FROM cells").execute(&mut *tx).await?;
        }
        // The folds' bits and columns follow the table: made again by the fold job.
        sqlx::query("DELETE FROM folds").execute(&mut *tx).await?;
        sqlx::query("UPDATE days SET folded = NULL, varies = NULL")
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM dimensions")
            .execute(&mut *tx)
            .await?;
        let mut insert =
            QueryBuilder::new("INSERT INTO dimensions (position, name, kind, within_run) ");
        insert.push_values(&wanted, |mut row, (at, name, kind, within_run)| {
            row.push_bind(*at)
                .push_bind(name.clone())
                .push_bind(kind.clone())
                .push_bind(*within_run);
        });
        insert.build().execute(&mut *tx).await?;
        tx.commit().await?;
        if !ensured.added.is_empty() {
            tracing::info!(
                columns = ?ensured.added,
                "added the columns of new dimensions: every run's cells are made again from its record"
            );
        }
        tracing::info!("the crowd's dimensions are not those the folds were made for: every day is folded again");
        anyhow::Ok(ensured)
    }
    .await)
    .context("bringing the cells and folds to the crowd's dimensions")
}
