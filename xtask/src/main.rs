//! firsttoken's automation. `cargo xtask run` builds everything and starts the server;
//! `cargo xtask test` runs every check CI runs. Both install what is missing first.

mod bench;
mod build;
mod circles;
mod compress;
mod docs;
mod floor;
mod paint;
mod run;
mod shell;
mod test;
mod tidy;
mod tools;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "firsttoken's automation", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Install what is missing, build the app and start the server on http://127.0.0.1:8080
    Run(run::Args),
    /// Build the release without starting it: one `firsttoken-server` binary with the app
    /// inside (target/release/firsttoken-server)
    Build,
    /// Formatting, clippy, native tests, browser tests in headless Chromium, end-to-end tests
    Test(test::Args),
    /// Serve the book in docs/ on http://127.0.0.1:3000, rebuilt as you edit
    Docs,
    /// The house rules a compiler does not check (also the first step of `test`)
    Tidy,
    /// The import graph between the project's source files: its size, and any circle in it
    Circles,
    /// Benchmarks that print figures: first visit, engine bias, the collector under load
    /// and under attack
    Bench(bench::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // Every path below is relative to the workspace root, wherever cargo was called from.
    std::env::set_current_dir(shell::workspace_root())?;
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Build => build::build(),
        Command::Test(args) => test::test(args),
        Command::Bench(args) => bench::bench(args),
        Command::Docs => docs::serve(),
        Command::Tidy => tidy::tidy(),
        Command::Circles => circles::circles(),
    }
}
