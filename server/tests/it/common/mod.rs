//! What the server's black-box tests share: servers on a real SQLite file and on a real
//! PostgreSQL (each test in a schema of its own), called in-process ([`App`]) or on a
//! real port ([`serve`]), and the example run from the core crate's schema folder.
//!
//! Tests of what a request gets back call the app in-process. A real port is for what
//! only a socket shows: connection limits and timeouts, slow and silent clients,
//! shutdown, connections the server drops, and several servers on one database.
//!
//! PostgreSQL is `postgres://postgres@127.0.0.1:5432/test` unless
//! `FIRSTTOKEN_TEST_POSTGRES` names another. When it cannot be reached the PostgreSQL half
//! of each test is skipped with a message, except under `CI=true`, where that fails.

#![allow(dead_code)] // privacy.rs, a binary of its own, uses part of this

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use firsttoken_server::db::Pool;
use firsttoken_server::{AppState, Config, Db};
use http_body_util::BodyExt;
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tempfile::TempDir;

/// One database a test runs against, and what keeps it alive.
pub struct TestDb {
    pub db: Db,
    pub name: &'static str,
    /// The SQLite file's folder.
    _dir: Option<TempDir>,
    /// The PostgreSQL schema, dropped by [`TestDb::cleanup`].
    schema: Option<(PgConnectOptions, String)>,
}

impl TestDb {
    /// The same database through a pool of its own, as a second collector instance
    /// opens it.
    pub async fn second_instance(&self) -> Db {
        match self.db.pool() {
            Pool::Postgres(pool) => Db::connect_postgres(pool.connect_options().as_ref().clone())
                .await
                .expect("second pool"),
            Pool::Sqlite(pool) => {
                let file = pool.connect_options().get_filename().display().to_string();
                Db::connect(&format!("sqlite://{file}"))
                    .await
                    .expect("second pool")
            }
        }
    }

    /// Drops the PostgreSQL schema (a SQLite folder goes with the value).
    pub async fn cleanup(self) {
        if let Some((options, schema)) = self.schema
            && let Ok(pool) = PgPoolOptions::new()
                .max_connections(1)
                .connect_with(options)
                .await
        {
            let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                .execute(&pool)
                .await;
        }
    }
}

fn postgres_url() -> String {
    std::env::var("FIRSTTOKEN_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

static SCHEMAS: AtomicU64 = AtomicU64::new(0);

/// A fresh SQLite file.
pub async fn sqlite() -> TestDb {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("runs.db").display());
    TestDb {
        db: Db::connect(&url).await.expect("SQLite opens"),
        name: "sqlite",
        _dir: Some(dir),
        schema: None,
    }
}

/// Set once PostgreSQL failed to answer, so later tests skip it without waiting again.
static POSTGRES_DOWN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// A fresh schema on the test PostgreSQL, or `None` (with a message) when there is none.
pub async fn postgres() -> Option<TestDb> {
    let url = postgres_url();
    if let Some(why) = POSTGRES_DOWN.get() {
        eprintln!("PostgreSQL tests skipped: {why}");
        return None;
    }
    let base = PgConnectOptions::from_str(&url).expect("a PostgreSQL URL");
    let admin = match PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(base.clone())
        .await
    {
        Ok(pool) => pool,
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("CI=true and PostgreSQL at {url} cannot be reached: {e}");
            }
            let why = format!("cannot connect to {url}: {e}");
            eprintln!("PostgreSQL tests skipped: {why}");
            let _ = POSTGRES_DOWN.set(why);
            return None;
        }
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    // Schemas a crashed test left behind more than an hour ago go first.
    let old: Vec<String> =
        sqlx::query_scalar("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'ft_test_%'")
            .fetch_all(&admin)
            .await
            .unwrap_or_default();
    for schema in old {
        let stamp: u64 = schema
            .split('_')
            .nth(2)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if stamp + 3600 < now {
            let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                .execute(&admin)
                .await;
        }
    }
    let schema = format!(
        "ft_test_{now}_{}_{}",
        std::process::id(),
        SCHEMAS.fetch_add(1, Ordering::Relaxed)
    );
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&admin)
        .await
        .expect("create a test schema");
    let options = base.clone().options([("search_path", schema.as_str())]);
    let db = Db::connect_postgres(options)
        .await
        .expect("PostgreSQL migrates");
    Some(TestDb {
        db,
        name: "postgres",
        _dir: None,
        schema: Some((base, schema)),
    })
}

/// SQLite, and PostgreSQL when it can be reached.
pub async fn databases() -> Vec<TestDb> {
    let mut all = vec![sqlite().await];
    all.extend(postgres().await);
    all
}

/// The configuration tests start from: a small body limit and a generous rate limit.
pub fn config() -> Config {
    Config {
        max_body_bytes: 1024 * 1024,
        uploads_per_minute: 10_000,
        // Tests ask for the group sizes they check; the server's floors are tests of
        // their own (summary.rs, privacy).
        min_samples: 1,
        min_runs: 1,
        admin_token: Some(firsttoken_server::config::Secret(ADMIN_TOKEN.into())),
        ..Config::defaults()
    }
}

pub const ADMIN_TOKEN: &str = "admin-test-token-of-at-least-32-characters";

/// A server state over `db`.
pub fn state(db: &Db) -> AppState {
    AppState::new(db.clone(), config())
}

/// A state with its own configuration.
pub fn state_with(db: &Db, config: Config) -> AppState {
    AppState::new(db.clone(), config)
}

/// The address in-process requests come from unless a test names another ([`Call::peer`]):
/// a client on loopback, as on a real port.
pub const PEER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 40000);

/// The whole app over a state, called in-process with `tower::ServiceExt::oneshot`: each
/// request goes through the router, the middleware and the handlers as it would on a
/// real port, with the client's address where [`firsttoken_server::serve`] puts it
/// (`ConnectInfo`), since rate limits and budgets count by it. The router is built once,
/// as `serve` builds it, so what it reads when built (the built app's pages) is read once.
///
/// What it leaves out is the connection: timeouts, connection caps, and the drop of a
/// connection a handler asks for ([`firsttoken_server::serve::CloseConnection`]).
#[derive(Clone)]
pub struct App {
    router: Router,
}

impl App {
    pub fn new(state: AppState) -> Self {
        Self {
            router: firsttoken_server::app(state),
        }
    }

    /// A request with `method` to `uri` (a path and a query), sent by [`Call::send`].
    pub fn call(&self, method: Method, uri: &str) -> Call {
        Call {
            router: self.router.clone(),
            request: Request::builder().method(method).uri(uri),
            body: Body::empty(),
            peer: PEER,
        }
    }

    pub fn get(&self, uri: &str) -> Call {
        self.call(Method::GET, uri)
    }

    pub fn post(&self, uri: &str) -> Call {
        self.call(Method::POST, uri)
    }

    pub fn delete(&self, uri: &str) -> Call {
        self.call(Method::DELETE, uri)
    }

    /// Sends a request made elsewhere, from [`PEER`] unless it names another peer, and
    /// reads the whole answer.
    pub async fn send(&self, mut request: Request<Body>) -> Answer {
        if request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .is_none()
        {
            request.extensions_mut().insert(ConnectInfo(PEER));
        }
        let response = tower::ServiceExt::oneshot(self.router.clone(), request)
            .await
            .unwrap_or_else(|e| match e {});
        Answer::read(response).await
    }
}

/// One request being put together, as with an HTTP client's request builder. It owns
/// what it needs, so a test can spawn it.
pub struct Call {
    router: Router,
    request: axum::http::request::Builder,
    body: Body,
    peer: SocketAddr,
}

impl Call {
    pub fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: TryInto<HeaderName>,
        K::Error: Into<axum::http::Error>,
        V: TryInto<HeaderValue>,
        V::Error: Into<axum::http::Error>,
    {
        self.request = self.request.header(name, value);
        self
    }

    pub fn bearer_auth(self, token: &str) -> Self {
        self.header(AUTHORIZATION, format!("Bearer {token}"))
    }

    /// `value` as a JSON body, with its type and length declared as a client does.
    pub fn json(self, value: &impl serde::Serialize) -> Self {
        let bytes = serde_json::to_vec(value).expect("serializes to JSON");
        self.header(CONTENT_TYPE, "application/json").body(bytes)
    }

    /// `bytes` as the body, with its length declared as a client does (the server checks
    /// a declared length before reading, and budgets reserve by it).
    pub fn body(mut self, bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        self = self.header(CONTENT_LENGTH, bytes.len());
        self.body = Body::from(bytes);
        self
    }

    /// A body that arrives as it comes (or never), with no length declared here.
    pub fn stream(mut self, body: Body) -> Self {
        self.body = body;
        self
    }

    /// Sent as if from `peer` rather than [`PEER`].
    pub fn peer(mut self, peer: SocketAddr) -> Self {
        self.peer = peer;
        self
    }

    /// The response as the app gives it: status and headers now, the body to be read
    /// (a stream, or one that ends with an error).
    pub async fn response(self) -> Response<Body> {
        let mut request = self.request.body(self.body).expect("a valid request");
        request.extensions_mut().insert(ConnectInfo(self.peer));
        tower::ServiceExt::oneshot(self.router, request)
            .await
            .unwrap_or_else(|e| match e {})
    }

    /// The whole answer.
    pub async fn send(self) -> Answer {
        Answer::read(self.response().await).await
    }
}

/// A response read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    /// Reads `response`'s body to its end; a body that ends with an error fails the test
    /// (read it with [`body`] to see the error).
    pub async fn read(response: Response<Body>) -> Self {
        let (parts, body) = response.into_parts();
        Self {
            status: parts.status,
            headers: parts.headers,
            body: body.collect().await.expect("the whole body").to_bytes(),
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.body.to_vec()).expect("UTF-8 text")
    }
}

/// `response`'s whole body, or the error it ended with.
pub async fn body(response: Response<Body>) -> Result<Bytes, axum::Error> {
    Ok(response.into_body().collect().await?.to_bytes())
}

/// Serves `state` on a free loopback port.
pub async fn serve(state: AppState) -> SocketAddr {
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = tcp.local_addr().expect("address");
    tokio::spawn(async move {
        firsttoken_server::serve(tcp, state, std::future::pending())
            .await
            .expect("serve")
    });
    address
}

/// The example run, as JSON.
pub fn example_run() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/schema/example-run.v1.json");
    serde_json::from_slice(&std::fs::read(path).expect("example readable")).expect("JSON")
}

/// The example run under another id (a UUID made from `n`), with its samples' TTFTs set.
pub fn run_with(n: u64, edit: impl FnOnce(&mut Value)) -> Value {
    let mut run = example_run();
    run["run_id"] = Value::String(format!("00000000-0000-4000-8000-{n:012x}"));
    edit(&mut run);
    run
}
