//! `cargo xtask bench`: benchmarks that print figures to quote, never timed assertions.

use crate::run::build_app;
use crate::shell::{self, Steps, cargo};
use crate::tools;

/// Each benchmark is an example of the e2e crate: the real server, the built app and
/// headless Chromium.
const BENCHMARKS: [(&str, &str); 2] = [
    (
        "a first visit to a share link: weight, and load time on emulated cellular",
        "first_load",
    ),
    ("the engine's bias on loopback", "engine_bias"),
];

pub fn bench() -> anyhow::Result<()> {
    let mut steps = Steps::default();
    steps.step("install missing tools", tools::ensure_for_browser)?;
    steps.step(
        "PostgreSQL for the collector benchmark",
        tools::ensure_postgres,
    )?;
    steps.step("build the app (trunk build --release)", build_app)?;
    for (name, example) in BENCHMARKS {
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
                    .env("CHROMEDRIVER", tools::CHROMEDRIVER),
            )
        })?;
    }
    steps.step("the collector under load (release build)", || {
        shell::run(cargo().args([
            "run",
            "--quiet",
            "--release",
            "--package",
            "firsttoken-server",
            "--example",
            "load",
        ]))
    })?;
    steps.report();
    Ok(())
}
