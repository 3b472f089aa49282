//! Serves the built app: files from Trunk's `dist/`, `index.html` for any other path so
//! the app's own routes work on reload, gzip where it helps.

use std::convert::Infallible;
use std::path::Path;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::IntoResponse;
use tower::{ServiceBuilder, ServiceExt};
use tower_http::compression::CompressionLayer;
use tower_http::services::{ServeDir, ServeFile};

use crate::AppState;

/// The router that answers every path no other route took.
pub fn router(dir: Option<&Path>) -> Router<AppState> {
    let Some(dir) = dir else {
        return Router::new().fallback(not_built);
    };
    // A path that names a file (`/favicon.ico`, `/old-bundle.js`) and is not there is a
    // 404; any other path is one of the app's own pages, so it gets the app.
    let index = dir.join("index.html");
    let app_page = tower::service_fn(move |request: Request<Body>| {
        let index = index.clone();
        async move {
            let last_segment = request.uri().path().rsplit('/').next().unwrap_or_default();
            if last_segment.contains('.') {
                return Ok::<_, Infallible>(StatusCode::NOT_FOUND.into_response());
            }
            let response = ServeFile::new(index).oneshot(request).await?;
            Ok(response.into_response())
        }
    });
    let files = ServeDir::new(dir).fallback(app_page);
    Router::new()
        .fallback_service(
            ServiceBuilder::new()
                .layer(CompressionLayer::new())
                .service(files),
        )
        .layer(middleware::from_fn(cache_control))
}

/// Trunk names most assets by their content hash (`app-1a2b3c4d5e6f7a8b.js`): those never
/// change under the same name. Everything else (`index.html`, the worker's fixed names)
/// must be revalidated.
async fn cache_control(request: Request<Body>, next: Next) -> Response<Body> {
    let hashed = is_content_hashed(request.uri().path());
    let mut response = next.run(request).await;
    let value = if hashed && response.status().is_success() {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static(value));
    response
}

/// `name-<16 hex digits>.ext` or `name-<16 hex digits>_bg.wasm`.
fn is_content_hashed(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or_default();
    let stem = file.split('.').next().unwrap_or_default();
    let stem = stem.strip_suffix("_bg").unwrap_or(stem);
    stem.rsplit_once('-')
        .is_some_and(|(_, hash)| hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
}

async fn not_built() -> impl IntoResponse {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "The firsttoken app is not built. Run `cargo xtask run`, which builds it and starts this server.\n",
    )
}
