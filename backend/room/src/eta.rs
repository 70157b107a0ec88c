//! The ETA and poll-hint formulas of docs/DESIGN.md ("ETA and poll hints").
//!
//! - The **effective rate** is the configured admission rate, or the rate the leader measured
//!   over the last minute when that is lower ([`vestibule_store::Pace`]).
//! - Tokens out are bounded by the cap on active users and by the stock left: the smaller is the
//!   room's **slots**. Shoppers beyond the free slots wait for a slot to free, at the slots'
//!   **pace** = slots ÷ how long a token is held ([`Hold`]): the measured finish rate once
//!   checkouts were measured, the room's expected checkout time before (a prior, with a wide
//!   high end), and the token TTL when stock binds (a unit comes back only when a token expires
//!   unused). Never below slots ÷ TTL, never above the effective rate.
//! - ETA (median) = those seconds × (1 + margin), rounded up; the **high** (90th-percentile)
//!   estimate adds the spread of finishes (a Gamma-distributed wait), the prior's doubt, and
//!   allows the rate to fall by a third while the shopper waits (an operator halving it
//!   mid-line), or by half under the closed loop (`autoRate` moves the rate each second and
//!   follows a halved origin down). Both are `None` while the room is paused or the rate is 0.
//! - Poll hint = the position's tier, but never more than half the ETA, never later than the
//!   earliest the shopper could be admitted (position ÷ configured rate: admission never goes
//!   faster) plus the notice target max(2 s, 5% of the TTL) less [`HINT_SLACK_MS`], and never
//!   under 1 s: a shopper who polls as told learns of a token within the target of its issue.
//!   While paused, the hint follows the ETA at the configured rate.

use std::str::FromStr;

use vestibule_shared::{EtaBasis, WaitReason};

use vestibule_store::{Pace, Settings};

/// Smallest poll hint in milliseconds.
pub const MIN_POLL_AFTER_MS: u64 = 1000;

/// The shortest notice target: a shopper learns of a token within max(this, 5% of the token
/// TTL) of its issue.
pub const NOTICE_MIN_MS: u64 = 2000;

/// Taken off the notice target for the poll's round trip and the scheduler's tick.
pub const HINT_SLACK_MS: u64 = 500;

/// The high estimate allows the rate to fall to 1 ÷ this while the shopper waits: a line
/// halved at mid-wait takes at most 1.5 × as long as first estimated.
pub const HIGH_SLOWDOWN: f64 = 1.5;

/// Under the closed loop (`autoRate`) the high estimate allows the rate to fall to half while
/// the shopper waits: the loop moves the rate by itself, and a halved origin capacity (the
/// drop it exists to follow) halves it within seconds. The median still reads the rate in force
/// and the pace achieved, so the estimate follows the loop as it moves.
pub const AUTO_RATE_HIGH_SLOWDOWN: f64 = 2.0;

/// The high estimate allows checkouts this many times as long as expected (before any was
/// measured) or as recently measured: a checkout can slow at any moment (a payment provider
/// throttles), and nothing shows it until the tokens out have aged past the old pace.
pub const CHECKOUT_DOUBT: f64 = 2.0;

/// z of the 90th percentile of a normal distribution.
const Z90: f64 = 1.2816;

/// An ETA rising by more than this factor above the configured rate's needs a reason.
const REASON_FACTOR: f64 = 1.2;

/// What the ETA of one room depends on, besides a shopper's position.
#[derive(Debug, Clone, Copy)]
pub struct EtaInputs {
    /// Configured admission rate, shoppers per second.
    pub rate_per_sec: f64,
    /// How far the high estimate lets the rate fall while the shopper waits (× 1 ÷ this):
    /// [`HIGH_SLOWDOWN`], or [`AUTO_RATE_HIGH_SLOWDOWN`] while the closed loop moves the rate.
    pub high_slowdown: f64,
    /// ETA margin (fraction).
    pub margin: f64,
    /// The room is paused.
    pub paused: bool,
    /// Cap on active users; `None` without a cap.
    pub max_active_users: Option<u64>,
    /// Active users (tokens out) as of the last tick.
    pub active: u64,
    /// Units of stock left; `None` = unlimited.
    pub stock_left: Option<u64>,
    /// Token TTL in seconds.
    pub token_ttl_secs: f64,
    /// The room's expected checkout time in seconds (the prior before anything is measured).
    pub expected_checkout_secs: f64,
    /// What the leader measured.
    pub pace: Pace,
    /// Seconds until the room's opening while a line that was already placed waits for it (an
    /// opening moved later after its draw): nobody is admitted before, so every estimate starts
    /// there. 0 when open.
    pub opens_in_secs: f64,
}

impl EtaInputs {
    /// The inputs of a room with `settings`, `active` users, its leader's measured `pace` and
    /// the configured ETA `margin`.
    pub fn for_room(settings: &Settings, active: u64, pace: Pace, margin: f64) -> Self {
        Self {
            rate_per_sec: settings.admission_rate_per_sec,
            high_slowdown: if settings.auto_rate.is_some() {
                AUTO_RATE_HIGH_SLOWDOWN
            } else {
                HIGH_SLOWDOWN
            },
            margin,
            paused: settings.paused,
            max_active_users: settings.max_active_users,
            active,
            stock_left: settings.sale.stock,
            token_ttl_secs: settings.token_ttl_ms as f64 / 1000.0,
            expected_checkout_secs: settings.expected_checkout_secs(),
            pace,
            opens_in_secs: settings.opens_at_ms.map_or(0.0, |at_ms| {
                at_ms.saturating_sub(vestibule_store::now_ms()) as f64 / 1000.0
            }),
        }
    }
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
    /// What the estimate rests on; `None` while paused.
    pub basis: Option<EtaBasis>,
    /// Poll hint, milliseconds.
    pub next_poll_after_ms: u64,
}

/// How long a token is held, which sets the pace of the slots once they are full.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hold {
    /// Finishes per held slot and second (median case).
    pub hazard: f64,
    /// The same at the high end (≤ `hazard`).
    pub hazard_high: f64,
    /// What it rests on.
    pub basis: EtaBasis,
}

/// The slots that bound tokens out: `(slots, stock binds)`; `None` with neither a cap nor a
/// stock.
pub fn slots(inputs: &EtaInputs) -> Option<(u64, bool)> {
    match (inputs.max_active_users, inputs.stock_left) {
        (None, None) => None,
        (Some(cap), None) => Some((cap, false)),
        (None, Some(stock)) => Some((stock, true)),
        (Some(cap), Some(stock)) => Some(if stock < cap {
            (stock, true)
        } else {
            (cap, false)
        }),
    }
}

/// How long the room's slots are held (see the module docs).
pub fn hold(stock_binds: bool, inputs: &EtaInputs) -> Hold {
    let ttl = inputs.token_ttl_secs.max(f64::MIN_POSITIVE);
    let floor = 1.0 / ttl;
    if stock_binds {
        // An order takes its unit with its slot: only a token expiring unused frees one.
        return Hold {
            hazard: floor,
            hazard_high: floor,
            basis: EtaBasis::TokenTtl,
        };
    }
    if let Some(measured) = inputs.pace.finish_per_active_sec {
        // The slower of the last ~15 s and the last ~5 s: a slowing checkout shows in seconds.
        let hazard = measured
            .min(inputs.pace.recent_finish_per_active_sec.unwrap_or(measured))
            .max(floor);
        return Hold {
            hazard,
            hazard_high: (hazard / CHECKOUT_DOUBT).max(floor),
            basis: EtaBasis::MeasuredCheckout,
        };
    }
    // Nothing measured: the room's expected checkout, plus the time to notice the token.
    let held = inputs.expected_checkout_secs.max(0.0) + notice_secs(inputs) / 2.0;
    Hold {
        hazard: 1.0 / held.min(ttl),
        hazard_high: 1.0 / (held * CHECKOUT_DOUBT).min(ttl),
        basis: EtaBasis::ExpectedCheckout,
    }
}

/// The notice target: max(2 s, 5% of the token TTL), seconds.
pub fn notice_secs(inputs: &EtaInputs) -> f64 {
    (NOTICE_MIN_MS as f64 / 1000.0).max(inputs.token_ttl_secs * 0.05)
}

/// The seconds of admission ahead of a 1-based `position`, before the margin:
/// `(10th percentile, median, 90th percentile)`, and what they rest on.
///
/// The first `slots − active` shoppers go at the effective rate (admission never goes faster
/// than the configured rate, so that part has no spread); after them a slot frees only when a
/// token is used or expires, so the rest go at the slots' pace. `n` finishes at pace λ take a
/// Gamma(n, λ) time: mean n ÷ λ, 10th/90th percentiles ≈ (n ∓ 1.28 √n) ÷ λ.
pub fn admission_secs(position: u64, inputs: &EtaInputs) -> (f64, f64, f64, EtaBasis) {
    let rate = effective_rate(inputs);
    let at_rate = |count: f64| count / rate;
    let bound = slots(inputs);
    let free = bound.map_or(u64::MAX, |(slots, _)| slots.saturating_sub(inputs.active));
    let Some((slots, stock_binds)) = bound.filter(|_| position > free) else {
        let secs = at_rate(position as f64);
        return (
            position as f64 / inputs.rate_per_sec,
            secs,
            secs,
            EtaBasis::AdmissionRate,
        );
    };
    let hold = hold(stock_binds, inputs);
    let pace = (slots as f64 * hold.hazard).min(rate);
    let pace_high = (slots as f64 * hold.hazard_high).min(rate);
    let beyond = (position - free) as f64;
    let ahead = at_rate(free as f64);
    let spread = Z90 * beyond.sqrt();
    (
        ahead + (beyond - spread).max(0.0) / pace,
        ahead + beyond / pace,
        ahead + (beyond + spread) / pace_high,
        hold.basis,
    )
}

/// The admission rate to expect: the configured one, or the measured one when lower.
pub fn effective_rate(inputs: &EtaInputs) -> f64 {
    let measured = inputs.pace.admitted_per_sec.unwrap_or(f64::INFINITY);
    inputs
        .rate_per_sec
        .min(measured.max(inputs.rate_per_sec * 0.05))
}

/// The estimate, reason and poll hint for a waiting shopper at a 1-based `position`.
pub fn estimate(position: u64, inputs: &EtaInputs, tiers: &PollTiers) -> Estimate {
    if inputs.rate_per_sec <= 0.0 {
        return Estimate {
            median_secs: None,
            high_secs: None,
            reason: inputs.paused.then_some(WaitReason::Paused),
            basis: None,
            next_poll_after_ms: tiers.after_ms(position),
        };
    }
    let (_, median, high, basis) = admission_secs(position, inputs);
    // A line held for a later opening starts then; the margin is for the rate, not the clock.
    let held = inputs.opens_in_secs.max(0.0);
    let median = median * (1.0 + inputs.margin);
    let high = (high * (1.0 + inputs.margin) * inputs.high_slowdown).max(median) + held;
    let median = median + held;
    // Admission never goes faster than the configured rate: nobody at this position can be
    // admitted sooner, so a poll by then plus the notice target never misses the token by more.
    let earliest_ms = (held + position as f64 / inputs.rate_per_sec) * 1000.0;
    let notice_ms = notice_secs(inputs) * 1000.0 - HINT_SLACK_MS as f64;
    let hint = tiers
        .after_ms(position)
        .min((median * 1000.0 / 2.0) as u64)
        .min((earliest_ms + notice_ms) as u64);
    let next_poll_after_ms = hint.max(MIN_POLL_AFTER_MS);
    if inputs.paused {
        // The hint follows the ETA the shopper would have at the configured rate, so a resume
        // is seen about as soon as it matters.
        return Estimate {
            median_secs: None,
            high_secs: None,
            reason: Some(WaitReason::Paused),
            basis: None,
            next_poll_after_ms,
        };
    }
    Estimate {
        median_secs: Some(median),
        high_secs: Some(high),
        reason: reason(position, inputs),
        basis: Some(basis),
        next_poll_after_ms,
    }
}

/// Why the wait is more than 20% longer than at the configured rate, from the room's state:
/// a measured rate above the configured one means the rate was lowered within about the last
/// minute; slots held by unused tokens with stock binding are `STOCK_HELD`; a cap that slows
/// this shopper is `CHECKOUT_SLOW` when active shoppers were measured to keep their slots for
/// more than half the token TTL on average, else `CAP_REACHED` (also before any checkout was
/// measured: nothing says checkout is slow then).
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
    let (_, expected, _, basis) = admission_secs(position, inputs);
    if expected <= nominal * REASON_FACTOR {
        return None;
    }
    match basis {
        EtaBasis::AdmissionRate | EtaBasis::Other => None,
        EtaBasis::TokenTtl => Some(WaitReason::StockHeld),
        EtaBasis::ExpectedCheckout => Some(WaitReason::CapReached),
        EtaBasis::MeasuredCheckout => {
            let hazard = inputs.pace.finish_per_active_sec.unwrap_or(0.0);
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
    }
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
mod tests;
