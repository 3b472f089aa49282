//! Storage of runs through sqlx with migrations: SQLite by default (one file, nothing to
//! install), PostgreSQL for deployments where several collector instances share one
//! database.
//!
//! Every query is built with [`QueryBuilder`], which writes each backend's placeholders,
//! so the same code serves both: [`with_pool!`] expands it once per backend.

mod filter;

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use firsttoken_core::schema::Run;
use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use sqlx::{QueryBuilder, Row};

pub use days::{DAY_MS, SETTLE_MS, day_of};
pub use export::ExportRun;
pub use filter::{DemoSamples, Dimension, Filter, Kind, Value};
use firsttoken_crowd::fold::Fold;
pub use firsttoken_crowd::summary::Cell;
pub use folds::{Folded, MOST_ROWS};

/// A part of a summary: a run's samples of a combination, or runs folded ahead, with its
/// group's values of the dimensions grouped by.
#[derive(Debug)]
pub enum Piece {
    /// Boxed, as the fold: both are hundreds of bytes, and a batch of pieces moves through
    /// a channel.
    Cell(Box<Cell>),
    Fold(Vec<String>, Box<Fold>),
}

/// Runs `$body` with `$pool` bound to whichever pool `$db` (a [`Db`] or a [`Pool`])
/// holds. The body is compiled once per backend, so it may use each backend's own types.
macro_rules! with_pool {
    ($db:expr, |$pool:ident| $body:expr) => {
        match $db.as_pool() {
            Pool::Sqlite($pool) => $body,
            Pool::Postgres($pool) => $body,
        }
    };
}

mod cells;
mod days;
mod delete;
mod dimensions;
mod export;
mod folded;
mod folds;
mod migrations;
pub mod partitions;
mod record;
pub mod sources;
mod statements;
mod storage;
mod studies;
mod write;

/// What storing a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// The run is new and now stored. The token that deletes it, when the collector made
    /// one; `None` when the uploader chose the token and sent only its digest.
    Created { delete_token: Option<String> },
    /// The same run was stored before; nothing was written.
    AlreadyStored,
    /// A different record was stored under this id before; nothing was written.
    IdTaken,
    /// The run was stored and then deleted with its token; it is not stored again.
    Deleted,
}

/// What a delete did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    Deleted,
    NotFound,
    WrongToken,
}

/// The database behind the collector: its connections, and the one task that writes
/// uploads ([`write`]). Clones share both.
#[derive(Debug, Clone)]
pub struct Db {
    pool: Pool,
    writer: write::Writer,
    /// Today's source key ([`sources`]), once read.
    source_key: std::sync::Arc<std::sync::Mutex<Option<DayKey>>>,
}

/// A day's source key: (the day, the key).
type DayKey = (i64, [u8; 32]);

/// The connections to whichever database the collector uses.
#[derive(Debug, Clone)]
pub enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl Pool {
    fn as_pool(&self) -> &Pool {
        self
    }
}

/// A transaction that reads and then writes. On SQLite it takes the write lock at its
/// start (`BEGIN IMMEDIATE`), waiting for it up to the busy timeout: a deferred one that
/// read first fails at once with "database is locked" when another connection holds the
/// lock or wrote after its read (SQLite runs no busy handler for a read that becomes a
/// write), which under uploads is nearly always. PostgreSQL needs nothing of the kind.
trait BeginWrite {
    type Database: sqlx::Database;
    fn begin_write(
        &self,
    ) -> impl Future<Output = sqlx::Result<sqlx::Transaction<'static, Self::Database>>> + Send;
}

impl BeginWrite for SqlitePool {
    type Database = sqlx::Sqlite;
    async fn begin_write(&self) -> sqlx::Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        self.begin_with("BEGIN IMMEDIATE").await
    }
}

impl BeginWrite for PgPool {
    type Database = sqlx::Postgres;
    async fn begin_write(&self) -> sqlx::Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        self.begin().await
    }
}

impl Db {
    /// The database behind `pool`, with its writer task started (on the current Tokio
    /// runtime).
    pub fn new(pool: Pool) -> Self {
        let writer = write::Writer::start(pool.clone());
        if let Pool::Postgres(pg) = &pool {
            // The months ahead, made while the collector runs (it may run for months).
            let pg = pg.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(partitions::PREPARE_EVERY).await;
                    if pg.is_closed() {
                        return;
                    }
                    if let Err(e) = partitions::prepare(&pg, now_ms()).await {
                        tracing::error!(error = format!("{e:#}"), "cannot make the months ahead");
                    }
                }
            });
        }
        Self {
            pool,
            writer,
            source_key: Default::default(),
        }
    }

    /// On PostgreSQL, makes the monthly partitions of runs and cells for `now_ms`'s month and
    /// the months ahead (as the collector does when it starts and every hour); the tables
    /// made. SQLite keeps one table: nothing to do.
    pub async fn prepare_partitions(&self, now_ms: i64) -> anyhow::Result<Vec<String>> {
        match &self.pool {
            Pool::Postgres(pg) => partitions::prepare(pg, now_ms).await,
            Pool::Sqlite(_) => Ok(Vec::new()),
        }
    }

    /// On PostgreSQL, the months runs and cells are partitioned into, oldest first.
    pub async fn partitions(&self) -> anyhow::Result<Vec<partitions::Month>> {
        match &self.pool {
            Pool::Postgres(pg) => partitions::months(pg).await,
            Pool::Sqlite(_) => Ok(Vec::new()),
        }
    }

    /// Its connections, for what the collector itself does not do (tests, benchmarks).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    fn as_pool(&self) -> &Pool {
        &self.pool
    }

    /// Transactions that stored uploads, so far: uploads stored over this is how many
    /// shared each commit.
    pub fn commits(&self) -> u64 {
        self.writer.commits()
    }

    /// Opens the database at `url` (`sqlite://path/file.db`, created when missing, or
    /// `postgres://user@host/db`) and brings its schema up to date.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let options = PgConnectOptions::from_str(url)
                .with_context(|| format!("{} is not a PostgreSQL URL", redact(url)))?;
            Self::connect_postgres(options).await
        } else if url.starts_with("sqlite:") {
            Self::connect_sqlite(url).await
        } else {
            anyhow::bail!(
                "the database URL must start with sqlite:// or postgres://, got {}",
                redact(url)
            )
        }
    }

    /// A PostgreSQL database from connect options (tests use this to set a schema).
    pub async fn connect_postgres(options: PgConnectOptions) -> anyhow::Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .context("cannot connect to PostgreSQL")?;
        migrations::postgres()
            .await?
            .run(&pool)
            .await
            .context("cannot bring the PostgreSQL schema up to date")?;
        partitions::prepare(&pool, now_ms())
            .await
            .context("cannot make the monthly partitions of runs and cells")?;
        let pool = Pool::Postgres(pool);
        dimensions::ensure(&pool).await?;
        cells::rebuild_missing(&pool)
            .await
            .context("cannot rebuild the summaries' cells")?;
        Ok(Self::new(pool))
    }

    async fn connect_sqlite(url: &str) -> anyhow::Result<Self> {
        let options = SqliteConnectOptions::from_str(url)
            .with_context(|| format!("{url:?} is not a SQLite URL (sqlite://path/to/file.db)"))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true)
            // What a delete or a purge removes is overwritten, not left in free pages.
            .pragma("secure_delete", "on");
        if let Some(dir) = options.get_filename().parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the database folder {}", dir.display()))?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await
            .with_context(|| format!("cannot open the database {url}"))?;
        migrations::sqlite()
            .await?
            .run(&pool)
            .await
            .context("cannot bring the SQLite schema up to date")?;
        let pool = Pool::Sqlite(pool);
        dimensions::ensure(&pool).await?;
        cells::rebuild_missing(&pool)
            .await
            .context("cannot rebuild the summaries' cells")?;
        Ok(Self::new(pool))
    }

    /// `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self.pool {
            Pool::Sqlite(_) => "sqlite",
            Pool::Postgres(_) => "postgres",
        }
    }

    /// Closes every connection: from then on the database answers nothing (shutdown, and
    /// tests of what happens when it is gone).
    pub async fn close(&self) {
        with_pool!(self, |pool| pool.close().await)
    }

    /// Whether the database answers.
    pub async fn healthy(&self) -> bool {
        with_pool!(self, |pool| sqlx::query("SELECT 1")
            .execute(pool)
            .await
            .is_ok())
    }

    /// Stores a validated run, once, and answers when it is on disk (its transaction,
    /// shared with other uploads, has committed). `record` is its JSON serialization;
    /// `delete_token_sha256` is the digest of the uploader's own delete token (lowercase
    /// hex), or `None` for the collector to make a token and answer with it.
    pub async fn insert_run(
        &self,
        run: &Run,
        record: &str,
        received_at_ms: i64,
        delete_token_sha256: Option<&str>,
    ) -> anyhow::Result<Stored> {
        self.store_run(
            run.clone(),
            record,
            received_at_ms,
            delete_token_sha256,
            None,
        )
        .await
    }

    /// [`Db::insert_run`], taking the run: an upload's run goes to the writer as it is,
    /// without a copy.
    pub async fn store_run(
        &self,
        run: Run,
        record: &str,
        received_at_ms: i64,
        delete_token_sha256: Option<&str>,
        source_tag: Option<String>,
    ) -> anyhow::Result<Stored> {
        let (delete_token, delete_token_sha256) = match delete_token_sha256 {
            Some(digest) => (None, digest.to_owned()),
            None => {
                let token = random_token()?;
                let digest = sha256_hex(token.as_bytes());
                (Some(token), digest)
            }
        };
        self.writer
            .store(write::Upload {
                // Compressed, and the cells counted, here on the upload's own task: the
                // writer (SQLite has one) only writes.
                record_lz4: record::compress(record),
                record_sha256: sha256_hex(record.as_bytes()),
                cells: cells::cells_of_run(&run, received_at_ms),
                run,
                received_at_ms,
                delete_token_sha256,
                delete_token,
                source_tag,
            })
            .await
    }

    /// The stored record of a run, as JSON.
    pub async fn run_record(&self, run_id: &str) -> anyhow::Result<Option<String>> {
        with_pool!(self, |pool| {
            let mut select =
                QueryBuilder::new("SELECT record, record_lz4 FROM runs WHERE run_id = ");
            select.push_bind(run_id.to_owned());
            let stored: Option<(String, Option<Vec<u8>>)> =
                select.build_query_as().fetch_optional(pool).await?;
            stored
                .map(|(json, lz4)| record::json_of(json, lz4))
                .transpose()
                .with_context(|| format!("the stored record of run {run_id}"))
        })
    }

    /// Deletes a run (its record, its cells and its id) when `token` is the one its upload
    /// was answered with.
    pub async fn delete_run(&self, run_id: &str, token: &str) -> anyhow::Result<Deleted> {
        delete::delete_run(&self.pool, run_id, token).await
    }

    /// Deletes every run with a sample matching `filter` (its record, its cells and its
    /// id); returns how many runs went. A filter of only an end date, demo runs included,
    /// takes every run received before it (with no samples too), and on PostgreSQL drops
    /// the months wholly before it.
    pub async fn purge(&self, filter: &Filter) -> anyhow::Result<u64> {
        delete::purge(&self.pool, filter).await
    }

    /// Makes the cells of runs that have none, or none with their samples' indexes, from
    /// their records, as the collector does when it starts; how many runs got cells.
    pub async fn rebuild_cells(&self) -> anyhow::Result<u64> {
        cells::rebuild_missing(&self.pool).await
    }

    /// Sends what a summary of the samples matching `filter` reads to `out`, in batches
    /// of up to `batch` pieces, with the values of `group_by` as text (booleans as
    /// `true`/`false`, numbers in decimal, absent as ""): the folds of the whole days it
    /// covers that are folded, and the cells of every other run. Stops early when the
    /// receiver is gone, and waits (yielding its thread) while the channel is full.
    pub async fn summary_pieces(
        &self,
        filter: &Filter,
        group_by: &[Dimension],
        out: &tokio::sync::mpsc::Sender<Vec<Piece>>,
        batch: usize,
    ) -> anyhow::Result<()> {
        let days = folded::folded_days(&self.pool, filter).await?;
        folded::summary_folds(&self.pool, filter, &days, group_by, out, batch).await?;
        cells::summary_cells(&self.pool, filter, &days, group_by, out, batch).await
    }

    /// Folds every day that ended [`SETTLE_MS`] before `now_ms` and changed since it was
    /// folded (or never was), as the collector does when it starts and every few minutes.
    pub async fn fold_closed_days(&self, now_ms: i64) -> anyhow::Result<Folded> {
        folds::fold_closed_days(&self.pool, now_ms, MOST_ROWS).await
    }

    /// [`Db::fold_closed_days`] with a day of more than `most_rows` rows of folds left
    /// to its cells (tests set a small bound to see that happen).
    pub async fn fold_closed_days_within(
        &self,
        now_ms: i64,
        most_rows: usize,
    ) -> anyhow::Result<Folded> {
        folds::fold_closed_days(&self.pool, now_ms, most_rows).await
    }

    /// Folds closed days now and every `every`, on the current Tokio runtime, until the
    /// pool closes.
    pub fn start_folding(&self, every: Duration) {
        let db = self.clone();
        tokio::spawn(async move {
            loop {
                match db.fold_closed_days(now_ms()).await {
                    Ok(folded) if folded.days + folded.changed > 0 => {
                        tracing::info!(
                            days = folded.days,
                            rows = folded.rows,
                            changed_meanwhile = folded.changed,
                            "folded closed days"
                        );
                    }
                    Ok(_) => {}
                    Err(e) => tracing::error!(error = format!("{e:#}"), "cannot fold days"),
                }
                tokio::time::sleep(every).await;
                if db.is_closed() {
                    return;
                }
            }
        });
    }

    pub(super) fn is_closed(&self) -> bool {
        match &self.pool {
            Pool::Sqlite(p) => p.is_closed(),
            Pool::Postgres(p) => p.is_closed(),
        }
    }

    pub async fn run_ids(&self) -> anyhow::Result<Vec<String>> {
        with_pool!(self, |pool| {
            Ok(
                sqlx::query_scalar("SELECT run_id FROM runs ORDER BY received_at_ms, run_id")
                    .fetch_all(pool)
                    .await?,
            )
        })
    }

    /// Counts rows in a table, for tests that check nothing was written.
    pub async fn count(&self, table: Table) -> anyhow::Result<i64> {
        with_pool!(self, |pool| {
            let sql = format!("SELECT COUNT(*) FROM {}", table.name());
            Ok(sqlx::query_scalar(&sql).fetch_one(pool).await?)
        })
    }

    /// The samples of every stored run.
    pub async fn stored_samples(&self) -> anyhow::Result<i64> {
        with_pool!(self, |pool| {
            Ok(sqlx::query_scalar(
                "SELECT CAST(COALESCE(SUM(sample_count), 0) AS BIGINT) FROM runs",
            )
            .fetch_one(pool)
            .await?)
        })
    }

    /// Every stored text value of every row, records decompressed, for tests that prove
    /// what is never stored.
    pub async fn all_text(&self) -> anyhow::Result<String> {
        let mut all = String::new();
        for table in [Table::RunIds, Table::Runs, Table::Cells, Table::RunSources] {
            with_pool!(self, |pool| {
                let sql = format!("SELECT * FROM {}", table.name());
                let rows = sqlx::query(&sql).fetch_all(pool).await?;
                for row in rows {
                    for i in 0..row.len() {
                        if let Ok(Some(text)) = row.try_get::<Option<String>, _>(i) {
                            all.push_str(&text);
                            all.push('\n');
                        }
                    }
                    if let Table::Runs = table {
                        let lz4: Option<Vec<u8>> = row.try_get("record_lz4")?;
                        all.push_str(&record::json_of(String::new(), lz4)?);
                        all.push('\n');
                    }
                }
                anyhow::Ok(())
            })?;
        }
        Ok(all)
    }
}

/// The collector's tables.
#[derive(Debug, Clone, Copy)]
pub enum Table {
    /// Every stored run's id, once.
    RunIds,
    /// A row per run, with its record.
    Runs,
    /// A row per combination of dimensions in a run (`cells`).
    Cells,
    /// A row per day with runs (`days`).
    Days,
    /// A row per folded day, choice of varying dimensions and combination (`folds`).
    Folds,
    /// A row per run received in the last two days: where it came from, as a tag
    /// (`run_sources`, [`sources`]).
    RunSources,
}

impl Table {
    fn name(self) -> &'static str {
        match self {
            Table::RunIds => "run_ids",
            Table::Days => "days",
            Table::Folds => "folds",
            Table::Runs => "runs",
            Table::Cells => "cells",
            Table::RunSources => "run_sources",
        }
    }
}

/// 32 random bytes as hex: a delete token.
fn random_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("no randomness for a delete token: {e}"))?;
    Ok(hex(&bytes))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares two secrets in time that does not depend on where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A database URL without its password, for messages.
pub fn redact(url: &str) -> String {
    // A password in the query (`?password=…`, as libpq and sqlx take it) goes first.
    if let Some((base, query)) = url.split_once('?') {
        let query: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        return format!("{}?{}", redact(base), query.join("&"));
    }
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let credentials = &url[scheme_end + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_stay_out_of_messages() {
        assert_eq!(
            redact("postgres://app:s3cret@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(redact("postgres://app@db/x"), "postgres://app@db/x");
        assert_eq!(redact("sqlite://data/x.db"), "sqlite://data/x.db");
        assert_eq!(
            redact("postgres://db/x?user=app&password=s3cret&sslmode=require"),
            "postgres://db/x?user=app&password=***&sslmode=require"
        );
        assert_eq!(
            redact("postgres://app:a@db/x?password=b"),
            "postgres://app:***@db/x?password=***"
        );
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
