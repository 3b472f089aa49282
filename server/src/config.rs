//! The server's configuration: flags, each with an environment variable.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use clap::{Parser, ValueEnum};
use firsttoken_crowd::summary::{DEFAULT_MIN_RUNS, DEFAULT_MIN_SAMPLES};

/// firsttoken server: the collector, the demo target and the built app.
#[derive(Debug, Clone, Parser)]
#[command(version, about)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "FIRSTTOKEN_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Where runs are stored: a SQLite file (`sqlite://data/firsttoken.db`, created when
    /// missing) or PostgreSQL (`postgres://user:password@host/database`), which several
    /// collector instances can share.
    #[arg(
        long,
        env = "DATABASE_URL",
        hide_env_values = true,
        default_value = "sqlite://data/firsttoken.db"
    )]
    pub database_url: Secret,

    /// Serve the app from this folder (Trunk's `dist/`) instead of the one built into the
    /// binary (`cargo xtask build` puts it there). A folder without an `index.html`, or no
    /// folder and a binary without an app: the server still runs the collector and the
    /// demo target, and `/` says how to build the app.
    #[arg(long, env = "FIRSTTOKEN_STATIC_DIR")]
    pub static_dir: Option<PathBuf>,

    /// Serve the app, the collector and the demo under this path (`/firsttoken`), for a
    /// reverse proxy on the operator's own domain that passes
    /// `https://chat.example.com/firsttoken/…` through unchanged. The app's requests to an
    /// endpoint on that domain are then same-origin. Empty: at the root.
    #[arg(long, env = "FIRSTTOKEN_BASE_PATH", default_value = "", value_parser = parse_base_path)]
    pub base_path: String,

    /// The largest upload accepted, in bytes. The default is the largest run the page
    /// makes (16 MiB: a run is bounded as a whole, core's `schema/size.rs`); below it the
    /// longest runs are refused with 413.
    #[arg(long, env = "FIRSTTOKEN_MAX_BODY_BYTES", default_value_t = firsttoken_core::schema::MAX_RECORD_BYTES)]
    pub max_body_bytes: usize,

    /// Upload bytes being read, parsed and stored at once, counted from each upload's
    /// declared length (or the largest body, without one) before it is read; past it
    /// uploads get 503 with Retry-After. At least --max-body-bytes.
    #[arg(long, env = "FIRSTTOKEN_UPLOAD_BYTES_IN_FLIGHT", default_value_t = 64 * 1024 * 1024)]
    pub upload_bytes_in_flight: usize,

    /// Uploads and deletes one network (an IPv4 address, an IPv6 /64) may make per minute
    /// (held in memory only).
    #[arg(long, env = "FIRSTTOKEN_UPLOADS_PER_MINUTE", default_value_t = 30)]
    pub uploads_per_minute: u32,

    /// Samples one network (an IPv4 address, an IPv6 /64) may upload per hour; 0 for no
    /// limit. A beta user uploads a few hundred.
    #[arg(long, env = "FIRSTTOKEN_SAMPLES_PER_HOUR", default_value_t = 20_000)]
    pub samples_per_hour: u64,

    /// Upload bytes one network may send per hour; 0 for no limit.
    #[arg(long, env = "FIRSTTOKEN_UPLOAD_BYTES_PER_HOUR", default_value_t = 64 * 1024 * 1024)]
    pub upload_bytes_per_hour: u64,

    /// Stop accepting runs (507) once the stored data takes this many bytes; 0 for no
    /// limit. Reads and deletes go on.
    #[arg(long, env = "FIRSTTOKEN_MAX_STORAGE_BYTES", default_value_t = 10 * 1024 * 1024 * 1024)]
    pub max_storage_bytes: u64,

    /// Accept runs only for these target origins (`https://chat.example.com`; repeat the
    /// flag, or separate with commas in the variable). Without it any origin is accepted.
    #[arg(
        long = "accept-target-origin",
        env = "FIRSTTOKEN_ACCEPT_TARGET_ORIGIN",
        value_delimiter = ','
    )]
    pub accept_target_origins: Vec<String>,

    /// Accept uploads from pages on these origins too (`https://chat.example.com`; repeat
    /// the flag, or commas in the variable; `*` for any). Without it an upload that says
    /// where it comes from (`Origin`, as every browser does) is accepted only from this
    /// server's own host, so another website cannot have its visitors' browsers upload.
    #[arg(
        long = "accept-upload-origin",
        env = "FIRSTTOKEN_ACCEPT_UPLOAD_ORIGIN",
        value_delimiter = ','
    )]
    pub accept_upload_origins: Vec<String>,

    /// Let a link the operator signed send the page's cookies to URLs under this prefix
    /// (`https://chat.example.com/api/chat`; repeat the flag, or separate with commas in
    /// the variable). Without it no link sends cookies; an unsigned link never does.
    #[arg(
        long = "cookie-target-prefix",
        env = "FIRSTTOKEN_COOKIE_TARGET_PREFIX",
        value_delimiter = ','
    )]
    pub cookie_target_prefixes: Vec<String>,

    /// Accept only runs of studies this collector signed (links made with the admin
    /// token); other uploads get 422.
    #[arg(long, env = "FIRSTTOKEN_SIGNED_STUDIES_ONLY")]
    pub signed_studies_only: bool,

    /// Take the client's address from `X-Forwarded-For` (only behind a proxy that appends
    /// to it; otherwise any client could pick its own). The entry used is the one the
    /// proxy added: `--proxy-hops` from the right.
    #[arg(long, env = "FIRSTTOKEN_TRUST_FORWARDED_FOR")]
    pub trust_forwarded_for: bool,

    /// How many trusted proxies append to `X-Forwarded-For` in front of the server: 1
    /// takes the rightmost entry, 2 the one before it. Entries further left were written
    /// by the client and are never used.
    #[arg(long, env = "FIRSTTOKEN_PROXY_HOPS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub proxy_hops: u32,

    /// Seconds a client has to send a request's headers; on a kept-alive HTTP/1
    /// connection also the longest wait for the next request.
    #[arg(
        long,
        env = "FIRSTTOKEN_HEADER_READ_TIMEOUT_SECS",
        default_value_t = 10
    )]
    pub header_read_timeout_secs: u64,

    /// Seconds a client has to send a request's body (an upload, a demo request).
    #[arg(long, env = "FIRSTTOKEN_BODY_READ_TIMEOUT_SECS", default_value_t = 30)]
    pub body_read_timeout_secs: u64,

    /// Open connections at most; more are answered 503 and closed. Keep it below the
    /// process's file descriptor limit (`ulimit -n`).
    #[arg(long, env = "FIRSTTOKEN_MAX_CONNECTIONS", default_value_t = 768)]
    pub max_connections: usize,

    /// Open connections one network (an IPv4 address, an IPv6 /64) may hold; more are
    /// closed at once, so one client's silent sockets cannot take every place. Not applied
    /// with `--trust-forwarded-for`: every connection then comes from the proxy, which
    /// should cap connections per client itself.
    #[arg(
        long,
        env = "FIRSTTOKEN_MAX_CONNECTIONS_PER_NETWORK",
        default_value_t = 128
    )]
    pub max_connections_per_network: usize,

    /// Seconds a response's write may wait for the client to read before its connection
    /// is closed (a client that stops reading would otherwise hold it for ever).
    #[arg(long, env = "FIRSTTOKEN_WRITE_STALL_SECS", default_value_t = 30)]
    pub write_stall_secs: u64,

    /// The longest any response may take to send, from its head being ready; past it
    /// the connection is closed (a client reading a byte now and then would otherwise
    /// hold it for ever). At least --demo-max-request-secs; raise it for large exports
    /// over slow links.
    #[arg(long, env = "FIRSTTOKEN_RESPONSE_DEADLINE_SECS", default_value_t = 600)]
    pub response_deadline_secs: u64,

    /// Requests being handled at once (not counting streams already answering); more
    /// are answered 503 with `Retry-After` rather than queued.
    #[arg(long, env = "FIRSTTOKEN_MAX_IN_FLIGHT", default_value_t = 256)]
    pub max_in_flight: usize,

    /// Seconds shutdown waits for uploads in flight before dropping what is still open.
    #[arg(long, env = "FIRSTTOKEN_SHUTDOWN_DEADLINE_SECS", default_value_t = 10)]
    pub shutdown_deadline_secs: u64,

    /// The demo target at `/v1/chat/completions`: `on` for trying firsttoken out, `off`
    /// for a production collector (anyone could use it to make the server stream).
    #[arg(long, env = "FIRSTTOKEN_DEMO", value_enum, default_value_t = Demo::On)]
    pub demo: Demo,

    /// Demo streams open at once, at most; more are answered 503.
    #[arg(long, env = "FIRSTTOKEN_DEMO_MAX_STREAMS", default_value_t = 64)]
    pub demo_max_streams: usize,

    /// Bytes of demo answers one network (an IPv4 address, an IPv6 /64) may be sent per
    /// hour, each request counted at the most its knobs and body can make it send; its
    /// /24 or /48 gets 16 times as much. 0 for no limit. The default is about 33,000
    /// answers of the default knobs (8 KB each), or 370 of the longest they allow (0.7 MB
    /// with a short model name).
    #[arg(long, env = "FIRSTTOKEN_DEMO_BYTES_PER_HOUR", default_value_t = 256 * 1024 * 1024)]
    pub demo_bytes_per_hour: u64,

    /// The longest a demo request may last, in seconds, from arrival to its last byte. A
    /// request whose knobs ask for longer is refused; one that runs over (waiting for a
    /// busy worker, a stall) is ended.
    #[arg(long, env = "FIRSTTOKEN_DEMO_MAX_REQUEST_SECS", default_value_t = 120)]
    pub demo_max_request_secs: u64,

    /// The operator's token (`Authorization: Bearer …`), at least 32 characters: bulk
    /// export, purge, the sources of recent runs, and signing links; it also reads what the
    /// results and metrics tokens read. Without one those endpoints are off.
    #[arg(long, env = "FIRSTTOKEN_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<Secret>,

    /// The token that reads the crowd's numbers: summaries and the Results page, which
    /// asks for it once per browser session (`Authorization: Bearer …`), at least 32
    /// characters. Without one they are open to anyone who can reach the collector. The
    /// admin token reads too; exports always need the admin token.
    #[arg(long, env = "FIRSTTOKEN_RESULTS_TOKEN", hide_env_values = true)]
    pub results_token: Option<Secret>,

    /// The token that reads `/metrics` (`Authorization: Bearer …`, as Prometheus'
    /// `authorization` setting sends it), at least 32 characters; the admin token reads
    /// too. Without one `/metrics` is open: its live upload counts tell an outsider when
    /// people take part.
    #[arg(long, env = "FIRSTTOKEN_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<Secret>,

    /// Summary groups from fewer runs publish nothing but their key (no count, no
    /// percentile), and the smallest other group is withheld with them; at least 5.
    #[arg(long, env = "FIRSTTOKEN_MIN_RUNS", default_value_t = DEFAULT_MIN_RUNS)]
    pub min_runs: usize,

    /// The most groups one summary may have; a query that makes more is refused (422),
    /// naming `group_by`: memory and the answer's size grow with each group.
    #[arg(long, env = "FIRSTTOKEN_MAX_SUMMARY_GROUPS", default_value_t = 1000)]
    pub max_summary_groups: usize,

    /// Summary groups with fewer answered requests show counts, not percentiles.
    #[arg(long, env = "FIRSTTOKEN_MIN_SAMPLES", default_value_t = DEFAULT_MIN_SAMPLES)]
    pub min_samples: usize,

    /// Summaries one network (an IPv4 address, an IPv6 /64) may have computed per minute;
    /// answers from the 10 s cache are not counted. More get `429` with `Retry-After`.
    #[arg(long, env = "FIRSTTOKEN_SUMMARIES_PER_MINUTE", default_value_t = 60)]
    pub summaries_per_minute: u32,

    /// The longest one summary may take, in seconds; past it the answer is `503` and says
    /// to narrow the query. Summaries are computed one at a time.
    #[arg(long, env = "FIRSTTOKEN_SUMMARY_TIME_LIMIT_SECS", default_value_t = 15)]
    pub summary_time_limit_secs: u64,

    /// `text` for people, `json` for log collectors.
    #[arg(long, env = "FIRSTTOKEN_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Demo {
    On,
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The shortest admin token accepted: long enough that guessing is hopeless even without
/// the limit on failed attempts.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 32;

impl Config {
    /// Whether runs for `origin` are accepted (`--accept-target-origin`).
    pub fn accepts_target_origin(&self, origin: &str) -> bool {
        self.accept_target_origins.is_empty()
            || self
                .accept_target_origins
                .iter()
                .any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin))
    }

    /// Whether an upload from a page on `origin` (its `Origin` header; `None` without
    /// one: not a browser's cross-site request) may be stored by this server, reached as
    /// `host` (its `Host` header). A page of this server's own host always may; others
    /// only when `--accept-upload-origin` names them (or is `*`). Hosts are compared
    /// without their ports: a proxy's `Host` often drops it.
    pub fn accepts_upload_from(&self, origin: Option<&str>, host: Option<&str>) -> bool {
        let Some(origin) = origin else {
            return true;
        };
        let origin = origin.trim_end_matches('/');
        let name = |authority: &str| {
            let authority = authority.to_ascii_lowercase();
            match authority.strip_prefix('[') {
                Some(v6) => v6.split(']').next().unwrap_or_default().to_owned(),
                None => authority.split(':').next().unwrap_or_default().to_owned(),
            }
        };
        let own = host.is_some_and(|host| {
            origin
                .split_once("://")
                .is_some_and(|(_, authority)| name(authority) == name(host))
        });
        own || self
            .accept_upload_origins
            .iter()
            .any(|o| o == "*" || o.trim_end_matches('/').eq_ignore_ascii_case(origin))
    }

    /// Refuses settings the server cannot run safely with, naming the flag.
    pub fn check(&self) -> Result<(), ConfigError> {
        for (flag, token) in [
            ("--admin-token (FIRSTTOKEN_ADMIN_TOKEN)", &self.admin_token),
            (
                "--results-token (FIRSTTOKEN_RESULTS_TOKEN)",
                &self.results_token,
            ),
            (
                "--metrics-token (FIRSTTOKEN_METRICS_TOKEN)",
                &self.metrics_token,
            ),
        ] {
            if let Some(token) = token
                && token.expose().chars().count() < MIN_ADMIN_TOKEN_CHARS
            {
                return Err(ConfigError::new(
                    flag,
                    format!(
                        "must be at least {MIN_ADMIN_TOKEN_CHARS} characters; `openssl rand -hex 32` makes one"
                    ),
                ));
            }
        }
        for origin in &self.accept_target_origins {
            let trimmed = origin.trim_end_matches('/');
            let ok = (trimmed.starts_with("https://") || trimmed.starts_with("http://"))
                && !trimmed.contains(['?', '#'])
                && trimmed.split('/').count() == 3;
            if !ok {
                return Err(ConfigError::new(
                    "--accept-target-origin",
                    format!("{origin:?} is not an origin (scheme://host[:port], no path)"),
                ));
            }
        }
        if self.upload_bytes_in_flight < self.max_body_bytes {
            return Err(ConfigError::new(
                "--upload-bytes-in-flight (FIRSTTOKEN_UPLOAD_BYTES_IN_FLIGHT)",
                format!(
                    "must be at least --max-body-bytes ({}): the largest upload would never get in",
                    self.max_body_bytes
                ),
            ));
        }
        if self.response_deadline_secs < self.demo_max_request_secs {
            return Err(ConfigError::new(
                "--response-deadline-secs (FIRSTTOKEN_RESPONSE_DEADLINE_SECS)",
                format!(
                    "must be at least --demo-max-request-secs ({}): a demo stream would be cut short",
                    self.demo_max_request_secs
                ),
            ));
        }
        if self.min_runs < DEFAULT_MIN_RUNS {
            return Err(ConfigError::new(
                "--min-runs (FIRSTTOKEN_MIN_RUNS)",
                format!(
                    "must be at least {DEFAULT_MIN_RUNS}: a smaller group can single out one person's run"
                ),
            ));
        }
        for prefix in &self.cookie_target_prefixes {
            let ok = firsttoken_core::url::origin_of(prefix).is_some()
                && !prefix.contains(['?', '#', '\\']);
            if !ok {
                return Err(ConfigError::new(
                    "--cookie-target-prefix",
                    format!("{prefix:?} is not an absolute http:// or https:// URL without ? or #"),
                ));
            }
        }
        for (flag, value) in [
            ("--max-connections", self.max_connections),
            ("--max-in-flight", self.max_in_flight),
            (
                "--max-connections-per-network",
                self.max_connections_per_network,
            ),
            ("--demo-max-streams", self.demo_max_streams),
            ("--max-summary-groups", self.max_summary_groups),
        ] {
            if value == 0 {
                return Err(ConfigError::new(flag, "must be at least 1"));
            }
        }
        for (flag, value) in [
            ("--header-read-timeout-secs", self.header_read_timeout_secs),
            ("--body-read-timeout-secs", self.body_read_timeout_secs),
            ("--write-stall-secs", self.write_stall_secs),
            ("--demo-max-request-secs", self.demo_max_request_secs),
            ("--summary-time-limit-secs", self.summary_time_limit_secs),
        ] {
            if value == 0 {
                return Err(ConfigError::new(flag, "must be at least 1"));
            }
        }
        Ok(())
    }

    /// The defaults, as if started without flags or environment (for tests and tools).
    pub fn defaults() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            database_url: Secret("sqlite://data/firsttoken.db".into()),
            static_dir: None,
            base_path: String::new(),
            max_body_bytes: firsttoken_core::schema::MAX_RECORD_BYTES,
            upload_bytes_in_flight: 64 * 1024 * 1024,
            uploads_per_minute: 30,
            samples_per_hour: 20_000,
            upload_bytes_per_hour: 64 * 1024 * 1024,
            max_storage_bytes: 10 * 1024 * 1024 * 1024,
            accept_target_origins: Vec::new(),
            accept_upload_origins: Vec::new(),
            cookie_target_prefixes: Vec::new(),
            signed_studies_only: false,
            trust_forwarded_for: false,
            proxy_hops: 1,
            header_read_timeout_secs: 10,
            body_read_timeout_secs: 30,
            max_connections: 768,
            max_connections_per_network: 128,
            max_in_flight: 256,
            write_stall_secs: 30,
            response_deadline_secs: 600,
            shutdown_deadline_secs: 10,
            demo: Demo::On,
            demo_max_streams: 64,
            demo_max_request_secs: 120,
            demo_bytes_per_hour: 256 * 1024 * 1024,
            admin_token: None,
            results_token: None,
            metrics_token: None,
            min_samples: DEFAULT_MIN_SAMPLES,
            min_runs: DEFAULT_MIN_RUNS,
            max_summary_groups: 1000,
            summaries_per_minute: 60,
            summary_time_limit_secs: 15,
            log_format: LogFormat::Text,
        }
    }
}

/// A setting the server refuses to start with, naming its flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag} {message}")]
pub struct ConfigError {
    /// The flag, and its environment variable where that helps.
    pub flag: &'static str,
    /// What is wrong with its value.
    pub message: String,
}

impl ConfigError {
    fn new(flag: &'static str, message: impl Into<String>) -> Self {
        Self {
            flag,
            message: message.into(),
        }
    }
}

/// A `--base-path` that is not a clean path prefix: the value as given, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} {message}")]
pub struct BasePathError {
    pub value: String,
    pub message: String,
}

/// A base path as `--base-path` takes it: `/firsttoken` (a trailing `/` is dropped; `/`
/// or nothing is the root), made of path segments of letters, digits and `-._~`.
pub fn parse_base_path(value: &str) -> Result<String, BasePathError> {
    let error = |message: String| BasePathError {
        value: value.to_owned(),
        message,
    };
    let trimmed = value.trim().trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    let Some(rest) = trimmed.strip_prefix('/') else {
        return Err(error("must start with / (like /firsttoken)".into()));
    };
    if trimmed.len() > 100 {
        return Err(error("is longer than 100 characters".into()));
    }
    for segment in rest.split('/') {
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~".contains(c);
        if segment.is_empty() || segment == "." || segment == ".." || !segment.chars().all(allowed)
        {
            return Err(error(format!(
                "has a part that is not letters, digits, -, ., _ or ~ between two / ({segment:?})"
            )));
        }
    }
    Ok(trimmed.to_owned())
}

/// A value that must not appear in logs or debug output (a token, a URL with a password).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_limit_of_zero_is_refused_naming_its_flag() {
        assert!(Config::defaults().check().is_ok());
        let zero = Config {
            summary_time_limit_secs: 0,
            ..Config::defaults()
        };
        let refused = zero.check().err().map(|e| e.flag);
        assert_eq!(refused, Some("--summary-time-limit-secs"));
    }

    #[test]
    fn a_base_path_is_a_clean_path_prefix_or_the_root() {
        assert_eq!(parse_base_path("/firsttoken/"), Ok("/firsttoken".into()));
        assert_eq!(
            parse_base_path("/tools/first-token"),
            Ok("/tools/first-token".into())
        );
        assert_eq!(parse_base_path("/"), Ok(String::new()));
        assert_eq!(parse_base_path(""), Ok(String::new()));
        for bad in [
            "firsttoken",
            "/a//b",
            "/a/../b",
            "/a b",
            "/a?x=1",
            "/%2e%2e",
        ] {
            let e = parse_base_path(bad).expect_err(bad);
            assert_eq!(e.value, bad);
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }
}

#[cfg(test)]
mod reference {
    use clap::CommandFactory;

    /// The book's configuration page holds `firsttoken-server --help` exactly, so the
    /// reference an operator reads is the one the binary prints.
    #[test]
    fn the_books_configuration_page_is_the_help() {
        // Exactly what `--help` prints: clap's answer to the flag itself.
        let help = super::Config::command()
            .try_get_matches_from(["firsttoken-server", "--help"])
            .expect_err("--help answers with the help")
            .to_string();
        let page = include_str!("../../docs/src/reference/configuration.md");
        let block = page
            .split("```text\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .unwrap_or_default();
        assert!(
            block.trim_end() == help.trim_end(),
            "docs/src/reference/configuration.md must hold `firsttoken-server --help` in its \
             ```text block; paste this there:\n{help}"
        );
    }
}
