//! Reading a request body within a size and a time limit. The size is checked against
//! `Content-Length` before a byte is read, and again while reading (a sender may lie or
//! send no length); the time limit ends a body that trickles in or stalls.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::error::AppError;

/// The body's length as `Content-Length` declares it.
pub fn declared_size(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// Refuses a body that says it is larger than `limit`, before reading it.
pub fn check_declared_size(headers: &HeaderMap, limit: usize) -> Result<(), AppError> {
    match declared_size(headers) {
        Some(length) if length > limit as u64 => Err(AppError::TooLarge { limit }),
        _ => Ok(()),
    }
}

/// The whole body, at most `limit` bytes, arriving within `time_limit`.
pub async fn read(
    body: Body,
    headers: &HeaderMap,
    limit: usize,
    time_limit: Duration,
) -> Result<Bytes, AppError> {
    check_declared_size(headers, limit)?;
    let collected = tokio::time::timeout(time_limit, Limited::new(body, limit).collect())
        .await
        .map_err(|_| AppError::BodyTimeout {
            secs: time_limit.as_secs(),
        })?;
    match collected {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(AppError::TooLarge { limit })
        }
        Err(e) => Err(AppError::BadRequest(format!(
            "the request body could not be read: {e}"
        ))),
    }
}
