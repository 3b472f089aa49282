//! What the end-to-end tests stand on: the real server on a real port with a real SQLite
//! file, serving the built app (`dist/`), and headless Chromium driven through
//! chromedriver.
//!
//! The tests run with the `browser` feature, which `cargo xtask test` turns on after it
//! has built the app and installed Chromium.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use firsttoken_core::plan::TargetPlan;
use firsttoken_core::share::Study;
use firsttoken_server::metrics::Metrics;
use firsttoken_server::{AppState, Config, Db};
use firsttoken_stream::dialect::Dialect;
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

#[cfg(feature = "browser")]
pub mod browser;
pub mod endpoint;
pub mod link;
pub mod nginx;
#[cfg(feature = "browser")]
mod operator;
#[cfg(feature = "browser")]
pub mod target;
#[cfg(feature = "browser")]
pub mod tls;

/// The server's settings in tests: the built app in `static_dir`, if any.
fn test_config(static_dir: Option<PathBuf>) -> Config {
    Config {
        static_dir: Some(static_dir.unwrap_or_else(|| "/nonexistent".into())),
        // The tests upload from one address, far more often than a person would.
        uploads_per_minute: 100_000,
        admin_token: Some(firsttoken_server::config::Secret(ADMIN_TOKEN.into())),
        ..Config::defaults()
    }
}

/// The test servers' admin token: the operator signs links with it.
pub const ADMIN_TOKEN: &str = "e2e-admin-token-of-at-least-32-characters";

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("e2e/ sits in the workspace")
        .to_path_buf()
}

/// A benchmark's setting from the environment: `default` when the variable `name` is
/// unset, else what `read` makes of its value; an error names the variable and the value.
pub fn bench_setting<T>(
    name: &str,
    default: T,
    read: impl FnOnce(&str) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(text) => read(&text).with_context(|| format!("{name}={text:?}")),
    }
}

/// The benchmarks' reference: a minimal hand-written JavaScript SSE reader (`reader.js`
/// beside this file), for a page or a worker. `run(url, n, k, w, after, options)` sends
/// `n` requests `k` at once, batch after batch, after `w` warm-up requests, awaiting
/// `after()` after each batch, and resolves to each request's bias: the TTFT it read
/// minus the demo server's own time to write its first token. In a worker, `pause` is the
/// engine's pause after each batch; the page answers it with [`PAGE_SIDE`].
pub const READER: &str = include_str!("reader.js");

/// The page's side of [`READER`]'s `pause`, for a reader in a worker:
/// `answerAfterDrawing(worker, draw)` draws (`draw()`) in the next animation frame, waits
/// two frames more and 30 ms, and answers the worker, as the app answers its engine after
/// each batch (`after_drawing` in `src/session.rs`); `drawLine` changes one line of the
/// page's text, the least a page draws.
pub const PAGE_SIDE: &str = r#"
function answerAfterDrawing(worker, draw) {
  requestAnimationFrame(() => {
    draw();
    requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => worker.postMessage('drawn'), 30)));
  });
}
let batchesDrawn = 0;
function drawLine() {
  const line = document.getElementById('batches') || document.body.appendChild(document.createElement('p'));
  line.id = 'batches';
  line.textContent = `batch ${++batchesDrawn}`;
}
"#;

/// Where the tests save screenshots of each state, for a person to look at.
pub fn screenshot_dir() -> PathBuf {
    workspace_root().join("target/e2e-screenshots")
}

/// The firsttoken server on a free loopback port, with its own SQLite file.
#[derive(Debug)]
pub struct TestServer {
    pub address: SocketAddr,
    pub db: Db,
    config: Config,
    /// The server's counters, kept across [`TestServer::stop`] and `resume`: TCP
    /// connections accepted so far.
    metrics: Arc<Metrics>,
    running: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
    /// Holds the SQLite file; removed when the server is dropped.
    _data: TempDir,
}

impl TestServer {
    /// The whole server: the built app, the demo target and the collector.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_with(|_| {}).await
    }

    /// The whole server, with its test settings changed by `edit`.
    pub async fn start_with(edit: impl FnOnce(&mut Config)) -> anyhow::Result<Self> {
        let dist = workspace_root().join("dist");
        if !dist.join("index.html").is_file() {
            bail!(
                "{} has no built app: `cargo xtask test` builds it before running these tests",
                dist.display()
            );
        }
        let mut config = test_config(Some(dist));
        edit(&mut config);
        Self::with(config).await
    }

    /// The server without the app: a collector (and a demo target) on another origin.
    pub async fn collector() -> anyhow::Result<Self> {
        Self::with(test_config(None)).await
    }

    /// A collector that will [`stop`](TestServer::stop) and [`resume`](TestServer::resume)
    /// on the same port. Its port is below the kernel's ephemeral range, where neither a
    /// `bind(0)` nor an outgoing connection's own port can take it while it is closed
    /// (one did: "Address already in use" on resuming), and no other server of this
    /// process gets the same one.
    pub async fn collector_that_goes_away() -> anyhow::Result<Self> {
        let tcp = stable_port_listener().await?;
        Self::listening(test_config(None), tcp).await
    }

    async fn with(config: Config) -> anyhow::Result<Self> {
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding a loopback port")?;
        Self::listening(config, tcp).await
    }

    async fn listening(config: Config, tcp: tokio::net::TcpListener) -> anyhow::Result<Self> {
        let mut config = config;
        if config.cookie_target_prefixes.is_empty() {
            // The test operator lets its signed links send cookies to its own origin.
            config.cookie_target_prefixes = vec![format!("http://{}/", tcp.local_addr()?)];
        }
        let data = tempfile::tempdir()?;
        let url = format!("sqlite://{}", data.path().join("runs.db").display());
        let db = Db::connect(&url).await?;
        let mut server = Self {
            address: tcp.local_addr()?,
            db,
            config,
            metrics: Arc::default(),
            running: None,
            _data: data,
        };
        server.serve(tcp);
        Ok(server)
    }

    fn serve(&mut self, tcp: tokio::net::TcpListener) {
        let state = AppState::new(self.db.clone(), self.config.clone());
        let mut state = state;
        state.metrics = self.metrics.clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = firsttoken_server::serve(tcp, state, async {
                let _ = stopped.await;
            })
            .await;
            if let Err(e) = served {
                eprintln!("test server stopped: {e}");
            }
        });
        self.running = Some((stop, task));
    }

    /// Stops answering (as a collector that went away): connections are refused until
    /// [`TestServer::resume`].
    pub async fn stop(&mut self) {
        if let Some((stop, task)) = self.running.take() {
            let _ = stop.send(());
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), task).await;
        }
    }

    /// Answers again, on the same address and with the same database.
    pub async fn resume(&mut self) -> anyhow::Result<()> {
        let tcp = tokio::net::TcpListener::bind(self.address)
            .await
            .with_context(|| format!("binding {} again", self.address))?;
        self.serve(tcp);
        Ok(())
    }

    /// `http://127.0.0.1:port/path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// A state for another server in front of the same database (the same settings as
    /// this one's, without the app).
    pub fn state(&self) -> AppState {
        AppState::new(self.db.clone(), test_config(None))
    }

    /// [`TestServer::state`] with its app under `base_path` (`/firsttoken`), as behind a
    /// reverse proxy that passes a prefix through.
    pub fn state_under(&self, base_path: &str) -> AppState {
        let config = Config {
            base_path: base_path.to_owned(),
            ..test_config(None)
        };
        AppState::new(self.db.clone(), config)
    }

    /// How many TCP connections the server has accepted.
    pub fn connections_accepted(&self) -> u64 {
        self.metrics.connections_accepted()
    }

    /// The demo target on this server as a study's target, with `knobs` in its query,
    /// probes, fresh connections (`{n}.localhost`) and the demo's timing breakdown.
    pub fn demo_target(&self, knobs: &str) -> TargetPlan {
        let path = format!("/v1/chat/completions?{knobs}");
        let mut target = TargetPlan::new(
            "demo",
            &self.url(&path),
            Dialect::OpenaiChat,
            r#"{"model":"demo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hello?"}]}"#,
        );
        target.probe_url = Some(self.url("/api/v1/ping"));
        target.timings_pointer = Some("/server_timings".into());
        target.fresh_url = Some(format!(
            "http://{{n}}.localhost:{}{path}",
            self.address.port()
        ));
        target
    }

    /// The share link of `study`, opened on this server's app.
    pub fn link(&self, study: &Study) -> String {
        self.url(&format!("/run#{}", study.to_fragment()))
    }

    /// The share link of `study` signed by this server, as its operator makes it with the
    /// admin token (`POST /api/v1/studies` signs with the same key and code).
    pub async fn signed_link(&self, study: &Study) -> anyhow::Result<String> {
        let mut study = study.clone();
        // Signing gives a study without a name one, as the endpoint does.
        study.study_id = study.study_id.or_else(|| Some("signedbytheopera".into()));
        let key = self.db.signing_key().await?;
        let unsigned = study.to_fragment();
        let signature = firsttoken_server::routes::studies::signature(&key, &unsigned);
        let id = study.study_id.clone().unwrap_or_default();
        self.db.record_signed_study(&id, &study.title).await?;
        Ok(self.url(&format!("/run#{unsigned}.{signature}")))
    }

    /// The record of the one run this server stored (an error if it stored none or more).
    /// Every stored run record.
    pub async fn records(&self) -> anyhow::Result<Vec<serde_json::Value>> {
        let mut records = Vec::new();
        for id in self.db.run_ids().await? {
            let record = self.db.run_record(&id).await?.context("stored")?;
            records.push(serde_json::from_str(&record)?);
        }
        Ok(records)
    }

    /// Runs the study on the page `browser` has loaded now as a beta user would (consent,
    /// Start), waits for it to finish from inside the page (nothing polls the page while
    /// it measures) and for its upload, and returns the record this server stored.
    #[cfg(feature = "browser")]
    pub async fn run_and_read_record(&self, browser: &browser::Browser) -> anyhow::Result<String> {
        let runs_before = self.db.run_ids().await?.len();
        browser.consent_and_start().await?;
        browser
            .wait_for_text_quietly("[data-testid=run-status]", "Finished")
            .await?;
        browser
            .wait_for_count(
                "[data-testid=stored-run-link]",
                1,
                std::time::Duration::from_secs(60),
            )
            .await?;
        self.record_after(runs_before).await
    }

    /// The record of the one run stored since there were `runs_before`; an error if none
    /// or several were.
    pub async fn record_after(&self, runs_before: usize) -> anyhow::Result<String> {
        let ids = self.db.run_ids().await?;
        anyhow::ensure!(
            ids.len() == runs_before + 1,
            "{} runs stored since, not 1",
            ids.len().saturating_sub(runs_before)
        );
        self.db
            .run_record(ids.last().context("a run")?)
            .await?
            .context("stored")
    }

    pub async fn only_record(&self) -> anyhow::Result<serde_json::Value> {
        let ids = self.db.run_ids().await?;
        anyhow::ensure!(ids.len() == 1, "{} runs stored, not 1", ids.len());
        let record = self.db.run_record(&ids[0]).await?.context("stored")?;
        Ok(serde_json::from_str(&record)?)
    }
}

/// A loopback listener on a port below the kernel's ephemeral range
/// (`/proc/sys/net/ipv4/ip_local_port_range`; 32768 where it cannot be read), from a
/// process-wide counter that starts at an offset of the process id, so that two test runs
/// at once seldom meet and one run never hands a port out twice.
async fn stable_port_listener() -> anyhow::Result<tokio::net::TcpListener> {
    use std::sync::atomic::{AtomicU32, Ordering};
    const SPAN: u32 = 8_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    let low = ephemeral_low.saturating_sub(SPAN).max(1_024);
    let span = ephemeral_low.saturating_sub(low).max(1);
    let start = std::process::id() % span;
    for _ in 0..100 {
        let offset = (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let port = u16::try_from(low + offset).context("a port number")?;
        if let Ok(tcp) = tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            return Ok(tcp);
        }
    }
    bail!("no free loopback port below {ephemeral_low} after 100 tries")
}
