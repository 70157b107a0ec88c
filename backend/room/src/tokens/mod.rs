//! Signed entry tokens: a JWT (RFC 7519, JWS compact, `EdDSA` with Ed25519) that anyone can
//! verify offline with the keys published at `GET /.well-known/jwks.json`.
//!
//! The store still issues its opaque random token at admission, atomically (exactly-once use and
//! the active-users count stay in the store). The JWT wraps it: `jti` = that store token, `exp`
//! = its expiry. It is signed where a ticket's status is built; Ed25519 is deterministic, so every
//! poll and SSE event of a ticket carries the same string. Verification is offline (signature,
//! `exp`, `iss`, `aud`, `room`); using a token (an order, a consume, a release) goes to the store
//! by `jti`. docs/DESIGN.md "Entry tokens" gives the format and where the keys live.
//!
//! - [`args`]: the flags (`--signing-key-file`, `--previous-signing-key-file`, `--token-issuer`,
//!   `--token-audience`, `--origin-api-key`).
//! - [`keys`]: the key ring (current key + verify-only previous keys; `kid` = RFC 7638 thumbprint)
//!   and where a generated key is kept.
//! - [`jwt`]: [`TokenService`]: signing and the offline verification.
//! - [`entry`]: [`check_entry`], whether a token admits its holder now (offline, then the store):
//!   the one check the token layer, the gate and the storefront's calls share.
//!
//! The JWKS document and its route belong to the HTTP layer (`http::jwks`).

pub mod args;
pub mod entry;
pub mod jwt;
pub mod keys;

pub use args::TokenArgs;
pub use entry::{check_entry, EntryRefusal};
pub use jwt::{Refusal, TokenService};
pub use keys::{KeyError, KeyRing};
