//! Starts the firsttoken server: parses the configuration, opens the database, serves until
//! Ctrl-C or SIGTERM.

use anyhow::Context;
use clap::Parser;
use firsttoken_server::config::LogFormat;
use firsttoken_server::db::redact;
use firsttoken_server::{AppState, Config, serve};
use tracing_subscriber::EnvFilter;

/// mimalloc rather than the system allocator: a summary over a million samples holds
/// about 25 MB while it runs, and glibc's allocator keeps such high-water marks in each
/// thread's arena for good, so a stranger asking for worst-case summaries would leave the
/// server tens of megabytes larger each time a new thread took one.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    // Logs go to stderr; stdout carries only the line that says where the server listens.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    match config.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    let database = redact(config.database_url.expose());
    let listen = config.listen;
    let base = config.base_path.clone();
    let state = AppState::from_config(config).await?;
    let tcp = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let address = tcp.local_addr()?;
    tracing::info!(%address, %database, "listening");
    println!("firsttoken is running at http://{address}{base}/");
    serve(tcp, state, shutdown_signal())
        .await
        .context("the server stopped with an error")?;
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM; uploads in flight then finish (within the shutdown
/// deadline) before the process exits.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing requests in flight");
}
