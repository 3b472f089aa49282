//! The one-file deployment: the `firsttoken-server` binary with the built app inside it,
//! copied into an empty folder and started there with no flag but its address. The
//! operator's page makes a link, a beta user runs the quick protocol through it and
//! uploads, all served from inside the binary; the folder then holds the binary and its
//! SQLite database, and nothing else.
//!
//! The binary is the one `FIRSTTOKEN_SERVER_WITH_APP` names. `cargo xtask test` names the
//! debug server it built with the app inside (the same `server/build.rs` embedding as the
//! release, in the test profile); without the variable, the release `cargo xtask build`
//! makes, `target/release/firsttoken-server`.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use firsttoken_e2e::browser::{Browser, DESKTOP};
use firsttoken_e2e::nginx::free_port;
use thirtyfour::prelude::*;

const WAIT: Duration = Duration::from_secs(60);
/// A fast demo answer, so the quick protocol takes a few seconds.
const FAST: &str = "first_token_ms=40&itl_ms=2&tokens=8";

/// The server with the app inside it: see the module's comment.
fn server_with_app() -> anyhow::Result<PathBuf> {
    let binary = std::env::var_os("FIRSTTOKEN_SERVER_WITH_APP").map_or_else(
        || firsttoken_e2e::workspace_root().join("target/release/firsttoken-server"),
        PathBuf::from,
    );
    if !binary.is_file() {
        bail!(
            "{} is not there: `cargo xtask build` makes it (`cargo xtask test` builds one in debug \
             and names it in FIRSTTOKEN_SERVER_WITH_APP)",
            binary.display()
        );
    }
    Ok(binary)
}

#[tokio::test]
async fn the_one_file_server_alone_serves_a_beta_users_quick_run() -> anyhow::Result<()> {
    let folder = tempfile::tempdir()?;
    let binary = folder.path().join("firsttoken-server");
    std::fs::copy(server_with_app()?, &binary).context("copying the server")?;
    let port = free_port()?;
    let root = format!("http://127.0.0.1:{port}");
    let mut server = tokio::process::Command::new(&binary)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .current_dir(folder.path())
        .env_clear()
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .context("starting the copied server")?;
    let mut answered = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            answered = true;
            break;
        }
        if let Some(status) = server.try_wait()? {
            bail!("the copied server stopped: {status}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answered, "the copied server never listened on {port}");

    let browser = Browser::start(DESKTOP).await?;
    let driver = &browser.driver;
    driver.goto(format!("{root}/")).await?;
    // The app's files come from inside the binary, brotli where the browser takes it.
    let served = driver
        .execute(
            "const html = await (await fetch('/')).text();
             const wasm = html.match(/[\\w-]+_bg\\.wasm/)[0];
             const r = await fetch('/' + wasm);
             await r.arrayBuffer();
             return [String(r.status), r.headers.get('content-type'), r.headers.get('content-encoding'),
                     r.headers.get('cache-control')];",
            Vec::new(),
        )
        .await?;
    let served: [Option<String>; 4] = serde_json::from_value(served.json().clone())?;
    assert_eq!(served[0].as_deref(), Some("200"), "{served:?}");
    assert_eq!(served[1].as_deref(), Some("application/wasm"), "{served:?}");
    assert_eq!(served[2].as_deref(), Some("br"), "{served:?}");
    assert_eq!(
        served[3].as_deref(),
        Some("public, max-age=31536000, immutable"),
        "{served:?}"
    );

    // The operator makes a quick link for the demo on this server.
    let target = browser
        .wait_for_count("[data-testid=target-url]", 1, WAIT)
        .await?
        .remove(0);
    let demo = format!("{root}/v1/chat/completions");
    assert_eq!(target.prop("value").await?.unwrap_or_default(), demo);
    target.send_keys(Key::Control + "a").await?;
    target.send_keys(format!("{demo}?{FAST}")).await?;
    driver
        .find(By::Css("[data-testid=protocol] option[value=quick]"))
        .await?
        .click()
        .await?;
    let link = browser.make_link(WAIT).await?;
    assert!(link.starts_with(&format!("{root}/run#v1.")), "{link}");

    // A beta user opens it, agrees, runs and uploads.
    driver.goto(&link).await?;
    browser.consent_and_start().await?;
    let stored = browser
        .wait_for_count("[data-testid=stored-run-link]", 1, Duration::from_secs(120))
        .await?[0]
        .prop("href")
        .await?
        .unwrap_or_default();
    assert!(stored.starts_with(&root), "{stored}");
    browser.quit().await?;

    server.start_kill()?;
    server.wait().await?;
    // One file deployed; the database is the only thing it wrote.
    let mut left: Vec<String> = std::fs::read_dir(folder.path())?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<anyhow::Result<_>>()?;
    left.sort();
    assert_eq!(left, ["data", "firsttoken-server"]);
    let database = folder.path().join("data/firsttoken.db");
    assert!(database.is_file(), "the run went to {}", database.display());
    Ok(())
}
