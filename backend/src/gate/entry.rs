//! Admission in gate mode: the one seam that verifies an entry token ([`verify_entry`]), the
//! claims it gives, and where a request carries its token (cookie or `X-Entry-Token`).

use axum::http::HeaderMap;
use serde::Serialize;
use vestibule_shared::ENTRY_TOKEN_HEADER;

use crate::http::error::ApiError;
use crate::http::token_layer;
use crate::state::AppState;

/// The header an admitted request reaches the origin with: [`EntryClaims`] as JSON. Any
/// client-sent header starting with [`VESTIBULE_HEADER_PREFIX`] is removed first.
pub const ENTRY_CLAIMS_HEADER: &str = "x-vestibule-entry";

/// The header an admitted request reaches the origin with: the entry token that admitted it,
/// for an origin that verifies it itself with the JWKS (signature, `exp`, `iss`, `aud`, `room`).
pub const ENTRY_TOKEN_FORWARD_HEADER: &str = "x-vestibule-token";

/// Headers with this prefix are Vestibule's to set; a client's own are stripped.
pub const VESTIBULE_HEADER_PREFIX: &str = "x-vestibule-";

/// What a verified entry token says: `{"room": "main", "sub": "3f9a0c…", "exp": 1764500000}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EntryClaims {
    /// The room the token admits to.
    pub room: String,
    /// A tag of the ticket (12 hex digits of SHA-256 of its id), never the ticket id itself.
    pub sub: String,
    /// When the token stops working, Unix seconds (rounded down).
    pub exp: u64,
}

impl From<vestibule_shared::entry::EntryClaims> for EntryClaims {
    /// The part of a verified token's claims the origin is told.
    fn from(claims: vestibule_shared::entry::EntryClaims) -> Self {
        Self {
            room: claims.room,
            sub: claims.sub,
            exp: claims.exp,
        }
    }
}

impl EntryClaims {
    /// Seconds the token still works at `now_ms` (0 once expired).
    pub fn remaining_secs(&self, now_ms: u64) -> u64 {
        self.exp.saturating_sub(now_ms / 1000)
    }
}

/// The name of the cookie holding a room's entry token: `vestibule_entry_{room}`.
pub fn cookie_name(room: &str) -> String {
    format!("vestibule_entry_{room}")
}

/// Where a token was found on a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    /// The `X-Entry-Token` header (apps).
    Header,
    /// The room's cookie set by the session endpoint (browsers).
    Cookie,
}

/// At most this many of a room's cookies are tried (a client can send many).
pub const MAX_TOKEN_CANDIDATES: usize = 4;

/// The entry tokens a request carries for `room`, in the order they are tried: a non-empty
/// `X-Entry-Token` first, then every cookie named [`cookie_name`] (at most
/// [`MAX_TOKEN_CANDIDATES`] in all). Every one is a candidate because a browser sends all
/// cookies of that name it holds (a sibling subdomain or a narrower `Path` can plant another
/// first): the one that verifies admits, so a planted cookie cannot lock a shopper out.
pub fn request_tokens(headers: &HeaderMap, room: &str) -> Vec<(String, TokenSource)> {
    let mut found = Vec::new();
    if let Some(value) = headers.get(ENTRY_TOKEN_HEADER) {
        let token = value.to_str().unwrap_or_default().trim();
        if !token.is_empty() {
            found.push((token.to_owned(), TokenSource::Header));
        }
    }
    let name = cookie_name(room);
    found.extend(
        headers
            .get_all(axum::http::header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(cookie::Cookie::split_parse)
            .filter_map(Result::ok)
            // A quoted value (`"…"`) is the same value (RFC 6265 §4.1.1).
            .filter(|cookie| cookie.name() == name && !cookie.value_trimmed().is_empty())
            .map(|cookie| (cookie.value_trimmed().to_owned(), TokenSource::Cookie)),
    );
    found.truncate(MAX_TOKEN_CANDIDATES);
    found
}

/// Verifies `token` for `room` without using it: the only place gate mode decides admission
/// (the session endpoint and every gated request call it).
///
/// The signature, expiry, audience and room are checked offline; then one store read by `jti`
/// says whether the token is still live, so a used or released token stops passing at once.
///
/// # Errors
/// 403 `entry_token_unknown|expired|wrong_room|used` (the `EntryToken` error); 503/504 when
/// the store is unreachable.
pub async fn verify_entry(
    state: &AppState,
    room: &str,
    token: &str,
) -> Result<EntryClaims, ApiError> {
    let (claims, _ticket_id) = token_layer::verify(state, room, token).await?;
    Ok(claims.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_comes_first_then_every_cookie_of_the_room() {
        let mut headers = HeaderMap::new();
        headers.insert(
            axum::http::header::COOKIE,
            "a=1; vestibule_entry_other=x.y; vestibule_entry_main=planted; vestibule_entry_main=\"main.tok\""
                .parse()
                .unwrap(),
        );
        // A quoted value is the same value (RFC 6265 §4.1.1).
        assert_eq!(
            request_tokens(&headers, "main"),
            vec![
                ("planted".into(), TokenSource::Cookie),
                ("main.tok".into(), TokenSource::Cookie)
            ]
        );
        assert!(request_tokens(&headers, "flash").is_empty());
        // An empty header does not hide the cookies.
        headers.insert(ENTRY_TOKEN_HEADER, " ".parse().unwrap());
        assert_eq!(request_tokens(&headers, "main").len(), 2);
        headers.insert(ENTRY_TOKEN_HEADER, " main.hdr ".parse().unwrap());
        assert_eq!(
            request_tokens(&headers, "main")[0],
            ("main.hdr".into(), TokenSource::Header)
        );
    }

    #[test]
    fn claims_serialize_as_the_origin_reads_them() {
        let claims = EntryClaims {
            room: "main".into(),
            sub: "3f9a0c1b2d4e".into(),
            exp: 1_764_500_000,
        };
        assert_eq!(
            serde_json::to_string(&claims).unwrap(),
            r#"{"room":"main","sub":"3f9a0c1b2d4e","exp":1764500000}"#
        );
        assert_eq!(claims.remaining_secs(1_764_499_990_500), 10);
        assert_eq!(claims.remaining_secs(1_764_600_000_000), 0);
    }
}
