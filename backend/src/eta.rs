//! The ETA and poll-hint formulas of DESIGN.md ("ETA", "nextPollAfter").
//!
//! - ETA = position ÷ effective admission rate × (1 + margin), in seconds rounded up; `None` while
//!   the room is paused or the rate is 0.
//! - Poll hint = the position's tier, but never more than half the ETA and never under 1 s, so
//!   nobody sleeps through their turn.

use crate::config::PollTiers;

/// Smallest poll hint in milliseconds.
pub const MIN_POLL_AFTER_MS: u64 = 1000;

/// The rate an ETA may count on, shoppers per second.
///
/// With a cap on active users, at most `cap` tokens are outstanding and each lasts up to the
/// token TTL, so the sustained rate can fall to `cap ÷ ttl`; the ETA uses the smaller rate.
pub fn effective_rate(
    rate_per_sec: f64,
    max_active_users: Option<u64>,
    token_ttl_secs: f64,
) -> f64 {
    match max_active_users {
        Some(cap) if token_ttl_secs > 0.0 => rate_per_sec.min(cap as f64 / token_ttl_secs),
        _ => rate_per_sec,
    }
}

/// Exact ETA in seconds for a 1-based `position`; `None` when nothing is being admitted.
pub fn eta_exact_secs(position: u64, rate_per_sec: f64, margin: f64, paused: bool) -> Option<f64> {
    (!paused && rate_per_sec > 0.0).then(|| position as f64 / rate_per_sec * (1.0 + margin))
}

/// ETA as shown to shoppers: whole seconds, rounded up.
pub fn eta_display_secs(exact_secs: f64) -> u64 {
    exact_secs.ceil() as u64
}

/// Poll hint in milliseconds for a waiting ticket.
pub fn next_poll_after_ms(position: u64, eta_exact_secs: Option<f64>, tiers: &PollTiers) -> u64 {
    let tier = tiers.after_ms(position);
    let capped = match eta_exact_secs {
        Some(eta) => tier.min((eta * 1000.0 / 2.0) as u64),
        None => tier,
    };
    capped.max(MIN_POLL_AFTER_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiers() -> PollTiers {
        "10:3000,100:10000,*:30000".parse().unwrap()
    }

    #[test]
    fn eta_is_position_over_rate_with_margin_and_null_while_paused() {
        assert_eq!(eta_exact_secs(175, 175.0, 0.2, false), Some(1.2));
        assert_eq!(eta_display_secs(1.2), 2);
        assert_eq!(eta_exact_secs(10, 175.0, 0.2, true), None);
        assert_eq!(eta_exact_secs(10, 0.0, 0.2, false), None);
    }

    #[test]
    fn poll_hint_follows_tiers_at_their_edges_when_the_eta_is_long() {
        let slow = |p| next_poll_after_ms(p, eta_exact_secs(p, 0.1, 0.2, false), &tiers());
        assert_eq!(slow(1), 3000);
        assert_eq!(slow(10), 3000);
        assert_eq!(slow(11), 10_000);
        assert_eq!(slow(100), 10_000);
        assert_eq!(slow(101), 30_000);
    }

    #[test]
    fn poll_hint_never_exceeds_half_the_eta_nor_drops_under_a_second() {
        // 50 at 10/s: ETA 6 s → half is 3 s, under the 10 s tier.
        assert_eq!(
            next_poll_after_ms(50, eta_exact_secs(50, 10.0, 0.2, false), &tiers()),
            3000
        );
        // 1 at 175/s: ETA 7 ms → floor of 1 s.
        assert_eq!(
            next_poll_after_ms(1, eta_exact_secs(1, 175.0, 0.2, false), &tiers()),
            1000
        );
        // Paused: the tier alone.
        assert_eq!(next_poll_after_ms(500, None, &tiers()), 30_000);
    }

    #[test]
    fn a_cap_on_active_users_slows_the_rate_the_eta_counts_on() {
        assert_eq!(effective_rate(175.0, None, 300.0), 175.0);
        assert_eq!(effective_rate(175.0, Some(300), 300.0), 1.0);
        assert_eq!(effective_rate(1.0, Some(3000), 300.0), 1.0);
    }
}
