//! `cargo xtask build`: the release an operator deploys, one `firsttoken-server` binary
//! with the built app inside it. Builds the app with Trunk (skipped when nothing it is made
//! from changed since the last build), then the server in release with the app embedded
//! (`server/build.rs` reads the folder `FIRSTTOKEN_APP_DIR` names). Starts nothing.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use crate::shell::{self, Steps, cargo};
use crate::tools;

/// What the app is made from, relative to the workspace root: a change to any file under
/// these (outside `target/`) rebuilds it. Every workspace crate the app or the painter
/// depends on is here (a test checks it against the manifests).
const APP_INPUTS: &[&str] = &[
    "src",
    "stream/src",
    "stream/Cargo.toml",
    "core/src",
    "core/schema",
    "core/Cargo.toml",
    "crowd/src",
    "crowd/Cargo.toml",
    "pages/src",
    "pages/Cargo.toml",
    "paint/src",
    "paint/Cargo.toml",
    "style",
    "index.html",
    "run.html",
    "paint.html",
    "Trunk.toml",
    "Cargo.toml",
    "Cargo.lock",
    "rust-toolchain.toml",
    // How it is built: these files of xtask shape what lands in dist/.
    "xtask/src/build.rs",
    "xtask/src/paint.rs",
    "xtask/src/compress.rs",
];

/// Where the last build's fingerprint is kept (not in `dist/`, which is served).
fn stamp_path() -> PathBuf {
    shell::workspace_root().join("target/app-build.fingerprint")
}

/// The release binary `cargo xtask build` makes.
pub fn release_binary() -> PathBuf {
    shell::workspace_root().join("target/release/firsttoken-server")
}

pub fn build() -> anyhow::Result<()> {
    let mut steps = Steps::default();
    steps.step("install missing tools", tools::ensure_build_tools)?;
    steps.step("build the app (trunk build --release)", build_app)?;
    steps.step(
        "build the server with the app inside (release)",
        release_server,
    )?;
    steps.report();
    let binary = release_binary();
    let size = std::fs::metadata(&binary).map(|m| m.len()).unwrap_or(0);
    println!(
        "\nThe release: {} ({:.1} MB), the app inside it. Copy that one file to the server and \
         start it (firsttoken-server --help lists its settings; docs/src/deploy/ has a systemd unit).",
        binary.display(),
        size as f64 / 1e6
    );
    Ok(())
}

/// `cargo build --release -p firsttoken-server` with `dist/` embedded. Every release build
/// of the server goes through here (run, build, test, bench), so none of them rebuilds
/// the server because another built it with other settings.
pub fn release_server() -> anyhow::Result<()> {
    let dist = shell::workspace_root().join("dist");
    shell::run(
        cargo()
            .args(["build", "--release", "--package", "firsttoken-server"])
            .env("FIRSTTOKEN_APP_DIR", &dist),
    )
}

/// Builds the app into `dist/` unless nothing it is made from changed since the last
/// build that finished and `dist/` is still there.
pub fn build_app() -> anyhow::Result<()> {
    let root = shell::workspace_root();
    let inputs = fingerprint(&root)?;
    let built = std::fs::read_to_string(stamp_path()).ok();
    // The stamp names what went in and what came out: `dist/` changed since (another tool
    // wrote there, `trunk serve` for one) means a build too.
    if built.as_deref() == Some(format!("{inputs}{}", output_listing(&root)).as_str()) {
        println!(
            "  nothing the app is made from changed since its last build: dist/ is current \
             (delete {} to force a build)",
            stamp_path().display()
        );
        return Ok(());
    }
    // A build that fails half way must not leave a stamp saying dist/ is current.
    let _ = std::fs::remove_file(stamp_path());
    trunk_build()?;
    std::fs::create_dir_all(root.join("target"))?;
    std::fs::write(stamp_path(), format!("{inputs}{}", output_listing(&root)))
        .context("writing the app build's fingerprint")
}

/// `dist/`'s files with their sizes, one a line; empty without an `index.html`, which no
/// stamp matches.
fn output_listing(root: &Path) -> String {
    let dist = root.join("dist");
    if !dist.join("index.html").is_file() {
        return "no app built\n".into();
    }
    let mut files = Vec::new();
    let _ = collect_files(&dist, &mut files);
    files.sort();
    files
        .iter()
        .map(|f| {
            let size = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
            format!("{} {size}\n", f.strip_prefix(root).unwrap_or(f).display())
        })
        .collect()
}

/// A hash of every input's path and contents, and of the tools' versions.
fn fingerprint(root: &Path) -> anyhow::Result<String> {
    let mut files = Vec::new();
    for input in APP_INPUTS {
        collect_files(&root.join(input), &mut files)?;
    }
    files.sort();
    let mut hasher = std::hash::DefaultHasher::new();
    for file in &files {
        file.strip_prefix(root).unwrap_or(file).hash(&mut hasher);
        std::fs::read(file)
            .with_context(|| format!("reading {}", file.display()))?
            .hash(&mut hasher);
    }
    for tool in ["trunk", "wasm-bindgen"] {
        shell::output(Command::new(tool).arg("--version")).hash(&mut hasher);
    }
    Ok(format!(
        "{:016x} over {} files\n",
        hasher.finish(),
        files.len()
    ))
}

fn collect_files(path: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if path.is_file() {
        files.push(path.to_path_buf());
    } else if path.is_dir() {
        for entry in
            std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))?
        {
            let entry = entry?.path();
            if entry.file_name().is_some_and(|n| n != "target") {
                collect_files(&entry, files)?;
            }
        }
    }
    Ok(())
}

/// Builds the two bundles with `trunk build --release`, offline, with the wasm-opt xtask
/// installed: the operator's pages (`index.html`) into `dist/`, the beta user's page
/// (`run.html`) into `target/trunk-run/`, whose files are then copied beside the first
/// (content-hashed names never collide; the stylesheet is the same file), and the
/// landing painter (`paint.html`) into `target/trunk-paint/`, whose module `run.html`
/// then loads first ([`crate::paint`]). Then the brotli and gzip copies the server sends
/// ([`crate::compress`]).
fn trunk_build() -> anyhow::Result<()> {
    // Trunk is offline and passes --offline to cargo: the crates must be here first.
    shell::run(cargo().args(["fetch", "--quiet"]))?;
    // Trunk builds one page at a time, and each page's last step, its link with fat LTO
    // into one codegen unit, runs on one core. Built in one cargo command, the two
    // bundles' binaries link side by side; Trunk's own cargo builds then find them current.
    shell::run(cargo().args([
        "build",
        "--offline",
        "--target",
        "wasm32-unknown-unknown",
        "--profile",
        "wasm-release",
        "--package",
        "firsttoken",
        "--bin",
        "firsttoken",
        "--bin",
        "firsttoken-run",
    ]))?;
    let root = shell::workspace_root();
    let run_dist = root.join("target/trunk-run");
    let paint_dist = root.join("target/trunk-paint");
    // The three side by side: what is left of each after the build above (binding, wasm-opt
    // and, for the painter, its own small build) is mostly one core's work.
    let trunk = |html: &str, dist: &Path| {
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
                .arg(dist)
                .env("PATH", tools::path_with_tools())
                .env("TRUNK_SKIP_VERSION_CHECK", "true")
                .env("NO_COLOR", "true"),
        )
    };
    let dist = root.join("dist");
    let built: Vec<anyhow::Result<()>> = std::thread::scope(|scope| {
        [
            ("index.html", dist.as_path()),
            ("run.html", run_dist.as_path()),
            ("paint.html", paint_dist.as_path()),
        ]
        .map(|(html, dist)| scope.spawn(move || trunk(html, dist)))
        .into_iter()
        .map(|h| h.join().expect("a trunk thread panicked"))
        .collect()
    });
    built.into_iter().collect::<anyhow::Result<()>>()?;
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

#[cfg(test)]
mod tests {
    use super::APP_INPUTS;
    use std::collections::BTreeSet;

    /// The `firsttoken-*` crates a manifest's `[dependencies]` names.
    fn workspace_dependencies(manifest: &str) -> Vec<String> {
        manifest
            .split("\n[")
            .filter(|section| section.starts_with("dependencies]"))
            .flat_map(|section| section.lines().skip(1))
            .filter_map(|line| line.split(['.', ' ', '=']).next())
            .filter(|name| name.starts_with("firsttoken-"))
            .map(str::to_owned)
            .collect()
    }

    /// A change to any workspace crate the app is built from must rebuild it: a crate
    /// missing from `APP_INPUTS` would leave `dist/` stale after an edit to it.
    #[test]
    fn every_crate_the_app_is_made_from_is_an_input() {
        let root = crate::shell::workspace_root();
        let read = |path: &str| std::fs::read_to_string(root.join(path)).expect(path);
        let workspace = read("Cargo.toml");
        // `firsttoken-core = { path = "core" }` in [workspace.dependencies].
        let folder_of = |name: &str| -> String {
            workspace
                .lines()
                .find(|l| l.starts_with(&format!("{name} = ")))
                .and_then(|l| l.split("path = \"").nth(1))
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_else(|| panic!("no path for {name} in Cargo.toml"))
                .to_owned()
        };
        let mut todo = workspace_dependencies(&workspace);
        todo.extend(workspace_dependencies(&read("paint/Cargo.toml")));
        let mut seen = BTreeSet::new();
        while let Some(name) = todo.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            let folder = folder_of(&name);
            for input in [format!("{folder}/src"), format!("{folder}/Cargo.toml")] {
                assert!(
                    APP_INPUTS.contains(&input.as_str()),
                    "the app is made from {name}, but APP_INPUTS lacks {input}"
                );
            }
            todo.extend(workspace_dependencies(&read(&format!(
                "{folder}/Cargo.toml"
            ))));
        }
        assert!(
            seen.contains("firsttoken-pages"),
            "read the manifests: {seen:?}"
        );
    }
}
