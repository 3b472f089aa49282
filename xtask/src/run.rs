//! `cargo xtask run`: install what is missing, build the app and the server in release,
//! and serve both on http://127.0.0.1:8080 until Ctrl-C.

use std::process::Command;

use anyhow::{Context, bail};

use crate::shell::{self, Steps, cargo};
use crate::tools;

#[derive(clap::Args)]
pub struct Args {
    /// Address the server listens on
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// Where runs are stored (a SQLite file by default)
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "sqlite://data/firsttoken.db"
    )]
    database_url: String,
    /// Serve everything under this path (`/firsttoken`), as behind a reverse proxy on
    /// your own domain
    #[arg(long, env = "FIRSTTOKEN_BASE_PATH", default_value = "")]
    base_path: String,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut steps = Steps::default();
    steps.step("install missing tools", tools::ensure_build_tools)?;
    steps.step("build the app (trunk build --release)", build_app)?;
    steps.step("build the server (release)", || {
        shell::run(cargo().args(["build", "--release", "--package", "firsttoken-server"]))
    })?;
    steps.report();

    let root = format!(
        "http://{}{}",
        args.listen,
        args.base_path.trim_end_matches('/')
    );
    println!(
        "\nStarting firsttoken on {root}/\n  \
         the app:         {root}/\n  \
         the demo target: POST {root}/v1/chat/completions\n  \
         the collector:   {root}/api/v1/runs (stored in {db})\n\
         Stop it with Ctrl-C.\n",
        db = args.database_url,
    );
    let mut child = Command::new(shell::workspace_root().join("target/release/firsttoken-server"))
        .args([
            "--listen",
            &args.listen,
            "--database-url",
            &args.database_url,
            "--static-dir",
            "dist",
            "--base-path",
            &args.base_path,
        ])
        .spawn()
        .context("cannot start the server")?;
    // Ctrl-C in a terminal reaches the server too and it shuts down gracefully; a SIGINT
    // sent to xtask alone is passed on. Either way xtask waits for the server to finish.
    let pid = child.id().to_string();
    ctrlc::set_handler(move || {
        let _ = Command::new("kill").args(["-INT", &pid]).status();
    })
    .context("cannot install the Ctrl-C handler")?;
    let status = child.wait().context("waiting for the server")?;
    if !status.success() {
        bail!("the server stopped: {status}");
    }
    println!("firsttoken stopped.");
    Ok(())
}

/// Builds the two bundles with `trunk build --release`, offline, with the wasm-opt xtask
/// installed: the operator's pages (`index.html`) into `dist/`, the beta user's page
/// (`run.html`) into `target/trunk-run/`, whose files are then copied beside the first
/// (content-hashed names never collide; the stylesheet is the same file), and the
/// landing painter (`paint.html`) into `target/trunk-paint/`, whose module `run.html`
/// then loads first ([`crate::paint`]). Then the brotli and gzip copies the server sends
/// ([`crate::compress`]).
pub fn build_app() -> anyhow::Result<()> {
    // Trunk is offline and passes --offline to cargo: the crates must be here first.
    shell::run(cargo().args(["fetch", "--quiet"]))?;
    let root = shell::workspace_root();
    let run_dist = root.join("target/trunk-run");
    let paint_dist = root.join("target/trunk-paint");
    for (html, dist) in [
        ("index.html", root.join("dist")),
        ("run.html", run_dist.clone()),
        ("paint.html", paint_dist.clone()),
    ] {
        shell::run(
            Command::new("trunk")
                .args([
                    "build",
                    html,
                    "--release=true",
                    "--html-output",
                    html,
                    "--dist",
                ])
                .arg(&dist)
                .env("PATH", tools::path_with_tools())
                .env("TRUNK_SKIP_VERSION_CHECK", "true")
                .env("NO_COLOR", "true"),
        )?;
    }
    for entry in std::fs::read_dir(&run_dist).context("reading the run bundle")? {
        let path = entry?.path();
        let Some(name) = path.file_name() else {
            continue;
        };
        if path.is_file() && name != ".trunk-lock" {
            std::fs::copy(&path, root.join("dist").join(name))
                .with_context(|| format!("copying {}", path.display()))?;
        }
    }
    crate::paint::add_to_run_page(&paint_dist, &root.join("dist"))?;
    crate::compress::precompress(&root.join("dist"))
}
