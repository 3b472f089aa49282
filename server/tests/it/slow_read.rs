//! A client that stops reading a response (a zero TCP window, as a slow-read attack
//! gives) is cut off once a write has waited `--write-stall-secs`, so a few networks
//! cannot hold every connection, each with a response's memory or a file's descriptor.
//! Once, nothing bounded a response after its head: the connection stayed open for ever.

use crate::common;

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn a_client_that_stops_reading_is_cut_off() {
    let t = common::sqlite().await;
    // A file far larger than the kernel's socket buffers on both sides.
    let dist = tempfile::tempdir().expect("dir");
    std::fs::write(
        dist.path().join("index.html"),
        "<!doctype html><title>x</title>",
    )
    .expect("write");
    let size = 32 << 20;
    std::fs::write(dist.path().join("big.bin"), vec![7u8; size]).expect("write");
    let config = firsttoken_server::Config {
        static_dir: Some(dist.path().to_path_buf()),
        write_stall_secs: 1,
        ..common::config()
    };
    let state = common::state_with(&t.db, config);
    let metrics = state.metrics.clone();
    let address = common::serve(state).await;

    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("a small window");
    let mut stream = socket.connect(address).await.expect("connect");
    stream
        .write_all(b"GET /big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("asked");
    // The client reads nothing: the server's writes wait, and after the stall limit the
    // connection goes.
    let start = Instant::now();
    while metrics.connections_open() == 0 {
        assert!(start.elapsed() < Duration::from_secs(5), "never served");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    while metrics.connections_open() > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "a connection whose client stopped reading is still open after 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // What the client then reads ends early: the response was cut, not finished.
    let mut received = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut received)).await;
    assert!(received.len() < size, "{} bytes of {size}", received.len());
    t.cleanup().await;
}

/// A response that goes on longer than `--response-deadline-secs` is cut there: a client
/// reading just often enough that no write waits long (a trickle) passes the write-stall
/// limit, which alone let it hold the connection as long as the response lasted.
#[tokio::test]
async fn a_response_past_its_deadline_is_cut_off() {
    let t = common::sqlite().await;
    let config = firsttoken_server::Config {
        write_stall_secs: 30,
        // Below the demo's own limit, which a server refuses to start with
        // (Config::check): here the demo stream is the long response to cut.
        response_deadline_secs: 2,
        ..common::config()
    };
    let address = common::serve(common::state_with(&t.db, config)).await;
    // A demo stream of 1,000 tokens 5 ms apart: 5 s of answer, written as it comes.
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let body = r#"{"stream":true}"#;
    stream
        .write_all(
            format!(
                "POST /v1/chat/completions?first_token_ms=1&itl_ms=5&tokens=1000 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .expect("asked");
    let start = Instant::now();
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    // Read as it comes (a trickle reader behaves the same to the server: the writes
    // never wait long, so only the deadline ends it), until the server closes.
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => received.extend_from_slice(&chunk[..n]),
            Err(_) => panic!("nothing for 10 s"),
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "still open after 20 s"
        );
    }
    let elapsed = start.elapsed();
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        !text.contains("[DONE]"),
        "the stream was cut before its end"
    );
    assert!(
        elapsed >= Duration::from_secs(2) && elapsed < Duration::from_secs(6),
        "closed after {elapsed:?}"
    );
    t.cleanup().await;
}
