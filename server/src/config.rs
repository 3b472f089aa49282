//! The server's configuration: flags, each with an environment variable.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use clap::{Parser, ValueEnum};

use firsttoken_core::summary::DEFAULT_MIN_SAMPLES;

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
        default_value = "sqlite://data/firsttoken.db"
    )]
    pub database_url: Secret,

    /// The built app (Trunk's `dist/`). When the folder is missing the server still runs
    /// the collector and the demo target, and `/` says how to build the app.
    #[arg(long, env = "FIRSTTOKEN_STATIC_DIR", default_value = "dist")]
    pub static_dir: PathBuf,

    /// The largest upload accepted, in bytes.
    #[arg(long, env = "FIRSTTOKEN_MAX_BODY_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Uploads and deletes one address may make per minute (held in memory only).
    #[arg(long, env = "FIRSTTOKEN_UPLOADS_PER_MINUTE", default_value_t = 30)]
    pub uploads_per_minute: u32,

    /// Take the client's address from the first `X-Forwarded-For` entry (only behind a
    /// proxy that sets it; otherwise any client could pick its own).
    #[arg(long, env = "FIRSTTOKEN_TRUST_FORWARDED_FOR")]
    pub trust_forwarded_for: bool,

    /// The token for bulk export and purge (`Authorization: Bearer …`). Without one those
    /// endpoints are off.
    #[arg(long, env = "FIRSTTOKEN_ADMIN_TOKEN")]
    pub admin_token: Option<Secret>,

    /// Summary groups with fewer answered requests show counts, not percentiles.
    #[arg(long, env = "FIRSTTOKEN_MIN_SAMPLES", default_value_t = DEFAULT_MIN_SAMPLES)]
    pub min_samples: usize,

    /// `text` for people, `json` for log collectors.
    #[arg(long, env = "FIRSTTOKEN_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl Config {
    /// The defaults, as if started without flags or environment (for tests and tools).
    pub fn defaults() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            database_url: Secret("sqlite://data/firsttoken.db".into()),
            static_dir: PathBuf::from("dist"),
            max_body_bytes: 8 * 1024 * 1024,
            uploads_per_minute: 30,
            trust_forwarded_for: false,
            admin_token: None,
            min_samples: DEFAULT_MIN_SAMPLES,
            log_format: LogFormat::Text,
        }
    }
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
