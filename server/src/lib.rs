//! firsttoken-server: one binary with the collector (`/api/v1`), the demo target
//! (`/v1/chat/completions`) and the built app.
//!
//! [`app`] builds the whole router from an [`AppState`], so tests call it directly with
//! `oneshot` or serve it on a real port ([`serve`]).

pub mod config;
pub mod db;
pub mod demo;
pub mod error;
pub mod limit;
pub mod metrics;
pub mod routes;
mod static_files;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::connect_info::IntoMakeServiceWithConnectInfo;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use axum::serve::{ListenerExt, TapIo};
use tokio::net::{TcpListener, TcpStream};
use tower_http::cors::{Any, CorsLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;

pub use config::Config;
pub use db::Db;

use crate::limit::RateLimiter;
use crate::metrics::Metrics;

/// What every handler can reach.
#[derive(Debug, Clone)]
pub struct AppState {
    pub db: Db,
    pub config: Arc<Config>,
    pub metrics: Arc<Metrics>,
    pub limiter: Arc<RateLimiter>,
    /// The built app, when there is one.
    pub static_dir: Option<PathBuf>,
}

impl AppState {
    /// A state over `db` configured by `config`.
    pub fn new(db: Db, config: Config) -> Self {
        let static_dir = config
            .static_dir
            .join("index.html")
            .is_file()
            .then(|| config.static_dir.clone());
        Self {
            db,
            limiter: Arc::new(RateLimiter::new(config.uploads_per_minute)),
            metrics: Arc::default(),
            config: Arc::new(config),
            static_dir,
        }
    }

    /// Opens the database `config` names and checks the static folder.
    pub async fn from_config(config: Config) -> anyhow::Result<Self> {
        let db = Db::connect(config.database_url.expose()).await?;
        let state = Self::new(db, config);
        if state.static_dir.is_none() {
            tracing::warn!(
                dir = %state.config.static_dir.display(),
                "no built app there: serving the collector and the demo target only (cargo xtask run builds the app)"
            );
        }
        Ok(state)
    }

    /// The client's address, for the rate limit only: the peer, or the first
    /// `X-Forwarded-For` entry when the configuration trusts a proxy to set it.
    pub fn client_address(&self, headers: &HeaderMap, peer: Option<SocketAddr>) -> Option<IpAddr> {
        if self.config.trust_forwarded_for
            && let Some(forwarded) = headers.get("x-forwarded-for").and_then(|v| v.to_str().ok())
            && let Some(first) = forwarded.split(',').next()
            && let Ok(address) = first.trim().parse()
        {
            return Some(address);
        }
        peer.map(|p| p.ip())
    }
}

/// The listener type [`listener`] makes.
pub type Listener = TapIo<TcpListener, fn(&mut TcpStream)>;

/// Wraps a bound socket so every connection sends what is written at once (TCP_NODELAY).
/// Without it Nagle's algorithm holds a small event back until the previous one is
/// acknowledged, which the client's delayed ACK can put off by 40 ms: first bytes and
/// tokens would arrive late, and every TTFB and inter-token gap would be wrong.
pub fn listener(tcp: TcpListener) -> Listener {
    tcp.tap_io(no_delay as fn(&mut TcpStream))
}

fn no_delay(tcp: &mut TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::warn!(error = %e, "cannot turn Nagle's algorithm off on a connection");
    }
}

/// The whole server as a service that knows each connection's peer address (the demo
/// target tells clients their port; the rate limit counts per address). Serve this one.
pub fn service(state: AppState) -> IntoMakeServiceWithConnectInfo<Router, SocketAddr> {
    app(state).into_make_service_with_connect_info::<SocketAddr>()
}

/// The whole server.
pub fn app(state: AppState) -> Router {
    // The app, the collector and the demo target are reached from other origins: beta
    // users' pages, the browser test harness, an operator's own app calling the demo.
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers(Any)
        .expose_headers(Any)
        .max_age(std::time::Duration::from_secs(7200));
    Router::new()
        .merge(routes::runs::router(state.config.max_body_bytes))
        .merge(routes::summary::router())
        .merge(routes::admin::router())
        .merge(routes::ops::router())
        .merge(demo::router())
        .merge(static_files::router(state.static_dir.as_deref()))
        .layer(axum::middleware::from_fn_with_state(state.clone(), metrics::record))
        .with_state(state)
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
            tracing::info_span!("request", method = %request.method(), path = %request.uri().path())
        }))
}
