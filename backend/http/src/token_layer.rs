//! The entry-token layer: a middleware in front of the protected path prefixes.
//!
//! A request under a protected prefix (default `/api/v1/rooms/{room}/orders`) must carry
//! `X-Entry-Token` with a live token of that room; otherwise 403 with a JSON error naming what is
//! wrong: missing, unknown, expired, another room's, or already used (docs/DESIGN.md "Entry tokens").
//! The token (a signed JWT) is verified offline first, then the store says by its `jti` whether it
//! was used or released. The layer only checks; the order handler consumes the token atomically,
//! so it works once.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use vestibule_shared::{error_code, ENTRY_TOKEN_HEADER};

use crate::error::ApiError;
use crate::state::AppState;
use vestibule_room::outage::OutagePolicy;
use vestibule_room::tokens::{check_entry, EntryRefusal};
use vestibule_shared::entry::EntryClaims;
use vestibule_store::TokenCheck;

/// The room a protected prefix pattern matches in `path`, if it matches.
///
/// A pattern is a path whose segments are literals or `{room}`; it matches a path that starts
/// with those segments. Returns `Some(None)` for a match of a pattern without `{room}`.
pub fn match_prefix<'p>(pattern: &str, path: &'p str) -> Option<Option<&'p str>> {
    let mut room = None;
    let mut segments = path.trim_start_matches('/').split('/');
    for expected in pattern
        .trim_start_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
    {
        let actual = segments.next()?;
        if expected == "{room}" {
            room = Some(actual);
        } else if expected != actual {
            return None;
        }
    }
    Some(room)
}

/// Whether a protected prefix pattern ([`match_prefix`]) matches `path`.
pub fn is_protected(prefixes: &[String], path: &str) -> bool {
    prefixes
        .iter()
        .any(|pattern| match_prefix(pattern, path).is_some())
}

/// The protected prefix patterns split into segments once (`None` for `{room}`): whether one
/// matches a path, as [`is_protected`] says, without splitting the patterns on every request.
#[derive(Clone, Debug)]
pub struct Prefixes(std::sync::Arc<[Vec<Option<String>>]>);

impl Prefixes {
    /// `patterns` as [`match_prefix`] reads them.
    pub fn new(patterns: &[String]) -> Self {
        Self(
            patterns
                .iter()
                .map(|pattern| {
                    pattern
                        .split('/')
                        .filter(|segment| !segment.is_empty())
                        .map(|segment| (segment != "{room}").then(|| segment.to_owned()))
                        .collect()
                })
                .collect(),
        )
    }

    /// Whether a pattern matches `path` (its first segments are the pattern's).
    pub fn matches(&self, path: &str) -> bool {
        self.0.iter().any(|pattern| {
            let mut segments = path.trim_start_matches('/').split('/');
            pattern.iter().all(|expected| match segments.next() {
                Some(actual) => expected.as_deref().is_none_or(|literal| literal == actual),
                None => false,
            })
        })
    }
}

/// Rejection for a token problem.
fn refuse(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::EntryToken {
        code,
        message: message.into(),
    }
}

impl From<EntryRefusal> for ApiError {
    /// 403 with the refusal's `entry_token_*` code; a store failure as the store's error
    /// (503/504).
    fn from(refused: EntryRefusal) -> Self {
        match refused {
            EntryRefusal::NotIssued => refuse(
                error_code::TOKEN_UNKNOWN,
                "this entry token was not issued by this waiting room",
            ),
            EntryRefusal::Expired => refuse(
                error_code::TOKEN_EXPIRED,
                "this entry token has expired; join the queue again",
            ),
            EntryRefusal::WrongRoom(other) => refuse(
                error_code::TOKEN_WRONG_ROOM,
                format!("this entry token is for room {other}, not this one"),
            ),
            EntryRefusal::Used => refuse(
                error_code::TOKEN_USED,
                "this entry token was already used, or its session was released",
            ),
            EntryRefusal::Store(error) => error.into(),
        }
    }
}

/// Verifies `token` for `room` offline, with no store call: its signature by a key of the ring,
/// issuer, audience, expiry and room (`vestibule_room::tokens::TokenService::verify`).
///
/// # Errors
/// 403 `entry_token_unknown` (not signed by this waiting room, or malformed),
/// `entry_token_expired`, `entry_token_wrong_room`.
pub fn verify_offline(state: &AppState, room: &str, token: &str) -> Result<EntryClaims, ApiError> {
    state
        .tokens
        .verify(token, room)
        .map_err(|refused| EntryRefusal::from(refused).into())
}

/// The store's verdict on a token whose signature holds, as a 403 (`Unknown` there means its
/// session ended: it reads as used).
pub fn stored_refusal(check: TokenCheck) -> ApiError {
    EntryRefusal::from(check).into()
}

/// The one check of an entry token for `room` ([`check_entry`]: offline, then the store by
/// `jti`), without using it. Returns the claims and the ticket id.
///
/// # Errors
/// 403 for every token problem; 404 for an unknown room; 503/504 when the store cannot say.
pub async fn verify(
    state: &AppState,
    room: &str,
    token: &str,
) -> Result<(EntryClaims, String), ApiError> {
    let runtime = state.room(room)?;
    Ok(check_entry(&*state.store, &state.tokens, &runtime, token).await?)
}

/// Whether `path` is exactly the demo order route, `/api/v1/rooms/{room}/orders`, whose handler
/// checks and uses its token in one store step itself.
pub fn is_order_route(path: &str) -> bool {
    let mut segments = path.trim_end_matches('/').split('/');
    matches!(
        (
            segments.next(),
            segments.next(),
            segments.next(),
            segments.next(),
            segments.next(),
            segments.next(),
            segments.next()
        ),
        (Some(""), Some("api"), Some("v1"), Some("rooms"), Some(room), Some("orders"), None)
            if !room.is_empty()
    )
}

/// The middleware: lets a request under a protected prefix through only with a live token.
pub async fn require_entry_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    // Most requests are under no protected prefix: they pass without an allocation.
    if !is_protected(&state.config.protected_prefixes, request.uri().path()) {
        return next.run(request).await;
    }
    let path = request.uri().path().to_owned();
    let matched = state
        .config
        .protected_prefixes
        .iter()
        .find_map(|pattern| match_prefix(pattern, &path));
    let Some(room) = matched else {
        return next.run(request).await;
    };
    // The demo order verifies and uses the token in one atomic step itself: a separate check
    // here would be a second store round trip, and a stall between the two could leave the
    // shopper unsure whether the token was used. (Other methods there get the router's 405.)
    if is_order_route(&path) {
        return next.run(request).await;
    }
    let room = match room {
        Some(room) if state.rooms.contains(room) => room.to_owned(),
        Some(room) => {
            return ApiError::RoomNotFound(room.chars().take(64).collect()).into_response()
        }
        None => state.config.rooms[0].clone(),
    };
    let token = match request
        .headers()
        .get(ENTRY_TOKEN_HEADER)
        .map(|v| v.to_str())
    {
        None => {
            return refuse(
                error_code::TOKEN_MISSING,
                format!("send the entry token in {ENTRY_TOKEN_HEADER}"),
            )
            .into_response()
        }
        Some(Err(_)) => return ApiError::from(EntryRefusal::NotIssued).into_response(),
        Some(Ok(token)) => token.trim().to_owned(),
    };
    let runtime = match state.room(&room) {
        Ok(runtime) => runtime,
        Err(error) => return error.into_response(),
    };
    match check_entry(&*state.store, &state.tokens, &runtime, &token).await {
        Ok(_) => next.run(request).await,
        Err(EntryRefusal::Store(source))
            if state.config.outage_policy.for_room(&room) == OutagePolicy::Pass =>
        {
            tracing::warn!(%room, reason = %source, "store down: protected path passed with a token verified offline only (outage policy = pass)");
            metrics::counter!("vestibule_outage_passes_total", "room" => room).increment(1);
            next.run(request).await
        }
        Err(refused) => ApiError::from(refused).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_order_route_itself_skips_the_token_layer() {
        assert!(is_order_route("/api/v1/rooms/main/orders"));
        assert!(is_order_route("/api/v1/rooms/main/orders/"));
        assert!(!is_order_route("/api/v1/rooms/main/orders/42"));
        assert!(!is_order_route("/api/v1/rooms//orders"));
        assert!(!is_order_route("/api/v1/rooms/main/tickets"));
        assert!(!is_order_route("/checkout-api/orders"));
    }

    #[test]
    fn prefixes_match_by_segment_and_capture_the_room() {
        let pattern = "/api/v1/rooms/{room}/orders";
        assert_eq!(
            match_prefix(pattern, "/api/v1/rooms/main/orders"),
            Some(Some("main"))
        );
        assert_eq!(
            match_prefix(pattern, "/api/v1/rooms/main/orders/42"),
            Some(Some("main"))
        );
        assert_eq!(match_prefix(pattern, "/api/v1/rooms/main/ordersx"), None);
        assert_eq!(match_prefix(pattern, "/api/v1/rooms/main/tickets"), None);
        assert_eq!(
            match_prefix("/checkout-api", "/checkout-api/pay"),
            Some(None)
        );
    }

    /// The split-once patterns of the layers' fast path say what `match_prefix` says.
    #[test]
    fn split_prefixes_match_as_match_prefix_does() {
        let patterns = [
            "/api/v1/rooms/{room}/orders".to_owned(),
            "/checkout-api".to_owned(),
            "//shop//{room}/".to_owned(),
        ];
        let split = Prefixes::new(&patterns);
        for path in [
            "/api/v1/rooms/main/orders",
            "/api/v1/rooms/main/orders/42",
            "/api/v1/rooms/main/ordersx",
            "/api/v1/rooms/main/tickets",
            "/api/v1/rooms//orders",
            "/api/v1/rooms",
            "/checkout-api",
            "/checkout-api/pay",
            "/checkout-apix",
            "/shop/main",
            "/shop",
            "shop/main/x",
            "/",
            "",
        ] {
            assert_eq!(split.matches(path), is_protected(&patterns, path), "{path}");
        }
        assert!(split.matches("/api/v1/rooms/main/orders"));
        assert!(!split.matches("/api/v1/rooms/main/tickets"));
        assert!(!Prefixes::new(&[]).matches("/api/v1/rooms/main/orders"));
    }
}
