//! The collector on the open internet: every connection, body and request is bounded in
//! time and number, the demo cannot be made to stream for hours, labels and maps cannot
//! grow with what a client makes up, and admin tokens cannot be guessed at leisure. Tests
//! of connections and bodies in transit talk to a real server on a real port, most of them
//! over raw sockets, since a polite HTTP client cannot misbehave the way these tests need;
//! the others call the app in-process.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::http::Method;
use firsttoken_server::Config;
use firsttoken_server::config::Demo;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common;
use crate::common::App;

/// A server configured by `config` on a real port, and the database it keeps.
async fn server(config: Config) -> (SocketAddr, common::TestDb) {
    let t = common::sqlite().await;
    let address = common::serve(common::state_with(&t.db, config)).await;
    (address, t)
}

/// The app configured by `config`, in-process, and the database it keeps.
async fn in_process(config: Config) -> (App, common::TestDb) {
    let t = common::sqlite().await;
    (App::new(common::state_with(&t.db, config)), t)
}

/// Reads until the server closes the connection or `within` passes; what it sent and
/// whether it closed.
async fn read_until_closed(socket: &mut TcpStream, within: Duration) -> (String, bool) {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, socket.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&received).into(), true),
            Ok(Ok(n)) => received.extend_from_slice(&buffer[..n]),
            Err(_) => return (String::from_utf8_lossy(&received).into(), false),
        }
    }
}

// A real port: the header timeout is the connection's.
#[tokio::test]
async fn silent_and_idle_connections_are_closed_after_the_header_timeout() {
    let (address, _db) = server(Config {
        header_read_timeout_secs: 1,
        ..common::config()
    })
    .await;
    // Sockets that never send a byte, one that stops halfway through its headers, and
    // one that sent a whole request and then keeps the connection idle.
    let mut silent = Vec::new();
    for _ in 0..50 {
        silent.push(TcpStream::connect(address).await.expect("connect"));
    }
    let mut halfway = TcpStream::connect(address).await.expect("connect");
    halfway
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    let mut idle = TcpStream::connect(address).await.expect("connect");
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");

    let started = Instant::now();
    let (answer, closed) = read_until_closed(&mut idle, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(closed, "an idle kept-alive connection is closed");
    for socket in silent.iter_mut().chain([&mut halfway]) {
        let (_, closed) = read_until_closed(socket, Duration::from_secs(5)).await;
        assert!(closed, "a silent connection is closed");
    }
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "closed after about 1 s, not {:?}",
        started.elapsed()
    );
}

// A real port: the cap is on connections.
#[tokio::test]
async fn connections_past_the_cap_are_told_to_come_back() {
    let (address, _db) = server(Config {
        max_connections: 4,
        ..common::config()
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(address).await.expect("connect"));
    }
    // The server accepts in order; give it a moment to take all four.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut extra = TcpStream::connect(address).await.expect("connect");
    let (answer, closed) = read_until_closed(&mut extra, Duration::from_secs(3)).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("retry-after: 1"), "{answer}");
    assert!(closed);

    // Once they go, the server answers again.
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let response = reqwest::get(format!("http://{address}/healthz"))
        .await
        .expect("response");
    assert_eq!(response.status(), 200);
    let metrics = reqwest::get(format!("http://{address}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("firsttoken_connections_refused_total 1"),
        "{metrics}"
    );
}

/// A socket from `source` (another loopback address is another network).
async fn connect_from(source: &str, to: std::net::SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{source}:0").parse().expect("address"))
        .expect("bind");
    socket.connect(to).await.expect("connect")
}

// A real port: the cap is on connections, counted by the socket's address.
#[tokio::test]
async fn one_networks_silent_sockets_leave_room_for_the_others() {
    let (address, _db) = server(Config {
        max_connections: 16,
        max_connections_per_network: 3,
        ..common::config()
    })
    .await;
    // 127.0.0.2 holds its three silent sockets; a fourth is closed without a word.
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(connect_from("127.0.0.2", address).await);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut fourth = connect_from("127.0.0.2", address).await;
    let (answer, closed) = read_until_closed(&mut fourth, Duration::from_secs(3)).await;
    assert!(closed && answer.is_empty(), "{answer:?}");

    // Another network is served as if nothing were going on.
    let mut honest = connect_from("127.0.0.3", address).await;
    honest
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let (answer, _) = read_until_closed(&mut honest, Duration::from_secs(3)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // Behind a trusted proxy every connection is the proxy's, so no network cap applies.
    let (proxied, _db) = server(Config {
        max_connections_per_network: 1,
        trust_forwarded_for: true,
        ..common::config()
    })
    .await;
    let _first = connect_from("127.0.0.4", proxied).await;
    let mut second = connect_from("127.0.0.4", proxied).await;
    second
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let (answer, _) = read_until_closed(&mut second, Duration::from_secs(3)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(held);
}

// A real port: a slow client, and a body a client never sends.
#[tokio::test]
async fn a_body_that_trickles_gets_408_and_a_declared_giant_gets_413_unread() {
    let (address, t) = server(Config {
        body_read_timeout_secs: 1,
        ..common::config()
    })
    .await;
    let mut slow = TcpStream::connect(address).await.expect("connect");
    slow.write_all(
        b"POST /api/v1/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"run",
    )
    .await
    .expect("write");
    let started = Instant::now();
    let (answer, _) = read_until_closed(&mut slow, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_timeout"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(4));

    // 100 MB announced: refused from the headers, before a byte of the body is sent.
    let mut giant = TcpStream::connect(address).await.expect("connect");
    giant
        .write_all(
            b"POST /api/v1/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n",
        )
        .await
        .expect("write");
    let (answer, _) = read_until_closed(&mut giant, Duration::from_secs(3)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert_eq!(
        t.db.count(firsttoken_server::db::Table::Runs)
            .await
            .expect("count"),
        0
    );
}

#[tokio::test]
async fn requests_past_the_in_flight_cap_are_shed_but_health_is_answered() {
    let (app, _db) = in_process(Config {
        max_in_flight: 1,
        ..common::config()
    })
    .await;
    // A non-streaming demo answer holds its request in flight for its whole second.
    let slow = tokio::spawn(
        app.post("/v1/chat/completions?first_token_ms=1000&tokens=1")
            .json(&json!({"stream": false, "messages": []}))
            .send(),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let shed = app.get("/api/v1/ping").send().await;
    assert_eq!(shed.status, 503);
    assert_eq!(shed.headers["retry-after"], "1");
    let body = shed.json();
    assert_eq!(body["error"]["code"], "busy");
    let health = app.get("/healthz").send().await;
    assert_eq!(health.status, 200, "health is never shed");
    assert_eq!(slow.await.expect("joined").status, 200);
    let after = app.get("/api/v1/ping").send().await;
    assert_eq!(after.status, 200);
}

#[tokio::test]
async fn shutdown_ends_open_streams_within_its_deadline() {
    let t = common::sqlite().await;
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = tcp.local_addr().expect("address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let config = Config {
        shutdown_deadline_secs: 5,
        ..common::config()
    };
    let server = tokio::spawn(firsttoken_server::serve(
        tcp,
        common::state_with(&t.db, config),
        async {
            let _ = stopped.await;
        },
    ));
    // A stream that would run for a minute, and a connection that sits idle.
    let stream = reqwest::Client::new()
        .post(format!(
            "http://{address}/v1/chat/completions?first_token_ms=10&itl_ms=1000&tokens=60"
        ))
        .json(&json!({"stream": true, "messages": []}))
        .send()
        .await
        .expect("headers");
    let _idle = TcpStream::connect(address).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    stop.send(()).expect("running");
    assert!(
        stream.bytes().await.is_err(),
        "the stream is cut off, not finished"
    );
    tokio::time::timeout(Duration::from_secs(4), server)
        .await
        .expect("the server ends well before the stream would have")
        .expect("joined")
        .expect("served");
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[tokio::test]
async fn the_demo_is_bounded_and_can_be_turned_off() {
    let (app, _db) = in_process(Config {
        demo_max_request_secs: 5,
        demo_max_streams: 1,
        ..common::config()
    })
    .await;
    let chat = json!({"stream": true, "messages": []});
    let post = |query: &str| {
        app.post(&format!("/v1/chat/completions?{query}"))
            .json(&chat)
    };

    // Knobs that ask for an hour are refused, naming the limit.
    let response = post("first_token_ms=100000&itl_ms=10000&tokens=400")
        .send()
        .await;
    assert_eq!(response.status, 400);
    let body = response.json();
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--demo-max-request-secs")),
        "{body}"
    );

    // One stream at a time here: the second is told to come back.
    let open = post("first_token_ms=10&itl_ms=100&tokens=20")
        .response()
        .await;
    let second = post("first_token_ms=10&tokens=2").send().await;
    assert_eq!(second.status, 503);
    assert_eq!(second.headers["retry-after"], "1");
    common::body(open).await.expect("the first stream finishes");

    // A stall ends at the time limit, cut off.
    let started = Instant::now();
    let stalled = post("first_token_ms=10&tokens=4&fault=stall")
        .response()
        .await;
    assert!(common::body(stalled).await.is_err(), "cut off at the limit");
    let took = started.elapsed();
    assert!(
        (Duration::from_secs(5)..Duration::from_secs(8)).contains(&took),
        "{took:?}"
    );

    // Off: the route says so.
    let (off, _db) = in_process(Config {
        demo: Demo::Off,
        ..common::config()
    })
    .await;
    let response = off.post("/v1/chat/completions").json(&chat).send().await;
    assert_eq!(response.status, 404);
    let body = response.json();
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--demo off")),
        "{body}"
    );
}

#[tokio::test]
async fn made_up_methods_share_one_metrics_label() {
    let (app, _db) = in_process(common::config()).await;
    for n in 0..20 {
        let method = Method::from_bytes(format!("MADEUP{n}").as_bytes()).expect("token");
        app.call(method, "/api/v1/ping").send().await;
    }
    let metrics = app.get("/metrics").send().await.text();
    assert!(!metrics.contains("MADEUP"), "{metrics}");
    assert!(metrics.contains("method=\"other\""), "{metrics}");
}

#[tokio::test]
async fn the_forwarded_address_is_the_one_the_trusted_proxy_added() {
    let t = common::sqlite().await;
    let peer: SocketAddr = "10.0.0.2:40000".parse().expect("address");
    let headers = |value: &str| {
        let mut headers = axum::http::HeaderMap::new();
        headers.insert("x-forwarded-for", value.parse().expect("header"));
        headers
    };
    let state = |hops| {
        common::state_with(
            &t.db,
            Config {
                trust_forwarded_for: true,
                proxy_hops: hops,
                ..common::config()
            },
        )
    };
    // The client wrote "1.2.3.4"; the proxy appended the address it saw.
    let sent = headers("1.2.3.4, 198.51.100.7");
    assert_eq!(
        state(1).client_address(&sent, Some(peer)),
        Some("198.51.100.7".parse().expect("ip"))
    );
    // Two proxies: the outer one's entry is second from the right.
    let two = headers("1.2.3.4, 198.51.100.7, 10.0.0.9");
    assert_eq!(
        state(2).client_address(&two, Some(peer)),
        Some("198.51.100.7".parse().expect("ip"))
    );
    // Fewer entries than proxies: the request did not come through them.
    assert_eq!(
        state(2).client_address(&headers("198.51.100.7"), Some(peer)),
        Some(peer.ip())
    );
    // Not trusted: the peer, whatever the header says.
    assert_eq!(
        common::state(&t.db).client_address(&sent, Some(peer)),
        Some(peer.ip())
    );
}

#[tokio::test]
async fn admin_tokens_are_long_and_guesses_run_out() {
    let short = Config {
        admin_token: Some(firsttoken_server::config::Secret("short-token".into())),
        ..common::config()
    };
    let refused = short.check().expect_err("too short");
    assert!(refused.message.contains("at least 32"), "{refused}");

    let (app, _db) = in_process(common::config()).await;
    let export = |token: &str| app.get("/api/v1/export").bearer_auth(token).send();
    assert_eq!(
        export(common::ADMIN_TOKEN).await.status,
        200,
        "the right token works and costs no allowance"
    );
    for _ in 0..firsttoken_server::ADMIN_FAILURES_PER_HOUR as usize {
        assert_eq!(export("a-wrong-guess").await.status, 401);
    }
    let waiting = export("another-wrong-guess").await;
    assert_eq!(
        waiting.status, 429,
        "past the allowance a guess is told to wait"
    );
    assert!(waiting.headers.contains_key("retry-after"));
    // Someone behind the same address (a NAT) used up the guesses: the operator's right
    // token still works. Once, it waited an hour.
    assert_eq!(export(common::ADMIN_TOKEN).await.status, 200);
}

/// Worst-case summaries, eight at once, over tens of thousands of samples: they take
/// their turns (or are told to come back), and meanwhile an upload is stored and
/// `/healthz` says the server is fine. Before summaries were bounded, eight of them held
/// every SQLite connection, the upload waited 30 s for one and failed with 500, and
/// `/healthz` answered 503.
#[tokio::test]
async fn summaries_take_turns_and_never_hold_up_uploads_or_health() {
    let t = common::sqlite().await;
    seed(&t, 400).await;
    let state = common::state(&t.db);
    let app = App::new(state.clone());
    // How many are computed at once, seen from inside the server while they run.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watching = {
        let (summaries, done) = (state.summaries.clone(), done.clone());
        tokio::spawn(async move {
            let mut most = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                most = most.max(summaries.computing());
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            most
        })
    };
    let summaries: Vec<_> = (0..8)
        .map(|i| {
            // Each a different question, so the cache cannot answer for them.
            let request = app.get(&format!(
                "/api/v1/summary?group_by=network,browser,os,target_version&phase=any&min_samples={}",
                i + 1
            ));
            tokio::spawn(async move {
                tokio::time::timeout(Duration::from_secs(60), request.send())
                    .await
                    .map(|r| r.status.as_u16())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A bound a hundred times what an upload takes here, not a speed test: without the
    // bound on summaries the upload waited over 15 s for a connection.
    let prompt = Duration::from_secs(15);
    let upload = tokio::time::timeout(
        prompt,
        app.post("/api/v1/runs")
            .json(&common::run_with(1, |_| {}))
            .send(),
    )
    .await
    .expect("answered");
    assert_eq!(upload.status, 201, "stored while summaries run");
    let health = tokio::time::timeout(prompt, app.get("/healthz").send())
        .await
        .expect("answered");
    assert_eq!(health.status, 200);
    for summary in summaries {
        let status = summary.await.expect("joined").expect("answered");
        assert!(
            status == 200 || status == 503,
            "a summary is answered or told to come back, never {status}"
        );
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let most = watching.await.expect("joined");
    assert_eq!(most, 1, "summaries ran, one at a time");
}

/// `runs` runs of 100 samples each, on six networks, stored straight into the database.
async fn seed(t: &common::TestDb, runs: u64) {
    let mut run: firsttoken_core::schema::Run =
        serde_json::from_value(common::example_run()).expect("example");
    run.targets[0].demo = false;
    let sample = run.samples[0].clone();
    run.samples = (0..100)
        .map(|i| firsttoken_core::schema::Sample {
            index: i,
            ..sample.clone()
        })
        .collect();
    run.plan.phases = vec![firsttoken_core::plan::PhasePlan::Steady { requests: 100 }];
    for n in 0..runs {
        run.run_id = format!("00000000-0000-4000-8000-{:012x}", 1000 + n);
        run.client.network = firsttoken_core::schema::NetworkLabel::ALL[(n % 6) as usize];
        let record = serde_json::to_string(&run).expect("json");
        t.db.insert_run(&run, &record, 1_796_000_000_000, None)
            .await
            .expect("stored");
    }
}

/// 256 summary requests at once from two networks, each a question the cache cannot
/// answer, asked again as soon as answered: uploads from a third network are stored and
/// `/healthz` answers meanwhile. Summaries once held an in-flight permit while they
/// waited up to 5 s for their turn, so 256 of them held every permit and every upload,
/// delete and read got 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summaries_from_two_networks_never_shed_uploads() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let t = common::sqlite().await;
    seed(&t, 100).await;
    let app = App::new(common::state(&t.db));
    let stop = Arc::new(AtomicBool::new(false));
    let asked = Arc::new(AtomicU64::new(0));
    let loops: Vec<_> = (0..256u64)
        .map(|i| {
            let (app, stop, asked) = (app.clone(), stop.clone(), asked.clone());
            let peer = SocketAddr::from(([127, 0, 0, 2 + (i % 2) as u8], 40_000));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let n = asked.fetch_add(1, Ordering::Relaxed);
                    let uri = format!(
                        "/api/v1/summary?group_by=network&min_samples={}",
                        n % 1_000_000 + 1
                    );
                    let status = app.get(&uri).peer(peer).send().await.status;
                    assert!([200, 429, 503].contains(&status.as_u16()), "{status}");
                    // An answer given at once never yields: let the other tasks run, as
                    // separate connections would.
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let honest = SocketAddr::from(([127, 0, 0, 4], 40_000));
    let mut statuses = Vec::new();
    for n in 0..20 {
        let run = common::run_with(n, |_| {});
        let upload = app
            .post("/api/v1/runs")
            .json(&run)
            .peer(honest)
            .send()
            .await;
        statuses.push(upload.status.as_u16());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let health = app.get("/healthz").peer(honest).send().await.status;
    stop.store(true, Ordering::Relaxed);
    for handle in loops {
        handle.await.expect("a summary loop");
    }
    assert!(
        asked.load(Ordering::Relaxed) > 256,
        "the summaries kept coming"
    );
    assert!(statuses.iter().all(|s| *s == 201), "uploads: {statuses:?}");
    assert_eq!(health, 200);
}
