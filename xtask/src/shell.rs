//! Running commands: each one is shown before it runs, and a failure says which command
//! failed and how.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// The workspace root (xtask's parent folder).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the workspace")
        .to_path_buf()
}

/// The cargo that runs us.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Runs `command` to completion, its output going to ours.
pub fn run(command: &mut Command) -> anyhow::Result<()> {
    let shown = show(command);
    println!("  $ {shown}");
    let status = command
        .status()
        .with_context(|| format!("cannot start `{shown}`"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}

/// Runs `command` quietly and returns its standard output, or `None` when it cannot run
/// or fails (used to ask a tool for its version).
pub fn output(command: &mut Command) -> Option<String> {
    let out = command.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The command as a person would type it.
pub fn show(command: &Command) -> String {
    let mut parts = vec![command.get_program().to_string_lossy().into_owned()];
    parts.extend(command.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}

/// Named steps with their durations, printed as they go and summed up at the end.
#[derive(Default)]
pub struct Steps {
    done: Vec<(String, Duration)>,
}

impl Steps {
    /// Runs one step, announcing it and timing it.
    pub fn step<T>(
        &mut self,
        name: &str,
        f: impl FnOnce() -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        println!("\n==> {name}");
        let start = Instant::now();
        let result = f().with_context(|| format!("step failed: {name}"));
        let elapsed = start.elapsed();
        println!(
            "    {name}: {} in {}",
            if result.is_ok() { "ok" } else { "FAILED" },
            duration(elapsed)
        );
        self.done.push((name.to_owned(), elapsed));
        result
    }

    /// The time each step took.
    pub fn report(&self) {
        println!("\nTimings:");
        let total: Duration = self.done.iter().map(|(_, d)| *d).sum();
        for (name, elapsed) in &self.done {
            println!("  {:>9}  {name}", duration(*elapsed));
        }
        println!("  {:>9}  total", duration(total));
    }
}

/// `4.2 s`, `3 min 07 s`.
pub fn duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1} s")
    } else {
        format!("{} min {:02} s", d.as_secs() / 60, d.as_secs() % 60)
    }
}
