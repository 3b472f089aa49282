//! A streaming chat endpoint of the tests' own, on a port of its own (so another origin
//! than the app's page), for the target check. Each path is one way a real endpoint can
//! be set up, right or wrong: `/{mode}/v1/chat` (also `/{mode}/v1/chat/completions`, for a
//! base URL of `/{mode}/v1`).
//!
//! | mode | what it does |
//! | --- | --- |
//! | `full` | CORS for any origin, `Timing-Allow-Origin`, `Server-Timing`, the client port, an OpenAI chat stream with usage |
//! | `bare` | CORS only: an OpenAI chat stream without usage, no timing headers |
//! | `no-cors` | the same stream without any CORS header |
//! | `no-cors-corp` | the same, and a `200` text page with `Cross-Origin-Resource-Policy: cross-origin` for a GET, which a `no-cors` request from the app's page may read |
//! | `no-auth-header` | CORS that allows `content-type` but not `authorization` |
//! | `json` | CORS, and a whole JSON answer instead of a stream |
//! | `unauthorized` | CORS, and `401` with a JSON error |
//! | `fixture-{name}` | CORS and timing headers, replaying `stream/tests/fixtures/sse/{name}.sse` |

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use axum::routing::any;
use tokio::task::JoinHandle;

/// The endpoint, listening on a free loopback port until dropped.
#[derive(Debug)]
pub struct Endpoint {
    pub address: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Endpoint {
    pub async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let app = Router::new()
            .route("/{mode}/v1/chat", any(chat))
            // Where an OpenAI-compatible server's base URL (`/{mode}/v1`) leads.
            .route("/{mode}/v1/chat/completions", any(chat));
        let task = tokio::spawn(async move {
            let _ = axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await;
        });
        Ok(Self { address, task })
    }

    /// `http://127.0.0.1:{port}/{mode}/v1/chat`.
    pub fn url(&self, mode: &str) -> String {
        format!("http://{}/{mode}/v1/chat", self.address)
    }
}

/// The OpenAI chat stream every mode but `json`, `unauthorized` and the fixtures sends.
fn openai_stream(usage: bool) -> String {
    let chunk = |delta: &str, finish: &str| {
        format!(
            "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
        )
    };
    let mut body = chunk(r#"{"role":"assistant","content":""}"#, "null");
    for word in ["Hello", " there", "!"] {
        body += &chunk(&format!("{{\"content\":\"{word}\"}}"), "null");
    }
    body += &chunk("{}", "\"stop\"");
    if usage {
        body += "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,\"total_tokens\":12}}\n\n";
    }
    body + "data: [DONE]\n\n"
}

async fn chat(
    Path(mode): Path<String>,
    method: Method,
    request_headers: HeaderMap,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Response {
    let origin = request_headers
        .get(header::ORIGIN)
        .cloned()
        .unwrap_or(HeaderValue::from_static("*"));
    let fixture = mode.strip_prefix("fixture-");
    let cors = !mode.starts_with("no-cors");
    let timing = mode == "full" || fixture.is_some();

    let mut response = if method == Method::OPTIONS {
        Response::builder()
            .status(StatusCode::NO_CONTENT)
            .body(Body::empty())
    } else if method != Method::POST && mode == "no-cors-corp" {
        // A page a `no-cors` request from a cross-origin isolated page may receive: an
        // ok status, not JSON (opaque-response blocking would withhold a 405 or JSON),
        // and `Cross-Origin-Resource-Policy: cross-origin` (COEP `require-corp`
        // withholds anything without it).
        Response::builder()
            .header(header::CONTENT_TYPE, "text/plain")
            .header("cross-origin-resource-policy", "cross-origin")
            .body(Body::from("This endpoint takes POST."))
    } else if method != Method::POST {
        Response::builder()
            .status(StatusCode::METHOD_NOT_ALLOWED)
            .body(Body::from("POST only"))
    } else if mode == "json" {
        Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(
                r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"Hello there!"}}]}"#,
            ))
    } else if mode == "unauthorized" {
        Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"error":{"message":"invalid api key"}}"#))
    } else {
        let body = match fixture {
            Some(name) if name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
                let path = crate::workspace_root()
                    .join("stream/tests/fixtures/sse")
                    .join(format!("{name}.sse"));
                match std::fs::read(&path) {
                    Ok(bytes) => bytes,
                    Err(e) => {
                        return Response::builder()
                            .status(StatusCode::NOT_FOUND)
                            .body(Body::from(format!("{}: {e}", path.display())))
                            .unwrap_or_default();
                    }
                }
            }
            Some(_) => b"bad fixture name".to_vec(),
            None => openai_stream(mode == "full").into_bytes(),
        };
        let mut builder = Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache");
        if timing {
            builder = builder
                .header("server-timing", "auth;dur=3.5, db;dur=12")
                .header("x-firsttoken-client-port", peer.port());
        }
        builder.body(Body::from(body))
    }
    .unwrap_or_default();

    let headers = response.headers_mut();
    if cors {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("POST"),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(if mode == "no-auth-header" {
                "content-type"
            } else {
                "content-type, authorization, x-api-key, anthropic-version, anthropic-dangerous-direct-browser-access"
            }),
        );
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("x-firsttoken-client-port"),
        );
    }
    if timing {
        headers.insert("timing-allow-origin", origin);
    }
    response
}
