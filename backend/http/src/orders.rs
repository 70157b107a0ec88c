//! `POST /api/v1/rooms/{room}/orders`: the demo checkout behind the entry-token layer.
//!
//! The handler verifies the signed entry token offline, then uses it by its `jti` in one atomic
//! store step (the token layer lets this
//! route through unchecked), so a token buys exactly one order. With an `Idempotency-Key`, the
//! key and the receipt are recorded with the token: a retry of the same order (after a lost
//! answer or a 504) gets the same receipt, while any other use of the token stays 403 used.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::{error_code, ErrorBody, OrderReceipt, OrderRequest, ENTRY_TOKEN_HEADER};

use super::idempotency::idempotency_key;
use super::openapi::{EdgeErrors, StoreWriteErrors};
use crate::error::{ApiError, Json, Path};
use crate::state::AppState;
use crate::token_layer;
use vestibule_room::outage::OutagePolicy;
use vestibule_store::ids::random_id;
use vestibule_store::{now_ms, OrderClaim, TokenUse};

/// Answer header on a retried order that returns the first order's receipt.
pub const REPLAYED_HEADER: &str = "Idempotent-Replayed";

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(place_order))
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
    // `null` is an order without details, like an empty body.
    serde_json::from_slice::<Option<OrderRequest>>(body)
        .map(Option::unwrap_or_default)
        .map_err(|error| ApiError::BadRequest(format!("order body: {error}")))
}

/// Places a demo order with a live entry token, using the token up.
#[utoipa::path(
    post,
    path = "/api/v1/rooms/{room}/orders",
    tag = "checkout",
    operation_id = "place_order",
    params(
        ("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main"),
        ("X-Entry-Token" = String, Header, description = "Entry token from TOKEN_ISSUED (a JWT, see /.well-known/jwks.json)", example = "eyJ0eXAiOiJKV1QiLCJhbGciOiJFZERTQSJ9.e30.c2lnbmF0dXJl"),
        ("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,128}$", description = "Makes retries safe: the same key with the same token and body answers the first receipt again (1–128 printable ASCII, no spaces)", example = "order-7f3a9c"),
    ),
    request_body(content = Option<OrderRequest>, content_type = "application/json", description = "May be omitted: one `demo-item`"),
    responses(
        (status = 201, body = OrderReceipt, description = "Order placed; for a retry with the same Idempotency-Key, the first order's receipt",
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the first order's receipt answered again"))),
        (status = 400, description = "Malformed order or key (`bad_request`, `invalid_field`)", body = ErrorBody),
        (status = 403, description = "Token missing, unknown, expired, another room's or used (`entry_token_*`)", body = ErrorBody),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        (status = 409, description = "The Idempotency-Key was used for another order body (`idempotency_key_reused`); no unit of stock left (`sold_out`: the token is not used up)", body = ErrorBody),
        (status = 415, description = "A body that is not `application/json` (`unsupported_media_type`)", body = ErrorBody),
        EdgeErrors, StoreWriteErrors,
    )
)]
pub async fn place_order(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let runtime = state.room(&room)?;
    let token = match headers.get(ENTRY_TOKEN_HEADER).map(HeaderValue::to_str) {
        None => {
            return Err(ApiError::EntryToken {
                code: error_code::TOKEN_MISSING,
                message: format!("send the entry token in {ENTRY_TOKEN_HEADER}"),
            })
        }
        Some(token) => token.unwrap_or_default().trim().to_owned(),
    };
    let order = order_from(&headers, &body)?;
    let sku = order.sku.unwrap_or_else(|| "demo-item".to_owned());
    if sku.is_empty() || sku.chars().count() > 64 {
        return Err(ApiError::InvalidField("sku must be 1–64 characters".into()));
    }
    let quantity = order.quantity.unwrap_or(1);
    if !(1..=10).contains(&quantity) {
        return Err(ApiError::InvalidField("quantity must be 1–10".into()));
    }
    let key = idempotency_key(&headers)?;
    let receipt = OrderReceipt {
        order_id: format!("ord_{}", random_id()),
        room: room.clone(),
        sku,
        quantity,
    };
    let stored = serde_json::to_string(&receipt)
        .map_err(|error| ApiError::Internal(anyhow::Error::new(error)))?;
    let claim = OrderClaim {
        idempotency_key: key.as_deref(),
        receipt: &stored,
    };
    let claims = token_layer::verify_offline(&state, &room, &token)?;
    let used = state
        .store
        .consume_token(runtime.id(), &claims.jti, &claim, now_ms())
        .await;
    let replayed = match used {
        Ok(TokenUse::Consumed { .. }) => None,
        Ok(TokenUse::Replayed { receipt, .. }) => Some(receipt),
        Ok(TokenUse::Refused(check)) => return Err(token_layer::stored_refusal(check)),
        Ok(TokenUse::SoldOut { .. }) => return Err(super::entries::no_unit_left()),
        // The operator chose to keep checkout open while the store is down.
        Err(error) if state.config.outage_policy.for_room(&room) == OutagePolicy::Pass => {
            tracing::warn!(%room, %error, "store down: order accepted with a token verified offline only (outage policy = pass)");
            None
        }
        Err(error) => return Err(error.into()),
    };
    let Some(first) = replayed else {
        runtime.counters.token_used();
        metrics::counter!("vestibule_tokens_used_total", "room" => room).increment(1);
        return Ok((StatusCode::CREATED, Json(receipt)).into_response());
    };
    let first: OrderReceipt = serde_json::from_str(&first)
        .map_err(|error| ApiError::Internal(anyhow::Error::new(error)))?;
    if (first.sku.as_str(), first.quantity) != (receipt.sku.as_str(), receipt.quantity) {
        return Err(ApiError::IdempotencyKeyReused(
            "this Idempotency-Key was used for an order with another sku or quantity".into(),
        ));
    }
    let mut response = (StatusCode::CREATED, Json(first)).into_response();
    response
        .headers_mut()
        .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    Ok(response)
}
