//! firsttoken-server: one binary with the collector (`/api/v1`), the demo target
//! (`/v1/chat/completions`) and the built app.
//!
//! [`app`] builds the whole router from an [`AppState`], so tests call it directly with
//! `oneshot` or serve it on a real port ([`serve`]).

pub mod body;
pub mod config;
pub mod db;
pub mod demo;
pub mod error;
pub mod limit;
pub mod metrics;
pub mod routes;
pub mod serve;
mod static_files;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use tokio::sync::{Semaphore, watch};
use tower_http::cors::{Any, CorsLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;

pub use config::Config;
pub use db::Db;
pub use serve::serve;

use crate::limit::RateLimiter;
use crate::metrics::Metrics;

/// What every handler can reach.
#[derive(Debug, Clone)]
pub struct AppState {
    pub db: Db,
    pub config: Arc<Config>,
    pub metrics: Arc<Metrics>,
    pub limiter: Arc<RateLimiter>,
    /// Samples each network may upload per hour (`None`: no limit).
    pub samples_budget: Option<Arc<RateLimiter>>,
    /// Upload bytes each network may send per hour (`None`: no limit).
    pub bytes_budget: Option<Arc<RateLimiter>>,
    /// The last measure of the stored bytes, and when it was taken.
    storage: Arc<std::sync::Mutex<Option<(std::time::Instant, u64)>>>,
    /// Set while the stored bytes are being measured again.
    measuring_storage: Arc<std::sync::atomic::AtomicBool>,
    /// Failed admin-token attempts per network: a few an hour.
    pub admin_failures: Arc<RateLimiter>,
    /// Link checks per network ([`routes::studies`]).
    pub link_checks: Arc<RateLimiter>,
    /// The key share links are signed with, read from the database at its first use.
    signing_key: Arc<tokio::sync::OnceCell<[u8; 32]>>,
    /// Requests being handled ([`serve::shed`]).
    pub in_flight: Arc<Semaphore>,
    /// Demo streams open.
    pub demo_streams: Arc<Semaphore>,
    /// Bytes of demo answers each network may be sent per hour (`None`: no limit).
    pub demo_bytes: Option<Arc<RateLimiter>>,
    /// Upload bytes in flight, in KiB ([`routes::runs`]).
    pub upload_kib: Arc<Semaphore>,
    /// Summaries being computed, and answers kept for a moment.
    pub summaries: Arc<routes::summary::Summaries>,
    /// When the database last answered ([`routes::ops::Health`]).
    pub health: Arc<routes::ops::Health>,
    /// Turns `true` when shutdown begins: streams that would run on end.
    stopping: Arc<watch::Sender<bool>>,
    /// The built app, when there is one: a folder, or the one inside this binary.
    pub app_files: Option<static_files::AppFiles>,
}

/// How often the stored size is measured again.
const STORAGE_MEASURED_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

fn hourly(amount: u64) -> Option<Arc<RateLimiter>> {
    (amount > 0).then(|| {
        Arc::new(RateLimiter::per_period(
            amount as f64,
            std::time::Duration::from_secs(3600),
        ))
    })
}

/// Failed admin-token attempts one network may make per hour.
pub const ADMIN_FAILURES_PER_HOUR: f64 = 10.0;

impl AppState {
    /// A state over `db` configured by `config`.
    pub fn new(db: Db, config: Config) -> Self {
        let app_files = static_files::AppFiles::choose(config.static_dir.as_deref());
        Self {
            db,
            limiter: Arc::new(RateLimiter::new(config.uploads_per_minute)),
            samples_budget: hourly(config.samples_per_hour),
            bytes_budget: hourly(config.upload_bytes_per_hour),
            storage: Arc::default(),
            measuring_storage: Arc::default(),
            admin_failures: Arc::new(RateLimiter::per_period(
                ADMIN_FAILURES_PER_HOUR,
                std::time::Duration::from_secs(3600),
            )),
            link_checks: Arc::new(RateLimiter::new(routes::studies::LINK_CHECKS_PER_MINUTE)),
            signing_key: Arc::default(),
            in_flight: Arc::new(Semaphore::new(config.max_in_flight.max(1))),
            demo_streams: Arc::new(Semaphore::new(config.demo_max_streams.max(1))),
            demo_bytes: hourly(config.demo_bytes_per_hour),
            upload_kib: Arc::new(Semaphore::new(
                config
                    .upload_bytes_in_flight
                    .div_ceil(1024)
                    .clamp(1, Semaphore::MAX_PERMITS),
            )),
            summaries: Arc::new(routes::summary::Summaries::new(config.summaries_per_minute)),
            health: Arc::default(),
            stopping: Arc::new(watch::channel(false).0),
            metrics: Arc::default(),
            config: Arc::new(config),
            app_files,
        }
    }

    /// Opens the database `config` names and checks the static folder.
    pub async fn from_config(config: Config) -> anyhow::Result<Self> {
        config.check()?;
        let db = Db::connect(config.database_url.expose()).await?;
        // Closed days folded for summaries, now and every few minutes (db/folds.rs).
        db.start_folding(std::time::Duration::from_secs(300));
        db.start_forgetting_sources();
        let state = Self::new(db, config);
        match (&state.app_files, &state.config.static_dir) {
            (Some(static_files::AppFiles::Embedded), _) => {
                tracing::info!("serving the app built into this binary");
            }
            (Some(static_files::AppFiles::Dir(dir)), _) => {
                tracing::info!(dir = %dir.display(), "serving the app from a folder");
            }
            (None, Some(dir)) => tracing::warn!(
                dir = %dir.display(),
                "--static-dir holds no index.html: serving the collector and the demo target only"
            ),
            (None, None) => tracing::warn!(
                "this binary carries no app (cargo xtask build makes one that does) and no \
                 --static-dir names one: serving the collector and the demo target only"
            ),
        }
        Ok(state)
    }

    /// The key share links are signed with ([`Db::signing_key`]), read once.
    pub async fn signing_key(&self) -> anyhow::Result<[u8; 32]> {
        self.signing_key
            .get_or_try_init(|| self.db.signing_key())
            .await
            .copied()
    }

    /// The client's address, for budgets only: the peer, or, when the configuration
    /// trusts proxies in front, the `X-Forwarded-For` entry the nearest trusted proxy
    /// wrote (`proxy_hops` from the right). Common proxies append to what the client
    /// sent, so entries further left are the client's own words and never used. With
    /// fewer entries than hops the request did not come through the proxies: the peer.
    pub fn client_address(&self, headers: &HeaderMap, peer: Option<SocketAddr>) -> Option<IpAddr> {
        if self.config.trust_forwarded_for {
            let entries: Vec<&str> = headers
                .get_all("x-forwarded-for")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .map(str::trim)
                .collect();
            let hops = self.config.proxy_hops.max(1) as usize;
            if let Some(entry) = entries.len().checked_sub(hops).map(|i| entries[i])
                && let Some(address) = forwarded_address(entry)
            {
                return Some(address);
            }
        }
        peer.map(|p| p.ip())
    }

    /// Refuses a new run once the stored data has reached `--max-storage-bytes`. The
    /// size is measured at most every few seconds, beside the uploads (only the first
    /// measure is waited for), and what was accepted since is added.
    pub async fn check_storage(&self, adding: u64) -> Result<(), error::AppError> {
        let limit = self.config.max_storage_bytes;
        if limit == 0 {
            return Ok(());
        }
        let now = std::time::Instant::now();
        let known = self.storage.lock().ok().and_then(|s| *s);
        let used = match known {
            Some((at, bytes)) => {
                // Measured again beside the uploads, which go on with the last measure
                // and what was accepted since: none of them waits for it.
                if now.duration_since(at) >= STORAGE_MEASURED_EVERY
                    && !self.measuring_storage.swap(true, Ordering::AcqRel)
                {
                    let state = self.clone();
                    tokio::spawn(async move {
                        match state.db.storage_bytes().await {
                            Ok(bytes) => {
                                if let Ok(mut storage) = state.storage.lock() {
                                    *storage = Some((std::time::Instant::now(), bytes));
                                }
                            }
                            Err(e) => tracing::warn!(error = %e, "measuring the stored bytes"),
                        }
                        state.measuring_storage.store(false, Ordering::Release);
                    });
                }
                bytes
            }
            None => {
                let bytes = self.db.storage_bytes().await?;
                if let Ok(mut storage) = self.storage.lock() {
                    *storage = Some((now, bytes));
                }
                bytes
            }
        };
        if used.saturating_add(adding) > limit {
            tracing::warn!(
                used,
                limit,
                "storage limit reached: runs are refused with 507"
            );
            return Err(error::AppError::StorageFull { limit });
        }
        if let Ok(mut storage) = self.storage.lock()
            && let Some((_, bytes)) = storage.as_mut()
        {
            *bytes = bytes.saturating_add(adding);
        }
        Ok(())
    }

    /// Tells open streams that shutdown has begun.
    pub fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// Resolves once shutdown has begun.
    pub fn stopping(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut stopping = self.stopping.subscribe();
        async move {
            let _ = stopping.wait_for(|stopping| *stopping).await;
        }
    }
}

/// The whole server.
pub fn app(state: AppState) -> Router {
    // The app, the collector and the demo target are reached from other origins: beta
    // users' pages, the browser test harness, an operator's own app calling the demo.
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        // Mirrored, not `*`: a wildcard does not cover `Authorization` (Fetch standard),
        // which a delete and a summary behind the results token send.
        .allow_headers(tower_http::cors::AllowHeaders::mirror_request())
        .expose_headers(Any)
        .max_age(std::time::Duration::from_secs(7200))
        // Not `Origin`: with `*` every origin gets the same answer. Varying by it would
        // split the browser's cache between requests that send `Origin` and those that
        // do not: the engine's worker would download again the bundle the page's module
        // preload had just cached.
        .vary([
            header::ACCESS_CONTROL_REQUEST_METHOD,
            header::ACCESS_CONTROL_REQUEST_HEADERS,
        ]);
    let base = state.config.base_path.clone();
    let routes = Router::new()
        .merge(routes::runs::router())
        .merge(routes::studies::router())
        .merge(routes::admin::router())
        .merge(routes::ops::router())
        .merge(demo::router(state.config.demo))
        .merge(static_files::router(state.app_files.as_ref(), &base))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            serve::shed,
        ))
        // Summaries are bounded by their own small pool and per-network budget
        // (`routes/summary.rs`), outside the in-flight capacity: waiting for their turn,
        // they once held every permit and shed every upload.
        .merge(routes::summary::router())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::record,
        ))
        .layer(axum::middleware::map_response_with_state(
            state.clone(),
            serve::deadline::limit,
        ))
        .with_state(state);
    // Under a base path everything is there (`--base-path`), and nothing else is ours.
    let routes = if base.is_empty() {
        routes
    } else {
        let not_here = format!("firsttoken is served under {base}/ here\n");
        Router::new()
            .nest(&base, routes.clone())
            // `nest` takes `/firsttoken` and `/firsttoken/…` but not `/firsttoken/`, the
            // address people write: the app's page there too.
            .route_service(&format!("{base}/"), routes.into_service())
            .fallback(move || async move { (axum::http::StatusCode::NOT_FOUND, not_here) })
    };
    routes
        .layer(cors)
        // Resource Timing details and Server-Timing entries of a cross-origin response are
        // visible to the page only with this header.
        .layer(SetResponseHeaderLayer::overriding(
            HeaderName::from_static("timing-allow-origin"),
            HeaderValue::from_static("*"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        // Spans name the method and the path: never the client's address or headers.
        .layer(TraceLayer::new_for_http().make_span_with(|request: &axum::http::Request<_>| {
            tracing::info_span!("request", method = %request.method(), path = %loggable_path(request.uri().path()))
        }))
}

/// A request's path as the log writes it: a run id in it (`/api/v1/runs/…`) is written
/// `{run_id}`, since with a proxy's access log an id and a time would say whose run it is.
fn loggable_path(path: &str) -> String {
    path.split('/')
        .map(|segment| {
            if firsttoken_core::schema::is_uuid(segment) {
                "{run_id}"
            } else {
                segment
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The address in one `X-Forwarded-For` entry, as proxies write it: `203.0.113.7`,
/// `203.0.113.7:41234` (some add the client's port), `2001:db8::1`, `[2001:db8::1]` or
/// `[2001:db8::1]:41234`. Read without its port, a ported entry once fell back to the
/// proxy's own address, so every client behind it shared one budget.
pub fn forwarded_address(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim().trim_matches('"');
    if let Ok(address) = entry.parse() {
        return Some(address);
    }
    if let Ok(socket) = entry.parse::<SocketAddr>() {
        return Some(socket.ip());
    }
    entry
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|inner| inner.parse().ok())
}
