//! What a room's tasks and a ticket's status take from the configuration: [`RoomOptions`],
//! made once by the server from its flags, and [`replica_id`], this process's name.

use std::sync::Arc;
use std::time::Duration;

use crate::eta::PollTiers;

/// A room's default checkout when its settings name none: the checkout URL for a slug, or
/// `None` for the demo checkout (gate mode: the room's first gated path).
pub type DefaultCheckout = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The configuration a room's scheduler, SSE hub and ticket statuses read.
#[derive(Clone)]
pub struct RoomOptions {
    /// The scheduler tick (`--tick-ms`).
    pub tick: Duration,
    /// How often an SSE hub refreshes its streams, ms (`--sse-refresh-ms`).
    pub sse_refresh_ms: u64,
    /// Poll hints by the estimated wait (`--poll-tiers`).
    pub poll_tiers: PollTiers,
    /// The ETA's margin (`--eta-margin`): the high estimate is the median × (1 + margin).
    pub eta_margin: f64,
    /// The storefront origins a stored checkout URL must be on (`--cors-origins`).
    pub cors_origins: Vec<String>,
    /// Where the page and its demo checkout are served: `/`, or the gate's mount prefix.
    pub page_base: String,
    /// A room's checkout when its settings name none.
    pub default_checkout: DefaultCheckout,
}

impl std::fmt::Debug for RoomOptions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RoomOptions")
            .field("tick", &self.tick)
            .field("sse_refresh_ms", &self.sse_refresh_ms)
            .field("eta_margin", &self.eta_margin)
            .field("page_base", &self.page_base)
            .finish_non_exhaustive()
    }
}

/// This process's name in the audit log and the admin event stream: `$HOSTNAME` (a
/// container's or pod's name) and 6 random characters, fixed for the process's life.
pub fn replica_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let host = std::env::var("HOSTNAME")
            .ok()
            .filter(|host| !host.trim().is_empty())
            .unwrap_or_else(|| "replica".into());
        let suffix: String = vestibule_store::ids::random_id().chars().take(6).collect();
        format!("{}-{suffix}", host.trim())
    })
}
