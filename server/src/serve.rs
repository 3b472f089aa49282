//! Serving on a real socket, with every connection bounded in time and number.
//!
//! `axum::serve` runs hyper without a timer, which turns every hyper timeout off: a client
//! that opens a socket and never sends a header holds it (and a file descriptor) forever,
//! and about a thousand of them take the server down. This loop serves the same router
//! with:
//! - a header-read timeout, which is also the idle keep-alive limit (hyper starts it
//!   again while waiting for the next request on a kept connection);
//! - a cap on open connections: past it, a connection gets `503` with `Retry-After` and
//!   is closed, instead of the server running out of file descriptors;
//! - a cap on open connections per network ([`ConnectionCounts`]), so that one client's
//!   silent sockets cannot take every place while honest clients are refused;
//! - a cap on requests in flight ([`shed`]), answered the same way;
//! - writes that must make progress ([`stall::WriteProgress`]): a client that stops
//!   reading a response is cut off after `--write-stall-secs`, and TCP keepalive finds a
//!   peer that went away without a word;
//! - a shutdown with a deadline: no new connections, idle ones close at once, demo
//!   streams end, uploads in flight finish; what is still open at the deadline is dropped.
//!
//! Body read time is bounded where bodies are read ([`crate::body`]).
//!
//! The plain listener speaks HTTP/1.1 only. Browsers never speak cleartext HTTP/2, and
//! hyper's automatic version detection reads the first bytes before any timeout runs,
//! so a silent socket would be held forever. A deployment that wants HTTP/2 (and should:
//! connections are then shared) puts a TLS-terminating proxy in front, as the book's deployment pages say (`docs/src/deploy/index.md`).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower::ServiceExt;

use crate::error::AppError;
use crate::limit::ConnectionCounts;
use crate::{AppState, app};

pub mod deadline;
mod stall;

/// When TCP keepalive starts probing an idle connection, and how often it probes.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(60);
const KEEPALIVE_EVERY: Duration = Duration::from_secs(10);

/// Connections past the cap that are still told why (with a `503`) at once; more than
/// this are closed without a word, so refusing cannot itself exhaust descriptors.
const REFUSING_AT_ONCE: usize = 64;

/// How long a refused connection gets to take its `503`.
const REFUSAL_WRITE_LIMIT: Duration = Duration::from_secs(1);

/// What the handlers put in a response's extensions to have the connection closed
/// without a response: the demo's `close_before_headers` fault. The service below turns
/// it into an error, on which hyper drops the connection without writing a byte.
#[derive(Debug, Clone, Copy)]
pub struct CloseConnection;

impl std::fmt::Display for CloseConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection closed before the response on purpose")
    }
}

impl std::error::Error for CloseConnection {}

/// Serves the whole app on `tcp` until `shutdown` resolves, then stops within the
/// configured deadline.
pub async fn serve(
    tcp: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let config = state.config.clone();
    let router = app(state.clone());
    let open = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let per_network = Arc::new(ConnectionCounts::new(config.max_connections_per_network));
    let refusing = Arc::new(Semaphore::new(REFUSING_AT_ONCE));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(config.header_read_timeout_secs.max(1)));

    tokio::pin!(shutdown);
    loop {
        let (socket, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = tcp.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, or a connection reset before it was accepted:
                    // wait a moment rather than spin, and go on.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        state.metrics.connection_accepted();
        // Behind a trusted proxy every connection is the proxy's: it caps per client.
        let counted = if config.trust_forwarded_for {
            None
        } else {
            match ConnectionCounts::open(&per_network, peer.ip()) {
                Some(counted) => Some(counted),
                None => {
                    // Closed without a word: answering would spend effort on the client
                    // that is already holding the most.
                    state.metrics.connection_refused();
                    continue;
                }
            }
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            state.metrics.connection_refused();
            if let Ok(refusal) = refusing.clone().try_acquire_owned() {
                tokio::spawn(async move {
                    refuse(socket).await;
                    drop(refusal);
                });
            }
            continue;
        };
        no_delay(&socket);
        keep_alive(&socket);
        let socket =
            stall::WriteProgress::new(socket, Duration::from_secs(config.write_stall_secs.max(1)));
        let router = router.clone();
        let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            let router = router.clone();
            async move {
                let response = router
                    .oneshot(request)
                    .await
                    .unwrap_or_else(|e: Infallible| match e {});
                if response.extensions().get::<CloseConnection>().is_some() {
                    return Err(CloseConnection);
                }
                Ok(response)
            }
        });
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(socket), service));
        let metrics = state.metrics.clone();
        tokio::spawn(async move {
            metrics.connection_opened();
            // Timeouts, resets and deliberate closes end connections every day: not news.
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended");
            }
            metrics.connection_closed();
            drop((permit, counted));
        });
    }

    drop(tcp);
    state.stop();
    let deadline = Duration::from_secs(config.shutdown_deadline_secs);
    let open = graceful.count();
    tracing::info!(
        open,
        ?deadline,
        "no longer accepting; finishing what is in flight"
    );
    if tokio::time::timeout(deadline, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            ?deadline,
            "connections still open at the shutdown deadline are dropped"
        );
    }
    Ok(())
}

/// TCP keepalive on an accepted socket: a peer that vanished (a phone that lost its
/// network) is found out and its connection closed, instead of held until a write fails.
fn keep_alive(socket: &TcpStream) {
    let probes = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_EVERY);
    if let Err(e) = socket2::SockRef::from(socket).set_tcp_keepalive(&probes) {
        tracing::warn!(error = %e, "cannot turn TCP keepalive on for a connection");
    }
}

fn no_delay(socket: &TcpStream) {
    // Without it Nagle's algorithm holds a small event back until the previous one is
    // acknowledged, which the client's delayed ACK can put off by 40 ms: first bytes and
    // tokens would arrive late, and every TTFB and inter-token gap would be wrong.
    if let Err(e) = socket.set_nodelay(true) {
        tracing::warn!(error = %e, "cannot turn Nagle's algorithm off on a connection");
    }
}

/// Tells a connection past the cap to come back later, and closes it.
async fn refuse(mut socket: TcpStream) {
    let body = r#"{"error":{"code":"busy","message":"the server has too many open connections; try again in 1 s"}}"#;
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REFUSAL_WRITE_LIMIT, async {
        socket.write_all(response.as_bytes()).await?;
        socket.shutdown().await
    })
    .await;
}

/// Sheds load: a request past the in-flight cap is answered `503` with `Retry-After` at
/// once, instead of waiting in a queue without bound. `/healthz` is never shed, so a
/// busy server still says it is alive.
pub async fn shed(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request.uri().path() == "/healthz" {
        return next.run(request).await;
    }
    match state.in_flight.clone().try_acquire_owned() {
        Ok(permit) => {
            let response = next.run(request).await;
            drop(permit);
            response
        }
        Err(_) => {
            state.metrics.request_shed();
            AppError::Busy {
                what: "requests in flight",
                retry_after: 1,
            }
            .into_response()
        }
    }
}

/// A response that makes [`serve`] drop the connection without answering.
pub fn close_connection() -> Response {
    let mut response = StatusCode::SERVICE_UNAVAILABLE.into_response();
    response.extensions_mut().insert(CloseConnection);
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The peer address a request came from, as [`serve`] records it.
pub fn peer(request: &Request) -> Option<SocketAddr> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(p)| *p)
}
