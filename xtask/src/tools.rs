//! Installs the tools the build and the tests need, from the package registries only
//! (crates.io, npm, Debian): this project must build on machines that reach nothing else.
//! Each tool's version and the trap it avoids are written beside it below.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::shell::{self, cargo, output};

/// Trunk's version. 0.22.x declares rust-version 1.96.1 but builds with 1.95, hence
/// `--ignore-rust-version`.
const TRUNK_VERSION: &str = "0.22.1";
/// The npm package that provides wasm-opt. Debian's binaryen (wasm-opt 108) produces wasm
/// that crashes in the browser, so it must never be the one Trunk finds.
const BINARYEN: &str = "binaryen@132.0.0";
const WASM_OPT_VERSION: &str = "version 132";
pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Debian's Firefox ESR, driven by geckodriver from crates.io.
pub const FIREFOX: &str = "/usr/bin/firefox-esr";
const GECKODRIVER_VERSION: &str = "0.37.1";
/// mdBook builds and serves the book in `docs/`.
const MDBOOK_VERSION: &str = "0.5.4";
/// Debian's WebKitGTK driver, which drives WebKitGTK's MiniBrowser under `xvfb-run`.
pub const WEBKIT_DRIVER: &str = "/usr/bin/WebKitWebDriver";
pub const MINIBROWSER: &str = "/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser";
const XVFB_RUN: &str = "/usr/bin/xvfb-run";
/// Debian's nginx (the `nginx-light` package), the reverse proxy the end-to-end tests put
/// in front of a server under a base path.
const NGINX: &str = "/usr/sbin/nginx";

/// Where each engine and its driver are, for the end-to-end tests and benchmarks (a
/// WebDriver client that looks for a driver by itself hangs on a machine without
/// internet).
pub fn driver_env() -> Vec<(&'static str, std::ffi::OsString)> {
    vec![
        ("CHROMEDRIVER", CHROMEDRIVER.into()),
        ("GECKODRIVER", geckodriver().into_os_string()),
        ("FIREFOX", FIREFOX.into()),
        ("WEBKIT_DRIVER", WEBKIT_DRIVER.into()),
        ("MINIBROWSER", MINIBROWSER.into()),
        ("XVFB_RUN", XVFB_RUN.into()),
        // Not `NGINX`: nginx reads that variable as sockets inherited from an older nginx.
        ("NGINX_BIN", NGINX.into()),
    ]
}

/// Where `cargo install` puts a tool.
fn installed(tool: &str) -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from("/root/.cargo"));
    home.join("bin").join(tool)
}

/// Where `cargo install` put geckodriver.
pub fn geckodriver() -> PathBuf {
    installed("geckodriver")
}

/// Where `cargo install` put mdBook.
pub fn mdbook() -> PathBuf {
    installed("mdbook")
}

/// mdBook from crates.io, for the book in `docs/`.
pub fn ensure_mdbook() -> anyhow::Result<()> {
    if !has_version(Command::new(mdbook()).arg("--version"), MDBOOK_VERSION) {
        println!("  installing mdbook {MDBOOK_VERSION} from crates.io (about 3 minutes, once)");
        shell::run(light_install(cargo().args([
            "install",
            "mdbook",
            "--version",
            MDBOOK_VERSION,
            "--locked",
        ])))?;
    }
    Ok(())
}

/// Where npm-installed tools live (inside target/, so `cargo clean` removes them too).
pub fn npm_tools_dir() -> PathBuf {
    shell::workspace_root().join("target/tools")
}

/// A PATH with our npm tools first, for Trunk to find the right wasm-opt.
pub fn path_with_tools() -> std::ffi::OsString {
    let mut paths = vec![npm_tools_dir().join("node_modules/.bin")];
    if let Some(path) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(paths).expect("PATH entries are valid")
}

/// What the app build needs: the wasm32 target, Trunk, wasm-bindgen-cli matching
/// Cargo.lock, and wasm-opt 132.
pub fn ensure_build_tools() -> anyhow::Result<()> {
    let wasm_bindgen = wasm_bindgen_version()?;
    check_trunk_toml(&wasm_bindgen)?;
    let missing_slow = [
        !has_version(Command::new("trunk").arg("--version"), TRUNK_VERSION),
        !has_version(Command::new("wasm-bindgen").arg("--version"), &wasm_bindgen),
    ];
    if missing_slow.iter().any(|m| *m) {
        println!(
            "  First run on this machine: installing build tools from crates.io. This takes about \
             4 minutes on 2 cores (Trunk about 2.5, wasm-bindgen-cli about 1.5), once."
        );
    }
    ensure_wasm_target()?;
    if missing_slow[0] {
        println!("  installing trunk {TRUNK_VERSION} (about 2.5 minutes)");
        shell::run(light_install(cargo().args([
            "install",
            "trunk",
            "--version",
            TRUNK_VERSION,
            "--locked",
            "--ignore-rust-version",
        ])))?;
    }
    if missing_slow[1] {
        // Not --locked: its lockfile wants a webpki-roots release the registry lacks.
        println!(
            "  installing wasm-bindgen-cli {wasm_bindgen} (about 1.5 minutes; brings wasm-bindgen-test-runner)"
        );
        shell::run(light_install_at(
            cargo().args(["install", "wasm-bindgen-cli", "--version", &wasm_bindgen]),
            LIGHT_COMPUTING,
        ))?;
    }
    ensure_wasm_opt()?;
    Ok(())
}

/// Everything a test or benchmark in a browser needs: the build tools, the three engines
/// with their drivers (Chromium and ChromeDriver, Firefox ESR and geckodriver, WebKitGTK
/// and WebKitWebDriver), and nginx for the reverse-proxy test.
pub fn ensure_for_browser() -> anyhow::Result<()> {
    ensure_build_tools()?;
    ensure_browsers()
}

/// What `cargo xtask test` needs: the browser tools and mdBook.
pub fn ensure_for_test() -> anyhow::Result<()> {
    ensure_for_browser()?;
    ensure_mdbook()
}

/// The engines from Debian, and geckodriver from crates.io.
fn ensure_browsers() -> anyhow::Result<()> {
    let wanted = [
        (CHROMIUM, "chromium"),
        (CHROMEDRIVER, "chromium-driver"),
        (FIREFOX, "firefox-esr"),
        (WEBKIT_DRIVER, "webkit2gtk-driver"),
        (MINIBROWSER, "webkit2gtk-driver"),
        (XVFB_RUN, "xvfb"),
        (NGINX, "nginx-light"),
    ];
    let mut missing: Vec<&str> = wanted
        .iter()
        .filter(|(path, _)| !Path::new(path).exists())
        .map(|(_, package)| *package)
        .collect();
    missing.dedup();
    if !missing.is_empty() {
        println!(
            "  installing {} from Debian (a minute or two)",
            missing.join(", ")
        );
        apt_install(&missing)?;
    }
    if !has_version(
        Command::new(geckodriver()).arg("--version"),
        GECKODRIVER_VERSION,
    ) {
        println!("  installing geckodriver {GECKODRIVER_VERSION} from crates.io (about 3 minutes)");
        shell::run(light_install(cargo().args([
            "install",
            "geckodriver",
            "--version",
            GECKODRIVER_VERSION,
            "--locked",
        ])))?;
    }
    Ok(())
}

/// A `cargo install` with the tool's release profile made cheap to build: no link-time
/// optimisation (Trunk's own profile asks for fat LTO with one codegen unit, which took
/// 11 min 39 s of a 23-minute first run on 2 cores; built this way, about 2 min 20 s),
/// sixteen codegen units, and no optimisation. Trunk, geckodriver and mdBook spend their time waiting on cargo, the
/// browser or the disk, not computing. wasm-bindgen-cli does compute (it rewrites the
/// app's wasm), so it gets [`LIGHT_COMPUTING`] instead.
fn light_install(command: &mut Command) -> &mut Command {
    light_install_at(command, "0")
}

/// The optimisation level of a lightly built tool that computes.
const LIGHT_COMPUTING: &str = "1";

fn light_install_at<'a>(command: &'a mut Command, opt_level: &str) -> &'a mut Command {
    command
        .env("CARGO_PROFILE_RELEASE_LTO", "false")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", opt_level)
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
}

fn ensure_wasm_target() -> anyhow::Result<()> {
    let installed =
        output(Command::new("rustup").args(["target", "list", "--installed"])).unwrap_or_default();
    if !installed
        .lines()
        .any(|t| t.trim() == "wasm32-unknown-unknown")
    {
        shell::run(Command::new("rustup").args(["target", "add", "wasm32-unknown-unknown"]))?;
    }
    Ok(())
}

fn ensure_wasm_opt() -> anyhow::Result<()> {
    let wasm_opt = npm_tools_dir().join("node_modules/.bin/wasm-opt");
    if has_version(Command::new(&wasm_opt).arg("--version"), WASM_OPT_VERSION) {
        return Ok(());
    }
    if output(Command::new("npm").arg("--version")).is_none() {
        println!("  npm is missing; installing it from Debian to fetch wasm-opt");
        apt_install(&["npm"])?;
    }
    std::fs::create_dir_all(npm_tools_dir())?;
    shell::run(
        Command::new("npm")
            .args([
                "install",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--prefix",
            ])
            .arg(npm_tools_dir())
            .arg(BINARYEN),
    )?;
    if !has_version(Command::new(&wasm_opt).arg("--version"), WASM_OPT_VERSION) {
        bail!(
            "{} is not wasm-opt {WASM_OPT_VERSION} after installing {BINARYEN}",
            wasm_opt.display()
        );
    }
    Ok(())
}

/// The wasm-bindgen version in Cargo.lock: the CLI must match it exactly.
pub fn wasm_bindgen_version() -> anyhow::Result<String> {
    let lock = std::fs::read_to_string(shell::workspace_root().join("Cargo.lock"))
        .context("reading Cargo.lock")?;
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == "name = \"wasm-bindgen\"" {
            let version = lines.next().unwrap_or_default();
            if let Some(v) = version
                .strip_prefix("version = \"")
                .and_then(|v| v.strip_suffix('"'))
            {
                return Ok(v.to_owned());
            }
        }
    }
    bail!("Cargo.lock has no wasm-bindgen package")
}

/// Trunk.toml names the wasm-bindgen version too (an offline Trunk cannot fetch another):
/// a mismatch would fail in the middle of a build with a confusing message.
fn check_trunk_toml(wasm_bindgen: &str) -> anyhow::Result<()> {
    let trunk_toml = std::fs::read_to_string(shell::workspace_root().join("Trunk.toml"))
        .context("reading Trunk.toml")?;
    let expected = format!("wasm_bindgen = \"{wasm_bindgen}\"");
    if !trunk_toml.lines().any(|l| l.trim() == expected) {
        bail!("Trunk.toml must say `{expected}` under [tools], to match Cargo.lock");
    }
    Ok(())
}

fn has_version(command: &mut Command, version: &str) -> bool {
    output(command).is_some_and(|out| out.contains(version))
}

/// `apt-get install`, as root or through sudo; says what to do when neither works.
fn apt_install(packages: &[&str]) -> anyhow::Result<()> {
    let is_root = output(Command::new("id").arg("-u")).is_some_and(|id| id.trim() == "0");
    let sudo: &[&str] = if is_root { &[] } else { &["sudo", "-n"] };
    let apt = |args: &[&str]| {
        let mut full: Vec<&str> = sudo.to_vec();
        full.push("apt-get");
        full.extend_from_slice(args);
        let mut command = Command::new(full[0]);
        command
            .args(&full[1..])
            .env("DEBIAN_FRONTEND", "noninteractive");
        command
    };
    let install = [&["install", "-y"][..], packages].concat();
    shell::run(&mut apt(&["update"]))
        .and_then(|()| shell::run(&mut apt(&install)))
        .with_context(|| {
            format!(
                "cannot install {} with apt-get; install them yourself (as root: apt-get install {})",
                packages.join(" "),
                packages.join(" ")
            )
        })
}

/// The PostgreSQL the server tests use (the same default as the tests).
pub fn postgres_url() -> String {
    std::env::var("FIRSTTOKEN_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// Makes sure PostgreSQL answers for the tests: starts a local cluster that is installed
/// but stopped. Without one the tests skip their PostgreSQL half, except under `CI=true`,
/// where that is an error.
pub fn ensure_postgres() -> anyhow::Result<()> {
    let url = postgres_url();
    let address = postgres_address(&url);
    if answers(&address) {
        println!(
            "  PostgreSQL at {address} answers: the storage tests run on SQLite and PostgreSQL"
        );
        return Ok(());
    }
    if address.starts_with("127.0.0.1:") || address.starts_with("localhost:") {
        let clusters = std::fs::read_dir("/etc/postgresql")
            .into_iter()
            .flatten()
            .flatten();
        for version in clusters {
            let version = version.file_name().to_string_lossy().into_owned();
            println!("  PostgreSQL does not answer; starting the local cluster {version}/main");
            let _ = shell::run(Command::new("pg_ctlcluster").args([
                "--skip-systemctl-redirect",
                &version,
                "main",
                "start",
            ]));
        }
        for _ in 0..20 {
            if answers(&address) {
                println!("  PostgreSQL at {address} answers now");
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        bail!(
            "CI=true needs PostgreSQL for the storage tests, and {address} does not answer (FIRSTTOKEN_TEST_POSTGRES names another)"
        );
    }
    println!(
        "  PostgreSQL at {address} does not answer: the storage tests will run on SQLite only and say that PostgreSQL was skipped"
    );
    Ok(())
}

/// `host:port` of a PostgreSQL URL.
fn postgres_address(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host_port = rest.split(['/', '?']).next().unwrap_or_default();
    let host_port = host_port.rsplit('@').next().unwrap_or_default();
    if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:5432")
    }
}

fn answers(address: &str) -> bool {
    use std::net::ToSocketAddrs;
    address
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .is_some_and(|addr| {
            std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)).is_ok()
        })
}
