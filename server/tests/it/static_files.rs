//! Serving the built app.

use crate::common;

use crate::common::App;

/// A server serving the app built in `static_dir`, with its settings changed by `edit`,
/// and the database it keeps.
async fn serve_app(
    static_dir: &std::path::Path,
    edit: impl FnOnce(&mut firsttoken_server::Config),
) -> (App, common::TestDb) {
    let t = common::sqlite().await;
    let mut config = firsttoken_server::Config {
        static_dir: Some(static_dir.to_path_buf()),
        ..common::config()
    };
    edit(&mut config);
    (App::new(common::state_with(&t.db, config)), t)
}

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
    let (app, _t) = serve_app(dist.path(), |_| {}).await;

    let index = app.get("/").send().await;
    assert_eq!(index.status, 200);
    assert_eq!(index.headers["cache-control"], "no-cache");
    // Its own scripts only (the inline one by digest), never framed, no referrer.
    let policy = index.headers["content-security-policy"]
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
    assert_eq!(index.headers["referrer-policy"], "no-referrer");
    assert_eq!(index.headers["x-frame-options"], "DENY");
    // Cross-origin isolated, for the finest clock the browser gives.
    assert_eq!(index.headers["cross-origin-opener-policy"], "same-origin");
    assert_eq!(
        index.headers["cross-origin-embedder-policy"],
        "require-corp"
    );
    assert!(index.text().contains("<title>firsttoken</title>"));

    // An app route that is not a file gets the app, so a reload works.
    let route = app.get("/results").send().await;
    assert_eq!(route.status, 200);
    assert!(route.text().starts_with("<!doctype html>"));

    // The beta user's page is its own bundle, allowed by its own script's digest.
    std::fs::write(
        dist.path().join("run.html"),
        "<!doctype html><title>run</title><script type=\"module\">alert(2)</script>",
    )
    .expect("write");
    let (with_run, _t2) = serve_app(dist.path(), |_| {}).await;
    for path in ["/run", "/run/", "/run.html"] {
        let run = with_run.get(path).send().await;
        assert_eq!(run.status, 200, "{path}");
        let policy = run.headers["content-security-policy"]
            .to_str()
            .expect("ascii")
            .to_owned();
        // printf 'alert(2)' | openssl dgst -sha256 -binary | base64
        assert!(
            policy.contains("'sha256-4axlHpxgDbFzJObpXPFZgZhULrEGgJiud3OwxN9unHg='"),
            "{policy}"
        );
        assert!(run.text().contains("<title>run</title>"), "{path}");
    }
    let operator = with_run.get("/results").send().await;
    assert!(operator.text().contains("<title>firsttoken</title>"));

    // A missing file is not the app.
    let missing = app.get("/favicon.ico").send().await;
    assert_eq!(missing.status, 404);

    // A file with a fixed name (no content hash) must be revalidated.
    std::fs::write(dist.path().join("robots.txt"), "User-agent: *").expect("write");
    let worker = app.get("/robots.txt").send().await;
    assert_eq!(worker.status, 200);
    assert_eq!(worker.headers["cache-control"], "no-cache");

    let asset = app
        .get("/app-1a2b3c4d5e6f7a8b.js")
        .header("accept-encoding", "gzip")
        .send()
        .await;
    assert_eq!(
        asset.headers["cache-control"],
        "public, max-age=31536000, immutable"
    );
    assert_eq!(asset.headers["content-encoding"], "gzip");
    assert_eq!(asset.headers["vary"], "accept-encoding");
}

/// `cargo xtask` writes `name.br` and `name.gz` beside each file at build time: a browser
/// that accepts brotli gets the `.br` file as it is, one that accepts only gzip the `.gz`,
/// any other the file itself; each answer says it varies by `Accept-Encoding`.
#[tokio::test]
async fn precompressed_copies_go_to_the_browsers_that_accept_them() {
    let dist = tempfile::tempdir().expect("dir");
    std::fs::write(
        dist.path().join("index.html"),
        "<!doctype html><title>t</title>",
    )
    .expect("write");
    let name = "firsttoken-1a2b3c4d5e6f7a8b_bg.wasm";
    // The server sends the copies as they are; marker bytes show which one it chose.
    for (file, bytes) in [
        (name.to_owned(), b"the wasm itself".as_slice()),
        (format!("{name}.br"), b"the brotli copy"),
        (format!("{name}.gz"), b"the gzip copy"),
    ] {
        std::fs::write(dist.path().join(file), bytes).expect("write");
    }
    let (app, _t) = serve_app(dist.path(), |_| {}).await;
    for (accept, encoding, body) in [
        ("gzip, deflate, br, zstd", Some("br"), "the brotli copy"),
        ("gzip, deflate", Some("gzip"), "the gzip copy"),
        ("identity", None, "the wasm itself"),
    ] {
        let response = app
            .get(&format!("/{name}"))
            .header("accept-encoding", accept)
            .send()
            .await;
        assert_eq!(response.status, 200, "{accept}");
        let headers = &response.headers;
        assert_eq!(
            headers
                .get("content-encoding")
                .map(|v| v.to_str().expect("ascii")),
            encoding,
            "{accept}"
        );
        assert_eq!(headers["content-type"], "application/wasm", "{accept}");
        assert_eq!(headers["vary"], "accept-encoding", "{accept}");
        // Not by `Origin`: the page's module preload sends it and the engine's worker
        // does not, and a cache split by it made the worker download the bundle again.
        let varies: Vec<&str> = headers
            .get_all("vary")
            .iter()
            .map(|v| v.to_str().expect("ascii"))
            .collect();
        assert!(
            !varies
                .iter()
                .any(|v| v.split(',').any(|h| h.trim() == "origin")),
            "{varies:?}"
        );
        assert_eq!(
            headers["cache-control"],
            "public, max-age=31536000, immutable"
        );
        assert_eq!(response.text(), body, "{accept}");
    }
}

#[tokio::test]
async fn without_a_built_app_the_root_says_how_to_build_it() {
    let (app, _t) = serve_app(std::path::Path::new("/nonexistent"), |_| {}).await;
    let response = app.get("/").send().await;
    assert_eq!(response.status, 503);
    assert!(response.text().contains("cargo xtask run"));
}

/// `--base-path /firsttoken`: the app, its files, the collector and the demo answer under
/// the prefix (as behind a reverse proxy that passes `/firsttoken/…` through), the page
/// loads its files from there and says where it lives, a stored run's URL carries the
/// prefix, and nothing outside the prefix answers.
#[tokio::test]
async fn under_a_base_path_everything_is_there_and_nothing_outside() {
    let dist = tempfile::tempdir().expect("dir");
    std::fs::write(
        dist.path().join("index.html"),
        "<!doctype html><html><head><script type=\"module\">import init from '/app-1a2b3c4d5e6f7a8b.js'; await init();</script></head></html>",
    )
    .expect("write");
    std::fs::write(
        dist.path().join("app-1a2b3c4d5e6f7a8b.js"),
        "export default 1;",
    )
    .expect("write");
    let (app, _t) = serve_app(dist.path(), |c| c.base_path = "/firsttoken".into()).await;
    let get = |path: &str| app.get(path).send();

    for page in [
        "/firsttoken",
        "/firsttoken/",
        "/firsttoken/run",
        "/firsttoken/index.html",
    ] {
        let response = get(page).await;
        assert_eq!(response.status, 200, "{page}");
        let policy = response.headers["content-security-policy"]
            .to_str()
            .expect("ascii")
            .to_owned();
        let html = response.text();
        assert!(
            html.contains("<meta name=\"firsttoken-base\" content=\"/firsttoken\" />"),
            "{page}: {html}"
        );
        assert!(
            html.contains("from '/firsttoken/app-1a2b3c4d5e6f7a8b.js'"),
            "{html}"
        );
        // The inline script is allowed as it is served, rewritten.
        let script = html
            .split("<script type=\"module\">")
            .nth(1)
            .and_then(|s| s.split("</script>").next())
            .expect("the inline script");
        let digest = {
            use sha2::Digest;
            base64_standard(&sha2::Sha256::digest(script.as_bytes()))
        };
        assert!(policy.contains(&format!("'sha256-{digest}'")), "{policy}");
    }
    let asset = get("/firsttoken/app-1a2b3c4d5e6f7a8b.js").await;
    assert_eq!(asset.status, 200);
    assert_eq!(asset.text(), "export default 1;");
    assert_eq!(get("/firsttoken/api/v1/ping").await.status, 200);
    // The demo's redirect stays under the prefix, and following it (as a client follows a
    // 307: the same method and body) leads to the answer.
    let demo = |path: &str| app.post(path).body("{}").send();
    let redirect =
        demo("/firsttoken/v1/chat/completions?first_token_ms=1&itl_ms=1&tokens=2&redirect=true")
            .await;
    assert!(redirect.status.is_redirection(), "{}", redirect.status);
    let location = redirect.headers["location"].to_str().expect("ascii");
    let followed = demo(location).await;
    assert_eq!(
        followed.status, 200,
        "followed the redirect under the prefix"
    );
    assert!(
        location.starts_with("/firsttoken/v1/chat/completions"),
        "{location}"
    );

    let stored = app
        .post("/firsttoken/api/v1/runs")
        .json(&common::example_run())
        .send()
        .await;
    assert_eq!(stored.status, 201);
    let location = stored.headers["location"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(
        location.starts_with("/firsttoken/api/v1/runs/"),
        "{location}"
    );
    assert_eq!(get(&location).await.status, 200);

    for outside in [
        "/",
        "/run",
        "/api/v1/ping",
        "/v1/chat/completions",
        "/firsttokenx/",
    ] {
        let response = get(outside).await;
        assert_eq!(response.status, 404, "{outside}");
        assert!(
            response.text().contains("served under /firsttoken/"),
            "{outside}"
        );
    }
}

/// Standard base64 with padding, as CSP digests are written (the server's own encoder is
/// private; this one is independent of it).
fn base64_standard(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}
