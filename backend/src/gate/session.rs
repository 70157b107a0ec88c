//! `POST /api/v1/rooms/{room}/session` (under the mount prefix in gate mode): turns an entry
//! token into an HttpOnly cookie for the storefront's paths, so the token never appears in a
//! URL and the shopper's browser carries it to every gated path.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use cookie::{Cookie, SameSite};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::{error_code, EntrySession, ErrorBody, SessionRequest};

use super::entry::{cookie_name, verify_entry};
use super::forwarding::came_over_https;
use super::rules::safe_return_path;
use crate::http::error::{ApiError, Json, Path};
use crate::http::openapi::{EdgeErrors, StoreReadErrors};
use crate::state::AppState;
use crate::store::now_ms;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(open_session))
}

/// The `Set-Cookie` value of a room's session: `vestibule_entry_{room}=<token>; Path=/;
/// Max-Age=<secs>; HttpOnly; SameSite=Lax` (`; Secure` when `secure`).
pub fn session_cookie(room: &str, token: &str, max_age_secs: u64, secure: bool) -> String {
    Cookie::build((cookie_name(room), token.to_owned()))
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(secure)
        .max_age(cookie::time::Duration::seconds(
            i64::try_from(max_age_secs).unwrap_or(i64::MAX),
        ))
        .build()
        .to_string()
}

/// Hands an entry token over for a session cookie on the storefront's paths (gate mode).
///
/// Verifies the token for this room without using it, then sets `vestibule_entry_{room}`:
/// HttpOnly, SameSite=Lax, Path=/, Secure when the request came over HTTPS (per
/// `X-Forwarded-Proto` from trusted proxies, `--client-ip-header`), Max-Age = the token's
/// remaining TTL in seconds. Gated paths accept that cookie (or `X-Entry-Token`) until the
/// token expires or is used.
#[utoipa::path(
    post,
    path = "/api/v1/rooms/{room}/session",
    tag = "gate",
    operation_id = "open_session",
    params(("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main")),
    request_body(content = SessionRequest, content_type = "application/json"),
    responses(
        (status = 200, body = EntrySession, description = "The session cookie is set",
            headers(("Set-Cookie" = String, description = "`vestibule_entry_{room}=<token>; Path=/; Max-Age=<remaining TTL s>; HttpOnly; SameSite=Lax` (+ `Secure` over HTTPS)"))),
        (status = 400, description = "Malformed body (`bad_request`)", body = ErrorBody),
        (status = 403, description = "Token unknown, expired, another room's or used (`entry_token_*`)", body = ErrorBody),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        (status = 415, description = "A body that is not `application/json` (`unsupported_media_type`)", body = ErrorBody),
        EdgeErrors, StoreReadErrors,
    )
)]
pub async fn open_session(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
    Json(request): Json<SessionRequest>,
) -> Result<Response, ApiError> {
    state.room(&room)?;
    let token = request.entry_token.trim();
    if token.is_empty() {
        return Err(ApiError::EntryToken {
            code: error_code::TOKEN_MISSING,
            message: "send the entry token as entryToken".into(),
        });
    }
    let claims = verify_entry(&state, &room, token).await?;
    let max_age = claims.remaining_secs(now_ms());
    if max_age == 0 {
        return Err(ApiError::EntryToken {
            code: error_code::TOKEN_EXPIRED,
            message: "this entry token has expired; join the queue again".into(),
        });
    }
    let secure = came_over_https(&headers, &state.config);
    let cookie = session_cookie(&room, token, max_age, secure);
    let return_to = safe_return_path(request.return_to.as_deref().unwrap_or("/")).to_owned();
    let mut response = Json(EntrySession {
        room,
        expires_at: claims.exp * 1000,
        return_to,
    })
    .into_response();
    let cookie = HeaderValue::from_str(&cookie)
        .map_err(|error| ApiError::Internal(anyhow::Error::new(error)))?;
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::session_cookie;

    #[test]
    fn the_session_cookie_has_every_attribute() {
        let cookie = session_cookie("main", "main.abc", 120, false);
        for part in [
            "vestibule_entry_main=main.abc",
            "HttpOnly",
            "SameSite=Lax",
            "Path=/",
            "Max-Age=120",
        ] {
            assert!(cookie.contains(part), "{cookie} lacks {part}");
        }
        assert!(!cookie.contains("Secure"));
        assert!(session_cookie("main", "main.abc", 120, true).contains("Secure"));
    }
}
