//! Puts the built app inside the binary when `FIRSTTOKEN_APP_DIR` names the folder it was
//! built into (`cargo xtask build` sets it to `dist/`), so that deploying firsttoken is
//! copying one file. Without it the binary carries no app and serves one from
//! `--static-dir`, or none. The generated table is read by `src/static_files/embedded.rs`.
//!
//! Also lists the schema's migrations (`migrations/sqlite`, `migrations/postgres`) for
//! `src/db/migrations.rs`, which builds them into the binary as `sqlx::migrate!` would.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=FIRSTTOKEN_APP_DIR");
    let mut table = String::from(
        "/// The built app's files, each by its path under the app's root.\n\
         pub static FILES: &[(&str, &[u8])] = &[\n",
    );
    if let Some(dir) = std::env::var_os("FIRSTTOKEN_APP_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        assert!(
            dir.join("index.html").is_file(),
            "FIRSTTOKEN_APP_DIR={} holds no index.html: build the app first (cargo xtask build does both)",
            dir.display()
        );
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files = Vec::new();
        collect(&dir, &mut files);
        files.sort();
        for file in files {
            let name = file
                .strip_prefix(&dir)
                .expect("collected under dir")
                .to_string_lossy()
                .replace('\\', "/");
            println!("cargo:rerun-if-changed={}", file.display());
            writeln!(
                table,
                "    ({name:?}, include_bytes!({:?})),",
                file.display().to_string()
            )
            .expect("writing to a String");
        }
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("embedded_app.rs"), table).expect("writing embedded_app.rs");
    std::fs::write(out.join("migrations.rs"), migrations()).expect("writing migrations.rs");
}

/// `SQLITE` and `POSTGRES`: each backend's migration files, `(file name, SQL)`, by name.
fn migrations() -> String {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let mut table = String::new();
    for (name, folder) in [("SQLITE", "sqlite"), ("POSTGRES", "postgres")] {
        let dir = root.join("migrations").join(folder);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|entry| entry.expect("reading a directory entry").path())
            .filter(|path| path.is_file() && path.extension().is_some_and(|e| e == "sql"))
            .collect();
        files.sort();
        writeln!(table, "pub static {name}: &[(&str, &str)] = &[").expect("to a String");
        for file in files {
            let file_name = file
                .file_name()
                .expect("a file has a name")
                .to_string_lossy()
                .into_owned();
            writeln!(
                table,
                "    ({file_name:?}, include_str!({:?})),",
                file.display().to_string()
            )
            .expect("to a String");
        }
        table.push_str("];\n");
    }
    table
}

/// Every file under `dir`, but not hidden ones (Trunk's `.trunk-lock`, `.stage`).
fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("reading a directory entry").path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        {
            continue;
        }
        if path.is_dir() {
            collect(&path, files);
        } else {
            files.push(path);
        }
    }
}
