//! The app carried inside the binary (`cargo xtask build`; the table is made by
//! `server/build.rs`): answers a request for one of its files from memory, the brotli or
//! gzip copy where the browser accepts it, as `ServeDir` does for a folder.

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, Response, StatusCode, header};

mod table {
    include!(concat!(env!("OUT_DIR"), "/embedded_app.rs"));
}

/// Every file of the embedded app, by its path under the app's root; empty when this
/// binary was built without one.
pub fn files() -> &'static [(&'static str, &'static [u8])] {
    table::FILES
}

/// One embedded file by name.
pub fn file(name: &str) -> Option<&'static [u8]> {
    files()
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, bytes)| *bytes)
}

/// The answer to a GET or HEAD for an embedded file, or `None` when the request names
/// no such file (the caller then serves the app's page).
pub fn respond(request: &Request<Body>) -> Option<Response<Body>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return None;
    }
    let name = request.uri().path().trim_start_matches('/');
    let plain = file(name)?;
    let accepts = |coding: &str| accepts_encoding(request, coding);
    let (bytes, encoding) = [("br", ".br"), ("gzip", ".gz")]
        .into_iter()
        .filter(|(coding, _)| accepts(coding))
        .find_map(|(coding, suffix)| Some((file(&format!("{name}{suffix}"))?, Some(coding))))
        .unwrap_or((plain, None));
    let mime = mime_guess::from_path(name).first_or_octet_stream();
    let mut response = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, mime.as_ref())
        .header(header::CONTENT_LENGTH, bytes.len());
    if let Some(encoding) = encoding {
        response = response.header(header::CONTENT_ENCODING, HeaderValue::from_static(encoding));
    }
    let body = if request.method() == Method::HEAD {
        Body::empty()
    } else {
        Body::from(bytes)
    };
    response.body(body).ok()
}

/// Whether `Accept-Encoding` lists `coding` without `q=0`.
fn accepts_encoding(request: &Request<Body>, coding: &str) -> bool {
    request
        .headers()
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let name = parts.next().unwrap_or_default();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            name.eq_ignore_ascii_case(coding) && !refused
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(encoding: &str) -> Request<Body> {
        Request::get("/x.js")
            .header(header::ACCEPT_ENCODING, encoding)
            .body(Body::empty())
            .expect("a request")
    }

    #[test]
    fn an_encoding_counts_unless_its_weight_is_zero() {
        assert!(accepts_encoding(&asking("gzip, deflate, br, zstd"), "br"));
        assert!(accepts_encoding(&asking("gzip;q=0.5"), "gzip"));
        assert!(!accepts_encoding(&asking("br;q=0, gzip"), "br"));
        assert!(!accepts_encoding(&asking("identity"), "gzip"));
        assert!(!accepts_encoding(&asking("brotli"), "br"));
    }
}
