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
use firsttoken_core::export;

use crate::AppState;
use crate::db::ExportRun;
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
    // A few runs in flight at most: each is one parsed record.
    let (tx, rx) = tokio::sync::mpsc::channel::<ExportRun>(4);
    let (db, filter) = (state.db.clone(), selection.filter);
    tokio::spawn(async move {
        if let Err(e) = db.export_runs(&filter, tx).await {
            tracing::error!(error = format!("{e:#}"), "export stopped");
        }
    });
    // The columns are core's one row (`export::COLUMNS`), the same as the page's CSV.
    let header_line =
        (format == Format::Csv).then(|| Ok::<_, Infallible>(Bytes::from(export::csv_header())));
    let lines = ReceiverStream::new(rx).map(move |run| {
        let mut text = String::new();
        for line in run.lines() {
            match format {
                Format::Csv => text.push_str(&export::csv_line(&line)),
                Format::Ndjson => {
                    let object = serde_json::Value::Object(export::json_object(&line));
                    text.push_str(&object.to_string());
                    text.push('\n');
                }
            }
        }
        Ok::<_, Infallible>(Bytes::from(text))
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
