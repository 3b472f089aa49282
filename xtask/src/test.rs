//! `cargo xtask test`: everything CI checks, in order, each step timed. Installs what is
//! missing and starts what the tests need (a server for the browser tests).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};

use crate::build::build_app;
use crate::shell::{self, Steps, cargo};
use crate::tools;

#[derive(clap::Args)]
pub struct Args {}

pub fn test(_args: Args) -> anyhow::Result<()> {
    let mut steps = Steps::default();
    let result = all(&mut steps);
    steps.report();
    if result.is_ok() {
        println!("\nAll checks passed.");
    }
    result
}

fn all(steps: &mut Steps) -> anyhow::Result<()> {
    steps.step(
        "house rules (//! lines, no markers, named paths exist, file sizes)",
        crate::tidy::tidy,
    )?;
    steps.step("install missing tools", tools::ensure_for_test)?;
    steps.step("PostgreSQL for the storage tests", tools::ensure_postgres)?;
    steps.step("formatting (cargo fmt --check)", || {
        shell::run(cargo().args(["fmt", "--all", "--", "--check"]))
    })?;
    steps.step(
        "the book (links and anchors checked, mdbook build docs)",
        crate::docs::build,
    )?;
    // First: every step after it builds the server with this app inside (`linted_cargo`),
    // and the end-to-end tests serve it.
    steps.step("build the app (trunk build --release)", build_app)?;
    steps.step(
        "clippy and build, native: every target, warnings denied",
        build_native,
    )?;
    steps.step(
        "clippy and build, the app and its painter for wasm32: every target, warnings denied",
        || {
            shell::run(linted_cargo().args([
                "test",
                "--package",
                "firsttoken",
                "--package",
                "firsttoken-paint",
                "--target",
                "wasm32-unknown-unknown",
                "--all-targets",
                "--no-run",
            ]))
        },
    )?;
    steps.step(
        "native and end-to-end tests (headless Chromium, Firefox and WebKitGTK)",
        || {
            shell::run(
                linted_cargo()
                    .args(["test", "--workspace", "--all-features", "--no-fail-fast"])
                    .args(NOT_NATIVE)
                    .envs(tools::driver_env())
                    .env("FIRSTTOKEN_SERVER_WITH_APP", server_with_app()),
            )
        },
    )?;
    steps.step("browser tests in headless Chromium", browser_tests)?;
    Ok(())
}

/// cargo with clippy as the compiler of the workspace's own crates, warnings denied: the
/// way `cargo clippy` runs it (`RUSTC_WORKSPACE_WRAPPER`, lint flags in `CLIPPY_ARGS`),
/// but in a build rather than a check. One build then both lints every target and makes
/// the test binaries, where `cargo clippy` followed by `cargo test` compiled every
/// dependency twice (a check, then a build). Every step that builds the workspace uses
/// it, so no step rebuilds what another made.
///
/// It also puts the built app (`dist/`) inside the server it builds, as `cargo xtask
/// build` does in release (`server/build.rs`): the end-to-end test of the one-file
/// deployment copies that debug binary into an empty folder and runs it there. Building
/// the release as well only for that test took about 3 of CI's 19 minutes (2026-12-07).
fn linted_cargo() -> Command {
    let mut cargo = cargo();
    cargo
        .env("RUSTC_WORKSPACE_WRAPPER", "clippy-driver")
        .env(
            "CLIPPY_ARGS",
            "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__",
        )
        .env("FIRSTTOKEN_APP_DIR", shell::workspace_root().join("dist"));
    cargo
}

/// The debug server the native build made, with the app inside ([`linted_cargo`]).
fn server_with_app() -> PathBuf {
    shell::workspace_root().join("target/debug/firsttoken-server")
}

/// The crates that run only in the browser, left out of the native build: the app and its
/// painter are linted and built for wasm32 (the step after it), and the app's unit tests
/// run there, in headless Chromium ([`browser_tests`]). Built natively as well, they cost
/// Leptos, web-sys and their macros' second copies, about a minute of the native build
/// (2026-12-07).
const NOT_NATIVE: [&str; 4] = ["--exclude", "firsttoken", "--exclude", "firsttoken-paint"];

/// Every native target of the workspace but [`NOT_NATIVE`], linted, with the tests'
/// features.
fn build_native() -> anyhow::Result<()> {
    shell::run(
        linted_cargo()
            .args([
                "test",
                "--workspace",
                "--all-targets",
                "--all-features",
                "--no-run",
            ])
            .args(NOT_NATIVE),
    )
}

/// The app's wasm-bindgen tests, run by wasm-bindgen-test-runner in headless Chromium
/// (flags from `webdriver.json`): its modules' unit tests, and those in `tests/` against a
/// real server this starts first.
fn browser_tests() -> anyhow::Result<()> {
    // The server binary the native test build made (cargo puts the binaries integration
    // tests may run in target/debug/): a no-op after that step, a build when this runs
    // alone. `cargo build --bin` would not do: without the dev-dependencies' features it
    // builds tokio and the rest a second time.
    build_native()?;
    let server = ServerProcess::start()?;
    println!("  test server: {}", server.url);
    shell::run(
        linted_cargo()
            .args([
                "test",
                "--package",
                "firsttoken",
                "--target",
                "wasm32-unknown-unknown",
                "--lib",
                "--test",
                "browser",
            ])
            .env(
                "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER",
                "wasm-bindgen-test-runner",
            )
            .env("CHROMEDRIVER", tools::CHROMEDRIVER)
            // The runner prefers geckodriver and safaridriver when their variables are
            // set: these tests run in Chromium, whatever the shell says.
            .env_remove("GECKODRIVER")
            .env_remove("SAFARIDRIVER")
            .env("WASM_BINDGEN_TEST_TIMEOUT", "120")
            // Read at compile time by the tests (option_env!): they cannot start a server.
            .env("FIRSTTOKEN_TEST_SERVER", &server.url),
    )
}

/// The debug server binary on a free port with its own SQLite file; killed when dropped.
struct ServerProcess {
    child: Child,
    url: String,
    data: PathBuf,
}

impl ServerProcess {
    fn start() -> anyhow::Result<Self> {
        let data =
            std::env::temp_dir().join(format!("firsttoken-browser-tests-{}", std::process::id()));
        std::fs::create_dir_all(&data)?;
        let mut child = Command::new(server_with_app())
            .args(["--listen", "127.0.0.1:0", "--static-dir", "dist"])
            .arg("--database-url")
            .arg(format!("sqlite://{}", data.join("runs.db").display()))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start target/debug/firsttoken-server")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let url = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(url) = line.strip_prefix("firsttoken is running at ") {
                        break url.trim_end_matches('/').to_owned();
                    }
                }
                _ => {
                    let _ = child.kill();
                    bail!("the test server exited before saying where it listens");
                }
            }
        };
        // Keep draining its output so it can never block on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(Self { child, url, data })
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}
