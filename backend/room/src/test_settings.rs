//! The room settings the unit tests start from (each test changes what it is about).

use vestibule_store::Settings;

/// An open room at 10/s: token TTL 60 s, no cap, no stock, abandon after 5 min.
pub fn settings() -> Settings {
    Settings {
        admission_rate_per_sec: 10.0,
        paused: false,
        token_ttl_ms: 60_000,
        max_active_users: None,
        checkout_url: None,
        share_token_with_embedder: false,
        abandon_after_ms: 300_000,
        hold_place_ms: 0,
        expected_checkout_ms: None,
        sale: Default::default(),
        opens_at_ms: None,
        prequeue_opens_at_ms: None,
        pow_difficulty: 0,
        pow_auto_joins_per_sec: None,
        require_user_assertion: false,
        labels: Default::default(),
        queueing_method: Default::default(),
        auto_rate: None,
    }
}
