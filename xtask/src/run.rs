//! `cargo xtask run`: install what is missing, build the release (`cargo xtask build`:
//! the server with the app inside) and start it on http://127.0.0.1:8080 until Ctrl-C.
//! With nothing changed since the last run, the builds are skipped and it serves in
//! seconds.

use std::process::Command;

use anyhow::{Context, bail};

use crate::build;
use crate::shell::Steps;
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
    steps.step("build the app (trunk build --release)", build::build_app)?;
    steps.step(
        "build the server with the app inside (release)",
        build::release_server,
    )?;
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
    let mut child = Command::new(build::release_binary())
        .args([
            "--listen",
            &args.listen,
            "--database-url",
            &args.database_url,
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
