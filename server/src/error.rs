//! One error type for every handler: it logs the internal cause and tells the client only
//! what it may know, as JSON that names the problem.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use firsttoken_core::api::{ErrorBody, ErrorDetail};

/// What went wrong with a request.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The body is not JSON at all.
    #[error("{0}")]
    MalformedJson(String),
    /// Other bad input: a query parameter, a path segment.
    #[error("{0}")]
    BadRequest(String),
    /// JSON of the wrong shape, or a record that breaks a rule.
    #[error("{message}")]
    Invalid {
        field: Option<String>,
        message: String,
    },
    #[error("the body is larger than the limit of {limit} bytes")]
    TooLarge { limit: usize },
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// It was here and was deleted for good (a run deleted with its token).
    #[error("{0}")]
    Gone(String),
    /// Not allowed at all (an endpoint that is off, a delete token that does not match).
    #[error("{0}")]
    Forbidden(String),
    /// No token, or the wrong one, where a token would let the request through.
    #[error("{0}")]
    Unauthorized(String),
    #[error("too many requests from this address; try again in {retry_after} s")]
    TooManyRequests { retry_after: u64 },
    /// The client's network has used an hourly budget.
    #[error("this network has used its hourly budget of {what}; try again in {retry_after} s")]
    OverBudget {
        what: &'static str,
        retry_after: u64,
    },
    /// The collector's storage limit is reached.
    #[error(
        "the collector's storage is full (its limit is {limit} bytes); the run stays on your device and can be sent later"
    )]
    StorageFull { limit: u64 },
    /// The server is at a cap it keeps for everyone (open connections, requests in
    /// flight, demo streams): not this client's fault, and over soon.
    #[error("the server is at its limit of {what}; try again in {retry_after} s")]
    Busy {
        what: &'static str,
        retry_after: u64,
    },
    /// Work the server bounds in time ran over (a summary over too many samples).
    #[error("{what} took longer than {secs} s; {hint}")]
    TooSlow {
        what: &'static str,
        secs: u64,
        hint: &'static str,
    },
    /// The body did not arrive in time (a slow or stalled sender).
    #[error("the request body did not arrive within {secs} s")]
    BodyTimeout { secs: u64 },
    /// Anything the client cannot fix; the cause is logged, not sent.
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl AppError {
    /// The short name clients and metrics see (`invalid`, `too_large`, …).
    pub fn code(&self) -> &'static str {
        self.status_and_code().1
    }

    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            AppError::MalformedJson(_) => (StatusCode::BAD_REQUEST, "malformed_json"),
            AppError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            AppError::Invalid { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "invalid"),
            AppError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            AppError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            AppError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            AppError::Gone(_) => (StatusCode::GONE, "gone"),
            AppError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            AppError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            AppError::TooManyRequests { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            AppError::OverBudget { .. } => (StatusCode::TOO_MANY_REQUESTS, "over_budget"),
            AppError::StorageFull { .. } => (StatusCode::INSUFFICIENT_STORAGE, "storage_full"),
            AppError::Busy { .. } => (StatusCode::SERVICE_UNAVAILABLE, "busy"),
            AppError::TooSlow { .. } => (StatusCode::SERVICE_UNAVAILABLE, "too_slow"),
            AppError::BodyTimeout { .. } => (StatusCode::REQUEST_TIMEOUT, "body_timeout"),
            AppError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        if let AppError::Internal(cause) = &self {
            tracing::error!(error = format!("{cause:#}"), "request failed");
        }
        let field = match &self {
            AppError::Invalid { field, .. } => field.clone(),
            _ => None,
        };
        let body = ErrorBody {
            error: ErrorDetail {
                code: code.to_owned(),
                message: self.to_string(),
                field,
            },
        };
        let mut response = (status, Json(body)).into_response();
        if let AppError::TooManyRequests { retry_after }
        | AppError::Busy { retry_after, .. }
        | AppError::OverBudget { retry_after, .. } = self
        {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, retry_after.into());
        }
        response
    }
}
