//! How each database takes a transaction's sample rows. The columns and their values come
//! from core's one definition of a row (`firsttoken_core::export::COLUMNS`).
//!
//! - SQLite: multi-row `INSERT … VALUES` of 128, 64, 32, … or 1 rows
//!   (`super::statements`), each size prepared once per connection and kept. SQLite runs
//!   in the collector's process, and has one writer.
//! - PostgreSQL: one `INSERT … SELECT * FROM UNNEST($1::text[], $2::bigint[], …)` with an
//!   array per column, whatever the number of rows. Multi-row `VALUES` of up to 32,766
//!   parameters were parsed and planned anew for every statement; a statement of 33
//!   arrays is the same text every time, so it is prepared once per connection and kept.
//!   It took PostgreSQL's CPU per 100-sample upload from about 3,450 to 1,900 µs (README,
//!   Figures).

use std::future::Future;

use anyhow::{Context, bail};
use firsttoken_core::export::{self, Line, Value};
use firsttoken_core::{Run, Sample};
use sqlx::QueryBuilder;

use super::statements;

/// One sample row to store: its run, the sample, and when the run was received.
pub(super) type Row<'a> = (&'a Run, &'a Sample, i64);

/// The most sample rows one SQLite INSERT carries (`super::statements`): a transaction
/// of eight 100-sample runs takes seven statements, each prepared once per connection.
const SQLITE_ROWS_PER_INSERT: usize = 128;
const _: () = assert!(SQLITE_ROWS_PER_INSERT * export::STORED_COUNT <= 32_766);

/// A connection that can store sample rows.
pub(super) trait InsertSamples {
    fn insert_samples<'c>(
        &'c mut self,
        rows: &'c [Row<'c>],
    ) -> impl Future<Output = anyhow::Result<()>> + Send + 'c;
}

fn line<'a>((run, sample, received_at_ms): &Row<'a>) -> Line<'a> {
    Line {
        run,
        sample,
        received_at_ms: Some(*received_at_ms),
    }
}

fn stored_names() -> Vec<&'static str> {
    export::stored_columns()
        .filter_map(|c| c.stored_as)
        .collect()
}

impl InsertSamples for sqlx::SqliteConnection {
    async fn insert_samples<'c>(&'c mut self, rows: &'c [Row<'c>]) -> anyhow::Result<()> {
        let into = format!("INSERT INTO samples ({}) ", stored_names().join(", "));
        for chunk in statements::chunks(rows, SQLITE_ROWS_PER_INSERT) {
            let mut insert = QueryBuilder::new(&into);
            insert.push_values(chunk, |mut row, sample| {
                let line = line(sample);
                for column in export::stored_columns() {
                    match column.value(&line) {
                        Value::Text(text) => row.push_bind(text),
                        Value::Int(n) => row.push_bind(n),
                        Value::Real(x) => row.push_bind(x),
                        Value::Bool(b) => row.push_bind(b),
                        // core's tests keep lists out of the stored columns.
                        Value::Reals(_) => unreachable!("{} is a list", column.name),
                    };
                }
            });
            // The same text for the same size: sqlx finds it prepared.
            insert
                .build()
                .persistent(true)
                .execute(&mut *self)
                .await
                .context("inserting samples")?;
        }
        Ok(())
    }
}

/// One column's values, as the PostgreSQL array bound for it.
enum Array<'a> {
    Text(Vec<Option<&'a str>>),
    Int(Vec<Option<i64>>),
    Real(Vec<Option<f64>>),
    Bool(Vec<Option<bool>>),
}

impl<'a> Array<'a> {
    /// An empty array of `first`'s type, room for `rows`.
    fn like(first: &Value<'_>, rows: usize, column: &str) -> anyhow::Result<Self> {
        Ok(match first {
            Value::Text(_) => Array::Text(Vec::with_capacity(rows)),
            Value::Int(_) => Array::Int(Vec::with_capacity(rows)),
            Value::Real(_) => Array::Real(Vec::with_capacity(rows)),
            Value::Bool(_) => Array::Bool(Vec::with_capacity(rows)),
            Value::Reals(_) => bail!("{column} is a list, which is never stored"),
        })
    }

    /// PostgreSQL's name for the array's type.
    fn sql_type(&self) -> &'static str {
        match self {
            Array::Text(_) => "text[]",
            Array::Int(_) => "bigint[]",
            Array::Real(_) => "double precision[]",
            Array::Bool(_) => "boolean[]",
        }
    }

    fn push(&mut self, value: Value<'a>, column: &str) -> anyhow::Result<()> {
        match (self, value) {
            (Array::Text(a), Value::Text(v)) => a.push(v),
            (Array::Int(a), Value::Int(v)) => a.push(v),
            (Array::Real(a), Value::Real(v)) => a.push(v),
            (Array::Bool(a), Value::Bool(v)) => a.push(v),
            _ => bail!("column {column} has values of two types"),
        }
        Ok(())
    }
}

impl InsertSamples for sqlx::PgConnection {
    async fn insert_samples<'c>(&'c mut self, rows: &'c [Row<'c>]) -> anyhow::Result<()> {
        let Some(first) = rows.first() else {
            return Ok(());
        };
        let first = line(first);
        let mut arrays = export::stored_columns()
            .map(|c| Array::like(&c.value(&first), rows.len(), c.name))
            .collect::<anyhow::Result<Vec<_>>>()?;
        for row in rows {
            let line = line(row);
            for (column, array) in export::stored_columns().zip(&mut arrays) {
                array.push(column.value(&line), column.name)?;
            }
        }
        let types: Vec<String> = arrays
            .iter()
            .enumerate()
            .map(|(i, a)| format!("${}::{}", i + 1, a.sql_type()))
            .collect();
        let sql = format!(
            "INSERT INTO samples ({}) SELECT * FROM UNNEST({})",
            stored_names().join(", "),
            types.join(", ")
        );
        let mut insert = sqlx::query(&sql);
        for array in arrays {
            insert = match array {
                Array::Text(a) => insert.bind(a),
                Array::Int(a) => insert.bind(a),
                Array::Real(a) => insert.bind(a),
                Array::Bool(a) => insert.bind(a),
            };
        }
        insert
            .execute(&mut *self)
            .await
            .context("inserting samples")?;
        Ok(())
    }
}
