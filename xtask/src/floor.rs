//! `cargo xtask bench page_floor`: how small the beta user's page could be while it is a
//! Leptos app that runs this engine. The app crate's `floor_*` examples and the page
//! itself are built exactly as Trunk builds the page (the `wasm-release` profile,
//! `wasm-bindgen --target web`, `wasm-opt -Oz` from the tools xtask installs) and printed
//! as served: brotli at quality 11, as `compress.rs` makes them for `dist/`.

use std::path::Path;
use std::process::Command;

use anyhow::Context;

use crate::compress::brotli;
use crate::shell::{self, cargo};
use crate::tools;

/// What is built, and what each stands for.
const BUILDS: [(&str, &str, &str); 4] = [
    (
        "--example",
        "floor_engine",
        "the engine's worker half alone",
    ),
    (
        "--example",
        "floor_page",
        "a Leptos page: signal, button, list, conditional view",
    ),
    (
        "--example",
        "floor_page_engine",
        "that page, also the engine's worker (one module)",
    ),
    (
        "--bin",
        "firsttoken-run",
        "the beta user's page as it ships",
    ),
];

/// wasm-opt's options: the features rustc's wasm uses, which wasm-opt must be told of.
const WASM_OPT: [&str; 7] = [
    "-Oz",
    "--enable-bulk-memory",
    "--enable-nontrapping-float-to-int",
    "--enable-sign-ext",
    "--enable-mutable-globals",
    "--enable-reference-types",
    "--enable-multivalue",
];

pub fn page_floor() -> anyhow::Result<()> {
    let root = shell::workspace_root();
    // One build each: examples bring the crate's dev-dependencies, whose features would
    // otherwise reach the page too.
    for (kind, name, _) in BUILDS {
        shell::run(cargo().args([
            "build",
            "--quiet",
            "--package",
            "firsttoken",
            "--profile",
            "wasm-release",
            "--target",
            "wasm32-unknown-unknown",
            kind,
            name,
        ]))?;
    }

    let built = root.join("target/wasm32-unknown-unknown/wasm-release");
    let out = root.join("target/page-floor");
    println!(
        "\n{:<55} {:>10} {:>10} {:>10}",
        "built alone, as Trunk builds the page", "wasm raw", "wasm br", "script br"
    );
    for (kind, name, meaning) in BUILDS {
        let wasm = if kind == "--example" {
            built.join("examples").join(format!("{name}.wasm"))
        } else {
            built.join(format!("{name}.wasm"))
        };
        let dir = out.join(name);
        shell::run(
            Command::new("wasm-bindgen")
                .args(["--target", "web", "--no-typescript", "--out-dir"])
                .arg(&dir)
                .arg(&wasm),
        )?;
        let bg = dir.join(format!("{name}_bg.wasm"));
        shell::run(
            Command::new(tools::npm_tools_dir().join("node_modules/.bin/wasm-opt"))
                .args(WASM_OPT)
                .arg(&bg)
                .arg("-o")
                .arg(&bg),
        )?;
        let wasm = read(&bg)?;
        let script = read(&dir.join(format!("{name}.js")))?;
        println!(
            "{meaning:<55} {:>10} {:>10} {:>10}",
            wasm.len(),
            brotli(&wasm)?.len(),
            brotli(&script)?.len()
        );
    }
    println!(
        "\nA page's CSS and HTML come on top (about 4.5 KB as served), and the painter when \
         run.html has it."
    );
    Ok(())
}

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}
