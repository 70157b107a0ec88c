//! Why a shopper's wait is longer than the configured admission rate makes it.

use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// Why a shopper's wait is longer than the configured admission rate makes it (`reason` of
/// [`TicketStatus`]). Derived from the room's state on every answer (docs/DESIGN.md "ETA and
/// poll hints"); clients must treat a code they do not know as "no explanation".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WaitReason {
    /// An operator paused admission.
    Paused,
    /// The admission rate was lowered within about the last minute.
    RateLowered,
    /// The cap on active users holds admission back: a place frees only when a shopper ahead
    /// finishes.
    CapReached,
    /// The cap holds admission back and shoppers ahead keep their checkout slots for most of
    /// the token TTL.
    CheckoutSlow,
    /// Stock holds admission back: every unit left is held by an entry token not yet used, so
    /// the next shopper enters only when one of them expires unused (at the latest a token TTL
    /// after its issue), or the room sells out.
    StockHeld,
    /// A code this client does not know yet.
    #[serde(other)]
    Other,
}

impl WaitReason {
    /// The wire name, e.g. `"CAP_REACHED"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Paused => "PAUSED",
            Self::RateLowered => "RATE_LOWERED",
            Self::CapReached => "CAP_REACHED",
            Self::CheckoutSlow => "CHECKOUT_SLOW",
            Self::StockHeld => "STOCK_HELD",
            Self::Other => "OTHER",
        }
    }
}

/// What a waiting shopper's ETA rests on (`etaBasis` of [`TicketStatus`](crate::TicketStatus)),
/// so an app can say how sure it is (docs/DESIGN.md "ETA and poll hints").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EtaBasis {
    /// The admission rate alone: the configured one, or the rate measured over the last minute
    /// when lower.
    AdmissionRate,
    /// A cap on active users holds the shopper back and no checkout has been measured yet: the
    /// room's expected checkout time (`expectedCheckoutSecs`, default a third of the token TTL)
    /// sets the pace, and the range is wide (the high end allows checkouts twice as long).
    ExpectedCheckout,
    /// A cap holds the shopper back: the pace at which active shoppers were measured to finish
    /// (weighted to the last ~15 s) sets it.
    MeasuredCheckout,
    /// Stock is held by unused entry tokens: units come back only as tokens expire (`STOCK_HELD`).
    TokenTtl,
    /// A code this client does not know yet.
    #[serde(other)]
    Other,
}
