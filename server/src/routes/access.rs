//! Who may read and who may change: the admin token (export, purge, signing links) and the results
//! token (summaries, the Results page). Tokens travel as `Authorization: Bearer …` and are
//! compared as SHA-256 digests, so neither the time taken nor the answer says anything
//! about a token's length. A network that keeps guessing wrong is told to wait
//! ([`crate::ADMIN_FAILURES_PER_HOUR`] wrong tokens an hour), but the right token always
//! passes, so guesses from behind the same NAT cannot lock the operator out.

use std::net::SocketAddr;
use std::time::Instant;

use axum::Extension;
use axum::extract::ConnectInfo;
use axum::http::HeaderMap;
use sha2::{Digest, Sha256};

use super::runs::bearer;
use crate::AppState;
use crate::config::Secret;
use crate::db::constant_time_eq;
use crate::error::AppError;
use crate::limit::Prefix;

pub type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

/// What a request wants to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Export or purge: the admin token only, and off without one.
    Admin,
    /// Read the crowd's numbers: open without a results token; with one, that token or
    /// the admin token.
    Read,
    /// Scrape `/metrics`: open without a metrics token; with one, that token or the
    /// admin token.
    Metrics,
}

/// Lets the request through when it may do `access`.
pub fn require(
    state: &AppState,
    headers: &HeaderMap,
    peer: &Peer,
    access: Access,
) -> Result<(), AppError> {
    let config = &state.config;
    let accepted: Vec<&Secret> = match access {
        Access::Admin => match &config.admin_token {
            Some(admin) => vec![admin],
            None => {
                return Err(AppError::Forbidden(
                    "the operator's tools (export, purge, signing links) are off: start the server with --admin-token (FIRSTTOKEN_ADMIN_TOKEN)".into(),
                ));
            }
        },
        Access::Read => match &config.results_token {
            Some(results) => std::iter::once(results)
                .chain(config.admin_token.as_ref())
                .collect(),
            None => return Ok(()),
        },
        Access::Metrics => match &config.metrics_token {
            Some(metrics) => std::iter::once(metrics)
                .chain(config.admin_token.as_ref())
                .collect(),
            None => return Ok(()),
        },
    };
    let what = match access {
        Access::Admin => "the admin token",
        Access::Read => "the results token",
        Access::Metrics => "the metrics token",
    };
    let Some(token) = bearer(headers) else {
        return Err(AppError::Unauthorized(format!(
            "send {what} as Authorization: Bearer <token>"
        )));
    };
    let digest = |t: &str| Sha256::digest(t.as_bytes());
    let given = digest(token);
    // Every accepted token is compared, so the time does not say which one matched.
    let matched = accepted.iter().fold(false, |m, t| {
        constant_time_eq(&given, &digest(t.expose())) | m
    });
    if matched {
        // The right token always passes: wrong guesses from the same network (a NAT, a
        // carrier's shared address) must not lock the operator out. A token of 32
        // characters or more is not found by guessing.
        return Ok(());
    }
    // Wrong guesses use up the network's allowance; past it they are told to wait.
    let peer = peer.as_ref().map(|Extension(ConnectInfo(p))| *p);
    if let Some(prefix) = state.client_address(headers, peer).map(Prefix::from) {
        state
            .admin_failures
            .take(prefix, 1.0, Instant::now())
            .map_err(|retry| AppError::TooManyRequests {
                retry_after: retry.0,
            })?;
    }
    tracing::warn!(what, "a request with a wrong token");
    Err(AppError::Unauthorized(format!("that is not {what}")))
}
