//! `GET /api/v1/summary`: the crowd's numbers, grouped and filtered by the query string.

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};

use super::selection::{self, Purpose};
use crate::AppState;
use crate::error::AppError;
use firsttoken_core::summary::{Accumulator, Summary};

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/summary", get(summary))
}

async fn summary(
    State(state): State<AppState>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Json<Summary>, AppError> {
    let selection = selection::parse(&params, Purpose::Summary)?;
    let min_samples = selection.min_samples.unwrap_or(state.config.min_samples);
    let mut accumulator = Accumulator::default();
    state
        .db
        .summary_rows(&selection.filter, &selection.group_by, |row| {
            accumulator.add(row)
        })
        .await?;
    // Bootstrap intervals cost real CPU on large groups: keep them off the threads that
    // serve requests.
    let group_by = selection.group_by;
    let summary = tokio::task::spawn_blocking(move || accumulator.finish(&group_by, min_samples))
        .await
        .map_err(anyhow::Error::from)?;
    Ok(Json(summary))
}
