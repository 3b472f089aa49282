//! The landing painter (`paint/`) in the beta user's page: Trunk builds it from
//! `paint.html` like any app, then its two files join `dist/` and `run.html` gets a
//! script that loads them, ahead of the app's own. Trunk allows one app per page, hence
//! this step.

use std::path::Path;

use anyhow::{Context, bail};

/// Copies the painter's script and module from `paint_dist` into `dist` and has
/// `dist/run.html` load them.
pub fn add_to_run_page(paint_dist: &Path, dist: &Path) -> anyhow::Result<()> {
    let mut script = None;
    let mut module = None;
    for entry in std::fs::read_dir(paint_dist).context("reading the painter's build")? {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        if !name.starts_with("firsttoken-paint-") {
            continue;
        }
        if name.ends_with("_bg.wasm") {
            module = Some(name.clone());
        } else if name.ends_with(".js") {
            script = Some(name.clone());
        } else {
            continue;
        }
        std::fs::copy(&path, dist.join(&name))
            .with_context(|| format!("copying {}", path.display()))?;
    }
    let (Some(script), Some(module)) = (script, module) else {
        bail!(
            "the painter's build in {} has no firsttoken-paint-….js and …_bg.wasm",
            paint_dist.display()
        );
    };
    let page = dist.join("run.html");
    let html = std::fs::read_to_string(&page).context("reading dist/run.html")?;
    std::fs::write(&page, with_painter(&html, &script, &module)?).context("writing dist/run.html")
}

/// `html` with the painter loaded before anything else in its head's scripts: a preload
/// of its module, so that its download starts with the page's, and a module script that
/// runs it. No `modulepreload` link: the app finds its own script, for its worker, as
/// the page's first `modulepreload` (`own_script` in src/engine/client.rs). No
/// top-level `await`, so the app's script, next in order, is not held up.
pub fn with_painter(html: &str, script: &str, module: &str) -> anyhow::Result<String> {
    let Some(at) = html.find("<script") else {
        bail!("run.html has no script for the painter to go before");
    };
    let tags = format!(
        "<link rel=\"preload\" href=\"/{module}\" crossorigin=\"anonymous\" as=\"fetch\" type=\"application/wasm\">\n\
         <script type=\"module\">import paint from '/{script}'; paint({{ module_or_path: '/{module}' }});</script>\n"
    );
    let mut out = html.to_owned();
    out.insert_str(at, &tags);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_painter_goes_before_the_app_and_adds_no_modulepreload() -> anyhow::Result<()> {
        let html = "<head><title>t</title>\n<script type=\"module\">import init from '/firsttoken-run-1.js';</script>\n<link rel=\"modulepreload\" href=\"/firsttoken-run-1.js\"></head>";
        let out = with_painter(html, "firsttoken-paint-2.js", "firsttoken-paint-3_bg.wasm")?;
        let painter = out.find("import paint from '/firsttoken-paint-2.js'");
        let app = out.find("import init from '/firsttoken-run-1.js'");
        assert!(painter.is_some() && painter < app, "{out}");
        assert!(
            out.contains("href=\"/firsttoken-paint-3_bg.wasm\""),
            "{out}"
        );
        assert_eq!(out.matches("modulepreload").count(), 1, "{out}");
        assert!(with_painter("<head></head>", "a.js", "b.wasm").is_err());
        Ok(())
    }
}
