//! What summaries, exports and purges select: filters on the columns of the `cells` table,
//! and the dimensions a summary groups by. A cell's samples share every value a filter
//! names, so a sample matches a filter exactly when its cell does.

pub use firsttoken_crowd::summary::{Dimension, Kind};
use sqlx::{Database, Encode, QueryBuilder, Type};

/// A value of a dimension: what a filter names, and what a cell or a fold holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    Text(String),
    Bool(bool),
    Int(i64),
}

impl Value {
    /// Reads `text` as a value of `dimension`, or says why it is not one.
    pub fn parse(dimension: Dimension, text: &str) -> Result<Self, ValueError> {
        let error = |message: String| ValueError {
            dimension: dimension.name(),
            message,
        };
        if text.is_empty() || text.len() > 128 || text.chars().any(char::is_control) {
            return Err(error("must be 1–128 characters".into()));
        }
        Ok(match dimension.kind() {
            Kind::Text => Value::Text(text.to_owned()),
            Kind::Bool => Value::Bool(match text {
                "true" => true,
                "false" => false,
                _ => return Err(error(format!("must be true or false, got {text:?}"))),
            }),
            Kind::Int => Value::Int(
                text.parse()
                    .map_err(|_| error(format!("must be a whole number, got {text:?}")))?,
            ),
        })
    }
}

/// A filter value that does not fit its dimension, naming the dimension.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{dimension} {message}")]
pub struct ValueError {
    pub dimension: &'static str,
    pub message: String,
}

/// Which samples to take.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Each dimension must equal its value.
    pub equals: Vec<(Dimension, Value)>,
    /// Received at or after (Unix ms).
    pub from_ms: Option<i64>,
    /// Received before (Unix ms).
    pub to_ms: Option<i64>,
    /// Samples from the demo target (left out unless asked for: simulated numbers must
    /// never mix with real ones).
    pub demo: DemoSamples,
    /// Runs from one source: their tags under the keys still kept (`sources.rs`; a
    /// purge's filter only).
    pub source_tags: Option<Vec<String>>,
}

/// What to do with samples from the built-in demo target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DemoSamples {
    #[default]
    Exclude,
    Include,
    Only,
}

impl Filter {
    /// Whether the filter narrows anything beyond leaving demo samples out.
    pub fn is_narrow(&self) -> bool {
        self.narrows_samples() || self.source_tags.is_some()
    }

    /// Whether the filter narrows runs by their samples (beyond leaving demo samples out).
    pub fn narrows_samples(&self) -> bool {
        !self.equals.is_empty()
            || self.from_ms.is_some()
            || self.to_ms.is_some()
            || self.demo == DemoSamples::Only
    }

    /// Appends ` WHERE …` for this filter to `query`.
    pub fn push_where<'a, DB: Database>(&self, query: &mut QueryBuilder<'a, DB>)
    where
        String: 'a + Encode<'a, DB> + Type<DB>,
        i64: 'a + Encode<'a, DB> + Type<DB>,
        bool: 'a + Encode<'a, DB> + Type<DB>,
    {
        self.push_conditions(&mut Clause::new(query), true);
    }

    /// [`Filter::push_where`], for the rows after `after` (their arrival, then run id) in
    /// the order exports read them: a page of an export begins where the last one ended.
    pub fn push_where_after<'a, DB: Database>(
        &self,
        query: &mut QueryBuilder<'a, DB>,
        after: Option<(i64, String)>,
    ) where
        String: 'a + Encode<'a, DB> + Type<DB>,
        i64: 'a + Encode<'a, DB> + Type<DB>,
        bool: 'a + Encode<'a, DB> + Type<DB>,
    {
        let mut clause = Clause::new(query);
        self.push_conditions(&mut clause, true);
        if let Some((at, run_id)) = after {
            // Said so that the arrival index is searched from `at` on.
            clause
                .next()
                .push("received_at_ms >= ")
                .push_bind(at)
                .push(" AND (received_at_ms > ")
                .push_bind(at)
                .push(" OR run_id > ")
                .push_bind(run_id)
                .push(")");
        }
    }

    /// Appends ` WHERE …` for this filter, and for `received_at_ms` outside each of the
    /// ranges `outside` (from, to: the days a summary reads folded instead).
    pub fn push_where_outside<'a, DB: Database>(
        &self,
        query: &mut QueryBuilder<'a, DB>,
        outside: &[(i64, i64)],
    ) where
        String: 'a + Encode<'a, DB> + Type<DB>,
        i64: 'a + Encode<'a, DB> + Type<DB>,
        bool: 'a + Encode<'a, DB> + Type<DB>,
    {
        let mut clause = Clause::new(query);
        self.push_conditions(&mut clause, true);
        for &(from, to) in outside {
            clause
                .next()
                .push("NOT (received_at_ms >= ")
                .push_bind(from)
                .push(" AND received_at_ms < ")
                .push_bind(to)
                .push(")");
        }
    }

    /// Appends ` WHERE …` for this filter's dimensions and demo runs, without its dates,
    /// and for `day_ms` in one of the ranges `days` (from, to): what a summary reads of
    /// the `folds` table, whose rows are whole days.
    pub fn push_where_days<'a, DB: Database>(
        &self,
        query: &mut QueryBuilder<'a, DB>,
        days: &[(i64, i64)],
    ) where
        String: 'a + Encode<'a, DB> + Type<DB>,
        i64: 'a + Encode<'a, DB> + Type<DB>,
        bool: 'a + Encode<'a, DB> + Type<DB>,
    {
        let mut clause = Clause::new(query);
        self.push_conditions(&mut clause, false);
        let q = clause.next();
        q.push("(");
        for (i, &(from, to)) in days.iter().enumerate() {
            if i > 0 {
                q.push(" OR ");
            }
            q.push("(day_ms >= ")
                .push_bind(from)
                .push(" AND day_ms < ")
                .push_bind(to)
                .push(")");
        }
        q.push(if days.is_empty() { "FALSE)" } else { ")" });
    }

    fn push_conditions<'a, DB: Database>(&self, clause: &mut Clause<'_, 'a, DB>, dates: bool)
    where
        String: 'a + Encode<'a, DB> + Type<DB>,
        i64: 'a + Encode<'a, DB> + Type<DB>,
        bool: 'a + Encode<'a, DB> + Type<DB>,
    {
        match self.demo {
            DemoSamples::Exclude => {
                clause.next().push("target_demo = ").push_bind(false);
            }
            DemoSamples::Only => {
                clause.next().push("target_demo = ").push_bind(true);
            }
            DemoSamples::Include => {}
        }
        for (dimension, value) in &self.equals {
            let q = clause.next();
            q.push(dimension.name()).push(" = ");
            match value {
                Value::Text(text) => q.push_bind(text.clone()),
                Value::Bool(flag) => q.push_bind(*flag),
                Value::Int(number) => q.push_bind(*number),
            };
        }
        if let Some(from) = self.from_ms.filter(|_| dates) {
            clause.next().push("received_at_ms >= ").push_bind(from);
        }
        if let Some(to) = self.to_ms.filter(|_| dates) {
            clause.next().push("received_at_ms < ").push_bind(to);
        }
        if let Some(tags) = &self.source_tags {
            let q = clause.next();
            q.push("run_id IN (SELECT run_id FROM run_sources");
            push_tags(q, " WHERE ", tags);
            q.push(")");
        }
    }
}

/// Appends `{before}tag IN (…)` for `tags` (`FALSE` for none).
pub fn push_tags<'a, DB: Database>(query: &mut QueryBuilder<'a, DB>, before: &str, tags: &[String])
where
    String: 'a + Encode<'a, DB> + Type<DB>,
{
    query.push(before);
    if tags.is_empty() {
        query.push("FALSE");
        return;
    }
    query.push("tag IN (");
    let mut list = query.separated(", ");
    for tag in tags {
        list.push_bind(tag.clone());
    }
    query.push(")");
}

/// Writes ` WHERE ` before the first condition and ` AND ` before the others.
struct Clause<'q, 'a, DB: Database> {
    query: &'q mut QueryBuilder<'a, DB>,
    started: bool,
}

impl<'q, 'a, DB: Database> Clause<'q, 'a, DB> {
    fn new(query: &'q mut QueryBuilder<'a, DB>) -> Self {
        Self {
            query,
            started: false,
        }
    }

    fn next(&mut self) -> &mut QueryBuilder<'a, DB> {
        self.query
            .push(if self.started { " AND " } else { " WHERE " });
        self.started = true;
        self.query
    }
}
