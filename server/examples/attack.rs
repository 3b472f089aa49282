//! Attacks the collector on loopback while honest clients upload, and prints what the
//! honest ones saw (figures, never assertions). Run with `cargo xtask bench`.
//!
//! The server is the real release binary (`FIRSTTOKEN_SERVER_BIN`) in a process of its
//! own, on a SQLite file holding 1,000,000 samples, so its resident memory and open file
//! descriptors can be read from `/proc`. Every client binds its own loopback address
//! (127.0.0.0/8 is all loopback on Linux), so each is a network of its own to the server's
//! per-network budgets: the honest uploaders are 127.0.1.x, the `/healthz` prober
//! 127.0.2.1, the attacker 127.0.3.1.
//!
//! While 16 clients upload 100-sample runs back to back, the attacker in turn:
//! - (a) holds 1,500 half-open sockets (headers never finished), opening again whatever
//!   the server closes;
//! - (b) runs 16 worst-case summaries at once, again and again;
//! - (c) sends 100,000 demo requests, each naming a pool of its own;
//! - (d) sends 10,000 requests with made-up methods;
//! - (e)–(i), the second round ([`attacks`]): 256 summary waiters from two networks,
//!   768 slow readers, 200 deletes under upload load, the upload that once broke
//!   folding, and 300 distinct large summaries.
//!
//! An honest client treats `429` and `503` as the app does: it waits `Retry-After` and
//! sends the same run again, so "lost" counts runs that were never stored at all. Each
//! attack is bounded in count and in time and stops by itself.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use firsttoken_core::schema::Run;
use firsttoken_crowd::stats::percentile;
use firsttoken_server::Db;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

mod attacks;
mod support;
use support::{fill, template, varied};

const HONEST_CLIENTS: u8 = 16;
const STORED_SAMPLES: u64 = 1_000_000;
const HALF_OPEN_SOCKETS: usize = 1_500;
const SUMMARIES_AT_ONCE: usize = 16;
const DEMO_REQUESTS: u64 = 100_000;
const DEMO_AT_ONCE: usize = 64;
const ODD_METHODS: u64 = 10_000;
/// The longest any one attack runs, whatever its count.
const ATTACK_LIMIT: Duration = Duration::from_secs(60);
/// How long the quiet baseline and the time-bound attacks (a, b) run.
const PHASE: Duration = Duration::from_secs(20);

fn address(last: [u8; 2]) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, last[0], last[1]))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let binary = std::env::var_os("FIRSTTOKEN_SERVER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/firsttoken-server")
        });
    let dir = tempfile::tempdir()?;
    let db_path = dir.path().join("attack.db");
    let db_url = format!("sqlite://{}", db_path.display());
    {
        let db = Db::connect(&db_url).await?;
        fill(&db, &template()?, STORED_SAMPLES).await?;
    }
    let mut server = Server::start(&binary, &db_url).await?;
    println!(
        "\nThe collector ({}) on {}, SQLite with {STORED_SAMPLES} samples; {HONEST_CLIENTS} honest clients upload 100-sample runs back to back\n",
        binary.display(),
        server.address
    );
    println!(
        "{:<44} {:>9} {:>9} {:>6} {:>9} {:>9} {:>8} {:>8} {:>6} {:>6}",
        "while",
        "uploads/s",
        "p99 ms",
        "lost",
        "refusals",
        "health p99",
        "RSS MB",
        "ΔRSS MB",
        "fds",
        "Δfds"
    );
    let template = template()?;
    let attacks: [(&str, Attack); 10] = [
        ("nothing (baseline)", Attack::None),
        ("(a) 1,500 half-open sockets", Attack::HalfOpen),
        ("(b) 16 worst-case summaries at once", Attack::Summaries),
        ("(c) 100,000 demo requests, unique pools", Attack::DemoPools),
        (
            "(d) 10,000 requests with random methods",
            Attack::OddMethods,
        ),
        (
            "(e) 256 summary waiters, two networks",
            Attack::SummaryWaiters,
        ),
        ("(f) 768 slow readers", Attack::SlowReaders),
        ("(g) 200 deletes under upload load", Attack::Deletes),
        ("(h) the fold-breaking upload", Attack::FoldBreaker),
        (
            "(i) 300 distinct large summaries",
            Attack::DistinctSummaries,
        ),
    ];
    let mut next_run = 0u64;
    for (name, attack) in attacks {
        let before = server.resources()?;
        let outcome = under(&server, &template, &mut next_run, attack).await?;
        // Let what the attack left (closing sockets, finished streams) settle.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after = server.resources()?;
        let lost = outcome.made - server.stored_since(outcome.first_run, &db_url).await?;
        println!(
            "{name:<44} {:>9.1} {:>9.0} {:>6} {:>9} {:>9.1} {:>8.1} {:>+8.1} {:>6} {:>+6}   {}",
            outcome.stored as f64 / outcome.seconds,
            percentile(&outcome.upload_ms, 99.0).unwrap_or(f64::NAN),
            lost,
            outcome.refusals,
            percentile(&outcome.health_ms, 99.0).unwrap_or(f64::NAN),
            after.rss_mb,
            after.rss_mb - before.rss_mb,
            after.fds,
            after.fds as i64 - before.fds as i64,
            outcome.attack_note,
        );
    }
    server.stop().await;
    Ok(())
}

#[derive(Debug, Clone, Copy)]
enum Attack {
    None,
    HalfOpen,
    Summaries,
    DemoPools,
    OddMethods,
    SummaryWaiters,
    SlowReaders,
    Deletes,
    FoldBreaker,
    DistinctSummaries,
}

/// What the honest clients saw during one attack.
struct Outcome {
    seconds: f64,
    /// Runs the honest clients made, and the id number of the first.
    made: u64,
    first_run: u64,
    /// Uploads answered 201, and the latency of each.
    stored: u64,
    upload_ms: Vec<f64>,
    /// Answers that asked to come back later (429, 503) or no answer at all.
    refusals: u64,
    health_ms: Vec<f64>,
    attack_note: String,
}

/// Runs `attack` while the honest clients upload and the prober asks `/healthz`.
async fn under(
    server: &Server,
    template: &Run,
    next_run: &mut u64,
    attack: Attack,
) -> anyhow::Result<Outcome> {
    let stop = Arc::new(AtomicBool::new(false));
    let first_run = *next_run;
    let counter = Arc::new(AtomicU64::new(first_run));
    let started = Instant::now();
    let uploaders: Vec<_> = (0..HONEST_CLIENTS)
        .map(|c| {
            let (stop, counter, template) = (stop.clone(), counter.clone(), template.clone());
            let target = server.address;
            tokio::spawn(async move { honest_uploads(c, target, &template, &counter, &stop).await })
        })
        .collect();
    let prober = {
        let stop = stop.clone();
        let target = server.address;
        tokio::spawn(async move { probe_health(target, &stop).await })
    };
    let attack_note = match attack {
        Attack::None => {
            tokio::time::sleep(PHASE).await;
            String::new()
        }
        Attack::HalfOpen => half_open(server.address).await,
        Attack::Summaries => summaries(server.address).await,
        Attack::DemoPools => demo_pools(server.address).await,
        Attack::OddMethods => odd_methods(server.address).await,
        Attack::SummaryWaiters => attacks::summary_waiters(server.address).await,
        // A record of the stored fill (numbered from 2^40).
        Attack::SlowReaders => attacks::slow_readers(server.address, run_id(1 << 40)).await,
        Attack::Deletes => attacks::deletes(server.address, template).await,
        Attack::FoldBreaker => attacks::fold_breaker(server.address, template).await,
        Attack::DistinctSummaries => attacks::distinct_summaries(server.address).await,
    };
    stop.store(true, Ordering::Relaxed);
    let seconds = started.elapsed().as_secs_f64();
    let mut outcome = Outcome {
        seconds,
        made: 0,
        first_run,
        stored: 0,
        upload_ms: Vec::new(),
        refusals: 0,
        health_ms: prober.await?,
        attack_note,
    };
    for uploader in uploaders {
        let (latencies, refusals) = uploader.await?;
        outcome.stored += latencies.len() as u64;
        outcome.upload_ms.extend(latencies);
        outcome.refusals += refusals;
    }
    *next_run = counter.load(Ordering::Relaxed);
    outcome.made = *next_run - first_run;
    Ok(outcome)
}

/// One honest client: uploads runs back to back from its own address until told to stop,
/// and finishes the run it is sending (waiting `Retry-After` as the app does) before it
/// returns. Returns the latency of each stored upload and how many answers said later.
async fn honest_uploads(
    client: u8,
    target: SocketAddr,
    template: &Run,
    counter: &AtomicU64,
    stop: &AtomicBool,
) -> (Vec<f64>, u64) {
    let http = client_from(address([1, client + 1]), Duration::from_secs(30));
    let (mut latencies, mut refusals) = (Vec::new(), 0);
    while !stop.load(Ordering::Relaxed) {
        let n = counter.fetch_add(1, Ordering::Relaxed);
        let body = serde_json::to_vec(&varied(template, n)).expect("serializes");
        // Gives up on a run only after a minute of trying: then it counts as lost.
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let start = Instant::now();
            let answer = http
                .post(format!("http://{target}/api/v1/runs"))
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await;
            match answer {
                Ok(r) if r.status().is_success() => {
                    latencies.push(start.elapsed().as_secs_f64() * 1000.0);
                    break;
                }
                Ok(r) => {
                    refusals += 1;
                    let wait = r
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                        .unwrap_or(1);
                    tokio::time::sleep(Duration::from_secs(wait)).await;
                }
                Err(_) => {
                    refusals += 1;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }
    (latencies, refusals)
}

/// `/healthz` every 50 ms; the latency of each answer (a failure counts as 5 s).
async fn probe_health(target: SocketAddr, stop: &AtomicBool) -> Vec<f64> {
    let http = client_from(address([2, 1]), Duration::from_secs(5));
    let mut latencies = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let start = Instant::now();
        let ok = http
            .get(format!("http://{target}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        latencies.push(if ok {
            start.elapsed().as_secs_f64() * 1000.0
        } else {
            5000.0
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    latencies
}

/// An HTTP client whose connections come from `from`.
fn client_from(from: IpAddr, timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(from)
        .timeout(timeout)
        .build()
        .expect("a client")
}

/// A TCP connection from the attacker's address.
async fn attacker_socket(target: SocketAddr) -> std::io::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(address([3, 1]), 0))?;
    socket.connect(target).await
}

/// (a) Keeps `HALF_OPEN_SOCKETS` connections that start a request and never finish its
/// headers, opening a new one (after a second) whenever the server closes one.
async fn half_open(target: SocketAddr) -> String {
    let deadline = Instant::now() + PHASE;
    let opened = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..HALF_OPEN_SOCKETS)
        .map(|_| {
            let opened = opened.clone();
            tokio::spawn(async move {
                while Instant::now() < deadline {
                    if let Ok(mut socket) = attacker_socket(target).await {
                        opened.fetch_add(1, Ordering::Relaxed);
                        let _ = socket
                            .write_all(b"POST /api/v1/runs HTTP/1.1\r\nHost: x\r\n")
                            .await;
                        let mut buffer = [0u8; 256];
                        // Held until the server closes it or the attack ends.
                        let left = deadline.saturating_duration_since(Instant::now());
                        let _ = tokio::time::timeout(left, async {
                            while socket.read(&mut buffer).await.is_ok_and(|n| n > 0) {}
                        })
                        .await;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    format!("{} sockets opened", opened.load(Ordering::Relaxed))
}

/// (b) `SUMMARIES_AT_ONCE` clients ask for the costliest summary back to back, each a
/// slightly different query so the cache cannot answer.
async fn summaries(target: SocketAddr) -> String {
    let deadline = Instant::now() + PHASE;
    let answers = Arc::new(std::sync::Mutex::new(
        std::collections::BTreeMap::<u16, u64>::new(),
    ));
    let tasks: Vec<_> = (0..SUMMARIES_AT_ONCE)
        .map(|i| {
            let answers = answers.clone();
            tokio::spawn(async move {
                let http = client_from(address([3, 1]), Duration::from_secs(60));
                let mut n = 0;
                while Instant::now() < deadline {
                    n += 1;
                    let query = format!(
                        "group_by=network,browser,target_version&phase=any&include_demo=true&min_samples={}",
                        30 + i * 1000 + n
                    );
                    let status = match http
                        .get(format!("http://{target}/api/v1/summary?{query}"))
                        .send()
                        .await
                    {
                        Ok(r) => r.status().as_u16(),
                        Err(_) => 0,
                    };
                    if let Ok(mut answers) = answers.lock() {
                        *answers.entry(status).or_default() += 1;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    let answers = answers.lock().map(|a| a.clone()).unwrap_or_default();
    format!("summary answers by status: {answers:?}")
}

/// (c) `DEMO_REQUESTS` short demo requests, `DEMO_AT_ONCE` at a time, each naming a
/// worker pool of its own.
async fn demo_pools(target: SocketAddr) -> String {
    let deadline = Instant::now() + ATTACK_LIMIT;
    let next = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..DEMO_AT_ONCE)
        .map(|_| {
            let (next, ok) = (next.clone(), ok.clone());
            tokio::spawn(async move {
                let http = client_from(address([3, 1]), Duration::from_secs(10));
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= DEMO_REQUESTS || Instant::now() > deadline {
                        return;
                    }
                    let url = format!(
                        "http://{target}/v1/chat/completions?first_token_ms=0&itl_ms=0&tokens=1&slots=1&pool=attack-{n}"
                    );
                    let answer = http
                        .post(url)
                        .header("content-type", "application/json")
                        .body(r#"{"model":"demo","stream":true,"messages":[]}"#)
                        .send()
                        .await;
                    if let Ok(r) = answer
                        && r.status().is_success()
                        && r.bytes().await.is_ok()
                    {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    format!(
        "{} sent, {} streamed to the end",
        next.load(Ordering::Relaxed).min(DEMO_REQUESTS),
        ok.load(Ordering::Relaxed)
    )
}

/// (d) `ODD_METHODS` requests, each with a method nobody uses (a fresh token every time),
/// 32 connections at a time.
async fn odd_methods(target: SocketAddr) -> String {
    let deadline = Instant::now() + ATTACK_LIMIT;
    let next = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let next = next.clone();
            tokio::spawn(async move {
                let http = client_from(address([3, 1]), Duration::from_secs(10));
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= ODD_METHODS || Instant::now() > deadline {
                        return;
                    }
                    let method = reqwest::Method::from_bytes(format!("X{n:08X}").as_bytes())
                        .expect("a token");
                    let _ = http
                        .request(method, format!("http://{target}/api/v1/runs"))
                        .send()
                        .await;
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    format!("{} sent", next.load(Ordering::Relaxed).min(ODD_METHODS))
}

/// The server binary running in a process of its own.
struct Server {
    child: tokio::process::Child,
    address: SocketAddr,
}

/// A process's resident memory and open file descriptors.
struct Resources {
    rss_mb: f64,
    fds: usize,
}

impl Server {
    async fn start(binary: &std::path::Path, db_url: &str) -> anyhow::Result<Self> {
        let mut child = tokio::process::Command::new(binary)
            .args(["--listen", "127.0.0.1:0", "--static-dir", "/nonexistent"])
            .args(["--database-url", db_url])
            // Honest clients upload far faster than people: only the attacks are limited.
            .args(["--uploads-per-minute", "1000000"])
            .args(["--samples-per-hour", "0", "--upload-bytes-per-hour", "0"])
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let address = loop {
            let line = lines
                .next_line()
                .await?
                .context("the server exited before saying where it listens")?;
            if let Some(url) = line.strip_prefix("firsttoken is running at ") {
                break url
                    .trim_end_matches('/')
                    .trim_start_matches("http://")
                    .parse()?;
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self { child, address })
    }

    fn resources(&self) -> anyhow::Result<Resources> {
        let pid = self.child.id().context("the server has exited")?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let rss_kb: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .context("no VmRSS")?;
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
        Ok(Resources {
            rss_mb: rss_kb / 1024.0,
            fds,
        })
    }

    /// Runs stored from honest run number `first` on.
    async fn stored_since(&self, first: u64, db_url: &str) -> anyhow::Result<u64> {
        let db = Db::connect(db_url).await?;
        let firsttoken_server::db::Pool::Sqlite(pool) = db.pool() else {
            anyhow::bail!("the benchmark runs on SQLite");
        };
        // Honest runs are numbered from 0; the stored fill is numbered from 2^40.
        let stored: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM runs WHERE run_id >= ? AND run_id < ?")
                .bind(run_id(first))
                .bind(run_id(1 << 40))
                .fetch_one(pool)
                .await?;
        Ok(stored as u64)
    }

    async fn stop(&mut self) {
        let _ = self.child.kill().await;
    }
}

/// The id [`varied`] gives run `n`.
fn run_id(n: u64) -> String {
    format!(
        "{:08x}-0000-4000-8000-{:012x}",
        n >> 48,
        n & 0xffff_ffff_ffff
    )
}
