//! `GET /api/v1/rooms/{room}`: the public view of a room.

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use vestibule_shared::{RoomInfo, RoomState};

use crate::error::{ApiError, Json, Path};
use crate::state::AppState;
use crate::store::now_ms;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/rooms/{room}", get(room_info))
}

/// State, waiting and active counts, and the admission rate of a room.
#[utoipa::path(
    get,
    path = "/api/v1/rooms/{room}",
    params(("room" = String, Path)),
    responses(
        (status = 200, body = RoomInfo),
        (status = 404, description = "Unknown room", body = vestibule_shared::ErrorBody),
        (status = 503, description = "Store unreachable", body = vestibule_shared::ErrorBody),
    )
)]
pub async fn room_info(
    State(state): State<AppState>,
    Path(room): Path<String>,
) -> Result<Json<RoomInfo>, ApiError> {
    let runtime = state.room(&room)?;
    let counts = state.store.counts(&room, now_ms()).await?;
    let config = runtime.config();
    Ok(Json(RoomInfo {
        room,
        state: if config.paused {
            RoomState::Paused
        } else {
            RoomState::Open
        },
        waiting: counts.waiting,
        active_users: counts.active,
        admission_rate_per_sec: config.admission_rate_per_sec,
        token_ttl_secs: config.token_ttl_ms / 1000,
    }))
}
