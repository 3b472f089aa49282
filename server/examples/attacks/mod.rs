//! The attack benchmark's second round (the review of 2026-12-06): summary waiters from
//! two networks, slow readers, deletes under upload load, the upload that once broke
//! folding, and many distinct large summaries. Each is bounded in count and in time and
//! returns a line saying what it got.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use firsttoken_core::plan::PhasePlan;
use firsttoken_core::schema::Run;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

/// How long the time-bound attacks run.
const PHASE: Duration = Duration::from_secs(20);
pub const SUMMARY_WAITERS: usize = 256;
pub const SLOW_READERS: usize = 768;
pub const DELETES: u64 = 200;
pub const DISTINCT_SUMMARIES: usize = 300;

fn address(a: u8, b: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, a, b))
}

fn client_from(from: IpAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(from)
        .timeout(Duration::from_secs(60))
        .build()
        .expect("a client")
}

/// The status a request got; 0 for no answer.
async fn status_of(request: reqwest::RequestBuilder) -> u16 {
    match request.send().await {
        Ok(r) => r.status().as_u16(),
        Err(_) => 0,
    }
}

fn count(statuses: &Mutex<BTreeMap<u16, u64>>, status: u16) {
    if let Ok(mut statuses) = statuses.lock() {
        *statuses.entry(status).or_default() += 1;
    }
}

fn counted(statuses: &Mutex<BTreeMap<u16, u64>>) -> BTreeMap<u16, u64> {
    statuses.lock().map(|s| s.clone()).unwrap_or_default()
}

/// (e) `SUMMARY_WAITERS` distinct worst-case summaries at once, half from each of two
/// networks (127.0.3.1 and .2), again as soon as all have answered.
pub async fn summary_waiters(target: SocketAddr) -> String {
    let deadline = Instant::now() + PHASE;
    let statuses = Arc::new(Mutex::new(BTreeMap::new()));
    let clients = [client_from(address(3, 1)), client_from(address(3, 2))];
    let mut round = 0;
    while Instant::now() < deadline {
        round += 1;
        let asks: Vec<_> = (0..SUMMARY_WAITERS)
            .map(|i| {
                let (http, statuses) = (clients[i % 2].clone(), statuses.clone());
                let query = format!(
                    "group_by=network,browser,target_version&phase=any&include_demo=true&min_samples={}",
                    30 + round * 1000 + i
                );
                tokio::spawn(async move {
                    let status = status_of(http
                        .get(format!("http://{target}/api/v1/summary?{query}"))).await;
                    count(&statuses, status);
                })
            })
            .collect();
        for ask in asks {
            let _ = ask.await;
        }
    }
    format!("summary answers by status: {:?}", counted(&statuses))
}

/// (f) `SLOW_READERS` connections from eight networks (127.0.4.1–8), each asking for a
/// stored record (`record_id`) with a tiny receive window and never reading the answer,
/// held until the phase ends.
pub async fn slow_readers(target: SocketAddr, record_id: String) -> String {
    let deadline = tokio::time::Instant::now() + PHASE;
    let opened = Arc::new(Mutex::new(0u64));
    let tasks: Vec<_> = (0..SLOW_READERS)
        .map(|i| {
            let (opened, record_id) = (opened.clone(), record_id.clone());
            tokio::spawn(async move {
                let socket = tokio::net::TcpSocket::new_v4().ok()?;
                socket.set_recv_buffer_size(4096).ok()?;
                socket
                    .bind(SocketAddr::new(address(4, 1 + (i % 8) as u8), 0))
                    .ok()?;
                let mut stream = socket.connect(target).await.ok()?;
                let ask = format!("GET /api/v1/runs/{record_id} HTTP/1.1\r\nHost: x\r\n\r\n");
                stream.write_all(ask.as_bytes()).await.ok()?;
                if let Ok(mut opened) = opened.lock() {
                    *opened += 1;
                }
                // Never read; hold the connection until the phase ends.
                tokio::time::sleep_until(deadline).await;
                drop(stream);
                Some(())
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    let opened = opened.lock().map(|o| *o).unwrap_or(0);
    format!("{opened} of {SLOW_READERS} slow readers got to ask")
}

/// (g) `DELETES` runs uploaded beforehand by one network (127.0.5.1), each with its own
/// delete token, deleted 8 at a time while the honest clients upload.
pub async fn deletes(target: SocketAddr, template: &Run) -> String {
    let http = client_from(address(5, 1));
    let mut tokens = Vec::new();
    for n in 0..DELETES {
        let mut run = crate::varied(template, (1 << 41) + n);
        run.run_id = format!("{:08x}-0000-4000-9000-{n:012x}", 0xde1e);
        let token = format!("delete-token-{n:04}-of-the-benchmark");
        let digest = hex(&Sha256::digest(token.as_bytes()));
        let stored = http
            .post(format!("http://{target}/api/v1/runs"))
            .header("content-type", "application/json")
            .header("x-delete-token-sha256", digest)
            .body(serde_json::to_vec(&run).expect("serializes"))
            .send()
            .await
            .map(|r| r.status().as_u16());
        if stored.is_ok_and(|s| s == 201) {
            tokens.push((run.run_id, token));
        }
    }
    let statuses = Arc::new(Mutex::new(BTreeMap::new()));
    let tokens = Arc::new(Mutex::new(tokens));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (http, statuses, tokens) = (http.clone(), statuses.clone(), tokens.clone());
            tokio::spawn(async move {
                loop {
                    let Some((id, token)) = tokens.lock().ok().and_then(|mut t| t.pop()) else {
                        return;
                    };
                    let status = status_of(
                        http.delete(format!("http://{target}/api/v1/runs/{id}"))
                            .bearer_auth(token),
                    )
                    .await;
                    count(&statuses, status);
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    let statuses = counted(&statuses);
    format!(
        "{} of {DELETES} deletes answered 204 (by status: {statuses:?})",
        statuses.get(&204).copied().unwrap_or(0)
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// (h) The upload that once broke folding (review M3): one run whose samples claim 500
/// concurrency levels over six phases its plan does not have.
pub async fn fold_breaker(target: SocketAddr, template: &Run) -> String {
    let mut run = crate::varied(template, 1 << 42);
    run.plan.phases = vec![PhasePlan::Steady { requests: 3000 }];
    let one = run.samples[0].clone();
    let phases = [
        firsttoken_core::plan::Phase::Steady,
        firsttoken_core::plan::Phase::Concurrency,
        firsttoken_core::plan::Phase::Cold,
        firsttoken_core::plan::Phase::Fresh,
        firsttoken_core::plan::Phase::Probe,
        firsttoken_core::plan::Phase::Compare,
    ];
    run.samples = (0..3000u32)
        .map(|i| firsttoken_core::schema::Sample {
            index: i,
            phase: phases[i as usize % 6],
            concurrency: 1 + i % 500,
            ..one.clone()
        })
        .collect();
    let answer = client_from(address(3, 1))
        .post(format!("http://{target}/api/v1/runs"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&run).expect("serializes"))
        .send()
        .await;
    match answer {
        Ok(r) => {
            let status = r.status().as_u16();
            let text = r.text().await.unwrap_or_default();
            format!(
                "the fold-breaking upload: {status} {}",
                text.chars().take(90).collect::<String>()
            )
        }
        Err(e) => format!("the fold-breaking upload: no answer ({e})"),
    }
}

/// (i) `DISTINCT_SUMMARIES` distinct large summaries one after another from one network
/// (127.0.6.1): what the answer cache and the per-network budget make of them.
pub async fn distinct_summaries(target: SocketAddr) -> String {
    let http = client_from(address(6, 1));
    let statuses = Mutex::new(BTreeMap::new());
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0..DISTINCT_SUMMARIES {
        if Instant::now() > deadline {
            break;
        }
        let query = format!(
            "group_by=network,browser,target_version,phase&phase=any&include_demo=true&min_samples={}",
            30 + i
        );
        let status = status_of(http.get(format!("http://{target}/api/v1/summary?{query}"))).await;
        count(&statuses, status);
    }
    format!("summary answers by status: {:?}", counted(&statuses))
}
