//! The ETA and poll-hint formulas of docs/DESIGN.md ("ETA and poll hints").
//!
//! - ETA = position ÷ admission rate × (1 + margin), in seconds rounded up; `None` while the room
//!   is paused or the rate is 0. With a cap on active users, shoppers beyond the free slots are
//!   counted at the cap's pace (see [`admission_secs`]).
//! - Poll hint = the position's tier, but never more than half the ETA and never under 1 s, so
//!   nobody sleeps through their turn.

use std::str::FromStr;

/// Smallest poll hint in milliseconds.
pub const MIN_POLL_AFTER_MS: u64 = 1000;

/// The seconds of admission ahead of a 1-based `position`, before the margin.
///
/// Without a cap on active users: `position ÷ rate`. With a cap, the first `cap − active`
/// shoppers still go at the admission rate; after them a slot frees only when a token is used
/// or expires, so the rest are counted at the cap's worst-case pace, `cap ÷ token TTL`
/// (nobody ordering). Honest for the part the cap governs, and no slower than the rate before.
pub fn admission_secs(
    position: u64,
    rate_per_sec: f64,
    cap: Option<(u64, u64)>,
    token_ttl_secs: f64,
) -> f64 {
    let at_rate = |count: f64| count / rate_per_sec;
    let Some((cap, active)) = cap else {
        return at_rate(position as f64);
    };
    let free = cap.saturating_sub(active);
    if position <= free || token_ttl_secs <= 0.0 {
        return at_rate(position as f64);
    }
    let capped_rate = (cap as f64 / token_ttl_secs).min(rate_per_sec);
    at_rate(free as f64) + (position - free) as f64 / capped_rate
}

/// Exact ETA in seconds for a 1-based `position` (no cap on active users); `None` when nothing
/// is being admitted.
pub fn eta_exact_secs(position: u64, rate_per_sec: f64, margin: f64, paused: bool) -> Option<f64> {
    eta_with_cap(position, rate_per_sec, margin, paused, None, 0.0)
}

/// Exact ETA in seconds: [`admission_secs`] × (1 + margin); `None` while paused or at rate 0.
/// `cap` is `(max active users, active users now)`.
pub fn eta_with_cap(
    position: u64,
    rate_per_sec: f64,
    margin: f64,
    paused: bool,
    cap: Option<(u64, u64)>,
    token_ttl_secs: f64,
) -> Option<f64> {
    (!paused && rate_per_sec > 0.0)
        .then(|| admission_secs(position, rate_per_sec, cap, token_ttl_secs) * (1.0 + margin))
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

/// Poll-hint tiers: the first tier whose `max_position` is ≥ the position gives the hint.
///
/// Parsed from `10:3000,100:10000,*:30000` (docs/DESIGN.md: 1–10 → 3 s, 11–100 → 10 s, >100 → 30 s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollTiers(pub Vec<PollTier>);

/// One poll-hint tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollTier {
    /// Largest position of the tier; `None` = every position (`*`).
    pub max_position: Option<u64>,
    /// Poll hint for the tier in milliseconds.
    pub after_ms: u64,
}

impl PollTiers {
    /// The tier hint for a 1-based position, in milliseconds.
    pub fn after_ms(&self, position: u64) -> u64 {
        self.0
            .iter()
            .find(|tier| tier.max_position.is_none_or(|max| position <= max))
            .map_or(30_000, |tier| tier.after_ms)
    }
}

impl FromStr for PollTiers {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut tiers = Vec::new();
        for part in text.split(',').map(str::trim) {
            let (max, ms) = part
                .split_once(':')
                .ok_or_else(|| format!("poll tier {part:?} is not maxPosition:ms"))?;
            let max_position = match max.trim() {
                "*" => None,
                n => Some(
                    n.parse::<u64>()
                        .map_err(|_| format!("poll tier position {n:?} is not a number"))?,
                ),
            };
            let after_ms = ms
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("poll tier delay {ms:?} is not milliseconds"))?;
            if after_ms < 1000 {
                return Err(format!("poll tier delay {after_ms} ms is under 1000 ms"));
            }
            tiers.push(PollTier {
                max_position,
                after_ms,
            });
        }
        let ascending =
            tiers
                .windows(2)
                .all(|pair| match (pair[0].max_position, pair[1].max_position) {
                    (Some(a), Some(b)) => a < b,
                    (Some(_), None) => true,
                    (None, _) => false,
                });
        if !ascending {
            return Err("poll tiers must ascend by position, with `*` last".into());
        }
        if tiers.last().is_none_or(|tier| tier.max_position.is_some()) {
            return Err("poll tiers must end with a `*:ms` tier".into());
        }
        Ok(Self(tiers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_tiers_must_ascend_and_end_with_a_catch_all() {
        assert!("10:3000,*:30000".parse::<PollTiers>().is_ok());
        assert!("100:3000,10:30000,*:1000".parse::<PollTiers>().is_err());
        assert!("10:3000".parse::<PollTiers>().is_err());
        assert!("10:500,*:3000".parse::<PollTiers>().is_err());
        assert!("x:3000,*:3000".parse::<PollTiers>().is_err());
    }

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
    fn a_cap_on_active_users_slows_only_the_shoppers_it_will_hold_back() {
        // No cap: position ÷ rate.
        assert_eq!(admission_secs(30, 10.0, None, 300.0), 3.0);
        // A cap far from reached changes nothing for those it will not hold back.
        assert_eq!(admission_secs(30, 10.0, Some((500, 100)), 300.0), 3.0);
        // Past the free slots the cap's pace (500 per 300 s) counts: 400 at 10/s, then 100 more.
        let secs = admission_secs(500, 10.0, Some((500, 100)), 300.0);
        assert!(
            (secs - (40.0 + 100.0 * 300.0 / 500.0)).abs() < 1e-9,
            "{secs}"
        );
        // A full room: everyone waits for slots.
        assert!((admission_secs(5, 10.0, Some((500, 500)), 300.0) - 3.0).abs() < 1e-9);
    }
}
