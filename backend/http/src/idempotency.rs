//! The `Idempotency-Key` header: what makes a retried join or order safe (docs/DESIGN.md
//! "Retries").

use crate::error::ApiError;

/// The `Idempotency-Key` of a request, if it sent one.
///
/// # Errors
/// 400 when it is not 1–128 printable ASCII characters without spaces.
pub fn idempotency_key(headers: &axum::http::HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(vestibule_shared::IDEMPOTENCY_KEY_HEADER) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .filter(|key| (1..=128).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic()))
        .map(|key| Some(key.to_owned()))
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "{} must be 1–128 printable ASCII characters without spaces",
                vestibule_shared::IDEMPOTENCY_KEY_HEADER
            ))
        })
}
