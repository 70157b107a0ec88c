//! Gate mode's session exchange: the page hands its entry token to
//! `POST {prefix}api/v1/rooms/{room}/session` and gets a cookie for the storefront's paths.

use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The body of the session request. Example:
/// `{"entryToken": "main.Qm9vZGxlcy1hbmQtY2hlZXNl", "returnTo": "/checkout?step=2"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionRequest {
    /// The entry token of `TOKEN_ISSUED` for this room. Example: `"main.Qm9vZGxlcy1hbmQtY2hlZXNl"`.
    #[cfg_attr(feature = "openapi", schema(example = "main.Qm9vZGxlcy1hbmQtY2hlZXNl"))]
    pub entry_token: String,
    /// Where the shopper came from (the `return` query parameter of the waiting room); the
    /// answer's `returnTo` is this path if it is a same-origin path, else `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = "/checkout"))]
    pub return_to: Option<String>,
}

/// The answer to a session request (the cookie itself is in `Set-Cookie`). Example:
/// `{"room": "main", "expiresAt": 1764500000000, "returnTo": "/checkout"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct EntrySession {
    /// The room the session admits to. Example: `"main"`.
    pub room: String,
    /// When the session (the entry token) ends, Unix milliseconds. Example: `1764500000000`.
    #[cfg_attr(feature = "openapi", schema(example = 1_764_500_000_000_u64))]
    pub expires_at: u64,
    /// The same-origin path to go to now: the request's `returnTo` when safe, else `/`.
    /// Example: `"/checkout"`.
    #[cfg_attr(feature = "openapi", schema(example = "/checkout"))]
    pub return_to: String,
}
