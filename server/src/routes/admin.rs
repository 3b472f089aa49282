//! The operator's bulk tools, behind the admin token: `GET /api/v1/export` (every matching
//! sample as CSV or NDJSON, streamed as the database yields it), `POST
//! /api/v1/admin/purge` (by a filter, or by source) and `GET /api/v1/admin/sources` (the
//! sources with the most runs in the last two days, by tag: `db/sources.rs`).

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
use super::selection::{self, Format, Purpose, Source};
use firsttoken_core::export;

use crate::AppState;
use crate::db::ExportRun;
use crate::error::AppError;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/export", get(export))
        .route("/api/v1/admin/purge", post(purge))
        .route("/api/v1/admin/sources", get(sources))
}

/// Sources listed at most.
const SOURCES_LISTED: i64 = 100;

async fn sources(
    State(state): State<AppState>,
    headers: HeaderMap,
    peer: Peer,
) -> Result<Json<serde_json::Value>, AppError> {
    access::require(&state, &headers, &peer, Access::Admin)?;
    let busiest = state
        .db
        .busiest_sources(crate::db::now_ms(), SOURCES_LISTED)
        .await?;
    Ok(Json(serde_json::json!({
        "kept_hours": crate::db::sources::KEPT_MS / 3_600_000,
        "sources": busiest,
    })))
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
    let mut selection = selection::parse(&params, Purpose::Purge)?;
    selection.filter.source_tags = match selection.source.take() {
        Some(Source::Block(block)) => {
            Some(state.db.source_tags(&block, crate::db::now_ms()).await?)
        }
        Some(Source::Tag(tag)) => Some(vec![tag]),
        None => None,
    };
    if !selection.filter.is_narrow() {
        return Err(AppError::BadRequest(
            "a purge needs at least one condition (from, to, a dimension, source, source_tag or include_demo=only)"
                .into(),
        ));
    }
    let deleted = state.db.purge(&selection.filter).await?;
    tracing::info!(deleted_runs = deleted, "purge");
    Ok(Json(serde_json::json!({ "deleted_runs": deleted })))
}
