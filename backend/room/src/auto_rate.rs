//! The closed loop (`autoRate`, docs/DESIGN.md "Closed-loop admission"): once a second a room's
//! scheduler leader hands the origin's latest signals to [`Controller::step`], which says where
//! the admission rate goes and why.
//!
//! The rule is additive-increase/multiplicative-decrease with a memory of where the origin last
//! struggled (as TCP CUBIC remembers its last loss):
//! - **over a target** (p95 latency above `targetP95Ms`, or errors above `maxErrorRate`): the rate
//!   falls at once, in proportion to the overshoot (× target ÷ p95, between × 0.5 and × 0.85;
//!   errors × 0.7), and the rate it fell from is remembered as the origin's trouble point. When
//!   the signals say how much was sent (`sent`) and the origin got less than 95% of it through,
//!   that share measures its capacity (rate × share, as a delivery-rate estimate in TCP BBR):
//!   the rate falls to 80% of it (at most to × 0.3 in one step) so the backlog drains, and the
//!   capacity becomes the trouble point;
//! - **settling**: for [`SETTLE_MS`] after a cut, and afterwards while the p95 is still falling
//!   by a tenth a second or the origin answers at least what it is sent (its backlog is
//!   draining), the rate holds: cutting again for latency already paid for would overshoot
//!   downward;
//! - **latency rising** (the p95 up by 20% on the previous second from 60% of the target, or up
//!   at all from 80% of it):
//!   a backlog is forming, so the origin is just past its capacity: the rate is trimmed by 5%
//!   and that rate becomes the trouble point;
//! - **under the targets**: well under (p95 < 80% of the target) the rate rises 8% a second, or
//!   2% a second within 10% of the trouble point, then 8% again once 10% past it (capacity came
//!   back); near the target it holds;
//! - **no evidence**: fewer than [`MIN_REQUESTS`] requests in the window hold the rate (a rate
//!   never rises on no evidence); signals older than [`SIGNALS_STALE_MS`] hold it at the last
//!   rate that was measured healthy, and after [`SIGNALS_LOST_MS`] without fresh signals it
//!   falls to `min`.
//!
//! The rate always stays in [`min`, `max`] of the room's [`AutoRate`]. The controller is pure
//! (time comes in as `now_ms`); a new leader starts one afresh from the room's current rate,
//! which is safe: a fresh controller only rises on fresh healthy signals.

use vestibule_shared::auto_rate::{AutoRate, AutoRateReason, OriginSignals};

pub mod health;
pub mod shown;
pub mod window;

/// Signals older than this (ms) are stale: the rate holds at its last safe value.
pub const SIGNALS_STALE_MS: u64 = 3_000;
/// After this long (ms) without fresh signals the rate falls to `min`.
pub const SIGNALS_LOST_MS: u64 = 10_000;
/// Fewest requests in a window for its latency and error rate to count as evidence.
pub const MIN_REQUESTS: u64 = 10;
/// How long (ms) the rate holds after a cut while the origin drains its backlog.
pub const SETTLE_MS: u64 = 2_000;
/// Rise per second well under the targets (a fraction of the rate).
const HEADROOM_RISE_PER_SEC: f64 = 0.08;
/// Rise per second near the trouble point.
const PROBING_RISE_PER_SEC: f64 = 0.02;
/// Cut on errors over `maxErrorRate`.
const ERROR_CUT: f64 = 0.7;
/// Bounds of the latency cut (× target ÷ p95).
const LATENCY_CUT: (f64, f64) = (0.5, 0.85);
/// Below an overloaded origin's measured capacity by this factor, so its backlog drains.
const DRAIN: f64 = 0.8;
/// The deepest single cut (× the rate), whatever the measured capacity says.
const DEEPEST_CUT: f64 = 0.3;
/// Under this share of the offered load got through, the origin is overloaded and the share
/// measures its capacity.
const OVERLOADED_SHARE: f64 = 0.95;
/// A p95 above the previous second's × this is rising: more than one latency bucket (× 1.19),
/// so a p95 that moves to the next bucket and back is not taken for a backlog.
const RISING: f64 = 1.2;
/// From this share of the latency target a rising p95 trims the rate.
const RISING_FROM_SHARE: f64 = 0.6;
/// The trim on a rising p95.
const RISING_TRIM: f64 = 0.95;
/// Under this share of the latency target the origin has headroom; between it and the target
/// the rate holds while the p95 does not grow.
const HEADROOM_SHARE: f64 = 0.8;

/// The origin's signals and when they were measured (ms since the Unix epoch).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// When the window of the signals ended.
    pub at_ms: u64,
    /// The signals.
    pub signals: OriginSignals,
}

/// Where the rate goes, and why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// The admission rate to apply, shoppers per second, within [`min`, `max`].
    pub rate: f64,
    /// Why.
    pub reason: AutoRateReason,
}

/// One room's loop state, kept by its scheduler leader.
#[derive(Debug, Clone, Default)]
pub struct Controller {
    /// The last rate at which the origin was measured under its targets.
    last_safe: Option<f64>,
    /// The rate from which the last cut was made: where the origin last struggled.
    trouble_rate: Option<f64>,
    /// When the last cut was made.
    last_cut_ms: Option<u64>,
    /// The p95 of the previous fresh reading, to tell a draining backlog.
    last_p95_ms: Option<f64>,
    /// When fresh signals were last seen (or the controller started).
    last_fresh_ms: Option<u64>,
    /// When the previous step ran (rises scale with the time since).
    last_step_ms: Option<u64>,
}

impl Controller {
    /// Where the admission rate goes now, from `rate_now` (the room's rate, shoppers/s) and the
    /// origin's latest `reading`, if any. Call about once a second; rises scale with the time
    /// since the previous call (at most 2 s of it).
    pub fn step(
        &mut self,
        settings: &AutoRate,
        rate_now: f64,
        reading: Option<&Reading>,
        now_ms: u64,
    ) -> Decision {
        let (min, max) = (settings.min, settings.max.max(settings.min));
        let rate = if rate_now.is_finite() {
            rate_now.clamp(min, max)
        } else {
            min
        };
        let elapsed_secs = self
            .last_step_ms
            .map_or(1.0, |then| now_ms.saturating_sub(then) as f64 / 1000.0)
            .min(2.0);
        self.last_step_ms = Some(now_ms);
        let last_fresh = *self.last_fresh_ms.get_or_insert(now_ms);

        let fresh = reading.filter(|r| now_ms.saturating_sub(r.at_ms) <= SIGNALS_STALE_MS);
        let Some(reading) = fresh else {
            if now_ms.saturating_sub(last_fresh) >= SIGNALS_LOST_MS {
                return self.set(min, AutoRateReason::SignalsLost);
            }
            let hold = self.last_safe.map_or(rate, |safe| safe.min(rate)).max(min);
            return self.set(hold, AutoRateReason::SignalsStale);
        };
        self.last_fresh_ms = Some(now_ms);
        let signals = reading.signals;
        let previous_p95 = self.last_p95_ms.replace(signals.p95_ms);
        if signals.requests < MIN_REQUESTS {
            return self.set(rate, AutoRateReason::LittleTraffic);
        }

        let target = settings.target_p95_ms as f64;
        let errors_high = signals.error_rate > settings.max_error_rate;
        let latency_high = signals.p95_ms > target;
        if errors_high || latency_high {
            let share = delivered_share(&signals);
            let draining = share.is_some_and(|share| share >= 1.0);
            if self.settling(now_ms, signals.p95_ms, previous_p95, draining) {
                return self.set(rate, AutoRateReason::Settling);
            }
            let (factor, reason) = if errors_high {
                (ERROR_CUT, AutoRateReason::ErrorsHigh)
            } else {
                let factor = (target / signals.p95_ms).clamp(LATENCY_CUT.0, LATENCY_CUT.1);
                (factor, AutoRateReason::LatencyHigh)
            };
            let mut cut = rate * factor;
            let capacity = share
                .filter(|share| *share < OVERLOADED_SHARE)
                .map(|share| rate * share);
            if let Some(capacity) = capacity {
                cut = cut.min(capacity * DRAIN).max(rate * DEEPEST_CUT);
            }
            self.trouble_rate = Some(capacity.unwrap_or(rate));
            self.last_cut_ms = Some(now_ms);
            let cut = cut.max(min);
            self.last_safe = Some(self.last_safe.map_or(cut, |safe| safe.min(cut)));
            return self.set(cut, reason);
        }

        self.last_safe = Some(rate);
        if self
            .last_cut_ms
            .is_some_and(|cut| now_ms.saturating_sub(cut) < SETTLE_MS)
        {
            return self.set(rate, AutoRateReason::Settling);
        }
        let growth = previous_p95.map_or(1.0, |previous| signals.p95_ms / previous.max(1.0));
        let rising = (signals.p95_ms >= target * HEADROOM_SHARE && growth > 1.0)
            || (signals.p95_ms >= target * RISING_FROM_SHARE && growth > RISING);
        if rising {
            // A backlog is forming at this rate: the origin is just past its capacity.
            self.trouble_rate = Some(rate);
            return self.set((rate * RISING_TRIM).max(min), AutoRateReason::LatencyRising);
        }
        if signals.p95_ms >= target * HEADROOM_SHARE {
            return self.set(rate, AutoRateReason::AtTarget);
        }
        if rate >= max {
            return self.set(max, AutoRateReason::AtMax);
        }
        if self
            .trouble_rate
            .is_some_and(|trouble| rate > trouble * 1.1)
        {
            // Past where the origin last struggled without trouble: its capacity came back.
            self.trouble_rate = None;
        }
        let near_trouble = self
            .trouble_rate
            .is_some_and(|trouble| rate >= trouble * 0.9);
        let (per_sec, reason) = if near_trouble {
            (PROBING_RISE_PER_SEC, AutoRateReason::Probing)
        } else {
            (HEADROOM_RISE_PER_SEC, AutoRateReason::Headroom)
        };
        let risen = (rate * (1.0 + per_sec * elapsed_secs)).max(rate + elapsed_secs);
        self.set(risen.min(max), reason)
    }

    /// Just cut, or the backlog the old rate left is still draining: the latency falls fast or
    /// the origin answers at least what it is sent (`draining`).
    fn settling(
        &self,
        now_ms: u64,
        p95_ms: f64,
        previous_p95_ms: Option<f64>,
        draining: bool,
    ) -> bool {
        let Some(cut) = self.last_cut_ms else {
            return false;
        };
        let since = now_ms.saturating_sub(cut);
        since < SETTLE_MS
            || (since < 4 * SETTLE_MS
                && (draining || previous_p95_ms.is_some_and(|previous| p95_ms < previous * 0.9)))
    }

    fn set(&self, rate: f64, reason: AutoRateReason) -> Decision {
        Decision { rate, reason }
    }
}

/// The share of the requests sent in the window that the origin answered without error
/// (`requests × (1 − errorRate) ÷ sent`); `None` when the signals do not say what was sent or it
/// was too little to judge.
fn delivered_share(signals: &OriginSignals) -> Option<f64> {
    let sent = signals.sent.filter(|sent| *sent >= MIN_REQUESTS)?;
    let answered = signals.requests as f64 * (1.0 - signals.error_rate);
    Some(answered / sent as f64)
}

#[cfg(test)]
mod tests;
