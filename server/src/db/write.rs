//! Group commit: one task writes every upload, many uploads per transaction.
//!
//! SQLite has a single writer. With each upload in a transaction of its own, concurrent
//! uploads queue on the database's write lock and wait in its busy handler, which sleeps
//! (hundreds of ms at the tail); each commit also pays its own fsync. Here each upload is
//! handed to one [`Writer`] task and answered only once the transaction holding it has
//! committed, so "stored" still means on disk. While one transaction commits, the uploads
//! that arrive meanwhile queue, and the next transaction takes them all: the busier the
//! collector, the more uploads share each commit, and no upload waits for more than the
//! commit before its own. PostgreSQL gets the same writer (fewer commits, fewer round
//! trips); several collector instances each have their own.
//!
//! One bad upload cannot fail the others: when a shared transaction fails, its uploads
//! are written again one transaction each, and only the one that fails is answered with
//! the error.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use firsttoken_core::schema::Run;
use sqlx::QueryBuilder;
use tokio::sync::{Mutex, mpsc, oneshot};

use super::{Pool, Stored, cells, days};

/// Uploads waiting for the writer. A full queue makes the next upload wait (its handler
/// holds it); with at most this many queued, memory stays bounded by the upload size.
const QUEUE: usize = 256;
/// At most this many uploads, and about this many samples, in one transaction: a bound on
/// the transaction's size and on how long the first upload in it waits for the last.
const RUNS_PER_COMMIT: usize = 64;
const SAMPLES_PER_COMMIT: usize = 20_000;

/// Writers side by side on PostgreSQL (each holds one of the pool's 16 connections while
/// it writes).
const POSTGRES_WRITERS: usize = 4;

// Every statement here but the cells' (which come in a few fixed sizes, `statements.rs`)
// has as many rows or ids as the batch has, so each is written once: they are not kept
// prepared (`persistent(false)`). sqlx keeps up to 100 prepared statements per
// connection, and a SQLite statement inserting a thousand rows of 33 values (the sample
// rows, when there were any) was about a megabyte of program: kept, such statements held
// hundreds of megabytes.

/// A run ready to store, with everything the writer needs.
#[derive(Debug)]
pub(super) struct Upload {
    pub run: Run,
    /// The run as the collector serializes it, compressed (`super::record`), and the
    /// SHA-256 of that JSON (lowercase hex).
    pub record_lz4: Vec<u8>,
    pub record_sha256: String,
    /// The run's cells, stored with it when it is new.
    pub cells: Vec<cells::CellRow>,
    pub received_at_ms: i64,
    pub delete_token_sha256: String,
    /// The delete token the collector made, when it made one (the answer carries it).
    pub delete_token: Option<String>,
    /// The tag of the network it came from ([`super::sources`]), when known.
    pub source_tag: Option<String>,
}

struct Job {
    upload: Upload,
    stored: oneshot::Sender<anyhow::Result<Stored>>,
}

/// The handle to the writer task; clones share it. The task ends when every handle is
/// dropped, after writing what was queued.
#[derive(Debug, Clone)]
pub(super) struct Writer {
    jobs: mpsc::Sender<Job>,
    commits: Arc<AtomicU64>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("run_id", &self.upload.run.run_id)
            .finish()
    }
}

impl Writer {
    /// Starts the writer task on the current Tokio runtime.
    pub fn start(pool: Pool) -> Self {
        let (jobs, queue) = mpsc::channel(QUEUE);
        let queue = Arc::new(Mutex::new(queue));
        let commits = Arc::new(AtomicU64::new(0));
        // SQLite writes one transaction at a time whatever we do; PostgreSQL writes
        // several side by side, each on a connection of its own.
        let writers = match pool {
            Pool::Sqlite(_) => 1,
            Pool::Postgres(_) => POSTGRES_WRITERS,
        };
        for _ in 0..writers {
            tokio::spawn(write_forever(pool.clone(), queue.clone(), commits.clone()));
        }
        Self { jobs, commits }
    }

    /// Transactions committed so far (each holding one or more uploads).
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Stores `upload` and answers once its transaction has committed.
    pub async fn store(&self, upload: Upload) -> anyhow::Result<Stored> {
        let (stored, answer) = oneshot::channel();
        self.jobs
            .send(Job { upload, stored })
            .await
            .map_err(|_| anyhow::anyhow!("the database writer has stopped"))?;
        answer
            .await
            .map_err(|_| anyhow::anyhow!("the database writer stopped before answering"))?
    }
}

/// One writer: takes what is queued (waiting for the first upload), writes it, answers.
/// Writers take turns at the queue, so each batch is whatever queued while the others
/// were writing.
async fn write_forever(
    pool: Pool,
    queue: Arc<Mutex<mpsc::Receiver<Job>>>,
    commits: Arc<AtomicU64>,
) {
    loop {
        let batch = {
            let mut queue = queue.lock().await;
            let Some(first) = queue.recv().await else {
                return;
            };
            let mut samples = first.upload.run.samples.len();
            let mut batch = vec![first];
            while batch.len() < RUNS_PER_COMMIT && samples < SAMPLES_PER_COMMIT {
                match queue.try_recv() {
                    Ok(job) => {
                        samples += job.upload.run.samples.len();
                        batch.push(job);
                    }
                    Err(_) => break,
                }
            }
            batch
        };
        let uploads: Vec<&Upload> = batch.iter().map(|j| &j.upload).collect();
        let outcomes = match write(&pool, &uploads).await {
            Ok(stored) => {
                commits.fetch_add(1, Ordering::Relaxed);
                stored.into_iter().map(Ok).collect()
            }
            Err(e) if uploads.len() == 1 => vec![Err(e)],
            Err(e) => {
                tracing::warn!(
                    uploads = uploads.len(),
                    error = %format!("{e:#}"),
                    "a shared transaction failed: writing its uploads one by one"
                );
                let mut outcomes = Vec::with_capacity(uploads.len());
                for upload in &uploads {
                    let outcome = write(&pool, &[upload]).await.map(|mut s| s.remove(0));
                    if outcome.is_ok() {
                        commits.fetch_add(1, Ordering::Relaxed);
                    }
                    outcomes.push(outcome);
                }
                outcomes
            }
        };
        for (job, outcome) in batch.into_iter().zip(outcomes) {
            // The uploader may have gone (its connection closed): what committed stays.
            let _ = job.stored.send(outcome);
        }
    }
}

/// Writes `uploads` in one transaction; what each became, in order.
async fn write(pool: &Pool, uploads: &[&Upload]) -> anyhow::Result<Vec<Stored>> {
    // The first upload of each run id is the one inserted; a later one in the same
    // transaction is compared with it, as if it had come after the commit.
    let mut first_of: HashMap<&str, usize> = HashMap::new();
    for (i, upload) in uploads.iter().enumerate() {
        first_of.entry(upload.run.run_id.as_str()).or_insert(i);
    }
    let mut firsts: Vec<&Upload> = uploads
        .iter()
        .enumerate()
        .filter(|(i, u)| first_of[u.run.run_id.as_str()] == *i)
        .map(|(_, u)| *u)
        .collect();
    // Rows inserted in id order: two PostgreSQL writers storing the same ids lock them in
    // the same order, so one waits for the other instead of deadlocking.
    firsts.sort_by(|a, b| a.run.run_id.cmp(&b.run.run_id));

    // `earlier`: each id stored before, with its record's digest and whether the run was
    // deleted since (its id kept as a tombstone).
    type Earlier = HashMap<String, (String, bool)>;
    let (created, earlier): (HashSet<String>, Earlier) = with_pool!(pool, |p| {
        let mut tx = p.begin().await?;
        // Each id once: `run_ids` decides which runs are new.
        let mut claim =
            QueryBuilder::new("INSERT INTO run_ids (run_id, received_at_ms, record_sha256) ");
        claim.push_values(&firsts, |mut row, u| {
            row.push_bind(u.run.run_id.as_str())
                .push_bind(u.received_at_ms)
                .push_bind(u.record_sha256.as_str());
        });
        claim.push(" ON CONFLICT (run_id) DO NOTHING RETURNING run_id");
        let created: HashSet<String> = claim
            .build_query_scalar()
            .persistent(false)
            .fetch_all(&mut *tx)
            .await
            .context("claiming run ids")?
            .into_iter()
            .collect();

        // Ids stored before this transaction: the same record again, or a different one.
        let mut earlier = HashMap::new();
        let taken: Vec<&str> = firsts
            .iter()
            .map(|u| u.run.run_id.as_str())
            .filter(|id| !created.contains(*id))
            .collect();
        if !taken.is_empty() {
            let mut select = QueryBuilder::new(
                "SELECT run_id, record_sha256, deleted_at_ms FROM run_ids WHERE run_id IN (",
            );
            let mut ids = select.separated(", ");
            for id in &taken {
                ids.push_bind(*id);
            }
            select.push(")");
            let rows: Vec<(String, String, Option<i64>)> = select
                .build_query_as()
                .persistent(false)
                .fetch_all(&mut *tx)
                .await
                .context("reading runs stored earlier")?;
            earlier.extend(
                rows.into_iter()
                    .map(|(id, sha, deleted)| (id, (sha, deleted.is_some()))),
            );
        }

        let new: Vec<&&Upload> = firsts
            .iter()
            .filter(|u| created.contains(&u.run.run_id))
            .collect();
        if !new.is_empty() {
            let mut insert = QueryBuilder::new(
                "INSERT INTO runs (run_id, received_at_ms, started_at_ms, schema_version, \
                 app_version, target_label, target_origin, target_version, dialect, demo, \
                 network, effective_type, browser, browser_major, os, mobile, sample_count, \
                 record_sha256, record, record_lz4, delete_token_sha256, study) ",
            );
            insert.push_values(&new, |mut row, u| {
                let (run, main) = (&u.run, u.run.main_target());
                row.push_bind(run.run_id.as_str())
                    .push_bind(u.received_at_ms)
                    .push_bind(i64::try_from(run.started_at_ms).unwrap_or(i64::MAX))
                    .push_bind(i64::from(run.schema_version))
                    .push_bind(run.app_version.as_str())
                    .push_bind(main.label.as_str())
                    .push_bind(main.origin.as_str())
                    .push_bind(main.version.as_deref())
                    .push_bind(main.dialect.name())
                    .push_bind(main.demo)
                    .push_bind(run.client.network.name())
                    .push_bind(run.client.effective_type.as_deref())
                    .push_bind(run.client.browser.as_deref())
                    .push_bind(run.client.browser_major.map(i64::from))
                    .push_bind(run.client.os.as_deref())
                    .push_bind(run.client.mobile)
                    .push_bind(run.samples.len() as i64)
                    .push_bind(u.record_sha256.as_str())
                    .push_bind("")
                    .push_bind(u.record_lz4.as_slice())
                    .push_bind(u.delete_token_sha256.as_str())
                    .push_bind(run.study_id.as_deref());
            });
            insert
                .build()
                .persistent(false)
                .execute(&mut *tx)
                .await
                .context("inserting runs")?;
        }
        // Where each new run came from, for a purge by source (kept two days).
        let tagged: Vec<(&str, &str, i64)> = new
            .iter()
            .filter_map(|u| {
                let tag = u.source_tag.as_deref()?;
                Some((u.run.run_id.as_str(), tag, u.received_at_ms))
            })
            .collect();
        if !tagged.is_empty() {
            let mut insert =
                QueryBuilder::new("INSERT INTO run_sources (run_id, tag, received_at_ms) ");
            insert.push_values(&tagged, |mut row, (id, tag, at)| {
                row.push_bind(*id).push_bind(*tag).push_bind(*at);
            });
            insert
                .build()
                .persistent(false)
                .execute(&mut *tx)
                .await
                .context("recording where runs came from")?;
        }
        // Each new run's cells, for summaries and exports: in this transaction, so they
        // never disagree with the run.
        let cells: Vec<&cells::CellRow> = new.iter().flat_map(|u| &u.cells).collect();
        cells::insert_cells!(tx, cells);
        // A change to each new run's day: folds made of the day before it are not read.
        if let Some(mut touch) = days::touch(new.iter().map(|u| u.received_at_ms)) {
            touch
                .build()
                .persistent(false)
                .execute(&mut *tx)
                .await
                .context("counting a change to the days of the runs")?;
        }
        tx.commit().await.context("committing uploads")?;
        anyhow::Ok((created, earlier))
    })?;

    // What each upload became: the record now stored under its id decides.
    let mut stored_sha: HashMap<&str, (&str, bool)> = earlier
        .iter()
        .map(|(id, (sha, deleted))| (id.as_str(), (sha.as_str(), *deleted)))
        .collect();
    for u in &firsts {
        if created.contains(&u.run.run_id) {
            stored_sha.insert(&u.run.run_id, (&u.record_sha256, false));
        }
    }
    uploads
        .iter()
        .enumerate()
        .map(|(i, u)| {
            let id = u.run.run_id.as_str();
            if first_of[id] == i && created.contains(id) {
                return Ok(Stored::Created {
                    delete_token: u.delete_token.clone(),
                });
            }
            match stored_sha.get(id) {
                Some((_, true)) => Ok(Stored::Deleted),
                Some((sha, false)) if *sha == u.record_sha256 => Ok(Stored::AlreadyStored),
                Some(_) => Ok(Stored::IdTaken),
                None => anyhow::bail!("run {id} was neither stored nor found"),
            }
        })
        .collect()
}
