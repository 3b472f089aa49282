//! The house rules a compiler does not check, run first by `cargo xtask test` (and alone by
//! `cargo xtask tidy`): every Rust file opens with a `//!` line saying what it is for; no
//! unfinished-work marker or debugging macro is left in; every repository path a comment
//! or a document names exists; no source file grows past [`MAX_LINES`] lines of code
//! (its `#[cfg(test)]` module and the crates' `tests/` folders aside); README.md stays
//! within [`README_MAX_LINES`]; and no two source files import from each other, however
//! long the chain (`circles.rs`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::bail;

/// Lines of code a source file may hold before it should be split along its seams.
const MAX_LINES: usize = 600;

/// Lines README.md may hold: what it is, the two commands, five steps to one's own
/// endpoint, and links into the book, which holds the rest.
const README_MAX_LINES: usize = 200;

/// Folders never looked into: build output, tools' caches, the built app.
const SKIPPED: [&str; 5] = ["target", ".git", "node_modules", "dist", ".cargo"];

/// The markers: spelled in two pieces so that this file does not contain them.
fn markers() -> [String; 3] {
    [
        format!("TO{}", "DO"),
        format!("FIX{}", "ME"),
        format!("dbg{}(", "!"),
    ]
}

/// Extensions of the files a reference may name.
const NAMED: [&str; 10] = [
    ".rs", ".md", ".json", ".sql", ".toml", ".html", ".css", ".py", ".yml", ".sh",
];

pub fn tidy() -> anyhow::Result<()> {
    let root = PathBuf::from(".");
    let mut files = Vec::new();
    walk(&root, &mut files)?;
    let mut problems = String::new();
    let readme = std::fs::read_to_string("README.md")?.lines().count();
    if readme > README_MAX_LINES {
        let _ = writeln!(
            problems,
            "README.md: {readme} lines, more than {README_MAX_LINES}: move the detail into the book (docs/src/)"
        );
    }
    for path in &files {
        let shown = path.strip_prefix(".").unwrap_or(path).display().to_string();
        let text = std::fs::read_to_string(path)?;
        if shown.ends_with(".rs") {
            check_rust(&shown, &text, &mut problems);
        }
        check_references(&shown, &text, &mut problems);
    }
    problems.push_str(&crate::circles::problems()?);
    if problems.is_empty() {
        println!(
            "{} files: each opens with //!, no markers, every named path exists, none longer than allowed, no import circle",
            files.len()
        );
        Ok(())
    } else {
        bail!("the house rules are broken:\n{problems}")
    }
}

/// The Rust and Markdown files under `dir`, skipping build output.
fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if !SKIPPED.contains(&name) {
                walk(&path, files)?;
            }
        } else if name.ends_with(".rs") || name.ends_with(".md") {
            files.push(path);
        }
    }
    files.sort();
    Ok(())
}

fn check_rust(path: &str, text: &str, problems: &mut String) {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if !first.starts_with("//!") {
        let _ = writeln!(
            problems,
            "{path}: the first line is not a `//!` line saying what the file is for"
        );
    }
    for (i, line) in text.lines().enumerate() {
        for marker in markers() {
            if line.contains(&marker) {
                let _ = writeln!(
                    problems,
                    "{path}:{}: `{marker}` left in (finish it, or say in words what is not done and why)",
                    i + 1
                );
            }
        }
    }
    let in_tests = path.contains("/tests/") || path.starts_with("tests/");
    if in_tests {
        return;
    }
    let code = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or_default()
        .lines()
        .count();
    if code > MAX_LINES {
        let _ = writeln!(
            problems,
            "{path}: {code} lines of code, more than {MAX_LINES}: split it along its seams"
        );
    }
}

/// Every path a file names inside the repository exists: a path whose first folder is one
/// of the repository's or of the file's crate, or a bare upper-case Markdown file name
/// (the README, ARCHITECTURE and such). Build output (`target/`) is made by the build,
/// never committed: whether a path under it exists depends on what ran, not on the tree.
fn check_references(path: &str, text: &str, problems: &mut String) {
    let crate_root = crate_root(path);
    for (i, line) in text.lines().enumerate() {
        let tokens = line
            .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')));
        for token in tokens {
            let token = token.trim_end_matches('.');
            if !NAMED.iter().any(|ext| token.ends_with(ext)) || token.contains("://") {
                continue;
            }
            let stem = token.strip_suffix(".md").unwrap_or_default();
            let bare_doc = !token.contains('/')
                && !stem.is_empty()
                && stem.chars().all(|c| c.is_ascii_uppercase() || c == '_');
            let first = token.split('/').next().unwrap_or_default();
            if first == "target" {
                continue;
            }
            let under = |base: &Path| !first.is_empty() && base.join(first).is_dir();
            let checked =
                bare_doc || (token.contains('/') && (under(Path::new(".")) || under(&crate_root)));
            if !checked {
                continue;
            }
            let here = Path::new(path).parent().unwrap_or(Path::new("."));
            let exists = [Path::new("."), crate_root.as_path(), here]
                .iter()
                .any(|base| base.join(token).exists());
            if !exists {
                let _ = writeln!(
                    problems,
                    "{path}:{}: names {token}, which is not in the repository",
                    i + 1
                );
            }
        }
    }
}

/// The folder of the crate a file belongs to (`core`, `server`, …, or `.` for the app).
fn crate_root(path: &str) -> PathBuf {
    let first = path.split('/').next().unwrap_or_default();
    let candidate = Path::new(first);
    if candidate.join("Cargo.toml").exists() {
        candidate.to_path_buf()
    } else {
        PathBuf::from(".")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The paths below are made up, under a folder the repository does not have, so that
    // the reference check passes over them.

    fn problems(path: &str, text: &str) -> String {
        let mut out = String::new();
        check_rust(path, text, &mut out);
        out
    }

    #[test]
    fn a_file_must_say_what_it_is_for_first() {
        assert!(problems("made/up/a.rs", "//! A thing.\nfn a() {}\n").is_empty());
        assert!(problems("made/up/a.rs", "\n\n//! A thing.\n").is_empty());
        assert!(problems("made/up/a.rs", "/// Not a module doc.\nfn a() {}\n").contains("`//!`"));
    }

    #[test]
    fn markers_are_named_with_their_line() {
        let text = format!("//! A thing.\nfn a() {{ {}x); }}\n", markers()[2]);
        assert!(problems("made/up/a.rs", &text).contains("made/up/a.rs:2"));
    }

    #[test]
    fn long_files_are_refused() {
        let long = format!("//! A thing.\n{}", "fn a() {}\n".repeat(MAX_LINES + 1));
        assert!(problems("made/up/new.rs", &long).contains("more than 600"));
        // Tests are not counted: in a test module, or in a tests folder.
        let tested = format!("//! A thing.\n#[cfg(test)]\n{}", "fn a() {}\n".repeat(700));
        assert!(problems("made/up/new.rs", &tested).is_empty());
        assert!(problems("made/up/tests/x.rs", &long).is_empty());
    }
}
