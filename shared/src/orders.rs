//! The demo checkout's order body and receipt (`POST /api/v1/rooms/{room}/orders`).

use serde::{Deserialize, Serialize};
#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::numbers::whole_number;

/// The demo checkout's order body (`POST /api/v1/rooms/{room}/orders`); the body may be omitted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OrderRequest {
    /// Product identifier, 1–64 chars. Example: `"sneaker-42"`.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 64, example = "sneaker-42")
    )]
    pub sku: Option<String>,
    /// Units, 1–10. Example: `1`.
    #[serde(default, deserialize_with = "whole_number")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10, example = 1))]
    pub quantity: Option<u32>,
}

/// The demo checkout's answer to a successful order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct OrderReceipt {
    /// Order identifier (random). Example: `"ord_5cQx…"`.
    pub order_id: String,
    /// Room slug. Example: `"main"`.
    pub room: String,
    /// Product ordered. Example: `"sneaker-42"`.
    pub sku: String,
    /// Units ordered. Example: `1`.
    pub quantity: u32,
}
