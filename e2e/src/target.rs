//! The whole server as a field benchmark's target: the demo endpoint behind the knobs a
//! real deployment differs by, and the truth a browser cannot tell, kept on the server's
//! side for the benchmark to compare with what the browser measured.
//!
//! The knobs ([`TargetConfig`]): plain HTTP/1.1 or TLS 1.2 or 1.3; HTTP/2 offered by
//! ALPN or not (then HTTP/1.1 only, as a browser meets behind many proxies); an idle
//! timeout after which the server closes a connection no request is using (uvicorn's 5 s
//! keep-alive, nginx's 75 s); the `Access-Control-Max-Age` its preflights answer (or
//! none, as many APIs send); whether the client's port header tells the real port, `0`
//! (uvicorn behind a proxy) or nothing; and a `Server-Timing` entry naming each request,
//! by which the benchmark joins a browser's Resource Timing entry to the server's record.
//!
//! The truth ([`FieldTarget::connections`], [`FieldTarget::preflights`],
//! [`FieldTarget::served`]): TCP connections accepted, preflights received, and each
//! request with its connection, its peer port and when its headers arrived.
//!
//! # Certificates
//!
//! The benchmark asks for "certificates from a test certificate authority that the browser
//! trusts by its key, not a blanket ignore certificate errors": a browser told
//! `--ignore-certificate-errors` skips verification altogether, which is not what a user's
//! browser does, and hides a wrong name or a broken chain. So each target makes a
//! certificate authority of its own at start and a leaf certificate signed by it, and
//! sends the chain [leaf, authority]. Chromium is told to trust the chain by the
//! authority's key with [`FieldTarget::spki_flag`] (the base64 SHA-256 of its
//! SubjectPublicKeyInfo): it verifies the chain as usual and accepts it only because that
//! key is in it. (Chromium honours that flag only with `--user-data-dir` given, as
//! chromedriver does.) Other clients trust the authority itself ([`FieldTarget::ca_pem`],
//! for reqwest or `curl --cacert`).
//!
//! The leaf names [`CERTIFICATE_NAMES`]: `target.test` and its subdomains, a wildcard for
//! fresh host names (`{n}.fresh.test`: a new name per request makes the browser open a
//! new connection, as a first visit does), `localhost` and `127.0.0.1`. The `.test` names
//! reach this machine with [`FieldTarget::resolver_flag`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state, map_response};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use firsttoken_core::api::CLIENT_PORT_HEADER;
use firsttoken_server::AppState;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use sha2::{Digest, Sha256};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

mod authority;
mod idle;

use authority::Authority;
use idle::{Guarded, InFlight, idle_for};

/// The names the target's certificate is good for.
pub const CERTIFICATE_NAMES: [&str; 5] = [
    "target.test",
    "*.target.test",
    "*.fresh.test",
    "localhost",
    "127.0.0.1",
];

/// The most requests [`FieldTarget::served`] keeps: the first ones.
pub const SERVED_KEPT: usize = 100_000;

/// The largest request body read to find its `request_name` (a larger one is refused).
pub const NAME_BODY_LIMIT: usize = 1024 * 1024;

/// The longest request name sent back in `Server-Timing`, in characters.
const NAME_CHARS: usize = 200;

/// The TLS version the target speaks: that one only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// The `Access-Control-Max-Age` of every response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxAge {
    /// None: the browser keeps a preflight's answer for its own default (5 s in Chromium).
    Absent,
    /// This many seconds (Chromium keeps an answer for at most 7200).
    Seconds(u32),
}

/// What the `x-firsttoken-client-port` header of the demo's answers says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PortHeader {
    /// The TCP peer's port, as the demo reports it.
    #[default]
    Peer,
    /// `0`, as a server behind a proxy that loses the port (uvicorn's default there).
    Zero,
    /// No header at all.
    Absent,
}

/// How the target behaves; [`Default`] is the app as it is, over TLS 1.3 with HTTP/2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetConfig {
    /// `None`: plain HTTP (HTTP/1.1).
    pub tls: Option<TlsVersion>,
    /// Offer HTTP/2 (ALPN `h2`). When `false` the server speaks HTTP/1.1 only.
    pub http2: bool,
    /// Close a connection that has had no request in flight for this long (counted from
    /// the end of the last response, or from the connection's start). `None`: never.
    pub idle_timeout: Option<Duration>,
    /// Overrides the `Access-Control-Max-Age` the app sends (7200 on preflights).
    pub max_age: MaxAge,
    pub port_header: PortHeader,
    /// Adds `Server-Timing: request;desc="<name>"` to every response: the request body's
    /// top-level JSON string `request_name`, else the request's number at this target
    /// (1, 2, 3…, every request counted, preflights too). Reads every request's body first
    /// (at most [`NAME_BODY_LIMIT`] bytes).
    pub server_timing_name: bool,
}

impl Default for TargetConfig {
    fn default() -> Self {
        Self {
            tls: Some(TlsVersion::Tls13),
            http2: true,
            idle_timeout: None,
            max_age: MaxAge::Seconds(7200),
            port_header: PortHeader::Peer,
            server_timing_name: false,
        }
    }
}

/// One request the target received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// Which TCP connection it came on: 1 for the first the target accepted, and so on.
    pub connection: u64,
    pub peer_port: u16,
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// When its headers had arrived (before its body was read).
    pub received: Instant,
    /// The name it was given in `Server-Timing`, when [`TargetConfig::server_timing_name`]
    /// is on.
    pub name: Option<String>,
}

/// What the target counts, shared by its tasks.
#[derive(Debug, Default)]
struct Truth {
    connections: AtomicU64,
    preflights: AtomicU64,
    requests: AtomicU64,
    served: Mutex<Vec<Served>>,
}

impl Truth {
    fn record(&self, served: Served) {
        let mut log = self.served.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() < SERVED_KEPT {
            log.push(served);
        }
    }
}

/// A connection as its requests see it (a request extension).
#[derive(Debug, Clone)]
struct ConnectionTruth {
    number: u64,
    peer: SocketAddr,
    /// Requests in flight on this connection: from their headers to their last byte out.
    in_flight: Arc<watch::Sender<usize>>,
}

/// The server on a loopback port with the knobs of [`TargetConfig`]; stops when dropped.
#[derive(Debug)]
pub struct FieldTarget {
    address: SocketAddr,
    config: TargetConfig,
    ca_der: Vec<u8>,
    ca_spki: Vec<u8>,
    /// The leaf certificate and its PKCS #8 key, for a proxy in front that ends TLS.
    leaf: (Vec<u8>, Vec<u8>),
    truth: Arc<Truth>,
    task: JoinHandle<()>,
}

impl FieldTarget {
    /// Serves `state`'s app (the demo target included) on a free 127.0.0.1 port, as
    /// `config` says.
    pub async fn start(state: AppState, config: TargetConfig) -> anyhow::Result<Self> {
        let authority = Authority::make()?;
        let acceptor = match config.tls {
            None => None,
            Some(version) => Some(authority.acceptor(version, config.http2)?),
        };
        let truth = Arc::new(Truth::default());
        let max_age = config.max_age;
        let port_header = config.port_header;
        let app = firsttoken_server::app(state)
            .layer(map_response(move |response: Response| {
                std::future::ready(set_max_age(response, max_age))
            }))
            .layer(map_response(move |response: Response| {
                std::future::ready(set_port_header(response, port_header))
            }))
            .layer(from_fn_with_state(
                Observer {
                    truth: truth.clone(),
                    naming: config.server_timing_name,
                },
                observe,
            ));
        let tcp = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding a loopback port")?;
        let address = tcp.local_addr()?;
        let counts = truth.clone();
        let (http2, idle) = (config.http2, config.idle_timeout);
        let task = tokio::spawn(async move {
            // Owns every connection's task: aborting this task aborts them all.
            let mut connections = JoinSet::new();
            loop {
                let accepted = tcp.accept().await;
                while connections.try_join_next().is_some() {}
                let Ok((stream, peer)) = accepted else {
                    // Out of file descriptors, most likely: give them a moment.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                let number = counts.connections.fetch_add(1, Ordering::Relaxed) + 1;
                // As the plain server does: no Nagle delay on the tokens.
                let _ = stream.set_nodelay(true);
                connections.spawn(serve_connection(
                    stream,
                    peer,
                    number,
                    acceptor.clone(),
                    app.clone(),
                    http2,
                    idle,
                ));
            }
        });
        Ok(Self {
            address,
            config,
            ca_der: authority.ca_der,
            ca_spki: authority.ca_spki,
            leaf: (authority.leaf_der, authority.leaf_key),
            truth,
            task,
        })
    }

    /// The loopback address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    pub fn config(&self) -> &TargetConfig {
        &self.config
    }

    /// `https://{host}:{port}{path}` (`http://` without TLS). `host` must reach
    /// 127.0.0.1 ([`FieldTarget::resolver_flag`]) and, over TLS, be one of
    /// [`CERTIFICATE_NAMES`].
    pub fn url(&self, host: &str, path: &str) -> String {
        let scheme = if self.config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{host}:{}{path}", self.address.port())
    }

    /// The Chromium flag that trusts this target's chain by its authority's key:
    /// `--ignore-certificate-errors-spki-list=<base64 SHA-256 of the authority's
    /// SubjectPublicKeyInfo>`.
    pub fn spki_flag(&self) -> String {
        format!(
            "--ignore-certificate-errors-spki-list={}",
            BASE64.encode(Sha256::digest(&self.ca_spki))
        )
    }

    /// The Chromium flag that sends the names `pattern` matches (`*.test`, say) to
    /// 127.0.0.1, on whatever port the URL names.
    pub fn resolver_flag(pattern: &str) -> String {
        format!("--host-resolver-rules=MAP {pattern} 127.0.0.1")
    }

    /// The certificate authority's certificate, PEM-encoded, for clients that trust it.
    pub fn ca_pem(&self) -> String {
        pem("CERTIFICATE", &self.ca_der)
    }

    /// The chain this target sends (leaf, then authority) and the leaf's private key,
    /// PEM-encoded: for a reverse proxy in front of a plain-HTTP target to end TLS with
    /// (nginx's `ssl_certificate` and `ssl_certificate_key`), so a browser trusting
    /// [`FieldTarget::spki_flag`] trusts the proxy.
    pub fn chain_and_key_pem(&self) -> (String, String) {
        let (leaf, key) = &self.leaf;
        (
            format!(
                "{}{}",
                pem("CERTIFICATE", leaf),
                pem("CERTIFICATE", &self.ca_der)
            ),
            pem("PRIVATE KEY", key),
        )
    }

    /// The certificate authority's certificate, DER-encoded.
    pub fn ca_der(&self) -> &[u8] {
        &self.ca_der
    }

    /// TCP connections accepted so far (handshakes that then failed included).
    pub fn connections(&self) -> u64 {
        self.truth.connections.load(Ordering::Relaxed)
    }

    /// `OPTIONS` requests (CORS preflights) received so far.
    pub fn preflights(&self) -> u64 {
        self.truth.preflights.load(Ordering::Relaxed)
    }

    /// Requests received so far, all of them (including those past [`SERVED_KEPT`]).
    pub fn requests(&self) -> u64 {
        self.truth.requests.load(Ordering::Relaxed)
    }

    /// The requests received so far, in the order they arrived: the first
    /// [`SERVED_KEPT`].
    pub fn served(&self) -> Vec<Served> {
        self.truth
            .served
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for FieldTarget {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One connection, from its TLS handshake (if any) to its close.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    number: u64,
    tls: Option<TlsAcceptor>,
    app: Router,
    http2: bool,
    idle: Option<Duration>,
) {
    let (in_flight, watched) = watch::channel(0usize);
    let connection = ConnectionTruth {
        number,
        peer,
        in_flight: Arc::new(in_flight),
    };
    // The demo reports the client's port when it has `ConnectInfo`, as over plain HTTP.
    let service = TowerToHyperService::new(
        app.layer(Extension(connection))
            .layer(Extension(ConnectInfo(peer))),
    );
    let builder = Builder::new(TokioExecutor::new());
    match tls {
        None => {
            // Without TLS a browser speaks HTTP/1.1 only; h2c is for other clients.
            let builder = if http2 { builder } else { builder.http1_only() };
            drive(&builder, TokioIo::new(stream), service, idle, watched).await;
        }
        Some(acceptor) => {
            let Ok(stream) = acceptor.accept(stream).await else {
                return;
            };
            // What ALPN chose, and nothing else: HTTP/2 only when both offered it.
            let builder = if stream.get_ref().1.alpn_protocol() == Some(b"h2") {
                builder.http2_only()
            } else {
                builder.http1_only()
            };
            drive(&builder, TokioIo::new(stream), service, idle, watched).await;
        }
    }
}

/// Serves one connection, closing it gracefully once no request has been in flight for
/// `idle` (HTTP/1.1: closed; HTTP/2: `GOAWAY`, then closed).
async fn drive<I>(
    builder: &Builder<TokioExecutor>,
    io: I,
    service: TowerToHyperService<Router>,
    idle: Option<Duration>,
    in_flight: watch::Receiver<usize>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let connection = builder.serve_connection(io, service);
    let mut connection = std::pin::pin!(connection);
    if let Some(idle) = idle {
        tokio::select! {
            _ = connection.as_mut() => return,
            () = idle_for(in_flight, idle) => connection.as_mut().graceful_shutdown(),
        }
    }
    let _ = connection.await;
}

#[derive(Debug, Clone)]
struct Observer {
    truth: Arc<Truth>,
    naming: bool,
}

/// Counts and logs each request, keeps it in flight on its connection, and names it in
/// `Server-Timing` when asked to.
async fn observe(State(observer): State<Observer>, request: Request, next: Next) -> Response {
    let received = Instant::now();
    let truth = &observer.truth;
    let sequence = truth.requests.fetch_add(1, Ordering::Relaxed) + 1;
    let connection = request.extensions().get::<ConnectionTruth>().cloned();
    let in_flight = connection
        .as_ref()
        .map(|connection| InFlight::begin(&connection.in_flight));
    if request.method() == Method::OPTIONS {
        truth.preflights.fetch_add(1, Ordering::Relaxed);
    }
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    let (request, name) = if observer.naming {
        match named(request, sequence).await {
            Ok((request, name)) => (request, Some(name)),
            Err(refused) => return refused,
        }
    } else {
        (request, None)
    };
    truth.record(Served {
        connection: connection.as_ref().map_or(0, |c| c.number),
        peer_port: connection.as_ref().map_or(0, |c| c.peer.port()),
        method,
        path,
        received,
        name: name.clone(),
    });
    let mut response = next.run(request).await;
    if let Some(name) = name {
        response.headers_mut().append(
            HeaderName::from_static("server-timing"),
            timing_entry(&name),
        );
    }
    match in_flight {
        Some(in_flight) => response.map(|body| {
            Body::new(Guarded {
                body,
                in_flight: Some(in_flight),
            })
        }),
        None => response,
    }
}

/// The request, rebuilt after its body was read, and its name: the body's top-level
/// `request_name` string, else `sequence`. A body declared larger than
/// [`NAME_BODY_LIMIT`] is passed on unread; one that turns out larger is refused.
async fn named(request: Request, sequence: u64) -> Result<(Request, String), Response> {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > NAME_BODY_LIMIT as u64) {
        return Ok((request, sequence.to_string()));
    }
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, NAME_BODY_LIMIT)
        .await
        .map_err(|e| {
            (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the field target reads bodies of at most {NAME_BODY_LIMIT} bytes to name them: {e}"
                ),
            )
                .into_response()
        })?;
    let name = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|body| body.get("request_name")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| sequence.to_string());
    Ok((Request::from_parts(parts, Body::from(bytes)), name))
}

/// `request;desc="<name>"`: the name's first characters, quotes and backslashes escaped,
/// anything but printable ASCII as `?`.
fn timing_entry(name: &str) -> HeaderValue {
    let mut entry = String::from("request;desc=\"");
    for c in name.chars().take(NAME_CHARS) {
        match c {
            '"' | '\\' => {
                entry.push('\\');
                entry.push(c);
            }
            c if c == ' ' || c.is_ascii_graphic() => entry.push(c),
            _ => entry.push('?'),
        }
    }
    entry.push('"');
    HeaderValue::from_str(&entry).unwrap_or_else(|_| HeaderValue::from_static("request"))
}

/// `der` as a PEM block labelled `label`.
fn pem(label: &str, der: &[u8]) -> String {
    let base64 = BASE64.encode(der);
    let mut pem = format!("-----BEGIN {label}-----\n");
    for line in base64.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str(&format!("-----END {label}-----\n"));
    pem
}

fn set_max_age(mut response: Response, max_age: MaxAge) -> Response {
    let headers = response.headers_mut();
    match max_age {
        MaxAge::Absent => {
            headers.remove(header::ACCESS_CONTROL_MAX_AGE);
        }
        MaxAge::Seconds(seconds) => {
            headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from(seconds));
        }
    }
    response
}

/// The demo's port header (only its answers carry one) as `port_header` says.
fn set_port_header(mut response: Response, port_header: PortHeader) -> Response {
    let headers = response.headers_mut();
    match port_header {
        PortHeader::Peer => {}
        PortHeader::Zero => {
            if headers.contains_key(CLIENT_PORT_HEADER) {
                headers.insert(CLIENT_PORT_HEADER, HeaderValue::from_static("0"));
            }
        }
        PortHeader::Absent => {
            headers.remove(CLIENT_PORT_HEADER);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TestServer;
    use axum::http::Version;
    use hyper::body::Incoming;
    use hyper::client::conn::{http1, http2};
    use rustls::pki_types::{CertificateDer, ServerName};
    use rustls::{ProtocolVersion, RootCertStore};
    use tokio_rustls::TlsConnector;

    const DEMO: &str = "/v1/chat/completions?first_token_ms=1&itl_ms=1&tokens=2";
    const CHAT: &str = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;

    /// A target over a collector's database (the collector holds the SQLite file).
    async fn start(config: TargetConfig) -> anyhow::Result<(TestServer, FieldTarget)> {
        let collector = TestServer::collector().await?;
        let target = FieldTarget::start(collector.state(), config).await?;
        Ok((collector, target))
    }

    fn plain() -> TargetConfig {
        TargetConfig {
            tls: None,
            http2: false,
            ..TargetConfig::default()
        }
    }

    enum Sender {
        H1(http1::SendRequest<Body>),
        H2(http2::SendRequest<Body>),
    }

    /// One client connection to a target.
    struct Client {
        sender: Sender,
        scheme: &'static str,
        authority: String,
        local_port: u16,
        tls_version: Option<ProtocolVersion>,
        alpn: Option<Vec<u8>>,
        /// The certificates the server sent.
        chain: Vec<Vec<u8>>,
        /// Ends when the connection does.
        closed: JoinHandle<()>,
    }

    impl Client {
        /// Over TLS to 127.0.0.1 as `server_name`, trusting the target's authority only,
        /// offering `versions` and (when `offer_h2`) HTTP/2.
        async fn tls(
            target: &FieldTarget,
            server_name: &str,
            versions: &[&'static rustls::SupportedProtocolVersion],
            offer_h2: bool,
        ) -> anyhow::Result<Self> {
            let mut roots = RootCertStore::empty();
            roots.add(CertificateDer::from(target.ca_der().to_vec()))?;
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_protocol_versions(versions)?
                .with_root_certificates(roots)
                .with_no_client_auth();
            config.alpn_protocols = if offer_h2 {
                vec![b"h2".to_vec(), b"http/1.1".to_vec()]
            } else {
                vec![b"http/1.1".to_vec()]
            };
            let tcp = TcpStream::connect(target.address()).await?;
            let local_port = tcp.local_addr()?.port();
            let tls = TlsConnector::from(Arc::new(config))
                .connect(ServerName::try_from(server_name.to_owned())?, tcp)
                .await?;
            let session = tls.get_ref().1;
            let tls_version = session.protocol_version();
            let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
            let chain = session
                .peer_certificates()
                .unwrap_or_default()
                .iter()
                .map(|c| c.to_vec())
                .collect();
            let (sender, closed) = handshake(tls, alpn.as_deref() == Some(b"h2")).await?;
            Ok(Self {
                sender,
                scheme: "https",
                authority: format!("{server_name}:{}", target.address().port()),
                local_port,
                tls_version,
                alpn,
                chain,
                closed,
            })
        }

        /// Plain HTTP/1.1 (or HTTP/2 with prior knowledge, `h2c`).
        async fn plain(target: &FieldTarget, h2c: bool) -> anyhow::Result<Self> {
            let tcp = TcpStream::connect(target.address()).await?;
            let local_port = tcp.local_addr()?.port();
            let (sender, closed) = handshake(tcp, h2c).await?;
            Ok(Self {
                sender,
                scheme: "http",
                authority: target.address().to_string(),
                local_port,
                tls_version: None,
                alpn: None,
                chain: Vec::new(),
                closed,
            })
        }

        async fn send(
            &mut self,
            method: Method,
            path: &str,
            headers: &[(&str, &str)],
            body: &str,
        ) -> anyhow::Result<axum::http::Response<Incoming>> {
            let h2 = matches!(self.sender, Sender::H2(_));
            let uri = if h2 {
                format!("{}://{}{path}", self.scheme, self.authority)
            } else {
                path.to_owned()
            };
            let mut request = axum::http::Request::builder().method(method).uri(uri);
            if !h2 {
                request = request.header(header::HOST, &self.authority);
            }
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            let request = request.body(Body::from(body.to_owned()))?;
            Ok(match &mut self.sender {
                Sender::H1(sender) => {
                    sender.ready().await?;
                    sender.send_request(request).await?
                }
                Sender::H2(sender) => {
                    sender.ready().await?;
                    sender.send_request(request).await?
                }
            })
        }

        async fn get(&mut self, path: &str) -> anyhow::Result<axum::http::Response<Incoming>> {
            self.send(Method::GET, path, &[], "").await
        }

        async fn chat(
            &mut self,
            path: &str,
            body: &str,
        ) -> anyhow::Result<axum::http::Response<Incoming>> {
            self.send(
                Method::POST,
                path,
                &[("content-type", "application/json")],
                body,
            )
            .await
        }
    }

    async fn handshake<I>(io: I, h2: bool) -> anyhow::Result<(Sender, JoinHandle<()>)>
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let io = TokioIo::new(io);
        Ok(if h2 {
            let (sender, connection) = http2::handshake(TokioExecutor::new(), io).await?;
            let closed = tokio::spawn(async move {
                let _ = connection.await;
            });
            (Sender::H2(sender), closed)
        } else {
            let (sender, connection) = http1::handshake(io).await?;
            let closed = tokio::spawn(async move {
                let _ = connection.await;
            });
            (Sender::H1(sender), closed)
        })
    }

    async fn text(response: axum::http::Response<Incoming>) -> anyhow::Result<String> {
        let bytes = axum::body::to_bytes(Body::new(response.into_body()), usize::MAX).await?;
        Ok(String::from_utf8(bytes.to_vec())?)
    }

    fn values(response: &axum::http::Response<Incoming>, name: &str) -> Vec<String> {
        response
            .headers()
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap_or("(not text)").to_owned())
            .collect()
    }

    fn assert_streamed(answer: &str) {
        assert!(
            answer.contains(r#""content":"Your""#) && answer.trim_end().ends_with("data: [DONE]"),
            "not a whole streamed answer: {answer}"
        );
    }

    #[tokio::test]
    async fn each_tls_version_is_spoken_and_the_authority_alone_is_trusted() -> anyhow::Result<()> {
        let both = [&rustls::version::TLS13, &rustls::version::TLS12];
        for (version, expected, other) in [
            (
                TlsVersion::Tls12,
                ProtocolVersion::TLSv1_2,
                &rustls::version::TLS13,
            ),
            (
                TlsVersion::Tls13,
                ProtocolVersion::TLSv1_3,
                &rustls::version::TLS12,
            ),
        ] {
            let (_collector, target) = start(TargetConfig {
                tls: Some(version),
                ..TargetConfig::default()
            })
            .await?;
            for name in [
                "target.test",
                "7.fresh.test",
                "a.target.test",
                "localhost",
                "127.0.0.1",
            ] {
                let mut client = Client::tls(&target, name, &both, true).await?;
                assert_eq!(client.tls_version, Some(expected), "{version:?} as {name}");
                assert_eq!(client.chain.len(), 2, "the chain is [leaf, authority]");
                assert_eq!(client.chain[1], target.ca_der());
                let response = client.get("/healthz").await?;
                assert_eq!(response.status(), StatusCode::OK, "{name}");
            }
            // A name the certificate does not have, and the version the target does not speak.
            let wrong_name = Client::tls(&target, "fresh.test", &both, true).await;
            assert!(wrong_name.is_err(), "fresh.test is not *.fresh.test");
            let elsewhere = Client::tls(&target, "target.example", &both, true).await;
            assert!(elsewhere.is_err(), "target.example verified");
            let other_version = Client::tls(&target, "target.test", &[other], true).await;
            assert!(other_version.is_err(), "{version:?} target spoke {other:?}");
            assert!(
                target
                    .url("7.fresh.test", "/x")
                    .starts_with("https://7.fresh.test:")
            );
        }
        Ok(())
    }

    #[tokio::test]
    async fn the_spki_flag_names_the_authoritys_key_and_the_pem_is_its_certificate()
    -> anyhow::Result<()> {
        let (_collector, target) = start(TargetConfig::default()).await?;
        let flag = target.spki_flag();
        let hash = flag
            .strip_prefix("--ignore-certificate-errors-spki-list=")
            .expect("the flag's name");
        assert_eq!(hash, BASE64.encode(Sha256::digest(&target.ca_spki)));
        assert_eq!(BASE64.decode(hash)?.len(), 32);
        // The key rcgen describes is the one in the authority's certificate.
        assert!(
            target
                .ca_der()
                .windows(target.ca_spki.len())
                .any(|w| w == target.ca_spki.as_slice()),
            "the SubjectPublicKeyInfo is not the authority certificate's"
        );
        let pem = target.ca_pem();
        let body: String = pem
            .lines()
            .filter(|line| !line.starts_with("-----"))
            .collect();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----\n"));
        assert!(pem.lines().all(|line| line.len() <= 64));
        assert_eq!(BASE64.decode(body)?, target.ca_der());
        assert_eq!(
            FieldTarget::resolver_flag("*.test"),
            "--host-resolver-rules=MAP *.test 127.0.0.1"
        );
        Ok(())
    }

    #[tokio::test]
    async fn http2_is_offered_only_when_asked() -> anyhow::Result<()> {
        let (_collector, one) = start(TargetConfig {
            http2: false,
            ..TargetConfig::default()
        })
        .await?;
        let mut client = Client::tls(&one, "target.test", &[&rustls::version::TLS13], true).await?;
        assert_eq!(client.alpn.as_deref(), Some(&b"http/1.1"[..]));
        let response = client.get("/healthz").await?;
        assert_eq!(response.version(), Version::HTTP_11);

        let (_collector, two) = start(TargetConfig::default()).await?;
        let mut client = Client::tls(&two, "target.test", &[&rustls::version::TLS13], true).await?;
        assert_eq!(client.alpn.as_deref(), Some(&b"h2"[..]));
        let response = client.get("/healthz").await?;
        assert_eq!(response.version(), Version::HTTP_2);
        assert_streamed(&text(client.chat(DEMO, CHAT).await?).await?);

        // Without TLS and without HTTP/2, not even HTTP/2 with prior knowledge.
        let (_collector, plain_one) = start(plain()).await?;
        let mut client = Client::plain(&plain_one, true).await?;
        assert!(client.get("/healthz").await.is_err(), "h2c answered");
        Ok(())
    }

    #[tokio::test]
    async fn max_age_is_removed_or_set() -> anyhow::Result<()> {
        let preflight = [
            ("origin", "https://app.test"),
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "content-type"),
        ];
        for (max_age, expected, config) in [
            (MaxAge::Absent, None, plain()),
            (MaxAge::Seconds(5), Some("5"), TargetConfig::default()),
            (MaxAge::Seconds(7200), Some("7200"), plain()),
        ] {
            let (_collector, target) = start(TargetConfig { max_age, ..config }).await?;
            let mut client = if target.config().tls.is_some() {
                Client::tls(&target, "target.test", &[&rustls::version::TLS13], true).await?
            } else {
                Client::plain(&target, false).await?
            };
            let response = client
                .send(Method::OPTIONS, "/v1/chat/completions", &preflight, "")
                .await?;
            assert!(response.status().is_success(), "{}", response.status());
            assert!(
                response
                    .headers()
                    .contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN),
                "not a preflight's answer"
            );
            assert_eq!(
                values(&response, "access-control-max-age"),
                expected.into_iter().map(str::to_owned).collect::<Vec<_>>(),
                "{max_age:?}"
            );
            assert_eq!(target.preflights(), 1);
            let served = target.served();
            assert_eq!(served.len(), 1);
            assert_eq!(served[0].method, "OPTIONS");
            assert_eq!(served[0].path, "/v1/chat/completions");
            assert_eq!(served[0].peer_port, client.local_port);
            assert_eq!(served[0].name, None);
        }
        Ok(())
    }

    #[tokio::test]
    async fn the_port_header_tells_the_peer_zero_or_nothing() -> anyhow::Result<()> {
        for (port_header, tls) in [
            (PortHeader::Peer, false),
            (PortHeader::Zero, false),
            (PortHeader::Absent, false),
            (PortHeader::Peer, true),
        ] {
            let config = TargetConfig {
                port_header,
                ..if tls {
                    TargetConfig {
                        tls: Some(TlsVersion::Tls12),
                        ..TargetConfig::default()
                    }
                } else {
                    plain()
                }
            };
            let (_collector, target) = start(config).await?;
            let mut client = if tls {
                Client::tls(&target, "target.test", &[&rustls::version::TLS12], true).await?
            } else {
                Client::plain(&target, false).await?
            };
            let response = client.chat(DEMO, CHAT).await?;
            assert_eq!(response.status(), StatusCode::OK);
            let port = values(&response, CLIENT_PORT_HEADER);
            let expected = match port_header {
                PortHeader::Peer => vec![client.local_port.to_string()],
                PortHeader::Zero => vec!["0".to_owned()],
                PortHeader::Absent => vec![],
            };
            assert_eq!(port, expected, "{port_header:?}");
            assert_streamed(&text(response).await?);
        }
        Ok(())
    }

    #[tokio::test]
    async fn an_idle_connection_is_closed_and_a_used_one_is_kept() -> anyhow::Result<()> {
        let idle = TargetConfig {
            idle_timeout: Some(Duration::from_millis(300)),
            ..plain()
        };

        // Idle for 600 ms: closed by the server, and the next request needs a new one.
        let (_collector, target1) = start(idle.clone()).await?;
        let mut client = Client::plain(&target1, false).await?;
        assert_eq!(client.get("/healthz").await?.status(), StatusCode::OK);
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(client.closed.is_finished(), "the idle connection is open");
        assert!(client.get("/healthz").await.is_err());
        let mut again = Client::plain(&target1, false).await?;
        assert_eq!(again.get("/healthz").await?.status(), StatusCode::OK);
        assert_eq!(target1.connections(), 2);
        let served = target1.served();
        assert_eq!(
            served.iter().map(|s| s.connection).collect::<Vec<_>>(),
            [1, 2]
        );

        // Used every 100 ms for a second, and one answer that takes longer than the
        // timeout to stream: still the one connection.
        let (_collector, target2) = start(idle.clone()).await?;
        let mut client = Client::plain(&target2, false).await?;
        for _ in 0..10 {
            assert_eq!(client.get("/healthz").await?.status(), StatusCode::OK);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let slow = "/v1/chat/completions?first_token_ms=500&itl_ms=100&tokens=3";
        let started = Instant::now();
        assert_streamed(&text(client.chat(slow, CHAT).await?).await?);
        assert!(started.elapsed() >= Duration::from_millis(600));
        assert_eq!(client.get("/healthz").await?.status(), StatusCode::OK);
        assert!(!client.closed.is_finished());
        assert_eq!(target2.connections(), 1);
        assert!(target2.served().iter().all(|s| s.connection == 1));

        // HTTP/2: GOAWAY, then closed.
        let (_collector, target3) = start(TargetConfig {
            idle_timeout: Some(Duration::from_millis(300)),
            ..TargetConfig::default()
        })
        .await?;
        let mut client =
            Client::tls(&target3, "target.test", &[&rustls::version::TLS13], true).await?;
        assert_eq!(client.get("/healthz").await?.version(), Version::HTTP_2);
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(
            client.closed.is_finished(),
            "the idle HTTP/2 connection is open"
        );

        // Without a timeout, the same idle connection stays.
        let (_collector, target4) = start(plain()).await?;
        let mut client = Client::plain(&target4, false).await?;
        assert_eq!(client.get("/healthz").await?.status(), StatusCode::OK);
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(!client.closed.is_finished());
        assert_eq!(client.get("/healthz").await?.status(), StatusCode::OK);
        assert_eq!(target4.connections(), 1);
        Ok(())
    }

    #[tokio::test]
    async fn server_timing_names_each_request() -> anyhow::Result<()> {
        let (_collector, target) = start(TargetConfig {
            server_timing_name: true,
            ..TargetConfig::default()
        })
        .await?;
        let mut client =
            Client::tls(&target, "target.test", &[&rustls::version::TLS13], true).await?;
        let named = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"request_name":"alpha"}"#;
        let response = client.chat(DEMO, named).await?;
        assert_eq!(response.status(), StatusCode::OK);
        let timing = values(&response, "server-timing");
        assert!(
            timing.iter().any(|v| v == r#"request;desc="alpha""#),
            "{timing:?}"
        );
        // Appended: the demo's own entries are still there.
        assert!(
            timing.iter().any(|v| v.contains("demo;desc=")),
            "{timing:?}"
        );
        assert_streamed(&text(response).await?);

        // No name: its number at this target. A name with a quote: escaped.
        let response = client.chat(DEMO, CHAT).await?;
        assert!(values(&response, "server-timing").contains(&r#"request;desc="2""#.to_owned()));
        assert_streamed(&text(response).await?);
        let quoted = r#"{"model":"m","stream":true,"messages":[],"request_name":"a\"b"}"#;
        let response = client.chat(DEMO, quoted).await?;
        assert!(
            values(&response, "server-timing").contains(&r#"request;desc="a\"b""#.to_owned()),
            "{:?}",
            values(&response, "server-timing")
        );
        text(response).await?;

        let served = target.served();
        let names: Vec<_> = served.iter().map(|s| s.name.as_deref()).collect();
        assert_eq!(names, [Some("alpha"), Some("2"), Some(r#"a"b"#)]);
        assert!(served.iter().all(|s| s.method == "POST"
            && s.path == "/v1/chat/completions"
            && s.connection == 1
            && s.peer_port == client.local_port));
        assert!(served.windows(2).all(|w| w[0].received <= w[1].received));

        // Off: no entry of ours.
        let (_collector, unnamed) = start(plain()).await?;
        let mut client = Client::plain(&unnamed, false).await?;
        let response = client.chat(DEMO, named).await?;
        let timing = values(&response, "server-timing");
        assert!(
            !timing.iter().any(|v| v.starts_with("request;")),
            "{timing:?}"
        );
        assert_streamed(&text(response).await?);
        assert_eq!(unnamed.served()[0].name, None);
        Ok(())
    }
}
