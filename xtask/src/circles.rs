//! The import graph between the project's own source files, and its circles: two or more
//! files that each, through a chain of imports, take something from the other. A circle
//! means none of its files can be read, tested or moved without the others, so tidy
//! refuses one and `cargo xtask circles` draws them.
//!
//! What counts as an import, outside each file's `#[cfg(test)]` module: every path that
//! starts with `crate::` or `super::`, or with the name of a module the file declares,
//! whether in a `use` or written inline, resolved to the file that defines the module it
//! names — through `pub use` re-exports, so that an import cannot hide behind one. A glob
//! (`use super::*`) takes names nobody can see, so it is refused outside tests. A `mod`
//! line is not an import: it places a file, it takes nothing from it. Nor is a file's use
//! of a module it sits inside (`db/cells.rs` of `db/mod.rs`, every file of `lib.rs`): it
//! is part of that module, and Rust lets it see its parents' private items for that reason.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The source folders of the workspace's crates: the app's, and each member's.
fn source_folders() -> anyhow::Result<Vec<PathBuf>> {
    let manifest = std::fs::read_to_string("Cargo.toml")?;
    let members = manifest
        .lines()
        .find_map(|line| line.trim().strip_prefix("members = ["))
        .ok_or_else(|| anyhow::anyhow!("Cargo.toml: no `members = [` line"))?;
    let mut folders = vec![PathBuf::from("src")];
    for member in members.trim_end_matches(']').split(',') {
        folders.push(Path::new(member.trim().trim_matches('"')).join("src"));
    }
    Ok(folders)
}

/// One source file of a crate.
#[derive(Debug)]
struct File {
    /// The path from the workspace root, as shown.
    shown: String,
    /// The module path from the crate root (`["schema", "validate"]`); empty for the root.
    module: Vec<String>,
    /// The text before its `#[cfg(test)]` module.
    code: String,
}

/// The files of one crate, and what each re-exports.
#[derive(Debug, Default)]
struct Crate {
    files: Vec<File>,
    /// Module path → index in `files`.
    by_module: BTreeMap<Vec<String>, usize>,
}

impl Crate {
    /// Whether the file `target` is `file` itself or a module `file` sits inside.
    fn encloses(&self, target: &str, file: &File) -> bool {
        self.files
            .iter()
            .find(|f| f.shown == target)
            .is_some_and(|f| file.module.starts_with(&f.module))
    }
}

/// The graph: for each file, the files it takes something from.
#[derive(Debug, Default)]
pub struct Graph {
    pub edges: BTreeMap<String, BTreeSet<String>>,
    /// Globs of the crate's own modules, outside tests: `file: line`.
    pub globs: Vec<String>,
}

/// `cargo xtask circles`: every file-level circle, or a line saying there is none.
pub fn circles() -> anyhow::Result<()> {
    let graph = graph()?;
    let found = strongly_connected(&graph.edges);
    let arrows: usize = graph.edges.values().map(BTreeSet::len).sum();
    println!(
        "{} source files, {arrows} imports between them, {} circle(s)",
        graph.edges.len(),
        found.len()
    );
    print!("{}", describe(&graph, &found));
    for glob in &graph.globs {
        println!("glob import (names it takes cannot be seen): {glob}");
    }
    Ok(())
}

/// The circles and globs as tidy's problems, one line each.
pub fn problems() -> anyhow::Result<String> {
    let graph = graph()?;
    let found = strongly_connected(&graph.edges);
    let mut out = describe(&graph, &found);
    for glob in &graph.globs {
        let _ = writeln!(
            out,
            "{glob}: a glob import of the crate's own module; name what it takes"
        );
    }
    Ok(out)
}

fn describe(graph: &Graph, found: &[Vec<String>]) -> String {
    let mut out = String::new();
    for (number, circle) in found.iter().enumerate() {
        let _ = writeln!(
            out,
            "import circle {}: {} (break it by moving what they share into a file both take from)",
            number + 1,
            circle.join(", ")
        );
        for from in circle {
            for to in &graph.edges[from] {
                if circle.contains(to) {
                    let _ = writeln!(out, "  {from} -> {to}");
                }
            }
        }
    }
    out
}

/// The graph of every measured crate.
pub fn graph() -> anyhow::Result<Graph> {
    let mut graph = Graph::default();
    for folder in source_folders()? {
        let krate = read_crate(&folder)?;
        for file in &krate.files {
            let mut to = BTreeSet::new();
            for (line, path) in paths(&file.code) {
                if path.last().is_some_and(|s| s == "*") {
                    if resolve(&krate, file, &path[..path.len() - 1], 0).is_some() {
                        graph.globs.push(format!("{}:{line}", file.shown));
                    }
                    continue;
                }
                if let Some(target) = resolve(&krate, file, &path, 0)
                    && !krate.encloses(&target, file)
                {
                    to.insert(target);
                }
            }
            graph.edges.insert(file.shown.clone(), to);
        }
    }
    Ok(graph)
}

/// A crate's files, found by following `mod` lines from its roots.
fn read_crate(src: &Path) -> anyhow::Result<Crate> {
    let mut krate = Crate::default();
    let mut roots = vec![(src.join("lib.rs"), Vec::new())];
    if !src.join("lib.rs").exists() {
        roots = vec![(src.join("main.rs"), Vec::new())];
    }
    let mut queue = roots;
    while let Some((path, module)) = queue.pop() {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let code = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .to_string();
        let folder = module_folder(&path, module.is_empty());
        for child in declared_modules(&code) {
            let mut child_module = module.clone();
            child_module.push(child.clone());
            let flat = folder.join(format!("{child}.rs"));
            let nested = folder.join(&child).join("mod.rs");
            let found = if flat.exists() { flat } else { nested };
            queue.push((found, child_module));
        }
        krate.by_module.insert(module.clone(), krate.files.len());
        krate.files.push(File {
            shown: path.display().to_string(),
            module,
            code,
        });
    }
    Ok(krate)
}

/// The folder a file's `mod x;` lines look in: its own for `mod.rs` and a crate root,
/// else the folder named after it.
fn module_folder(path: &Path, is_root: bool) -> PathBuf {
    let parent = path.parent().unwrap_or(Path::new("."));
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    if is_root || stem == "mod" {
        parent.to_path_buf()
    } else {
        parent.join(stem)
    }
}

/// The names of `mod x;` lines (not inline `mod x { … }` blocks).
fn declared_modules(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("pub(crate) mod "))
                .or_else(|| line.strip_prefix("mod "))?;
            let name = rest.strip_suffix(';')?;
            Some(name.trim().to_string())
        })
        .collect()
}

/// Every path in `code` that may name the crate's own modules, with its line number:
/// `use` trees expanded, and inline `a::b::c` paths.
fn paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut statement = String::new();
    let mut statement_line = 0;
    for (index, raw) in code.lines().enumerate() {
        let line = raw.split("//").next().unwrap_or_default();
        let trimmed = line.trim_start();
        if statement.is_empty() {
            let body = trimmed
                .strip_prefix("pub use ")
                .or_else(|| trimmed.strip_prefix("pub(crate) use "))
                .or_else(|| trimmed.strip_prefix("use "));
            if let Some(body) = body {
                statement = body.to_string();
                statement_line = index + 1;
            } else {
                for path in inline_paths(line) {
                    out.push((index + 1, path));
                }
                continue;
            }
        } else {
            statement.push_str(trimmed);
        }
        if let Some(tree) = statement.strip_suffix(';') {
            for path in expand(tree.trim()) {
                out.push((statement_line, path));
            }
            statement.clear();
        }
    }
    out
}

/// The paths of a `use` tree: `a::{b, c::{d as e}}` → `a::b`, `a::c::d`.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    if tree.is_empty() {
        return Vec::new();
    }
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or_default();
        return vec![path.split("::").map(|s| s.trim().to_string()).collect()];
    };
    let prefix: Vec<String> = tree[..open]
        .trim_end_matches("::")
        .split("::")
        .filter(|s| !s.is_empty())
        .map(|s| s.trim().to_string())
        .collect();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut out = Vec::new();
    for part in split_top(inner) {
        for rest in expand(part) {
            let mut path = prefix.clone();
            if rest != ["self"] {
                path.extend(rest);
            }
            out.push(path);
        }
    }
    out
}

/// `a, b::{c, d}, e` split at the commas outside braces.
fn split_top(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (at, ch) in inner.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&inner[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// Paths written inline in a line of code: runs of `ident::ident::…` outside strings.
fn inline_paths(line: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut in_string = false;
    let mut word = String::new();
    let mut path: Vec<String> = Vec::new();
    let mut chars = line.chars().peekable();
    let mut previous = ' ';
    while let Some(ch) = chars.next() {
        if ch == '"' && previous != '\\' {
            in_string = !in_string;
        }
        previous = ch;
        if in_string {
            continue;
        }
        if ch.is_alphanumeric() || ch == '_' {
            word.push(ch);
            continue;
        }
        if ch == ':' && chars.peek() == Some(&':') && !word.is_empty() {
            chars.next();
            path.push(std::mem::take(&mut word));
            continue;
        }
        if !path.is_empty() {
            if !word.is_empty() {
                path.push(std::mem::take(&mut word));
            }
            out.push(std::mem::take(&mut path));
        }
        word.clear();
    }
    if !path.is_empty() {
        if !word.is_empty() {
            path.push(word);
        }
        out.push(path);
    }
    out
}

/// The file a path from `file` leads to, following re-exports; `None` when it leaves the
/// crate or names nothing of it.
fn resolve(krate: &Crate, file: &File, path: &[String], depth: usize) -> Option<String> {
    if depth > 8 || path.is_empty() {
        return None;
    }
    let mut module: Vec<String> = match path[0].as_str() {
        "crate" => Vec::new(),
        "super" | "self" => file.module.clone(),
        first => {
            let mut child = file.module.clone();
            child.push(first.to_string());
            if !krate.by_module.contains_key(&child) {
                return None;
            }
            file.module.clone()
        }
    };
    let mut rest = match path[0].as_str() {
        "crate" | "self" => &path[1..],
        _ => path,
    };
    while let Some(first) = rest.first() {
        if first == "super" {
            module.pop();
            rest = &rest[1..];
        } else {
            break;
        }
    }
    while let Some(next) = rest.first() {
        let mut child = module.clone();
        child.push(next.clone());
        if krate.by_module.contains_key(&child) {
            module = child;
            rest = &rest[1..];
        } else {
            break;
        }
    }
    let holder = &krate.files[*krate.by_module.get(&module)?];
    // A name the module only re-exports leads on to where it is defined.
    if let Some(name) = rest.first() {
        for (_, reexport) in paths(&holder.code) {
            if reexport.last() == Some(name)
                && reexport.len() > 1
                && is_reexport(&holder.code, name)
                && let Some(target) = resolve(krate, holder, &reexport, depth + 1)
            {
                return Some(target);
            }
        }
    }
    Some(holder.shown.clone())
}

/// Whether `code` has a `pub use` that ends in `name`.
fn is_reexport(code: &str, name: &str) -> bool {
    code.split("pub use ").skip(1).any(|tail| {
        tail.split(';').next().is_some_and(|tree| {
            expand(tree)
                .iter()
                .any(|p| p.last().is_some_and(|last| last == name))
        })
    })
}

/// The strongly connected components of more than one file (Tarjan's algorithm), each
/// sorted, in the order of their first file.
fn strongly_connected(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a str) {
        let number = state.index.len();
        state.index.insert(node, number);
        state.low.insert(node, number);
        state.stack.push(node);
        state.on_stack.insert(node);
        let edges = state.edges;
        for next in edges.get(node).into_iter().flatten() {
            let next = next.as_str();
            if !state.index.contains_key(next) {
                visit(state, next);
                let low = state.low[node].min(state.low[next]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(next) {
                let low = state.low[node].min(state.index[next]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                component.push(top.to_string());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.found.sort();
    state.found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_use_tree_expands_to_each_path() {
        let paths = expand("crate::{schema::{Run, validate::check as c}, plan}");
        assert_eq!(
            paths,
            vec![
                vec!["crate", "schema", "Run"],
                vec!["crate", "schema", "validate", "check"],
                vec!["crate", "plan"],
            ]
        );
    }

    #[test]
    fn inline_paths_are_read_outside_strings() {
        let found = inline_paths(r#"let x = crate::share::is_id("a::b") + super::MAX;"#);
        assert_eq!(
            found,
            vec![vec!["crate", "share", "is_id"], vec!["super", "MAX"]]
        );
    }

    #[test]
    fn a_circle_is_found_and_a_chain_is_not() {
        let edge = |pairs: &[(&str, &str)]| {
            let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (from, to) in pairs {
                edges
                    .entry(from.to_string())
                    .or_default()
                    .insert(to.to_string());
                edges.entry(to.to_string()).or_default();
            }
            edges
        };
        let chain = edge(&[("a", "b"), ("b", "c")]);
        assert!(strongly_connected(&chain).is_empty());
        let circle = edge(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]);
        assert_eq!(strongly_connected(&circle), vec![vec!["a", "b", "c"]]);
    }
}
