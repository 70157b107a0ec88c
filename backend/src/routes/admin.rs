//! `GET`/`PATCH /api/v1/admin/rooms/{room}`: the operator's live knobs.
//!
//! Needs `Authorization: Bearer <admin token>` (compared in constant time). A change is written
//! to the store, so every replica's scheduler picks it up on its next tick.

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::routing::get;
use axum::Router;
use subtle::ConstantTimeEq;
use vestibule_shared::{RoomSettings, RoomSettingsPatch};

use crate::error::{ApiError, Json, Path};
use crate::state::AppState;
use crate::store::{now_ms, RoomConfig, RoomConfigPatch};

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/admin/rooms/{room}", get(settings).patch(update))
}

/// Checks the bearer token.
///
/// # Errors
/// 401 when none is sent, 403 when it is wrong or the admin API is off.
pub fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(expected) = &state.admin_token else {
        return Err(ApiError::Forbidden(
            "the admin API is disabled on this server".into(),
        ));
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .ok_or(ApiError::Unauthorized)?;
    if bool::from(presented.trim().as_bytes().ct_eq(expected.as_bytes())) {
        Ok(())
    } else {
        Err(ApiError::Forbidden("wrong admin token".into()))
    }
}

async fn current(
    state: &AppState,
    room: &str,
    config: RoomConfig,
) -> Result<RoomSettings, ApiError> {
    let counts = state
        .store
        .counts(room, now_ms())
        .await
        .map_err(|error| state.store_error(error))?;
    Ok(RoomSettings {
        room: room.to_owned(),
        admission_rate_per_sec: config.admission_rate_per_sec,
        paused: config.paused,
        token_ttl_secs: config.token_ttl_ms / 1000,
        max_active_users: config.max_active_users,
        waiting: counts.waiting,
        active_users: counts.active,
    })
}

/// Reads a room's settings and counts.
#[utoipa::path(
    get,
    path = "/api/v1/admin/rooms/{room}",
    params(("room" = String, Path)),
    security(("admin_token" = [])),
    responses(
        (status = 200, body = RoomSettings),
        (status = 401, body = vestibule_shared::ErrorBody),
        (status = 403, body = vestibule_shared::ErrorBody),
        (status = 404, body = vestibule_shared::ErrorBody),
    )
)]
pub async fn settings(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
) -> Result<Json<RoomSettings>, ApiError> {
    authorize(&state, &headers)?;
    let runtime = state.room(&room)?;
    let config = runtime.config();
    current(&state, &room, config).await.map(Json)
}

/// Validates a patch and converts it to store units.
fn checked(patch: &RoomSettingsPatch) -> Result<RoomConfigPatch, ApiError> {
    if let Some(rate) = patch.admission_rate_per_sec {
        if !(rate.is_finite() && (0.0..=100_000.0).contains(&rate)) {
            return Err(ApiError::InvalidField(
                "admissionRatePerSec must be 0–100000".into(),
            ));
        }
    }
    if let Some(ttl) = patch.token_ttl_secs {
        if !(1..=86_400).contains(&ttl) {
            return Err(ApiError::InvalidField(
                "tokenTtlSecs must be 1–86400".into(),
            ));
        }
    }
    if let Some(Some(cap)) = patch.max_active_users {
        if !(1..=10_000_000).contains(&cap) {
            return Err(ApiError::InvalidField(
                "maxActiveUsers must be 1–10000000 (null removes the cap; pause to stop admission)"
                    .into(),
            ));
        }
    }
    Ok(RoomConfigPatch {
        admission_rate_per_sec: patch.admission_rate_per_sec,
        paused: patch.paused,
        token_ttl_ms: patch.token_ttl_secs.map(|secs| secs * 1000),
        max_active_users: patch.max_active_users,
    })
}

/// Changes a room's settings live (absent fields stay).
#[utoipa::path(
    patch,
    path = "/api/v1/admin/rooms/{room}",
    params(("room" = String, Path)),
    request_body = RoomSettingsPatch,
    security(("admin_token" = [])),
    responses(
        (status = 200, body = RoomSettings),
        (status = 400, body = vestibule_shared::ErrorBody),
        (status = 401, body = vestibule_shared::ErrorBody),
        (status = 403, body = vestibule_shared::ErrorBody),
        (status = 404, body = vestibule_shared::ErrorBody),
        (status = 503, body = vestibule_shared::ErrorBody),
    )
)]
pub async fn update(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
    Json(body): Json<serde_json::Value>,
) -> Result<Json<RoomSettings>, ApiError> {
    authorize(&state, &headers)?;
    let runtime = state.room(&room)?;
    // serde would also read a struct from a JSON array; only an object names its fields.
    if !body.is_object() {
        return Err(ApiError::BadRequest(
            "the settings patch must be a JSON object".into(),
        ));
    }
    let patch: RoomSettingsPatch = serde_json::from_value(body)
        .map_err(|error| ApiError::BadRequest(format!("settings patch: {error}")))?;
    let patch = checked(&patch)?;
    let config = state
        .store
        .update_room(&room, &patch)
        .await
        .map_err(|error| state.store_error(error))?;
    runtime.set_config(config.clone());
    tracing::info!(%room, ?patch, "room settings changed");
    current(&state, &room, config).await.map(Json)
}
