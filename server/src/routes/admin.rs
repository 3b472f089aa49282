//! The operator's bulk tools, behind the admin token: `GET /api/v1/export` (every matching
//! sample as CSV or NDJSON, streamed as the database yields it) and
//! `POST /api/v1/admin/purge`.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use super::access::{self, Access, Peer};
use super::selection::{self, Format, Purpose};
use firsttoken_core::export::csv_field;

use crate::AppState;
use crate::db::ExportRow;
use crate::error::AppError;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/export", get(export))
        .route("/api/v1/admin/purge", post(purge))
}

async fn export(
    State(state): State<AppState>,
    headers: HeaderMap,
    peer: Peer,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Response, AppError> {
    access::require(&state, &headers, &peer, Access::Admin)?;
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
last_token_ms,e2e_ms,output_chunks,output_tokens,conn_reused,protocol,study\n";

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
        text(row.study.as_deref()),
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
    access::require(&state, &headers, &peer, Access::Admin)?;
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
            study: None,
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
