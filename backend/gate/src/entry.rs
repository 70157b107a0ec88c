//! Admission in gate mode: the one seam that verifies an entry token ([`verify_entry`]), the
//! claims it gives, and where a request carries its token (cookie or `X-Entry-Token`).

use serde::Serialize;

pub use vestibule_http::entry_cookie::{cookie_name, request_tokens, TokenSource};
use vestibule_http::error::ApiError;
use vestibule_http::state::AppState;
use vestibule_room::tokens::check_entry;

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
    let runtime = state.room(room)?;
    let (claims, _ticket_id) = check_entry(&*state.store, &state.tokens, &runtime, token).await?;
    Ok(claims.into())
}

#[cfg(test)]
mod tests {
    use super::*;

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
