//! Links the operator made, told from links anyone made. `POST /api/v1/studies` (the
//! admin token) signs a study with the collector's key and answers with its link;
//! `POST /api/v1/studies/check` tells the page opening a link whether this collector
//! signed it, unchanged, and whether it may send the page's cookies.
//!
//! A signature is HMAC-SHA256 under the collector's key ([`crate::db::Db::signing_key`])
//! of `firsttoken study link\n` and the link's `v1.<study>` text, written after it as
//! `.<43 characters of base64url>`. The page cannot check it alone (it has no key), so
//! it asks the server that served it: that server's operator is the one a signed link
//! speaks for.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use firsttoken_core::api::{CHECK_PATH, LinkCheck, STUDIES_PATH};
use firsttoken_core::share;
use firsttoken_core::share::{Link, MAX_PAYLOAD_CHARS, SignedStudy, Study};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::access::{self, Access, Peer};
use crate::AppState;
use crate::error::AppError;

/// The largest study JSON the signing endpoint reads: a link's code inflates to at most
/// 256 KiB.
const MAX_STUDY_BYTES: usize = 256 * 1024;
/// What the HMAC covers before the link's text, so a signature can mean nothing else.
const CONTEXT: &[u8] = b"firsttoken study link\n";
/// Link checks one network may ask for each minute: one per page opened.
pub const LINK_CHECKS_PER_MINUTE: u32 = 120;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(STUDIES_PATH, post(sign))
        .route(CHECK_PATH, post(check))
}

fn mac(key: &[u8; 32], signed_text: &str) -> Hmac<Sha256> {
    // Any key length is accepted by HMAC; 32 bytes cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(CONTEXT);
    mac.update(signed_text.as_bytes());
    mac
}

/// The signature of a link's `v1.<study>` text.
pub fn signature(key: &[u8; 32], signed_text: &str) -> String {
    URL_SAFE_NO_PAD.encode(mac(key, signed_text).finalize().into_bytes())
}

/// Whether `signature` is this key's for `signed_text` (compared in constant time).
pub fn verify(key: &[u8; 32], signed_text: &str, signature: &str) -> bool {
    URL_SAFE_NO_PAD
        .decode(signature)
        .is_ok_and(|bytes| mac(key, signed_text).verify_slice(&bytes).is_ok())
}

async fn sign(
    State(state): State<AppState>,
    headers: HeaderMap,
    peer: Peer,
    body: Body,
) -> Result<Response, AppError> {
    access::require(&state, &headers, &peer, Access::Admin)?;
    let body = crate::body::read(body, &headers, MAX_STUDY_BYTES, read_time(&state)).await?;
    let mut study: Study = serde_json::from_slice(&body)
        .map_err(|e| AppError::MalformedJson(format!("the body is not a study: {e}")))?;
    // A study without a name gets one: its runs can then be told apart, and accepted
    // under --signed-studies-only.
    if study.study_id.is_none() {
        let mut random = [0u8; 10];
        getrandom::fill(&mut random).map_err(|e| anyhow::anyhow!("no random bytes: {e}"))?;
        study.study_id = Some(firsttoken_core::study_id::study_id_from_random(random));
    }
    study.validate().map_err(|e| AppError::Invalid {
        message: e.to_string(),
        field: Some(e.field),
    })?;
    if let Some(why) = study.cookies_refused(&state.config.cookie_target_prefixes) {
        return Err(AppError::Invalid {
            field: Some("plan.targets".into()),
            message: format!("cookies cannot be sent: {why}"),
        });
    }
    let unsigned = study.to_fragment();
    let code_chars = unsigned.len() - share::VERSION.len() - 1;
    if code_chars > MAX_PAYLOAD_CHARS {
        return Err(AppError::Invalid {
            field: None,
            message: format!(
                "the study makes a link of {code_chars} characters, and links hold at most {MAX_PAYLOAD_CHARS}"
            ),
        });
    }
    let key = state.signing_key().await?;
    let study_id = study.study_id.clone().unwrap_or_default();
    let signed_at_ms = state
        .db
        .record_signed_study(&study_id, &study.title)
        .await?;
    let fragment = format!("{unsigned}.{}", signature(&key, &unsigned));
    tracing::info!(study_id, "signed a study");
    let path = format!("{}/run#{fragment}", state.config.base_path);
    Ok((
        StatusCode::CREATED,
        Json(SignedStudy {
            study_id,
            signed_at_ms: u64::try_from(signed_at_ms).unwrap_or_default(),
            fragment,
            path,
        }),
    )
        .into_response())
}

async fn check(
    State(state): State<AppState>,
    headers: HeaderMap,
    peer: Peer,
    body: Body,
) -> Result<Json<LinkCheck>, AppError> {
    let address = state.client_address(&headers, peer.as_ref().map(|Extension(ConnectInfo(p))| *p));
    if let Some(address) = address {
        state
            .link_checks
            .check(address)
            .map_err(|retry| AppError::TooManyRequests {
                retry_after: retry.0,
            })?;
    }
    let body =
        crate::body::read(body, &headers, MAX_PAYLOAD_CHARS + 128, read_time(&state)).await?;
    let text = std::str::from_utf8(&body)
        .map_err(|_| AppError::BadRequest("the body is not a link's text (UTF-8)".into()))?;
    let link = Link::parse(text).map_err(|e| AppError::Invalid {
        field: None,
        message: e.to_string(),
    })?;
    let Some(signature) = &link.signature else {
        return Ok(Json(unsigned("no signature")));
    };
    let key = state.signing_key().await?;
    if !verify(&key, &link.signed_text, signature) {
        return Ok(Json(unsigned(
            "a signature that is not this site's: another collector signed it, or it was changed since",
        )));
    }
    let signed_at_ms = match &link.study.study_id {
        Some(id) => state.db.signed_study(id).await?,
        None => None,
    };
    Ok(Json(LinkCheck {
        signed: true,
        signed_at_ms: signed_at_ms.and_then(|ms| u64::try_from(ms).ok()),
        unsigned_reason: None,
        // Asked now, not when it was signed: the operator may have narrowed the prefixes.
        cookies_refused: link
            .study
            .cookies_refused(&state.config.cookie_target_prefixes),
    }))
}

fn unsigned(reason: &str) -> LinkCheck {
    LinkCheck {
        signed: false,
        signed_at_ms: None,
        unsigned_reason: Some(reason.to_owned()),
        cookies_refused: None,
    }
}

fn read_time(state: &AppState) -> Duration {
    Duration::from_secs(state.config.body_read_timeout_secs)
}
