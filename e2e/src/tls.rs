//! The whole server again, over TLS with HTTP/2 on another port, for what only HTTP/2
//! shows: more than six requests at once to one origin, all on one connection (browsers
//! speak HTTP/2 only over TLS, and queue a seventh HTTP/1.1 request to a host). The
//! certificate is self-signed and made at start; the browser that uses it is told to
//! accept it (`--ignore-certificate-errors`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use axum::Extension;
use axum::extract::{ConnectInfo, Request};
use axum::http::Method;
use axum::middleware::map_request;
use firsttoken_server::AppState;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// The Chromium flag a browser needs to accept this server's certificate.
pub const ACCEPT_SELF_SIGNED: &str = "--ignore-certificate-errors";

/// The server over TLS on a loopback port; stops when dropped.
#[derive(Debug)]
pub struct TlsServer {
    pub address: SocketAddr,
    /// CORS preflights (`OPTIONS` requests) received so far.
    pub preflights: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl TlsServer {
    /// Serves `state`'s app (demo target included) over TLS, offering HTTP/2 and
    /// HTTP/1.1.
    pub async fn start(state: AppState) -> anyhow::Result<Self> {
        let key = rcgen::generate_simple_self_signed(vec![
            "127.0.0.1".to_owned(),
            "localhost".to_owned(),
        ])
        .context("making a self-signed certificate")?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(key.cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.key_pair.serialize_der())),
            )?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let tcp = TcpListener::bind("127.0.0.1:0").await?;
        let address = tcp.local_addr()?;
        let preflights = Arc::new(AtomicU64::new(0));
        let counter = preflights.clone();
        let app = firsttoken_server::app(state).layer(map_request(move |request: Request| {
            if request.method() == Method::OPTIONS {
                counter.fetch_add(1, Ordering::Relaxed);
            }
            std::future::ready(request)
        }));
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = tcp.accept().await else {
                    continue;
                };
                // As the plain server does: no Nagle delay on the tokens.
                let _ = stream.set_nodelay(true);
                let (acceptor, app) = (acceptor.clone(), app.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    // The demo reports the client's port, as over plain HTTP.
                    let service = TowerToHyperService::new(app.layer(Extension(ConnectInfo(peer))));
                    let _ = Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        Ok(Self {
            address,
            preflights,
            task,
        })
    }

    /// `https://127.0.0.1:port/path`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.address)
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
