//! The ETA and poll-hint formulas of docs/DESIGN.md ("ETA and poll hints").
//!
//! - The **effective rate** is the configured admission rate, or the rate the leader measured
//!   over the last minute when that is lower ([`vestibule_store::Pace`]).
//! - Under a cap on active users, shoppers beyond the free slots go at the cap's **pace**: the
//!   cap × the measured finish rate per active shopper, never below the worst case
//!   (cap ÷ token TTL: nobody finishing early) nor above the effective rate.
//! - ETA (median) = those seconds × (1 + margin), rounded up; the **high** (90th-percentile)
//!   estimate adds the spread of finishes under a cap (a Gamma-distributed wait) and allows the
//!   rate to fall by a third while the shopper waits (an operator halving it mid-line).
//!   Both are `None` while the room is paused or the rate is 0.
//! - Poll hint = the position's tier, but never more than half the ETA, at most 2 s when the
//!   low (10th-percentile) estimate is within one hint (a shopper learns of a token within 2 s
//!   at p90), and never under 1 s. While paused, the hint follows the ETA at the configured rate.

use std::str::FromStr;

use vestibule_shared::WaitReason;

use vestibule_store::Pace;

/// Smallest poll hint in milliseconds.
pub const MIN_POLL_AFTER_MS: u64 = 1000;

/// Longest poll hint once a shopper may be admitted before the next poll: with polls uniformly
/// spread over the hint, 90% learn of the token within 0.9 × this, under the 2 s target.
pub const NEAR_POLL_AFTER_MS: u64 = 1500;

/// Under an active-users cap, the shoppers within this many places of a free slot poll at most
/// every [`NEAR_POLL_AFTER_MS`]: a slot frees whenever any active shopper finishes, which the
/// pace (a mean) cannot time, so these few must be ready. Bounded: at most this many shoppers a
/// room poll that often because of the cap, however long the line.
pub const NEAR_CAP_PLACES: u64 = 25;

/// The high estimate allows the rate to fall to 1 ÷ this while the shopper waits: a line
/// halved at mid-wait takes at most 1.5 × as long as first estimated.
pub const HIGH_SLOWDOWN: f64 = 1.5;

/// z of the 90th percentile of a normal distribution.
const Z90: f64 = 1.2816;

/// An ETA rising by more than this factor above the configured rate's needs a reason.
const REASON_FACTOR: f64 = 1.2;

/// What the ETA of one room depends on, besides a shopper's position.
#[derive(Debug, Clone, Copy)]
pub struct EtaInputs {
    /// Configured admission rate, shoppers per second.
    pub rate_per_sec: f64,
    /// ETA margin (fraction).
    pub margin: f64,
    /// The room is paused.
    pub paused: bool,
    /// `(cap on active users, active users now)`, `None` without a cap.
    pub cap: Option<(u64, u64)>,
    /// Token TTL in seconds.
    pub token_ttl_secs: f64,
    /// What the leader measured.
    pub pace: Pace,
}

/// One shopper's estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Median estimate with the margin, seconds (exact); `None` while paused.
    pub median_secs: Option<f64>,
    /// 90th-percentile estimate, seconds (exact, ≥ median); `None` while paused.
    pub high_secs: Option<f64>,
    /// Why the wait is longer than the configured rate alone makes it.
    pub reason: Option<WaitReason>,
    /// Poll hint, milliseconds.
    pub next_poll_after_ms: u64,
}

/// The seconds of admission ahead of a 1-based `position`, before the margin:
/// `(10th percentile, median, 90th percentile)`.
///
/// The first `cap − active` shoppers go at the effective rate (admission never goes faster than
/// the configured rate, so that part has no spread); after them a slot frees only when an active
/// shopper finishes, so the rest go at the cap's pace. `n` finishes at pace λ take a Gamma(n, λ)
/// time: mean n ÷ λ, 10th/90th percentiles ≈ (n ∓ 1.28 √n) ÷ λ.
pub fn admission_secs(position: u64, inputs: &EtaInputs) -> (f64, f64, f64) {
    let rate = effective_rate(inputs);
    let at_rate = |count: f64| count / rate;
    let free = inputs
        .cap
        .map_or(u64::MAX, |(cap, active)| cap.saturating_sub(active));
    let Some((cap, _)) = inputs.cap.filter(|_| position > free) else {
        let secs = at_rate(position as f64);
        return (position as f64 / inputs.rate_per_sec, secs, secs);
    };
    let pace = cap_pace(cap, inputs).min(rate);
    let beyond = (position - free) as f64;
    let ahead = at_rate(free as f64);
    let spread = Z90 * beyond.sqrt();
    (
        ahead + (beyond - spread).max(0.0) / pace,
        ahead + beyond / pace,
        ahead + (beyond + spread) / pace,
    )
}

/// The admission rate to expect: the configured one, or the measured one when lower.
pub fn effective_rate(inputs: &EtaInputs) -> f64 {
    let measured = inputs.pace.admitted_per_sec.unwrap_or(f64::INFINITY);
    inputs
        .rate_per_sec
        .min(measured.max(inputs.rate_per_sec * 0.05))
}

/// Shoppers per second the cap lets in once it is full: cap × finishes per active shopper and
/// second, never below cap ÷ token TTL (every token ends by its TTL).
pub fn cap_pace(cap: u64, inputs: &EtaInputs) -> f64 {
    let floor = if inputs.token_ttl_secs > 0.0 {
        1.0 / inputs.token_ttl_secs
    } else {
        f64::INFINITY
    };
    let hazard = inputs.pace.finish_per_active_sec.unwrap_or(0.0).max(floor);
    cap as f64 * hazard
}

/// The estimate, reason and poll hint for a waiting shopper at a 1-based `position`.
pub fn estimate(position: u64, inputs: &EtaInputs, tiers: &PollTiers) -> Estimate {
    if inputs.rate_per_sec <= 0.0 {
        return Estimate {
            median_secs: None,
            high_secs: None,
            reason: inputs.paused.then_some(WaitReason::Paused),
            next_poll_after_ms: tiers.after_ms(position),
        };
    }
    let (low, median, high) = admission_secs(position, inputs);
    let median = median * (1.0 + inputs.margin);
    let high = (high * (1.0 + inputs.margin) * HIGH_SLOWDOWN).max(median);
    let mut hint = tiers.after_ms(position).min((median * 1000.0 / 2.0) as u64);
    let near_a_free_slot = inputs.cap.is_some_and(|(cap, active)| {
        position <= cap.saturating_sub(active).saturating_add(NEAR_CAP_PLACES)
    });
    if low * 1000.0 < hint as f64 || near_a_free_slot {
        // May well be admitted before the next poll (a cap freeing slots faster than the
        // median assumes): poll often enough to learn of the token within 2 s.
        hint = hint.min(NEAR_POLL_AFTER_MS);
    }
    let next_poll_after_ms = hint.max(MIN_POLL_AFTER_MS);
    if inputs.paused {
        // The hint follows the ETA the shopper would have at the configured rate, so a resume
        // is seen about as soon as it matters.
        return Estimate {
            median_secs: None,
            high_secs: None,
            reason: Some(WaitReason::Paused),
            next_poll_after_ms,
        };
    }
    Estimate {
        median_secs: Some(median),
        high_secs: Some(high),
        reason: reason(position, inputs),
        next_poll_after_ms,
    }
}

/// Why the wait is more than 20% longer than at the configured rate, from the room's state:
/// a measured rate above the configured one means the rate was lowered within about the last
/// minute; a cap that slows this shopper is `CHECKOUT_SLOW` when active shoppers were measured to
/// keep their slots for more than half the token TTL on average, else `CAP_REACHED` (also before
/// any finish was measured).
fn reason(position: u64, inputs: &EtaInputs) -> Option<WaitReason> {
    let rate = inputs.rate_per_sec;
    if inputs
        .pace
        .admitted_per_sec
        .is_some_and(|measured| measured > rate * REASON_FACTOR)
    {
        return Some(WaitReason::RateLowered);
    }
    let nominal = position as f64 / rate;
    let (_, expected, _) = admission_secs(position, inputs);
    if expected <= nominal * REASON_FACTOR {
        return None;
    }
    let (cap, active) = inputs.cap?;
    if position <= cap.saturating_sub(active) {
        return None;
    }
    // Before any finish was measured (the first minute of a sale) nothing says checkout is
    // slow: the cap holds the shopper back, which is all that is known.
    let Some(hazard) = inputs.pace.finish_per_active_sec else {
        return Some(WaitReason::CapReached);
    };
    let mean_checkout_secs = if hazard > 0.0 {
        1.0 / hazard
    } else {
        f64::INFINITY
    };
    Some(if mean_checkout_secs > inputs.token_ttl_secs / 2.0 {
        WaitReason::CheckoutSlow
    } else {
        WaitReason::CapReached
    })
}

/// ETA as shown to shoppers: whole seconds, rounded up.
pub fn eta_display_secs(exact_secs: f64) -> u64 {
    exact_secs.ceil() as u64
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

    fn open(rate: f64) -> EtaInputs {
        EtaInputs {
            rate_per_sec: rate,
            margin: 0.2,
            paused: false,
            cap: None,
            token_ttl_secs: 300.0,
            pace: Pace::default(),
        }
    }

    #[test]
    fn eta_is_position_over_rate_with_margin_and_null_while_paused() {
        let estimate = estimate(175, &open(175.0), &tiers());
        assert!((estimate.median_secs.unwrap() - 1.2).abs() < 1e-9);
        assert!((estimate.high_secs.unwrap() - 1.8).abs() < 1e-9);
        assert_eq!(estimate.reason, None);
        assert_eq!(eta_display_secs(1.2), 2);
        let paused = super::estimate(
            10,
            &EtaInputs {
                paused: true,
                ..open(175.0)
            },
            &tiers(),
        );
        assert_eq!((paused.median_secs, paused.high_secs), (None, None));
        assert_eq!(paused.reason, Some(WaitReason::Paused));
        assert_eq!(super::estimate(10, &open(0.0), &tiers()).median_secs, None);
    }

    #[test]
    fn poll_hint_follows_tiers_at_their_edges_when_the_eta_is_long() {
        let slow = |p| estimate(p, &open(0.1), &tiers()).next_poll_after_ms;
        assert_eq!(slow(1), 3000);
        assert_eq!(slow(10), 3000);
        assert_eq!(slow(11), 10_000);
        assert_eq!(slow(100), 10_000);
        assert_eq!(slow(101), 30_000);
    }

    #[test]
    fn poll_hint_never_exceeds_half_the_eta_nor_drops_under_a_second() {
        // 50 at 10/s: ETA 6 s → half is 3 s, under the 10 s tier.
        assert_eq!(estimate(50, &open(10.0), &tiers()).next_poll_after_ms, 3000);
        // 1 at 175/s: ETA 7 ms → floor of 1 s.
        assert_eq!(estimate(1, &open(175.0), &tiers()).next_poll_after_ms, 1000);
    }

    #[test]
    fn while_paused_the_hint_follows_the_eta_at_the_configured_rate() {
        let paused = EtaInputs {
            paused: true,
            ..open(175.0)
        };
        // Place 121 at 175/s is under a second away once resumed: poll at the floor, not 30 s.
        assert_eq!(estimate(121, &paused, &tiers()).next_poll_after_ms, 1000);
        assert_eq!(
            estimate(500_000, &paused, &tiers()).next_poll_after_ms,
            30_000
        );
    }

    #[test]
    fn a_cap_on_active_users_slows_only_the_shoppers_it_will_hold_back() {
        let capped = |cap, active| EtaInputs {
            cap: Some((cap, active)),
            ..open(10.0)
        };
        assert_eq!(admission_secs(30, &open(10.0)).1, 3.0);
        assert_eq!(admission_secs(30, &capped(500, 100)).1, 3.0);
        // Nothing measured: the worst-case pace (500 per 300 s) past the free slots.
        let secs = admission_secs(500, &capped(500, 100)).1;
        assert!(
            (secs - (40.0 + 100.0 * 300.0 / 500.0)).abs() < 1e-9,
            "{secs}"
        );
        assert!((admission_secs(5, &capped(500, 500)).1 - 3.0).abs() < 1e-9);
    }

    #[test]
    fn no_checkout_is_called_slow_before_one_was_measured() {
        let cold = EtaInputs {
            cap: Some((20, 20)),
            token_ttl_secs: 60.0,
            ..open(20.0)
        };
        assert!(cold.pace.finish_per_active_sec.is_none());
        // Place 300 behind a full cap of 20, nothing measured: held back by the cap, not slow.
        assert_eq!(reason(300, &cold), Some(WaitReason::CapReached));
        // Measured: no finish at all over the window is slow.
        let stuck = EtaInputs {
            pace: Pace {
                finish_per_active_sec: Some(0.0),
                ..Pace::default()
            },
            ..cold
        };
        assert_eq!(reason(300, &stuck), Some(WaitReason::CheckoutSlow));
    }

    #[test]
    fn under_a_cap_the_measured_finish_rate_sets_the_pace() {
        // The scenario: cap 20, TTL 60 s, rate 20/s, shoppers order within ~1 s.
        let inputs = EtaInputs {
            cap: Some((20, 20)),
            token_ttl_secs: 60.0,
            pace: Pace {
                finish_per_active_sec: Some(0.2),
                ..Pace::default()
            },
            ..open(20.0)
        };
        // 20 × 0.2 = 4 per second: place 268 waits about 67 s, not 804 s.
        let (low, median, high) = admission_secs(268, &inputs);
        assert!(low < median);
        assert!((median - 67.0).abs() < 1e-9, "{median}");
        assert!(high > median && high < median * 1.2, "{high}");
        let estimate = estimate(268, &inputs, &tiers());
        assert_eq!(estimate.reason, Some(WaitReason::CapReached));
        // Shoppers who hold their slots most of the TTL: checkout is slow.
        let slow = EtaInputs {
            pace: Pace {
                finish_per_active_sec: Some(1.0 / 50.0),
                ..Pace::default()
            },
            ..inputs
        };
        assert_eq!(
            super::estimate(268, &slow, &tiers()).reason,
            Some(WaitReason::CheckoutSlow)
        );
    }

    #[test]
    fn near_the_front_under_a_cap_hints_shrink_to_the_near_hint() {
        let capped = |hazard| EtaInputs {
            cap: Some((5, 5)),
            token_ttl_secs: 60.0,
            pace: Pace {
                finish_per_active_sec: Some(hazard),
                ..Pace::default()
            },
            ..open(20.0)
        };
        // Place 4, a slot a second: median 4.8 s (half: 2.4 s), but 10% are in within 1.4 s.
        assert_eq!(
            estimate(4, &capped(0.2), &tiers()).next_poll_after_ms,
            NEAR_POLL_AFTER_MS
        );
        // Place 3, a slot every 4 s on average: within NEAR_CAP_PLACES of a free slot, so ready
        // for a slot that frees early; place 40 of the same room keeps its tier's hint.
        assert_eq!(
            estimate(3, &capped(0.05), &tiers()).next_poll_after_ms,
            NEAR_POLL_AFTER_MS
        );
        assert!(estimate(40, &capped(0.05), &tiers()).next_poll_after_ms > NEAR_POLL_AFTER_MS);
        // Without a cap admission is never faster than the rate: no shrinking.
        assert_eq!(estimate(50, &open(10.0), &tiers()).next_poll_after_ms, 3000);
    }

    #[test]
    fn a_rate_lowered_below_what_was_achieved_is_the_reason() {
        let inputs = EtaInputs {
            pace: Pace {
                admitted_per_sec: Some(20.0),
                ..Pace::default()
            },
            ..open(10.0)
        };
        let estimate = estimate(100, &inputs, &tiers());
        assert_eq!(estimate.reason, Some(WaitReason::RateLowered));
        // The configured (lower) rate counts, not the measured one.
        assert!((estimate.median_secs.unwrap() - 12.0).abs() < 1e-9);
    }

    #[test]
    fn a_measured_rate_below_the_configured_one_is_used() {
        let inputs = EtaInputs {
            pace: Pace {
                admitted_per_sec: Some(5.0),
                ..Pace::default()
            },
            ..open(10.0)
        };
        assert!((admission_secs(50, &inputs).1 - 10.0).abs() < 1e-9);
    }
}
