//! Precompressed copies of the built app's files: `name.br` (brotli, quality 11) and
//! `name.gz` (gzip -9) beside each script, stylesheet and wasm in `dist/`. The server
//! sends the one the browser accepts, so the best compression costs nothing per request
//! (brotli at quality 11 takes seconds for the wasm, far too slow to do per request).

use std::io::Write;
use std::path::Path;

use anyhow::Context;

/// The files worth compressing: the page's `index.html` is rewritten for the base path
/// when the server starts, and compressed on the fly (it is about a kilobyte).
const EXTENSIONS: [&str; 4] = ["js", "wasm", "css", "svg"];

/// Writes `.br` and `.gz` beside every file of `dir` with one of [`EXTENSIONS`]; prints
/// each file's sizes.
pub fn precompress(dir: &Path) -> anyhow::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| EXTENSIONS.contains(&e))
        })
        .collect();
    entries.sort();
    // One thread a file: brotli at quality 11 is most of this step, and one core's work a
    // file (the two bundles' wasm take seconds each).
    let compressed: Vec<anyhow::Result<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = entries
            .iter()
            .map(|path| scope.spawn(|| compress_beside(path)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a compressing thread panicked"))
            .collect()
    });
    for line in compressed {
        println!("  {}", line?);
    }
    Ok(())
}

/// Writes `path.br` and `path.gz`; says what each weighs.
fn compress_beside(path: &Path) -> anyhow::Result<String> {
    let raw = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let br = brotli(&raw)?;
    let gz = gzip(&raw)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("?");
    let line = format!(
        "{name}: {} bytes, brotli {} bytes, gzip {} bytes",
        raw.len(),
        br.len(),
        gz.len()
    );
    for (suffix, bytes) in [("br", br), ("gz", gz)] {
        let out = path.with_file_name(format!("{name}.{suffix}"));
        std::fs::write(&out, bytes).with_context(|| format!("cannot write {}", out.display()))?;
    }
    Ok(line)
}

/// Brotli at its best quality with the largest standard window (16 MB).
pub fn brotli(raw: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    {
        let mut writer = brotli::CompressorWriter::new(&mut out, 64 * 1024, 11, 24);
        writer.write_all(raw).context("brotli")?;
        writer.flush().context("brotli")?;
    }
    Ok(out)
}

/// Gzip at level 9, for browsers that do not accept brotli (over plain HTTP, Firefox and
/// Chromium offer brotli only on HTTPS and localhost).
pub fn gzip(raw: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(raw).context("gzip")?;
    encoder.finish().context("gzip")
}
