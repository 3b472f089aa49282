//! A graceful shutdown finishes the uploads in flight: the server stops accepting, answers
//! what it has, and only then ends.

use crate::common;

use std::time::Duration;

use firsttoken_server::db::Table;
use futures_util::StreamExt;

// A real port: graceful shutdown is `serve`'s.
#[tokio::test]
async fn an_upload_in_flight_when_shutdown_begins_is_still_stored() {
    let t = common::sqlite().await;
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = tcp.local_addr().expect("address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(firsttoken_server::serve(tcp, common::state(&t.db), async {
        let _ = stopped.await;
    }));

    // The body arrives in two halves, 400 ms apart; shutdown begins in between.
    let body = serde_json::to_vec(&common::example_run()).expect("json");
    let (first, second) = body.split_at(body.len() / 2);
    let (first, second) = (first.to_vec(), second.to_vec());
    let chunks = futures_util::stream::iter([first, second]).then(|chunk| async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok::<_, std::io::Error>(chunk)
    });
    let upload = tokio::spawn(
        reqwest::Client::new()
            .post(format!("http://{address}/api/v1/runs"))
            .header("content-type", "application/json")
            .body(reqwest::Body::wrap_stream(chunks))
            .send(),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.send(()).expect("the server is running");

    let response = upload
        .await
        .expect("joined")
        .expect("the upload was answered");
    assert_eq!(response.status(), 201);
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server ends once the upload is done")
        .expect("joined")
        .expect("served");
    assert_eq!(t.db.count(Table::Runs).await.expect("count"), 1);
    // And it accepts nothing new.
    assert!(
        reqwest::get(format!("http://{address}/api/v1/ping"))
            .await
            .is_err()
    );
}
