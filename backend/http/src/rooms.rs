//! `GET /api/v1/rooms/{room}`: the public view of a room.

use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::embed::EmbeddingInfo;
use vestibule_shared::{ErrorBody, RoomInfo, RoomState};

use vestibule_room::public_state::{room_state, sold_out_message};

use super::openapi::{EdgeErrors, StoreReadErrors};

use crate::error::{ApiError, Json, Path};
use crate::state::AppState;
use vestibule_store::now_ms;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(room_info))
        .routes(routes!(room_embedding))
}

/// State (docs/DESIGN.md "Room state"), waiting and active counts, stock left, units sold and the
/// admission rate of a room. Once sold out nobody waits: `waiting` is 0.
#[utoipa::path(
    get,
    path = "/api/v1/rooms/{room}",
    tag = "rooms",
    operation_id = "room_info",
    params(("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main")),
    responses(
        (status = 200, body = RoomInfo),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        EdgeErrors, StoreReadErrors,
    )
)]
pub async fn room_info(
    State(state): State<AppState>,
    Path(room): Path<String>,
) -> Result<Json<RoomInfo>, ApiError> {
    let runtime = state.room(&room)?;
    let counts = state.store.counts(runtime.id(), now_ms()).await?;
    let settings = runtime.settings();
    let state = room_state(&settings, now_ms());
    Ok(Json(RoomInfo {
        room,
        state,
        waiting: if state == RoomState::SoldOut {
            0
        } else {
            counts.waiting
        },
        active_users: counts.active,
        admission_rate_per_sec: settings.admission_rate_per_sec,
        token_ttl_secs: settings.token_ttl_ms / 1000,
        stock_left: settings.sale.stock,
        sold: settings.sale.sold,
        sold_out_message: sold_out_message(&settings),
        message_en: settings.labels.message_en.clone(),
        message_ko: settings.labels.message_ko.clone(),
        display_name_en: settings.labels.display_name_en.clone(),
        display_name_ko: settings.labels.display_name_ko.clone(),
        queueing_method: settings.queueing_method,
    }))
}

/// What a framed page or the widget may tell the storefront embedding it: the
/// `postMessage` target origins (`--cors-origins`; the page never posts to `*`) and whether
/// `vestibule:admitted` carries the entry token (the room's `shareTokenWithEmbedder`, as this
/// replica last read it: within a tick of a change).
#[utoipa::path(
    get,
    path = "/api/v1/rooms/{room}/embedding",
    tag = "rooms",
    operation_id = "room_embedding",
    params(("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main")),
    responses(
        (status = 200, body = EmbeddingInfo),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        EdgeErrors,
    )
)]
pub async fn room_embedding(
    State(state): State<AppState>,
    Path(room): Path<String>,
) -> Result<Json<EmbeddingInfo>, ApiError> {
    let runtime = state.room(&room)?;
    Ok(Json(EmbeddingInfo {
        room,
        allowed_origins: state.config.cors_origins.clone(),
        share_token_with_embedder: runtime.settings().share_token_with_embedder,
    }))
}
