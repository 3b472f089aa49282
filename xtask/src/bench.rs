//! `cargo xtask bench`: benchmarks that print figures to quote, never timed assertions.
//! `cargo xtask bench attack load` runs only the benchmarks named.

use anyhow::bail;

use crate::build::build_app;
use crate::shell::{self, Steps, cargo};
use crate::tools;

#[derive(clap::Args)]
pub struct Args {
    /// Run only these: first_load, engine_bias, field, fetch_options (the app in headless
    /// Chromium), page_floor (the page's size floor), load, ingest_cost, attack (the
    /// collector), stream (the SSE reader)
    only: Vec<String>,
}

/// The benchmarks in the browser are examples of the e2e crate: the real server, the
/// built app and headless Chromium.
const IN_BROWSER: [(&str, &str); 4] = [
    (
        "first_load",
        "a first visit to a share link: weight, and load time on emulated cellular",
    ),
    ("engine_bias", "the engine's bias on loopback"),
    (
        "field",
        "every figure on emulated links (fiber, 4G, poor cellular; HTTP/1.1 and HTTP/2 over TLS 1.3)",
    ),
    (
        "fetch_options",
        "what the engine's fetch() options and its pause between batches cost a JS reader",
    ),
];
/// Sizes, built and measured by xtask itself ([`crate::floor`]).
const SIZES: [(&str, &str); 1] = [(
    "page_floor",
    "how small a Leptos page that runs this engine can be, as served",
)];
/// Benchmarks of a library alone, with criterion: the name, the package and its bench
/// target (`cargo bench --package … --bench …`).
const LIBRARIES: [(&str, &str, &str, &str); 1] = [(
    "stream",
    "firsttoken-stream",
    "parse",
    "the SSE reader beside eventsource-stream (criterion)",
)];
/// The collector's benchmarks are examples of the server crate, built for release.
const COLLECTOR: [(&str, &str); 3] = [
    ("load", "the collector under load (release build)"),
    (
        "ingest_cost",
        "what one upload costs the collector in CPU, stage by stage (release build)",
    ),
    (
        "attack",
        "the collector under attack (release build, the server in a process of its own)",
    ),
];

pub fn bench(args: Args) -> anyhow::Result<()> {
    let known: Vec<&str> = IN_BROWSER
        .iter()
        .chain(&SIZES)
        .chain(&COLLECTOR)
        .map(|(n, _)| *n)
        .chain(LIBRARIES.iter().map(|(n, ..)| *n))
        .collect();
    if let Some(unknown) = args.only.iter().find(|n| !known.contains(&n.as_str())) {
        bail!(
            "no benchmark is called {unknown:?}; there are {}",
            known.join(", ")
        );
    }
    let wanted = |name: &str| args.only.is_empty() || args.only.iter().any(|n| n == name);
    let browser: Vec<_> = IN_BROWSER.iter().filter(|(n, _)| wanted(n)).collect();
    let sizes: Vec<_> = SIZES.iter().filter(|(n, _)| wanted(n)).collect();
    let collector: Vec<_> = COLLECTOR.iter().filter(|(n, _)| wanted(n)).collect();
    let libraries: Vec<_> = LIBRARIES.iter().filter(|(n, ..)| wanted(n)).collect();

    let mut steps = Steps::default();
    if !browser.is_empty() || !sizes.is_empty() || !collector.is_empty() {
        steps.step("install missing tools", tools::ensure_for_browser)?;
    }
    // The collector benchmarks run the release binary, which carries the app.
    if !browser.is_empty() || !collector.is_empty() {
        steps.step("build the app (trunk build --release)", build_app)?;
    }
    if !collector.is_empty() {
        steps.step(
            "PostgreSQL for the collector benchmarks",
            tools::ensure_postgres,
        )?;
    }
    for (example, name) in browser {
        steps.step(name, || {
            shell::run(
                cargo()
                    .args([
                        "run",
                        "--quiet",
                        "--package",
                        "firsttoken-e2e",
                        "--features",
                        "browser",
                    ])
                    .args(["--example", example])
                    .envs(tools::driver_env()),
            )
        })?;
    }
    for (_, name) in sizes {
        steps.step(name, crate::floor::page_floor)?;
    }
    for (example, name) in collector {
        steps.step(name, || {
            // The attack benchmark runs the server binary itself, to read its memory and
            // descriptors from /proc.
            crate::build::release_server()?;
            shell::run(
                cargo()
                    .args([
                        "run",
                        "--quiet",
                        "--release",
                        "--package",
                        "firsttoken-server",
                        "--example",
                        example,
                    ])
                    .env("FIRSTTOKEN_SERVER_BIN", crate::build::release_binary()),
            )
        })?;
    }
    for (_, package, target, name) in libraries {
        steps.step(name, || {
            shell::run(cargo().args(["bench", "--package", package, "--bench", target]))
        })?;
    }
    steps.report();
    Ok(())
}
