//! `GET /api/v1/summary`: the crowd's numbers, grouped and filtered by the query string.
//!
//! A summary scans cells (each run's samples of one combination of dimensions, kept as
//! sketches; `db/cells.rs`) and is open to anyone who can reach the collector, so it is
//! the cheapest way to make the server work hard. It is bounded four ways, outside the
//! in-flight capacity that uploads, deletes and record reads share (`serve::shed`), so
//! reads never starve writes:
//! - each network (an IPv4 address, an IPv6 /64) may have `--summaries-per-minute`
//!   computed (cached answers are free); past it, `429` with `Retry-After`;
//! - at most [`SUMMARIES_AT_ONCE`] are computed at once (each holds one database
//!   connection, so uploads and `/healthz` always have the rest of the pool), and at most
//!   [`SUMMARY_WAITERS`] wait for their turn: another gets `503` with `Retry-After` at
//!   once, and so does one that cannot start within [`WAIT_FOR_TURN`];
//! - each has the server's `--summary-time-limit-secs` (15 s unless set); past it the
//!   scan is dropped (its connection goes back to the pool) and the answer says to
//!   narrow the query;
//! - answers are kept for [`CACHE_FOR`] under the normalised query (parameters sorted),
//!   so the same question asked many times is computed once.
//!
//! With `--results-token` only those who send it (or the admin token) read summaries.
//!
//! The smallest group that gets percentiles is the server's `--min-samples`; a query
//! may raise it, never lower it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use firsttoken_crowd::summary::{Accumulator, Dimension, Summary};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::access::{self, Access, Peer};
use super::selection::{self, Purpose};
use crate::AppState;
use crate::db::{Filter, Piece};
use crate::error::AppError;
use crate::limit::RateLimiter;

/// Summaries computed at once. Each holds its groups' folds, and the sketches of up to
/// [`FOLD_RUNS_AT`] runs not yet folded, so this bounds what worst-case queries can make
/// the server hold.
pub const SUMMARIES_AT_ONCE: usize = 1;
/// Summaries that may wait for their turn at once; more are "busy" at once.
pub const SUMMARY_WAITERS: usize = 8;
/// How long a summary waits for its turn before the answer is "busy".
pub const WAIT_FOR_TURN: Duration = Duration::from_secs(5);
/// How long an answer is reused for the same query.
pub const CACHE_FOR: Duration = Duration::from_secs(10);
/// Answers kept at most, and their bytes at most: an answer's size grows with its groups
/// (up to a few KB each), so a count alone let 256 large answers hold gigabytes.
const CACHE_ENTRIES: usize = 256;
pub const CACHE_BYTES: usize = 16 * 1024 * 1024;

/// What bounds the summaries of one server.
#[derive(Debug)]
pub struct Summaries {
    /// The turn to compute: held by the tallying thread until it exits, so a summary
    /// past its time limit that is still working out its intervals keeps the next one
    /// waiting (one thread at a time), rather than another thread starting beside it.
    turns: Arc<Semaphore>,
    waiters: Semaphore,
    per_network: RateLimiter,
    cache: Mutex<HashMap<String, (Instant, Bytes)>>,
}

impl Summaries {
    /// Bounds for a server that computes `per_minute` summaries per network a minute.
    pub fn new(per_minute: u32) -> Self {
        Self {
            turns: Arc::new(Semaphore::new(SUMMARIES_AT_ONCE)),
            waiters: Semaphore::new(SUMMARY_WAITERS),
            per_network: RateLimiter::new(per_minute),
            cache: Mutex::default(),
        }
    }

    /// Summaries being computed now.
    pub fn computing(&self) -> usize {
        SUMMARIES_AT_ONCE - self.turns.available_permits()
    }

    /// The bytes of the answers kept now.
    pub fn cached_bytes(&self) -> usize {
        self.cache
            .lock()
            .map(|cache| cache.values().map(|(_, body)| body.len()).sum())
            .unwrap_or(0)
    }

    fn cached(&self, key: &str, now: Instant) -> Option<Bytes> {
        let mut cache = self.cache.lock().ok()?;
        let (at, body) = cache.get(key)?;
        if now.duration_since(*at) < CACHE_FOR {
            return Some(body.clone());
        }
        cache.remove(key);
        None
    }

    /// Keeps `body` for `key`: expired answers go first, then the oldest until it fits
    /// under [`CACHE_ENTRIES`] and [`CACHE_BYTES`]; an answer larger than a quarter of
    /// the bytes is not kept.
    fn keep(&self, key: String, body: Bytes, now: Instant) {
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        cache.retain(|_, (at, _)| now.duration_since(*at) < CACHE_FOR);
        if body.len() > CACHE_BYTES / 4 {
            return;
        }
        let mut bytes: usize = cache.values().map(|(_, b)| b.len()).sum();
        while cache.len() >= CACHE_ENTRIES || bytes + body.len() > CACHE_BYTES {
            let Some(oldest) = cache
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            bytes -= cache.remove(&oldest).map_or(0, |(_, b)| b.len());
        }
        cache.insert(key, (now, body));
    }
}

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/summary", get(summary))
}

async fn summary(
    State(state): State<AppState>,
    headers: HeaderMap,
    peer: Peer,
    Query(mut params): Query<Vec<(String, String)>>,
) -> Result<Response, AppError> {
    access::require(&state, &headers, &peer, Access::Read)?;
    let selection = selection::parse(&params, Purpose::Summary)?;
    let floor = state.config.min_samples;
    let min_samples = selection
        .min_samples
        .map_or(floor, |asked| asked.max(floor));
    // A query may raise the runs a group needs, never lower them.
    let min_runs = selection.min_runs.map_or(state.config.min_runs, |asked| {
        asked.max(state.config.min_runs)
    });
    params.retain(|(name, _)| name != "min_samples" && name != "min_runs");
    params.sort();
    let key = format!("{params:?} min_samples={min_samples} min_runs={min_runs}");
    if let Some(body) = state.summaries.cached(&key, Instant::now()) {
        return Ok(json(body));
    }

    let address = state.client_address(&headers, peer.as_ref().map(|p| p.0.0));
    if let Some(address) = address {
        state
            .summaries
            .per_network
            .check(address)
            .map_err(|retry| AppError::TooManyRequests {
                retry_after: retry.0,
            })?;
    }
    let _waiting = state
        .summaries
        .waiters
        .try_acquire()
        .map_err(|_| AppError::Busy {
            what: "summaries waiting for their turn",
            retry_after: 2,
        })?;
    let turn = tokio::time::timeout(WAIT_FOR_TURN, state.summaries.turns.clone().acquire_owned())
        .await
        .map_err(|_| AppError::Busy {
            what: "summaries computed at once",
            retry_after: 2,
        })?
        .map_err(anyhow::Error::from)?;
    // Another request may have computed it while this one waited.
    if let Some(body) = state.summaries.cached(&key, Instant::now()) {
        return Ok(json(body));
    }
    let limit = Duration::from_secs(state.config.summary_time_limit_secs);
    let computed = tokio::time::timeout(limit, async {
        let (from_ms, to_ms) = (selection.filter.from_ms, selection.filter.to_ms);
        let mut summary = tally(
            &state,
            selection.filter,
            selection.group_by,
            (min_samples, min_runs),
            turn,
        )
        .await?;
        (summary.from_ms, summary.to_ms) = (from_ms, to_ms);
        Ok::<_, AppError>(Bytes::from(
            serde_json::to_vec(&summary).map_err(anyhow::Error::from)?,
        ))
    })
    .await
    .map_err(|_| AppError::TooSlow {
        what: "this summary",
        secs: limit.as_secs(),
        hint: "narrow it with from, to, a target or a network",
    })??;
    state.summaries.keep(key, computed.clone(), Instant::now());
    Ok(json(computed))
}

/// Runs' sketches a summary holds before it folds them into their groups: about a
/// megabyte. Without folding, a summary held every run's: hundreds of megabytes in the
/// attack benchmark's largest summaries (`docs/src/benchmarks/attack.md`).
const FOLD_RUNS_AT: usize = 1024;

/// Rows sent to the tallying thread at a time, and batches it may have waiting.
const BATCH_ROWS: usize = 1024;
const BATCHES_WAITING: usize = 16;

/// Scans the folds of the folded days and the cells of the rest on the server's runtime
/// and tallies them on a thread of the summary's own, which also works out the intervals (real CPU on large groups). The
/// threads that serve uploads never hold a summary's sketches, nor wait for the tally:
/// when it is [`BATCHES_WAITING`] batches behind, the scan yields its thread until it
/// catches up. The memory a summary took is there for the next one: the allocator hands
/// an exited thread's arena to the next thread (the next turn begins only once the
/// thread has exited, its arena given up), where sketches merged on the shared threads
/// would stay spread over every arena they touched. If the scan is dropped (its time
/// limit), the thread stops without working anything out.
async fn tally(
    state: &AppState,
    filter: Filter,
    group_by: Vec<Dimension>,
    (min_samples, min_runs): (usize, usize),
    turn: OwnedSemaphorePermit,
) -> Result<Summary, AppError> {
    let (rows, mut batches) = tokio::sync::mpsc::channel::<Vec<Piece>>(BATCHES_WAITING);
    let (done, summary) = tokio::sync::oneshot::channel::<Result<Summary, usize>>();
    let dimensions = group_by.clone();
    // Set when this future is dropped (its time limit): the thread then stops at its next
    // batch or group, instead of working out intervals for nobody.
    let cancelled = CancelOnDrop(Arc::new(AtomicBool::new(false)));
    let stop = cancelled.0.clone();
    let most_groups = state.config.max_summary_groups;
    let thread = std::thread::Builder::new()
        .name("summary".into())
        .spawn(move || {
            let stopped = || stop.load(Ordering::Relaxed);
            // The cells come run by run (`db/cells.rs`), so whole runs are folded as
            // they come.
            let mut accumulator = Accumulator::in_run_order(FOLD_RUNS_AT);
            // An empty batch is the end of the scan; a closed channel, a scan abandoned.
            while let Some(batch) = batches.blocking_recv() {
                if stopped() {
                    return;
                }
                if batch.is_empty() {
                    if let Some(summary) =
                        accumulator.finish_unless(&dimensions, min_samples, min_runs, stopped)
                    {
                        let _ = done.send(Ok(summary));
                    }
                    return;
                }
                for piece in batch {
                    match piece {
                        Piece::Cell(cell) => accumulator.add_cell(*cell),
                        Piece::Fold(group, fold) => accumulator.add_fold(group, *fold),
                    }
                }
                if accumulator.groups() > most_groups {
                    let _ = done.send(Err(accumulator.groups()));
                    return;
                }
            }
        })
        .map_err(anyhow::Error::from)?;
    // The turn goes when the thread has ended, not when its work has: the next summary's
    // thread never runs beside this one, even while it exits. Joined on a thread of its
    // own, so the wait outlives this future if its time limit drops it.
    tokio::task::spawn_blocking(move || {
        let _ = thread.join();
        drop(turn);
    });
    let scan = state
        .db
        .summary_pieces(&filter, &group_by, &rows, BATCH_ROWS);
    // The thread may stop early (too many groups): then the scan's sends fail, and its
    // answer is what counts.
    let scanned = scan.await;
    let _ = rows.send(Vec::new()).await;
    match summary.await {
        Ok(Ok(summary)) => {
            scanned?;
            Ok(summary)
        }
        Ok(Err(groups)) => Err(AppError::Invalid {
            field: Some("group_by".into()),
            message: format!(
                "this summary has more than {most_groups} groups ({groups} so far): group by fewer dimensions, or filter"
            ),
        }),
        Err(_) => {
            scanned?;
            Err(anyhow::anyhow!("the summary's thread stopped before its answer").into())
        }
    }
}

/// Sets its flag when dropped.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn json(body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 300 distinct large answers: the cache holds at most its bytes, and an answer past
    /// its time is gone when next asked for. Bounded by count alone, it once held 256 of
    /// them, 256 MiB here.
    #[test]
    fn the_answer_cache_is_bounded_in_bytes_and_forgets_expired_answers() {
        let summaries = Summaries::new(60);
        let start = Instant::now();
        let at = |i: u64| start + Duration::from_millis(i);
        for i in 0..300 {
            let body = Bytes::from(vec![b'x'; 1024 * 1024]);
            summaries.keep(format!("query {i}"), body, at(i));
            assert!(summaries.cached_bytes() <= CACHE_BYTES, "after {i}");
        }
        let start = at(300);
        assert!(summaries.cached("query 299", start).is_some());
        assert!(
            summaries.cached("query 0", start).is_none(),
            "the oldest went"
        );
        let later = start + CACHE_FOR;
        assert!(summaries.cached("query 299", later).is_none());
        summaries.keep("new".into(), Bytes::from_static(b"{}"), later);
        assert_eq!(
            summaries.cached_bytes(),
            2,
            "expired answers go when one is kept"
        );
        // One answer too large to keep is not kept.
        summaries.keep("huge".into(), Bytes::from(vec![0; CACHE_BYTES]), later);
        assert!(summaries.cached("huge", later).is_none());
    }
}
