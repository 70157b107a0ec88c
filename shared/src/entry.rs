//! Entry tokens as a storefront sees them: the claims of the signed token and the bodies of the
//! origin endpoints `POST /api/v1/rooms/{room}/entries/consume` and `…/entries/release`.
//!
//! The entry token is a JWT (RFC 7519, JWS compact, `EdDSA` / Ed25519) whose keys are published
//! at `GET /.well-known/jwks.json`; docs/DESIGN.md "Entry tokens" gives the format.

use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The claims of an entry token (the JWT payload), as verified by Vestibule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct EntryClaims {
    /// Issuer (`--token-issuer`). Example: `"vestibule"`.
    pub iss: String,
    /// Audience (`--token-audience`), the storefront. Example: `"storefront"`.
    pub aud: String,
    /// The room that admitted the shopper. Example: `"main"`.
    pub room: String,
    /// A non-secret tag of the shopper's ticket (12 hex digits of its SHA-256), never the
    /// ticket id. Example: `"ba7816bf8f01"`.
    pub sub: String,
    /// Issued at, Unix seconds.
    pub iat: u64,
    /// Expiry, Unix seconds (the token TTL after admission).
    pub exp: u64,
    /// Token id: the store's handle of this admission, used once by an order or a consume.
    pub jti: String,
}

/// The body of `…/entries/consume` and `…/entries/release`: the token to use or end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct EntryTokenBody {
    /// The entry token (JWS compact) exactly as the shopper got it.
    pub entry_token: String,
}

/// The answer to `…/entries/release`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct EntryReleased {
    /// The room.
    pub room: String,
    /// `true` when this call ended the session; `false` when it had already ended (used,
    /// released or expired): releasing is idempotent.
    pub released: bool,
}
