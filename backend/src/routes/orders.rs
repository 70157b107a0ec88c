//! `POST /api/v1/rooms/{room}/orders`: the demo checkout behind the entry-token layer.
//!
//! The layer has already checked the token; this handler validates the order and then consumes
//! the token atomically, so a token buys exactly one order (a second try gets 403 used).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use vestibule_shared::{OrderReceipt, OrderRequest, ENTRY_TOKEN_HEADER};

use crate::config::OutagePolicy;
use crate::error::{ApiError, Json, Path};
use crate::ids::random_id;
use crate::state::AppState;
use crate::token_layer;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/rooms/{room}/orders", post(place_order))
}

/// Parses the optional JSON body.
fn order_from(headers: &HeaderMap, body: &Bytes) -> Result<OrderRequest, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(OrderRequest::default());
    }
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !is_json {
        return Err(ApiError::UnsupportedMediaType(
            "send the order as Content-Type: application/json".into(),
        ));
    }
    serde_json::from_slice(body)
        .map_err(|error| ApiError::BadRequest(format!("order body: {error}")))
}

/// Places a demo order with a live entry token, consuming it.
#[utoipa::path(
    post,
    path = "/api/v1/rooms/{room}/orders",
    params(("room" = String, Path), ("X-Entry-Token" = String, Header, description = "Entry token from TOKEN_ISSUED")),
    request_body(content = Option<OrderRequest>, content_type = "application/json"),
    responses(
        (status = 201, body = OrderReceipt),
        (status = 400, description = "Malformed order", body = vestibule_shared::ErrorBody),
        (status = 403, description = "Token missing, unknown, expired, another room's or used", body = vestibule_shared::ErrorBody),
        (status = 503, description = "Store unreachable", body = vestibule_shared::ErrorBody),
    )
)]
pub async fn place_order(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<OrderReceipt>), ApiError> {
    state.room(&room)?;
    let order = order_from(&headers, &body)?;
    let sku = order.sku.unwrap_or_else(|| "demo-item".to_owned());
    if sku.is_empty() || sku.chars().count() > 64 {
        return Err(ApiError::InvalidField("sku must be 1–64 characters".into()));
    }
    let quantity = order.quantity.unwrap_or(1);
    if !(1..=10).contains(&quantity) {
        return Err(ApiError::InvalidField("quantity must be 1–10".into()));
    }
    let token = headers
        .get(ENTRY_TOKEN_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .unwrap_or_default();
    match token_layer::verify(&state, &room, token, true).await {
        Ok(_) => {}
        // The operator chose to keep checkout open while the store is down.
        Err(ApiError::StoreUnavailable { .. })
            if state.config.outage_policy.for_room(&room) == OutagePolicy::Pass =>
        {
            tracing::warn!(%room, "store down: order accepted unverified (outage policy = pass)");
        }
        Err(error) => return Err(error),
    }
    metrics::counter!("vestibule_tokens_used_total", "room" => room.clone()).increment(1);
    Ok((
        StatusCode::CREATED,
        Json(OrderReceipt {
            order_id: format!("ord_{}", random_id()),
            room,
            sku,
            quantity,
        }),
    ))
}
