//! The book in `docs/` (mdBook): `cargo xtask docs` serves it while you edit, and
//! `cargo xtask test` builds it and checks every link, in the book and in the Markdown
//! files at the repository's root: each relative link names a file that exists, each
//! `#anchor` a heading of the page it points into, and no book page links outside the
//! book (such a link would break on the built site: name the repository path as code).
//! Every page of `docs/src/` is in `docs/src/SUMMARY.md`, so none is left unbuilt.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use anyhow::bail;

use crate::shell;
use crate::tools;

/// Serves the book on http://127.0.0.1:3000, rebuilt on every change, until Ctrl-C.
pub fn serve() -> anyhow::Result<()> {
    tools::ensure_mdbook()?;
    check_links()?;
    println!("The book: http://127.0.0.1:3000 (Ctrl-C stops it)");
    shell::run(Command::new(tools::mdbook()).args([
        "serve",
        "docs",
        "--hostname",
        "127.0.0.1",
        "--port",
        "3000",
    ]))
}

/// Checks the links, then builds the book into `target/book/`.
pub fn build() -> anyhow::Result<()> {
    check_links()?;
    shell::run(Command::new(tools::mdbook()).args(["build", "docs"]))
}

/// Every link of the book and of the root's Markdown files, checked.
pub fn check_links() -> anyhow::Result<()> {
    let root = shell::workspace_root();
    let book = root.join("docs/src");
    let mut pages = Vec::new();
    markdown_under(&book, &mut pages)?;
    let mut files = pages.clone();
    for entry in std::fs::read_dir(&root)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    files.sort();
    let mut problems = String::new();
    let mut links = 0;
    for file in &files {
        let text = std::fs::read_to_string(file)?;
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        for (line, target, included) in links_in(&text) {
            links += 1;
            // An included file's text becomes the page's: it may come from anywhere.
            let book = if included {
                Path::new("/")
            } else {
                book.as_path()
            };
            if let Err(why) = check_link(file, &target, book) {
                let _ = writeln!(problems, "{shown}:{line}: ({target}) {why}");
            }
        }
    }
    let contents = normalize(&root.join("docs/src/SUMMARY.md"));
    let summary = std::fs::read_to_string(&contents)?;
    let listed: BTreeSet<PathBuf> = links_in(&summary)
        .into_iter()
        .map(|(_, target, _)| normalize(&book.join(target)))
        .collect();
    for page in &pages {
        if *page != contents && !listed.contains(page) {
            let _ = writeln!(
                problems,
                "{}: not in docs/src/SUMMARY.md, so the book leaves it out",
                page.strip_prefix(&root).unwrap_or(page).display()
            );
        }
    }
    if !problems.is_empty() {
        bail!("broken links:\n{problems}");
    }
    println!(
        "  {links} links in {} Markdown files: each names a file and heading that exist",
        files.len()
    );
    Ok(())
}

fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            markdown_under(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(normalize(&path));
        }
    }
    Ok(())
}

/// Whether `target`, as written in `file`, leads somewhere.
fn check_link(file: &Path, target: &str, book: &Path) -> Result<(), String> {
    let target = target.trim_start_matches('<').trim_end_matches('>');
    if target.contains("://") || target.starts_with("mailto:") {
        return Ok(());
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let here = file.parent().unwrap_or(Path::new("."));
    let resolved = if path.is_empty() {
        file.to_path_buf()
    } else {
        normalize(&here.join(path))
    };
    if !resolved.exists() {
        return Err("no such file".into());
    }
    if file.starts_with(book) && !resolved.starts_with(book) {
        return Err(
            "leaves the book, and would break on the built site: write the repository path as `code`"
                .into(),
        );
    }
    if !anchor.is_empty() && resolved.extension().is_some_and(|e| e == "md") {
        let text = std::fs::read_to_string(&resolved).map_err(|e| e.to_string())?;
        if !headings(&text).contains(anchor) {
            return Err(format!("no heading there makes the anchor #{anchor}"));
        }
    }
    Ok(())
}

/// `a/./b/../c` as `a/c`, without asking the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The links of a Markdown text, with their line numbers: `[text](target)` and
/// `![alt](target)`, outside code blocks and code spans, and `{{#include target}}`
/// (marked `true`: its text becomes the page's).
fn links_in(text: &str) -> Vec<(usize, String, bool)> {
    let mut links = Vec::new();
    let mut fenced = false;
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if let Some(rest) = line.trim().strip_prefix("{{#include ") {
            let target = rest.trim_end_matches("}}").trim();
            links.push((
                number + 1,
                target.split(':').next().unwrap_or(target).to_owned(),
                true,
            ));
            continue;
        }
        // Code spans are the odd pieces between backticks.
        for (i, piece) in line.split('`').enumerate() {
            if i % 2 == 1 {
                continue;
            }
            let mut rest = piece;
            while let Some(at) = rest.find("](") {
                rest = &rest[at + 2..];
                let end = rest.find(')').unwrap_or(rest.len());
                let target = rest[..end].split_whitespace().next().unwrap_or_default();
                if !target.is_empty() {
                    links.push((number + 1, target.to_owned(), false));
                }
                rest = &rest[end..];
            }
        }
    }
    links
}

/// The anchors mdBook (and GitHub) give a page's headings: lower case, spaces as `-`,
/// punctuation but `-` and `_` dropped; a repeated one gets `-1`, `-2`.
fn headings(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let id: String = title
            .chars()
            .filter_map(|c| {
                if c.is_alphanumeric() || c == '_' || c == '-' {
                    Some(c.to_ascii_lowercase())
                } else if c.is_whitespace() {
                    Some('-')
                } else {
                    None
                }
            })
            .collect();
        let mut unique = id.clone();
        let mut n = 1;
        while ids.contains(&unique) {
            unique = format!("{id}-{n}");
            n += 1;
        }
        ids.insert(unique);
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_found_outside_code_only() {
        let text = "See [a](a.md#x) and `[b](b.md)`.\n```\n[c](c.md)\n```\n![d](img/d.png)\n{{#include ../../ARCHITECTURE.md}}\n";
        let found: Vec<String> = links_in(text).into_iter().map(|(_, t, _)| t).collect();
        assert_eq!(found, ["a.md#x", "img/d.png", "../../ARCHITECTURE.md"]);
    }

    #[test]
    fn anchors_are_made_as_mdbook_makes_them() {
        let ids =
            headings("# The `--listen` flag\n## Health, metrics & backups\n## Limits\n## Limits\n");
        for id in [
            "the---listen-flag",
            "health-metrics--backups",
            "limits",
            "limits-1",
        ] {
            assert!(ids.contains(id), "{id} in {ids:?}");
        }
    }
}
