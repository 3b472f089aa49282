//! Serving the built app.

mod common;

#[tokio::test]
async fn serves_the_app_and_its_routes_with_sound_caching() {
    let dist = tempfile::tempdir().expect("dir");
    std::fs::write(
        dist.path().join("index.html"),
        format!(
            "<!doctype html><title>firsttoken</title><script type=\"module\">alert(1)</script>{}",
            "<p>firsttoken</p>".repeat(20)
        ),
    )
    .expect("write");
    std::fs::write(
        dist.path().join("app-1a2b3c4d5e6f7a8b.js"),
        "console.log('firsttoken');".repeat(20),
    )
    .expect("write");
    let t = common::sqlite().await;
    let config = firsttoken_server::Config {
        static_dir: dist.path().to_path_buf(),
        ..common::config()
    };
    let base = format!(
        "http://{}",
        common::serve(common::state_with(&t.db, config)).await
    );
    let client = reqwest::Client::new();

    let index = client.get(format!("{base}/")).send().await.expect("index");
    assert_eq!(index.status(), 200);
    assert_eq!(index.headers()["cache-control"], "no-cache");
    // Its own scripts only (the inline one by digest), never framed, no referrer.
    let policy = index.headers()["content-security-policy"]
        .to_str()
        .expect("ascii");
    for directive in [
        "default-src 'self'",
        "script-src 'self' 'wasm-unsafe-eval' 'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='",
        "connect-src *",
        "frame-ancestors 'none'",
        "object-src 'none'",
    ] {
        assert!(policy.contains(directive), "{directive} in {policy}");
    }
    assert_eq!(index.headers()["referrer-policy"], "no-referrer");
    assert_eq!(index.headers()["x-frame-options"], "DENY");
    // Cross-origin isolated, for the finest clock the browser gives.
    assert_eq!(index.headers()["cross-origin-opener-policy"], "same-origin");
    assert_eq!(
        index.headers()["cross-origin-embedder-policy"],
        "require-corp"
    );
    assert!(
        index
            .text()
            .await
            .expect("text")
            .contains("<title>firsttoken</title>")
    );

    // An app route that is not a file gets the app, so a reload works.
    let route = client
        .get(format!("{base}/results"))
        .send()
        .await
        .expect("route");
    assert_eq!(route.status(), 200);
    assert!(
        route
            .text()
            .await
            .expect("text")
            .starts_with("<!doctype html>")
    );

    // A missing file is not the app.
    let missing = client
        .get(format!("{base}/favicon.ico"))
        .send()
        .await
        .expect("missing");
    assert_eq!(missing.status(), 404);

    // The worker has a fixed name, so it must be revalidated.
    std::fs::write(dist.path().join("engine_worker.js"), "importScripts();").expect("write");
    let worker = client
        .get(format!("{base}/engine_worker.js"))
        .send()
        .await
        .expect("worker");
    assert_eq!(worker.status(), 200);
    assert_eq!(worker.headers()["cache-control"], "no-cache");

    let asset = client
        .get(format!("{base}/app-1a2b3c4d5e6f7a8b.js"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .expect("asset");
    assert_eq!(
        asset.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    assert_eq!(asset.headers()["content-encoding"], "gzip");
}

#[tokio::test]
async fn without_a_built_app_the_root_says_how_to_build_it() {
    let t = common::sqlite().await;
    let config = firsttoken_server::Config {
        static_dir: "/nonexistent".into(),
        ..common::config()
    };
    let base = format!(
        "http://{}",
        common::serve(common::state_with(&t.db, config)).await
    );
    let response = reqwest::get(format!("{base}/")).await.expect("response");
    assert_eq!(response.status(), 503);
    assert!(
        response
            .text()
            .await
            .expect("text")
            .contains("cargo xtask run")
    );
}
