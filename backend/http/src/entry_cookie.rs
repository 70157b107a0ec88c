//! Where a request carries a room's entry token: the `X-Entry-Token` header (apps) or the room's
//! session cookie (browsers), set by the session and hand-off endpoints (gate mode) and read by
//! the gate and the storefront's release.

use axum::http::{HeaderMap, HeaderValue};
use vestibule_shared::ENTRY_TOKEN_HEADER;

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

/// `Set-Cookie` that ends `room`'s session cookie in the browser (a refused or released token).
pub fn cleared_cookie(room: &str) -> Option<HeaderValue> {
    let expired = format!(
        "{}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax",
        cookie_name(room)
    );
    HeaderValue::from_str(&expired).ok()
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
}
