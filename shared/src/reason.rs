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
            Self::Other => "OTHER",
        }
    }
}
