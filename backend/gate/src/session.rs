//! `POST /api/v1/rooms/{room}/session` (under the mount prefix in gate mode): turns an entry
//! token into an HttpOnly cookie for the storefront's paths, so the token never appears in a
//! URL and the shopper's browser carries it to every gated path.
//!
//! `POST /api/v1/rooms/{room}/handoff` does the same for a top-level form navigation (the page
//! framed on another site, where the frame's own cookie would be a third-party one the browser
//! drops): a form body (`entryToken`, `return`), answered `303 See Other` to `return` with the
//! cookie set, or to the waiting room when the token does not work. A storefront that checks
//! tokens itself (`vestibule-guard`) serves the same path under `/_vestibule/`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use cookie::{Cookie, SameSite};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::{error_code, EntrySession, ErrorBody, SessionRequest};

use super::answers;
use super::entry::{cookie_name, verify_entry};
use super::forwarding::came_over_https;
use super::rules::{join_url, safe_return_path};
use vestibule_http::error::{ApiError, Json, Path};
use vestibule_http::openapi::{EdgeErrors, StoreReadErrors};
use vestibule_http::state::AppState;
use vestibule_store::now_ms;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(open_session))
        .routes(routes!(hand_off))
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
    let secure = came_over_https(&headers, state.config.client_ip_source());
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

/// The form fields of a hand-off (`application/x-www-form-urlencoded`).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // Documents the form; the body is read field by field.
pub struct HandoffForm {
    /// The entry token of `TOKEN_ISSUED` for this room.
    #[schema(rename = "entryToken")]
    entry_token: String,
    /// Where to go once the cookie is set: a same-origin path (else `/`).
    #[schema(rename = "return")]
    return_to: Option<String>,
}

/// The fields `entryToken` (trimmed) and `return` of a form body, each `None` when absent;
/// `None` when the body is no form.
pub fn handoff_fields(
    headers: &HeaderMap,
    body: &[u8],
) -> Option<(Option<String>, Option<String>)> {
    let form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|kind| {
            kind.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !form {
        return None;
    }
    let (mut token, mut back) = (None, None);
    for (name, value) in url::form_urlencoded::parse(body) {
        match name.as_ref() {
            "entryToken" => token = Some(value.trim().to_owned()),
            "return" => back = Some(value.into_owned()),
            _ => {}
        }
    }
    Some((token, back))
}

/// Hands an entry token over by a top-level form navigation and goes on to `return`.
///
/// For a page that cannot open a session itself: framed on another site, where the browser
/// drops the frame's cookies as third-party ones. The page posts a form with `target=_top`:
/// this answer is then the top-level document's, so its cookie is the storefront's own. The
/// token is checked as `…/session` checks it; `303 See Other` to `return` (a same-origin path,
/// else `/`) with the session cookie set, or, for a token that does not work, to the waiting
/// room with `room` and `return` (the refused cookie cleared). A store outage gets the gate's
/// HTML fault page (503, `Retry-After`).
#[utoipa::path(
    post,
    path = "/api/v1/rooms/{room}/handoff",
    tag = "gate",
    operation_id = "hand_off",
    params(("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main")),
    request_body(content = HandoffForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "To `return` with the session cookie set, or to the waiting room when the token does not work",
            headers(("Location" = String, description = "`return`, or the waiting room"),
                    ("Set-Cookie" = String, description = "The session cookie, or its removal"))),
        (status = 400, description = "No `entryToken` field (`bad_request`)", body = ErrorBody),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        (status = 415, description = "A body that is not a form (`unsupported_media_type`)", body = ErrorBody),
        EdgeErrors, StoreReadErrors,
    )
)]
pub async fn hand_off(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    state.room(&room)?;
    let (token, back) = handoff_fields(&headers, &body).ok_or_else(|| {
        ApiError::UnsupportedMediaType(
            "send the body as Content-Type: application/x-www-form-urlencoded".into(),
        )
    })?;
    let token = token.ok_or_else(|| ApiError::BadRequest("the form has no entryToken".into()))?;
    let back = safe_return_path(back.as_deref().unwrap_or("/")).to_owned();
    let prefix = state.room_options.page_base.clone();
    let refused = |clear: bool| {
        let join = join_url(&prefix, &room, &back);
        let mut response = answers::refusal(&room, "", "", &join, true, clear);
        response.extensions_mut().insert(super::StorefrontLocation);
        response
    };
    if token.is_empty() {
        return Ok(refused(false));
    }
    let claims = match verify_entry(&state, &room, &token).await {
        Ok(claims) => claims,
        Err(ApiError::EntryToken { .. }) => return Ok(refused(true)),
        Err(error) if error.status().is_server_error() => {
            return Ok(answers::fault(
                StatusCode::SERVICE_UNAVAILABLE,
                error_code::STORE_UNAVAILABLE,
                "the waiting room cannot check admission right now; retry shortly",
                true,
                state.config.retry_after_secs,
            ))
        }
        Err(error) => return Err(error),
    };
    let max_age = claims.remaining_secs(now_ms());
    if max_age == 0 {
        return Ok(refused(true));
    }
    let cookie = session_cookie(
        &room,
        &token,
        max_age,
        came_over_https(&headers, state.config.client_ip_source()),
    );
    let cookie = HeaderValue::from_str(&cookie)
        .map_err(|error| ApiError::Internal(anyhow::Error::new(error)))?;
    let location = HeaderValue::from_str(&back)
        .map_err(|error| ApiError::Internal(anyhow::Error::new(error)))?;
    let mut response = (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, location),
            (header::SET_COOKIE, cookie),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            // The next page must not learn where the shopper came from (the waiting room's URL).
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
    )
        .into_response();
    response.extensions_mut().insert(super::StorefrontLocation);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_gives_its_token_and_return_and_anything_else_none() {
        let mut headers = HeaderMap::new();
        assert_eq!(handoff_fields(&headers, b"entryToken=a"), None);
        headers.insert(
            header::CONTENT_TYPE,
            "application/x-www-form-urlencoded; charset=UTF-8"
                .parse()
                .unwrap(),
        );
        assert_eq!(
            handoff_fields(&headers, b"entryToken=+a.b+&return=%2Fcheckout%3Fx%3D1&x=y"),
            Some((Some("a.b".into()), Some("/checkout?x=1".into())))
        );
        assert_eq!(handoff_fields(&headers, b""), Some((None, None)));
    }

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
