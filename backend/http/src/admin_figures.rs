//! `GET /api/v1/admin/rooms/{room}/history` (the last hour of a room's figures, for the
//! console's charts after a reload) and `GET /api/v1/admin/rooms/{room}/summary` (the sale's
//! totals, kept in the store, the same through every replica).

use axum::extract::State;
use axum::http::HeaderMap;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::admin_events::{FigureHistory, SaleSummary};
use vestibule_shared::ErrorBody;
use vestibule_store::{now_ms, FigureShare};

use super::admin::authorize;
use super::openapi::{EdgeErrors, StoreReadErrors};
use crate::error::{ApiError, Json, Path};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(room_history))
        .routes(routes!(room_summary))
}

/// The last hour of a room's figures, one point every 5 s, oldest first.
#[utoipa::path(
    get,
    path = "/api/v1/admin/rooms/{room}/history",
    tag = "admin",
    operation_id = "room_history",
    description = "The figures of the admin event stream, one point every 5 s over the last \
        hour (at most 720), kept by the answering replica since it started: the figures are \
        the room's whichever replica read them.",
    params(
        ("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main"),
    ),
    security(("admin_token" = [])),
    responses(
        (status = 200, body = FigureHistory, description = "The points, oldest first"),
        (status = 401, description = "No bearer token (`unauthorized`)", body = ErrorBody),
        (status = 403, description = "Wrong token, or the admin API is off (`forbidden`)", body = ErrorBody),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        EdgeErrors,
    )
)]
pub async fn room_history(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
) -> Result<Json<FigureHistory>, ApiError> {
    authorize(&state, &headers)?;
    let runtime = state.room(&room)?;
    state.admin_feed.start(&state);
    Ok(Json(state.admin_feed.history(&runtime.name)))
}

/// A room's sale so far.
#[utoipa::path(
    get,
    path = "/api/v1/admin/rooms/{room}/summary",
    tag = "admin",
    operation_id = "room_summary",
    description = "Joined, admitted, ordered, tokens expired unused, the longest line, the \
        longest wait at the front and when the room sold out: kept in the store, so the same \
        through every replica (the peaks are raised each second by every replica's figures).",
    params(
        ("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main"),
    ),
    security(("admin_token" = [])),
    responses(
        (status = 200, body = SaleSummary, description = "The sale's totals"),
        (status = 401, description = "No bearer token (`unauthorized`)", body = ErrorBody),
        (status = 403, description = "Wrong token, or the admin API is off (`forbidden`)", body = ErrorBody),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        EdgeErrors, StoreReadErrors,
    )
)]
pub async fn room_summary(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
) -> Result<Json<SaleSummary>, ApiError> {
    authorize(&state, &headers)?;
    let runtime = state.room(&room)?;
    let now = now_ms();
    let read = FigureShare {
        replica: vestibule_room::replica_id(),
        record: None,
        expired: 0,
        now_ms: now,
        ttl_ms: 0,
    };
    let shared = state
        .store
        .share_figures(runtime.id(), &read)
        .await
        .map_err(vestibule_store::StoreError::for_read)?;
    let counts = state
        .store
        .counts(runtime.id(), now)
        .await
        .map_err(vestibule_store::StoreError::for_read)?;
    let sale = state
        .store
        .room_settings(&runtime.name)
        .await?
        .settings
        .sale;
    let totals = shared.totals;
    Ok(Json(SaleSummary {
        room: runtime.name.clone(),
        joined: totals.joined,
        admitted: totals.admitted,
        ordered: sale.sold,
        expired_unused: totals.expired,
        waiting: counts.waiting,
        sold_out: sale.sold_out,
        sold_out_at_ms: totals.sold_out_at_ms,
        peak_waiting: totals.peak_waiting,
        longest_wait_secs: totals.longest_wait_secs,
    }))
}
