//! The page inside a storefront: framed in an `<iframe>`, or mounted into the
//! storefront's own page by `widget.js`. The page learns from
//! `GET /api/v1/rooms/{room}/embedding` which origins it may tell about the ticket
//! (`postMessage` target origins, never `*`) and whether it may hand them the entry token.
//!
//! Message types (`type` of a `postMessage` to the parent, or the name of a `CustomEvent` on
//! the widget's element, whose `detail` is the same object): [`STATUS`], [`ADMITTED`],
//! [`RESIZE`]; from the parent: [`NAVIGATE_SELF`].

use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// `{type, room, status, position, etaSeconds}` on every status the page receives.
pub const STATUS: &str = "vestibule:status";
/// `{type, room, checkoutUrl, entryToken?}` once admitted; `entryToken` only when the room's
/// `shareTokenWithEmbedder` is on.
pub const ADMITTED: &str = "vestibule:admitted";
/// `{type, room, height}`: the page's height in CSS pixels, whenever it changes.
pub const RESIZE: &str = "vestibule:resize";
/// From the parent: `{type: "vestibule:navigate-self", value: false}` = the parent navigates on
/// `vestibule:admitted`, the framed page stays.
pub const NAVIGATE_SELF: &str = "vestibule:navigate-self";

/// What a framed page or the widget may tell its embedder (`GET /api/v1/rooms/{room}/embedding`).
/// Example: `{"room":"main","allowedOrigins":["https://shop.example"],"shareTokenWithEmbedder":false}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct EmbeddingInfo {
    /// Room slug. Example: `"main"`.
    pub room: String,
    /// The storefront origins (`--cors-origins`): the only `postMessage` targets. Example:
    /// `["https://shop.example"]`.
    pub allowed_origins: Vec<String>,
    /// Whether `vestibule:admitted` carries the entry token (the room setting). Example: `false`.
    pub share_token_with_embedder: bool,
}
