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
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::Semaphore;

use super::access::{self, Access, Peer};
use super::selection::{self, Purpose};
use crate::AppState;
use crate::db::{Filter, Piece};
use crate::error::AppError;
use crate::limit::RateLimiter;
use firsttoken_core::summary::{Accumulator, Dimension, Summary};

/// Summaries computed at once. Each holds a sketch per run and group in memory while it
/// runs, so this bounds what worst-case queries can make the server hold.
pub const SUMMARIES_AT_ONCE: usize = 1;
/// Summaries that may wait for their turn at once; more are "busy" at once.
pub const SUMMARY_WAITERS: usize = 8;
/// How long a summary waits for its turn before the answer is "busy".
pub const WAIT_FOR_TURN: Duration = Duration::from_secs(5);
/// How long an answer is reused for the same query.
pub const CACHE_FOR: Duration = Duration::from_secs(10);
/// Answers kept at most.
const CACHE_ENTRIES: usize = 256;

/// What bounds the summaries of one server.
#[derive(Debug)]
pub struct Summaries {
    turns: Semaphore,
    waiters: Semaphore,
    per_network: RateLimiter,
    cache: Mutex<HashMap<String, (Instant, Bytes)>>,
}

impl Summaries {
    /// Bounds for a server that computes `per_minute` summaries per network a minute.
    pub fn new(per_minute: u32) -> Self {
        Self {
            turns: Semaphore::new(SUMMARIES_AT_ONCE),
            waiters: Semaphore::new(SUMMARY_WAITERS),
            per_network: RateLimiter::new(per_minute),
            cache: Mutex::default(),
        }
    }

    /// Summaries being computed now.
    pub fn computing(&self) -> usize {
        SUMMARIES_AT_ONCE - self.turns.available_permits()
    }

    fn cached(&self, key: &str, now: Instant) -> Option<Bytes> {
        let cache = self.cache.lock().ok()?;
        let (at, body) = cache.get(key)?;
        (now.duration_since(*at) < CACHE_FOR).then(|| body.clone())
    }

    fn keep(&self, key: String, body: Bytes, now: Instant) {
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        if cache.len() >= CACHE_ENTRIES {
            cache.retain(|_, (at, _)| now.duration_since(*at) < CACHE_FOR);
        }
        if cache.len() >= CACHE_ENTRIES
            && let Some(oldest) = cache
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone())
        {
            cache.remove(&oldest);
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
    params.retain(|(name, _)| name != "min_samples");
    params.sort();
    let key = format!("{params:?} min_samples={min_samples}");
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
    let _turn = tokio::time::timeout(WAIT_FOR_TURN, state.summaries.turns.acquire())
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
        let summary = tally(&state, selection.filter, selection.group_by, min_samples).await?;
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

/// Rows sent to the tallying thread at a time, and batches it may have waiting.
const BATCH_ROWS: usize = 1024;
const BATCHES_WAITING: usize = 16;

/// Scans the folds of the folded days and the cells of the rest on the server's runtime
/// and tallies them on a thread of the summary's own, which also works out the intervals (real CPU on large groups). The
/// threads that serve uploads never hold a summary's sketches, nor wait for the tally:
/// when it is [`BATCHES_WAITING`] batches behind, the scan yields its thread until it
/// catches up. The memory a summary took is there for the next one: the allocator hands
/// an exited thread's arena to the next thread, where sketches merged on the shared
/// threads would stay spread over every arena they touched. If the scan is dropped (its
/// time limit), the thread stops without working anything out.
async fn tally(
    state: &AppState,
    filter: Filter,
    group_by: Vec<Dimension>,
    min_samples: usize,
) -> Result<Summary, AppError> {
    let (rows, mut batches) = tokio::sync::mpsc::channel::<Vec<Piece>>(BATCHES_WAITING);
    let (done, summary) = tokio::sync::oneshot::channel();
    let dimensions = group_by.clone();
    std::thread::Builder::new()
        .name("summary".into())
        .spawn(move || {
            let mut accumulator = Accumulator::default();
            // An empty batch is the end of the scan; a closed channel, a scan abandoned.
            while let Some(batch) = batches.blocking_recv() {
                if batch.is_empty() {
                    let _ = done.send(accumulator.finish(&dimensions, min_samples));
                    return;
                }
                for piece in batch {
                    match piece {
                        Piece::Cell(cell) => accumulator.add_cell(cell),
                        Piece::Fold(group, fold) => accumulator.add_fold(group, fold),
                    }
                }
            }
        })
        .map_err(anyhow::Error::from)?;
    state
        .db
        .summary_pieces(&filter, &group_by, &rows, BATCH_ROWS)
        .await?;
    let _ = rows.send(Vec::new()).await;
    Ok(summary
        .await
        .map_err(|_| anyhow::anyhow!("the summary's thread stopped before its answer"))?)
}

fn json(body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}
