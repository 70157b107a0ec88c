//! `GET /.well-known/jwks.json`: the public keys that verify entry tokens (RFC 7517 JWK Set).
//!
//! The current key first, then the previous keys still accepted. Cacheable for 5 minutes: a
//! verifier that meets an unknown `kid` (after a rotation) fetches the set again.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::AppState;
use vestibule_room::tokens::KeyRing;

/// How long a verifier may cache the key set, in seconds.
pub const MAX_AGE_SECS: u64 = 300;

/// One public key (RFC 8037 OKP key).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PublicJwk {
    /// Key type: always `OKP`.
    #[schema(example = "OKP")]
    pub kty: &'static str,
    /// Curve: always `Ed25519`.
    #[schema(example = "Ed25519")]
    pub crv: &'static str,
    /// The public key, base64url.
    pub x: String,
    /// Key id: the RFC 7638 thumbprint (SHA-256, base64url); tokens name it in their header.
    pub kid: String,
    /// Algorithm: always `EdDSA`.
    #[schema(example = "EdDSA")]
    pub alg: &'static str,
    /// Use: always `sig`.
    #[serde(rename = "use")]
    #[schema(example = "sig")]
    pub key_use: &'static str,
}

/// The key set.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Jwks {
    /// The current key first, then previous keys (verify only).
    pub keys: Vec<PublicJwk>,
}

impl Jwks {
    /// The key set of a ring.
    pub fn of(ring: &KeyRing) -> Self {
        Self {
            keys: ring
                .public_keys()
                .map(|key| PublicJwk {
                    kty: "OKP",
                    crv: "Ed25519",
                    x: key.x.clone(),
                    kid: key.kid.clone(),
                    alg: "EdDSA",
                    key_use: "sig",
                })
                .collect(),
        }
    }
}

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(jwks))
}

/// The public keys that verify entry tokens.
#[utoipa::path(
    get,
    path = "/.well-known/jwks.json",
    tag = "tokens",
    operation_id = "jwks",
    responses(
        (status = 200, body = Jwks, content_type = "application/json",
            description = "The current signing key first, then previous keys still accepted",
            headers(("Cache-Control" = String, description = "`public, max-age=300`"))),
    )
)]
pub async fn jwks(State(state): State<AppState>) -> Response {
    (
        [
            (
                header::CACHE_CONTROL,
                format!("public, max-age={MAX_AGE_SECS}"),
            ),
            (header::CONTENT_TYPE, "application/json".to_owned()),
        ],
        serde_json::to_string(&Jwks::of(state.tokens.keys())).unwrap_or_default(),
    )
        .into_response()
}
