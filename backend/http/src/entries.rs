//! The storefront's entry endpoints: `POST /api/v1/rooms/{room}/entries/consume` (use an entry
//! token once, for a storefront that wants a single-use check) and `…/entries/release` (end a
//! shopper's session at once: the token stops working and the active-users count drops, so a
//! room under its cap admits the next shopper at the next tick).
//!
//! Both verify the token offline first (signature, `exp`, `iss`, `aud`, `room`), then act in the
//! store by its `jti` — one store step for consume (the same step as the demo order, so a token
//! works once across every replica), the ticket's leave for release (which gives the token back).
//! Consume needs `Authorization: Bearer <--origin-api-key>`; release takes that key with the token
//! in the body, or the token's holder sending it in `X-Entry-Token`, or (a browser, whose session
//! cookie is HttpOnly) the room's session cookie on a `Content-Type: application/json` request:
//! a cross-site form cannot send that type and a cross-site script needs a granted CORS
//! preflight, so another site cannot end a shopper's session (SameSite=Lax already keeps the
//! cookie off cross-site POSTs).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use subtle::ConstantTimeEq as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::entry::{EntryClaims, EntryReleased, EntryTokenBody};
use vestibule_shared::{ErrorBody, ENTRY_TOKEN_HEADER};

use super::openapi::{EdgeErrors, StoreWriteErrors};
use crate::error::{ApiError, Json, Path};
use crate::state::AppState;
use crate::token_layer::{stored_refusal, verify_offline};
use vestibule_room::tokens::EntryRefusal;
use vestibule_store::{now_ms, LeaveOutcome, OrderClaim, TokenCheck, TokenUse};

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(consume))
        .routes(routes!(release))
}

/// Whether the request carries an `Authorization` header at all.
fn has_authorization(headers: &HeaderMap) -> bool {
    headers.contains_key(header::AUTHORIZATION)
}

/// Checks the origin API key (constant time).
///
/// # Errors
/// 401 `unauthorized` when none is sent; 403 `forbidden` when it is wrong or no key is configured.
pub fn authorize_origin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let presented =
        crate::admin::bearer_credentials(headers).ok_or(ApiError::OriginUnauthorized)?;
    let Some(expected) = &state.config.origin_api_key else {
        return Err(ApiError::Forbidden(
            "the storefront entry endpoints are off: start Vestibule with --origin-api-key".into(),
        ));
    };
    if bool::from(presented.trim().as_bytes().ct_eq(expected.as_bytes())) {
        Ok(())
    } else {
        Err(ApiError::Forbidden("wrong origin API key".into()))
    }
}

/// Uses an entry token once, for a storefront's single-use check (origin API key).
#[utoipa::path(
    post,
    path = "/api/v1/rooms/{room}/entries/consume",
    tag = "tokens",
    operation_id = "consume_entry",
    params(("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main")),
    request_body(content = EntryTokenBody, content_type = "application/json"),
    responses(
        (status = 200, body = EntryClaims, description = "The token was live and is now used; its verified claims"),
        (status = 400, description = "Malformed body (`bad_request`)", body = ErrorBody),
        (status = 401, description = "No `Authorization: Bearer <origin API key>` (`unauthorized`)", body = ErrorBody),
        (status = 403, description = "Wrong origin key or none configured (`forbidden`); token not issued here, expired or another room's (`entry_token_*`)", body = ErrorBody),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        (status = 409, description = "Already used (by a consume or an order) or released (`entry_token_consumed`); no unit of stock left (`sold_out`: the token stays live, so release it)", body = ErrorBody),
        (status = 415, description = "A body that is not `application/json` (`unsupported_media_type`)", body = ErrorBody),
        EdgeErrors, StoreWriteErrors,
    ),
    security(("origin_key" = []))
)]
pub async fn consume(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
    Json(body): Json<EntryTokenBody>,
) -> Result<Json<EntryClaims>, ApiError> {
    let runtime = state.room(&room)?;
    authorize_origin(&state, &headers)?;
    let claims = verify_offline(&state, &room, body.entry_token.trim())?;
    let claim = OrderClaim {
        idempotency_key: None,
        receipt: "",
    };
    match state
        .store
        .consume_token(runtime.id(), &claims.jti, &claim, now_ms())
        .await?
    {
        TokenUse::Consumed { .. } => {
            runtime.counters.token_used();
            metrics::counter!("vestibule_tokens_used_total", "room" => room).increment(1);
            Ok(Json(claims))
        }
        TokenUse::Refused(TokenCheck::Expired) => Err(EntryRefusal::Expired.into()),
        TokenUse::SoldOut { .. } => Err(no_unit_left()),
        TokenUse::Refused(_) | TokenUse::Replayed { .. } => Err(ApiError::EntryConsumed(
            "this entry token was already used, or its session was released".into(),
        )),
    }
}

/// 409 `sold_out` for a live token when the room's stock is gone (the order's unit is taken in
/// the token's store step, docs/DESIGN.md "Stock and sold out").
pub(super) fn no_unit_left() -> ApiError {
    ApiError::SoldOut(
        "no unit of stock is left: nothing was ordered, and the entry token was not used up".into(),
    )
}

/// The token of a release and whether it came from the session cookie: the body's
/// `entryToken` (origin key), else `X-Entry-Token` (holder), else the room's session cookie on a
/// JSON request (the first that verifies offline, as the gate tries them).
fn release_token(
    state: &AppState,
    room: &str,
    headers: &HeaderMap,
    body: &Bytes,
    origin: bool,
) -> Result<(String, bool), ApiError> {
    match release_header_token(headers, body, origin) {
        Err(ApiError::OriginUnauthorized) => {
            let json = headers
                .get(header::CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.split(';').next())
                .is_some_and(|kind| kind.trim().eq_ignore_ascii_case("application/json"));
            let cookies: Vec<String> = crate::entry_cookie::request_tokens(headers, room)
                .into_iter()
                .filter(|(_, source)| *source == crate::entry_cookie::TokenSource::Cookie)
                .map(|(token, _)| token)
                .collect();
            if !json || cookies.is_empty() {
                return Err(ApiError::OriginUnauthorized);
            }
            let token = cookies
                .iter()
                .find(|token| verify_offline(state, room, token).is_ok())
                .unwrap_or(&cookies[0]);
            Ok((token.clone(), true))
        }
        other => other.map(|token| (token, false)),
    }
}

/// The token of a release sent by the origin (body) or the holder (`X-Entry-Token`).
fn release_header_token(
    headers: &HeaderMap,
    body: &Bytes,
    origin: bool,
) -> Result<String, ApiError> {
    if origin && !body.iter().all(u8::is_ascii_whitespace) {
        let parsed: EntryTokenBody = serde_json::from_slice(body)
            .map_err(|error| ApiError::BadRequest(format!("release body: {error}")))?;
        return Ok(parsed.entry_token.trim().to_owned());
    }
    match headers.get(ENTRY_TOKEN_HEADER).map(HeaderValue::to_str) {
        Some(Ok(token)) => Ok(token.trim().to_owned()),
        Some(Err(_)) => Err(EntryRefusal::NotIssued.into()),
        None if origin => Err(ApiError::BadRequest(
            "send {\"entryToken\": …} in the body or the token in X-Entry-Token".into(),
        )),
        None => Err(ApiError::OriginUnauthorized),
    }
}

/// Ends a shopper's session at once: the token stops working and the room's active users drop.
#[utoipa::path(
    post,
    path = "/api/v1/rooms/{room}/entries/release",
    tag = "tokens",
    operation_id = "release_entry",
    params(
        ("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main"),
        ("X-Entry-Token" = Option<String>, Header, description = "The holder's own token (instead of the origin key and a body); a browser may instead send the room's session cookie (`vestibule_entry_{room}`) with `Content-Type: application/json`, and gets it cleared"),
    ),
    request_body(content = Option<EntryTokenBody>, content_type = "application/json", description = "With the origin API key: the token to release"),
    responses(
        (status = 200, body = EntryReleased, description = "Released now (`released: true`) or already ended (`false`)"),
        (status = 400, description = "Malformed body (`bad_request`)", body = ErrorBody),
        (status = 401, description = "Neither the origin API key, `X-Entry-Token` nor the session cookie on a JSON request (`unauthorized`)", body = ErrorBody),
        (status = 403, description = "Wrong origin key (`forbidden`); token not issued here, expired or another room's (`entry_token_*`)", body = ErrorBody),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        EdgeErrors, StoreWriteErrors,
    ),
    security((), ("origin_key" = []))
)]
pub async fn release(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<axum::response::Response, ApiError> {
    let runtime = state.room(&room)?;
    let origin = has_authorization(&headers);
    if origin {
        authorize_origin(&state, &headers)?;
    }
    let (token, from_cookie) = release_token(&state, &room, &headers, &body, origin)?;
    let claims = verify_offline(&state, &room, &token)?;
    let now = now_ms();
    let released = match state
        .store
        .check_token(runtime.id(), &claims.jti, now)
        .await?
    {
        TokenCheck::Valid { ticket_id } => matches!(
            state.store.leave(runtime.id(), &ticket_id, now).await?,
            LeaveOutcome::Left
        ),
        TokenCheck::Expired => return Err(stored_refusal(TokenCheck::Expired)),
        TokenCheck::Used | TokenCheck::Unknown => false,
    };
    if released {
        metrics::counter!("vestibule_entries_released_total", "room" => room.clone()).increment(1);
    }
    // The browser's cookie holds a token that no longer works: it goes too.
    let cleared = from_cookie
        .then(|| crate::entry_cookie::cleared_cookie(&room))
        .flatten();
    let mut response =
        axum::response::IntoResponse::into_response(Json(EntryReleased { room, released }));
    if let Some(cleared) = cleared {
        response.headers_mut().insert(header::SET_COOKIE, cleared);
    }
    Ok(response)
}
