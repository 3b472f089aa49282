//! The operator's bulk tools, behind the admin token: `GET /api/v1/export` (every matching
//! sample as CSV or NDJSON, streamed as the database yields it) and
//! `POST /api/v1/admin/purge`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use sha2::{Digest, Sha256};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use super::runs::bearer;
use super::selection::{self, Format, Purpose};
use firsttoken_core::export::csv_field;

use crate::AppState;
use crate::db::{ExportRow, constant_time_eq};
use crate::error::AppError;
use crate::limit::Prefix;

type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/export", get(export))
        .route("/api/v1/admin/purge", post(purge))
}

/// Lets the request through with the admin token. The comparison is of SHA-256 digests,
/// so neither its time nor its outcome says anything about the token's length; a network
/// that keeps guessing wrong is refused for a while ([`crate::ADMIN_FAILURES_PER_HOUR`]).
fn require_admin(state: &AppState, headers: &HeaderMap, peer: &Peer) -> Result<(), AppError> {
    let Some(expected) = &state.config.admin_token else {
        return Err(AppError::Forbidden(
            "bulk export and purge are off: start the server with --admin-token (FIRSTTOKEN_ADMIN_TOKEN)".into(),
        ));
    };
    let Some(token) = bearer(headers) else {
        return Err(AppError::Forbidden(
            "send the admin token as Authorization: Bearer <token>".into(),
        ));
    };
    let peer = peer.as_ref().map(|Extension(ConnectInfo(p))| *p);
    let prefix = state.client_address(headers, peer).map(Prefix::from);
    let now = Instant::now();
    // Wrong guesses use up the allowance; once it is gone even the right token waits,
    // so a guesser learns nothing from the answers.
    if let Some(prefix) = prefix {
        state
            .admin_failures
            .take(prefix, 1.0, now)
            .map_err(|retry| AppError::TooManyRequests {
                retry_after: retry.0,
            })?;
    }
    let digest = |t: &str| Sha256::digest(t.as_bytes());
    if constant_time_eq(&digest(token), &digest(expected.expose())) {
        if let Some(prefix) = prefix {
            state.admin_failures.give_back(prefix, 1.0);
        }
        Ok(())
    } else {
        tracing::warn!("a request with a wrong admin token");
        Err(AppError::Forbidden("that is not the admin token".into()))
    }
}

async fn export(
    State(state): State<AppState>,
    headers: HeaderMap,
    peer: Peer,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Response, AppError> {
    require_admin(&state, &headers, &peer)?;
    let selection = selection::parse(&params, Purpose::Export)?;
    let format = selection.format.unwrap_or(Format::Ndjson);
    let (tx, rx) = tokio::sync::mpsc::channel::<ExportRow>(256);
    let (db, filter) = (state.db.clone(), selection.filter);
    tokio::spawn(async move {
        if let Err(e) = db.export_rows(&filter, tx).await {
            tracing::error!(error = format!("{e:#}"), "export stopped");
        }
    });
    let header_line = (format == Format::Csv).then(|| Ok::<_, Infallible>(Bytes::from(CSV_HEADER)));
    let lines = ReceiverStream::new(rx).map(move |row| {
        Ok::<_, Infallible>(Bytes::from(match format {
            Format::Csv => csv_line(&row),
            Format::Ndjson => {
                let mut line = serde_json::to_string(&row).unwrap_or_default();
                line.push('\n');
                line
            }
        }))
    });
    let body = Body::from_stream(tokio_stream::iter(header_line).chain(lines));
    let (content_type, file) = match format {
        Format::Csv => ("text/csv; charset=utf-8", "firsttoken-samples.csv"),
        Format::Ndjson => ("application/x-ndjson", "firsttoken-samples.ndjson"),
    };
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{file}\""),
            ),
        ],
        body,
    )
        .into_response())
}

const CSV_HEADER: &str = "run_id,index,received_at_ms,phase,concurrency,scenario,target_label,target_version,\
target_demo,network,effective_type,browser,os,mobile,status,error,headers_ms,ttfb_ms,ttft_ms,ttft_any_ms,\
last_token_ms,e2e_ms,output_chunks,output_tokens,conn_reused,protocol\n";

/// One CSV line (RFC 4180), quoted as the app's own export is.
fn csv_line(row: &ExportRow) -> String {
    fn text(value: Option<&str>) -> String {
        value.map(csv_field).unwrap_or_default()
    }
    fn opt<T: ToString>(value: Option<T>) -> String {
        value.map_or_else(String::new, |v| v.to_string())
    }
    let fields = [
        text(Some(&row.run_id)),
        row.index.to_string(),
        row.received_at_ms.to_string(),
        text(Some(&row.phase)),
        row.concurrency.to_string(),
        text(row.scenario.as_deref()),
        text(Some(&row.target_label)),
        text(row.target_version.as_deref()),
        row.target_demo.to_string(),
        text(Some(&row.network)),
        text(row.effective_type.as_deref()),
        text(row.browser.as_deref()),
        text(row.os.as_deref()),
        opt(row.mobile),
        row.status.to_string(),
        text(row.error.as_deref()),
        opt(row.headers_ms),
        opt(row.ttfb_ms),
        opt(row.ttft_ms),
        opt(row.ttft_any_ms),
        opt(row.last_token_ms),
        opt(row.e2e_ms),
        row.output_chunks.to_string(),
        opt(row.output_tokens),
        opt(row.conn_reused),
        text(row.protocol.as_deref()),
    ];
    let mut line = fields.join(",");
    line.push('\n');
    line
}

async fn purge(
    State(state): State<AppState>,
    headers: HeaderMap,
    peer: Peer,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<serde_json::Value>, AppError> {
    require_admin(&state, &headers, &peer)?;
    let selection = selection::parse(&params, Purpose::Purge)?;
    if !selection.filter.is_narrow() {
        return Err(AppError::BadRequest(
            "a purge needs at least one condition (from, to, a dimension, or include_demo=only)"
                .into(),
        ));
    }
    let deleted = state.db.purge(&selection.filter).await?;
    tracing::info!(deleted_runs = deleted, "purge");
    Ok(Json(serde_json::json!({ "deleted_runs": deleted })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_what_needs_quoting() {
        let row = ExportRow {
            run_id: "r".into(),
            index: 0,
            received_at_ms: 1,
            phase: "steady".into(),
            concurrency: 1,
            scenario: Some("a,b".into()),
            target_label: "say \"hi\"".into(),
            target_version: None,
            target_demo: false,
            network: "wifi".into(),
            effective_type: None,
            browser: None,
            os: None,
            mobile: Some(true),
            status: 200,
            error: None,
            headers_ms: Some(1.5),
            ttfb_ms: None,
            ttft_ms: Some(300.0),
            ttft_any_ms: None,
            last_token_ms: None,
            e2e_ms: None,
            output_chunks: 3,
            output_tokens: None,
            conn_reused: None,
            protocol: None,
        };
        let line = csv_line(&row);
        assert!(
            line.starts_with(
                "r,0,1,steady,1,\"a,b\",\"say \"\"hi\"\"\",,false,wifi,,,,true,200,,1.5,,300,"
            ),
            "{line}"
        );
        // One comma is inside the quoted scenario; the rest separate the header's fields.
        assert_eq!(
            line.matches(',').count() - 1,
            CSV_HEADER.matches(',').count(),
            "{line}"
        );
    }
}
