//! Serves the built app: its files (from a folder such as Trunk's `dist/`, or from inside
//! the binary, [`embedded`]), `index.html` for any other path so the app's own routes work
//! on reload, brotli or gzip copies made at build time where the browser accepts them.
//!
//! Every file goes out with a Content-Security-Policy ([`content_security_policy`]) and
//! `Referrer-Policy: no-referrer`: the page runs only its own scripts and WebAssembly,
//! may not be framed (nobody can overlay the consent box), and tells no target where its
//! user came from. `connect-src *` stays open: measuring other origins is the point.
//!
//! They also go out with `Cross-Origin-Opener-Policy: same-origin` and
//! `Cross-Origin-Embedder-Policy: require-corp`, which make the page cross-origin isolated
//! on a secure origin (HTTPS, or `localhost` / `127.0.0.1`). Isolated, Firefox and WebKit
//! give `performance.now()` in steps of 20 µs instead of 1 ms, and Chromium 5 µs instead
//! of 100 µs (measured with Chromium 156, Firefox 153 and WebKitGTK 2.50). It costs the page nothing it uses: its measuring requests are CORS-mode
//! fetches, which COEP lets through, and it loads nothing from other origins.

mod embedded;

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Request, Response, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse};
use sha2::{Digest, Sha256};
use tower::ServiceExt as _;

use tower_http::compression::CompressionLayer;
use tower_http::services::ServeDir;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::AppState;

/// Where the app's files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppFiles {
    /// A folder on disk (`--static-dir`).
    Dir(PathBuf),
    /// The app built into this binary by `cargo xtask build`.
    Embedded,
}

impl AppFiles {
    /// The app to serve: the folder `static_dir` names when it holds an `index.html`, else
    /// the one inside the binary, else none (the folder is named but empty, or no folder
    /// is named and this binary carries no app).
    pub fn choose(static_dir: Option<&std::path::Path>) -> Option<Self> {
        match static_dir {
            Some(dir) => dir
                .join("index.html")
                .is_file()
                .then(|| Self::Dir(dir.to_path_buf())),
            None => embedded::file("index.html").map(|_| Self::Embedded),
        }
    }

    /// The names at the app's root.
    fn names(&self) -> Vec<String> {
        match self {
            Self::Dir(dir) => std::fs::read_dir(dir)
                .map(|entries| {
                    entries
                        .filter_map(|e| e.ok()?.file_name().into_string().ok())
                        .collect()
                })
                .unwrap_or_default(),
            Self::Embedded => embedded::files()
                .iter()
                .map(|(name, _)| name.split('/').next().unwrap_or(name).to_owned())
                .collect(),
        }
    }

    /// One text file of the app.
    fn read(&self, name: &str) -> Option<String> {
        match self {
            Self::Dir(dir) => std::fs::read_to_string(dir.join(name)).ok(),
            Self::Embedded => String::from_utf8(embedded::file(name)?.to_vec()).ok(),
        }
    }
}

/// The router that answers every path no other route took: the built app, for a server
/// whose paths start with `base` (`/firsttoken`, or empty at the root; the router itself
/// sees paths with `base` taken off).
pub fn router(files: Option<&AppFiles>, base: &str) -> Router<AppState> {
    let Some(files) = files else {
        return Router::new().fallback(not_built);
    };
    let names = files.names();
    let index = files.read("index.html").unwrap_or_default();
    let page = Arc::new(app_page(&index, &names, base));
    // The beta user's page is its own, smaller bundle; a build without it serves the
    // operator's app there too (it has the study page as well).
    let run_page = Arc::new(app_page(
        &files.read("run.html").unwrap_or(index),
        &names,
        base,
    ));
    let policy = content_security_policy(&format!("{page}{run_page}"));
    // A path that names a file (`/favicon.ico`, `/old-bundle.js`) and is not there is a
    // 404; `/run` is the beta user's page; any other path is one of the operator's pages.
    let app = tower::service_fn(move |request: Request<Body>| {
        let (page, run_page) = (page.clone(), run_page.clone());
        async move {
            let path = request.uri().path().trim_end_matches('/');
            let last_segment = path.rsplit('/').next().unwrap_or_default();
            let html = match last_segment {
                "run" | "run.html" => run_page,
                "index.html" => page,
                _ if last_segment.contains('.') => {
                    return Ok::<_, Infallible>(StatusCode::NOT_FOUND.into_response());
                }
                _ => page,
            };
            Ok(Html(html.as_str().to_owned()).into_response())
        }
    });
    // Never Trunk's own index.html: the page is always the one made for `base`. The
    // brotli and gzip copies `cargo xtask` makes beside each file (`app.wasm.br`) go to
    // browsers that accept them; without them, the compression layer gzips on the fly.
    let routes = Router::new()
        .route_service("/index.html", app.clone())
        .route_service("/run.html", app.clone());
    let routes = match files {
        AppFiles::Dir(dir) => routes.fallback_service(
            ServeDir::new(dir)
                .append_index_html_on_directories(false)
                .precompressed_br()
                .precompressed_gzip()
                .fallback(app),
        ),
        AppFiles::Embedded => {
            routes.fallback_service(tower::service_fn(move |request: Request<Body>| {
                let app = app.clone();
                async move {
                    match embedded::respond(&request) {
                        Some(response) => Ok(response),
                        None => app.oneshot(request).await,
                    }
                }
            }))
        }
    };
    let policy = HeaderValue::from_str(&policy)
        .unwrap_or_else(|_| HeaderValue::from_static("default-src 'self'"));
    routes
        .layer(CompressionLayer::new())
        .layer(middleware::from_fn(cache_control))
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            policy,
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            HeaderName::from_static("cross-origin-opener-policy"),
            HeaderValue::from_static("same-origin"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            HeaderName::from_static("cross-origin-embedder-policy"),
            HeaderValue::from_static("require-corp"),
        ))
}

/// Trunk's `index.html` made to work under `base`: every reference to a file or folder of
/// `dist/` (`names`) starting with `/` gets the prefix (`'/app-1a2b….js'` becomes
/// `'/firsttoken/app-1a2b….js'`), and a `<meta name="firsttoken-base">` tells the app
/// where it lives, so its links, its collector and its demo are under the prefix too.
pub fn app_page(index_html: &str, names: &[String], base: &str) -> String {
    let mut html = index_html.to_owned();
    if !base.is_empty() {
        for name in names {
            for quote in ['"', '\'', '`'] {
                html = html.replace(&format!("{quote}/{name}"), &format!("{quote}{base}/{name}"));
            }
        }
    }
    let meta = format!("\n    <meta name=\"firsttoken-base\" content=\"{base}\" />");
    match (html.find("<head>"), html.find("<title")) {
        (Some(at), _) => html.insert_str(at + "<head>".len(), &meta),
        (None, Some(at)) => html.insert_str(at, &meta),
        (None, None) => html.push_str(&meta),
    }
    html
}

/// The page's policy. Trunk writes one inline module script (it loads the app), which is
/// allowed by its SHA-256 digest and nothing else inline is; the engine's worker starts
/// from a `blob:` URL; Leptos sets `style` attributes on chart ticks and bars.
pub fn content_security_policy(index_html: &str) -> String {
    let digests: String = inline_scripts(index_html)
        .map(|script| format!(" 'sha256-{}'", base64(&Sha256::digest(script.as_bytes()))))
        .collect();
    format!(
        "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'{digests}; worker-src 'self' blob:; \
         style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src *; \
         frame-ancestors 'none'; object-src 'none'; base-uri 'none'; form-action 'none'"
    )
}

/// The text of every `<script>` without a `src`.
fn inline_scripts(html: &str) -> impl Iterator<Item = &str> {
    html.split("<script").skip(1).filter_map(|rest| {
        let (attributes, body) = rest.split_once('>')?;
        if attributes.contains("src=") {
            return None;
        }
        Some(body.split_once("</script>")?.0)
    })
}

/// Standard base64 with padding, as CSP digests are written.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Trunk names most assets by their content hash (`app-1a2b3c4d5e6f7a8b.js`): those never
/// change under the same name. Everything else (the pages, any file without a hash)
/// must be revalidated. Every answer may differ by `Accept-Encoding` (a brotli copy, a
/// gzip copy or the file itself), and says so, so that no shared cache hands brotli to
/// a browser that did not ask for it.
async fn cache_control(request: Request<Body>, next: Next) -> Response<Body> {
    let hashed = is_content_hashed(request.uri().path());
    let mut response = next.run(request).await;
    let value = if hashed && response.status().is_success() {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(value));
    let varies = headers.get_all(header::VARY).iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.to_ascii_lowercase().contains("accept-encoding"))
    });
    if !varies {
        headers.append(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    response
}

/// `name-<16 hex digits>.ext` or `name-<16 hex digits>_bg.wasm`.
fn is_content_hashed(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or_default();
    let stem = file.split('.').next().unwrap_or_default();
    let stem = stem.strip_suffix("_bg").unwrap_or(stem);
    // Trunk's 64-bit hash in hex, without leading zeros: 16 digits, fewer one time in
    // sixteen (fewer than 8 one time in 4 billion: left to revalidate).
    stem.rsplit_once('-').is_some_and(|(_, hash)| {
        (8..=16).contains(&hash.len()) && hash.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

async fn not_built() -> impl IntoResponse {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "This server carries no app: it was built without one and no --static-dir names a built \
         app. `cargo xtask build` makes a firsttoken-server with the app inside; `cargo xtask run` \
         builds it and starts it.\n",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trunk writes its 64-bit hash in hex without leading zeros: one build in sixteen
    /// names its files with 15 digits (`firsttoken-38e546b7b3f0686_bg.wasm`, CI's build
    /// of 5f3dc59), which were served `no-cache` and fetched again on every visit.
    #[test]
    fn trunks_hashes_are_told_whatever_their_length() {
        for path in [
            "/firsttoken-run-24b092c0a6df4268_bg.wasm",
            "/firsttoken-38e546b7b3f0686_bg.wasm",
            "/firsttoken-95022b19591daf3.js",
            "/base/main-00c0ffee.css",
        ] {
            assert!(is_content_hashed(path), "{path}");
        }
        for path in [
            "/",
            "/run.html",
            "/index.html",
            "/firsttoken-paint.js",
            "/a-cafe.js",
            "/x-0123456789abcdef0.js",
        ] {
            assert!(!is_content_hashed(path), "{path}");
        }
    }

    #[test]
    fn base64_matches_the_standard_vectors() {
        for (input, output) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), output);
        }
    }

    /// What Trunk writes, shortened.
    const TRUNK_INDEX: &str = r#"<!doctype html>
<html lang="en">
  <head>
<script type="module">
import init, * as bindings from '/firsttoken-f02931ef2e469712.js';
const wasm = await init({ module_or_path: '/firsttoken-4ab91b6bd799f655_bg.wasm' });
</script>
    <link rel="stylesheet" href="/main-33568ffbe00c5dbd.css"/>
    <a href="/firsttoken-docs">not a file of dist/</a>
  </head>
</html>"#;

    #[test]
    fn the_page_under_a_base_path_loads_its_files_from_there_and_says_where_it_lives() {
        let names = [
            "firsttoken-f02931ef2e469712.js",
            "firsttoken-4ab91b6bd799f655_bg.wasm",
            "main-33568ffbe00c5dbd.css",
            "index.html",
        ]
        .map(String::from);
        let page = app_page(TRUNK_INDEX, &names, "/firsttoken");
        assert!(
            page.contains("from '/firsttoken/firsttoken-f02931ef2e469712.js'"),
            "{page}"
        );
        assert!(page.contains("module_or_path: '/firsttoken/firsttoken-4ab91b6bd799f655_bg.wasm'"));
        assert!(page.contains("href=\"/firsttoken/main-33568ffbe00c5dbd.css\""));
        assert!(
            page.contains("href=\"/firsttoken-docs\""),
            "only dist's own names move"
        );
        assert!(
            page.contains("<head>\n    <meta name=\"firsttoken-base\" content=\"/firsttoken\" />")
        );
        // The policy allows the script as rewritten.
        let policy = content_security_policy(&page);
        assert_ne!(policy, content_security_policy(TRUNK_INDEX));

        let root = app_page(TRUNK_INDEX, &names, "");
        assert!(root.contains("from '/firsttoken-f02931ef2e469712.js'"));
        assert!(root.contains("content=\"\""));
    }

    #[test]
    fn only_inline_scripts_are_allowed_by_digest() {
        let html = "<script type=\"module\">alert(1)</script><script src=\"/a.js\"></script>";
        let policy = content_security_policy(html);
        // printf 'alert(1)' | openssl dgst -sha256 -binary | base64
        assert!(
            policy.contains("'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='"),
            "{policy}"
        );
        assert_eq!(policy.matches("'sha256-").count(), 1);
        assert!(policy.contains("frame-ancestors 'none'"));
    }
}
