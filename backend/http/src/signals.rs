//! `POST /api/v1/rooms/{room}/signals`: a storefront reports its origin's health for the room's
//! closed loop (docs/DESIGN.md "Closed-loop admission"), when Vestibule does not stand in front
//! of it (outside gate mode). Origin API key, as the entry endpoints.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::auto_rate::OriginSignals;
use vestibule_shared::ErrorBody;

use super::openapi::EdgeErrors;
use crate::entries::authorize_origin;
use crate::error::{ApiError, Json, Path};
use crate::state::AppState;
use vestibule_store::now_ms;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(report))
}

/// Reports the origin's health over the last few seconds (send one every second or two; a room
/// whose loop hears nothing for 3 s holds its rate, and after 10 s falls to `autoRate.min`).
#[utoipa::path(
    post,
    path = "/api/v1/rooms/{room}/signals",
    tag = "tokens",
    operation_id = "report_signals",
    params(("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main")),
    request_body(content = OriginSignals, content_type = "application/json"),
    responses(
        (status = 204, description = "Taken: the room's loop reads it within a second"),
        (status = 400, description = "Malformed body (`bad_request`) or a number out of bounds (`invalid_field`)", body = ErrorBody),
        (status = 401, description = "No `Authorization: Bearer <origin API key>` (`unauthorized`)", body = ErrorBody),
        (status = 403, description = "Wrong origin key or none configured (`forbidden`)", body = ErrorBody),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        (status = 415, description = "A body that is not `application/json` (`unsupported_media_type`)", body = ErrorBody),
        EdgeErrors,
    ),
    security(("origin_key" = []))
)]
pub async fn report(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
    Json(signals): Json<OriginSignals>,
) -> Result<StatusCode, ApiError> {
    let runtime = state.room(&room)?;
    authorize_origin(&state, &headers)?;
    signals.check().map_err(ApiError::InvalidField)?;
    runtime.origin.report(now_ms(), signals);
    Ok(StatusCode::NO_CONTENT)
}
