//! The closed loop (`autoRate`, docs/DESIGN.md "Closed-loop admission"): once a second a room's
//! scheduler leader hands the origin's latest signals to [`Controller::step`], which says where
//! the admission rate goes and why.
//!
//! The rule is additive-increase/multiplicative-decrease with a memory of where the origin
//! struggled (as TCP CUBIC remembers its last loss), and a measure of its capacity from what it
//! got through (as TCP BBR measures its delivery rate). The loop acts on what it sees a second or
//! two late, so each reading is judged against the rate in force when its load was offered
//! ([`OFFER_LAG_MS`] before the reading), not the rate now:
//! - **over a target** (p95 latency above `targetP95Ms`, errors above `maxErrorRate`, or the
//!   wait of a request sent now, by Little's law, over the target: see [`queue_wait_ms`]): the
//!   rate falls at once, in proportion to the overshoot (× target ÷ the p95 or that wait,
//!   between × 0.5 and × 0.85; errors × 0.7), and the offered rate is remembered as a trouble
//!   point. When the signals say
//!   how much was sent (`sent`) and the origin got less than 95% of it through, that share of
//!   the offered rate measures its capacity: the rate falls under it, to × target ÷ p95 of it
//!   between × 0.5 and × 0.8 (the further over, the bigger the backlog to drain), and no higher
//!   than × that share of it (the further the load was over the capacity, the more of it is
//!   still on its way), at most to × 0.3 of the rate in one step (× 0.1 for a drain, below);
//!   the capacity becomes the trouble point. On a wait in flight over the target, the growth
//!   of what is in flight measures the capacity now too (offered × the share of what was sent
//!   that did not pile up), and the lower of the two sizes the cut. Where the count in flight
//!   also measures the backlog, the cut drains it within a second and the rate refills to just
//!   under the capacity once it is gone (see [`drain`]);
//! - **settling**: for [`SETTLE_MS`] after a cut, while the readings still measure load offered
//!   before it, up to 8 s while the p95 is still falling by a tenth a second, and up to 10 s
//!   while the origin answers over 110% of what it is sent, or at least what it is sent at a rate
//!   under the capacity the last cut measured (its backlog is draining, and where the count in
//!   flight is known, fast enough to be gone within [`DRAINED_WITHIN_SECS`]), the rate holds:
//!   cutting again for latency already paid for would overshoot downward. After a trim (below)
//!   only the last two hold a cut: a reading over the target just after a 5–10% trim is a
//!   backlog the trim cannot drain, and the cut goes at once. Nor does a cut made without a
//!   measured capacity hold once a reading measures one under the rate: it cuts again, sized
//!   by it. A trickle's reading whose window spans seconds holds too while what is in flight
//!   now waits under the target (see [`answers_stale`]);
//! - **latency rising**: from an elevated p95 (the previous reading's at 40% of the target or
//!   more: one burst lifting one second's p95 from a low base is not a backlog), the p95 up on
//!   each of the last two readings and by 20% over both, up by 20% on the previous reading from
//!   60% of the target, or up at all from 80% of it (these two on a reading of at least
//!   [`ONE_READING_REQUESTS`] answers, of fewer the p95 is one of the slowest few, and with what
//!   is in flight waiting over a bucket longer than the p50, when that is known). The origin
//!   is just past its capacity: the rate is trimmed by 5%, or to 90% of the offered rate when
//!   that is lower, and 95% of the offered rate becomes a trouble point. (The counts of what
//!   was sent and what got through are not used here: near capacity a second's counts swing by
//!   a third with bursts of checkouts, and trims on them ratchet the rate down);
//! - **under the targets**: well under (p95 < 80% of the target) the rate rises 8% a second, but
//!   2% a second while queueing (a p95 from 60% of the target and 1.5× the lowest of the last
//!   [`FLOOR_MS`]) or from 10% under a trouble point, and 1.5% a second past it until it is forgotten:
//!   once the rate has stayed 10% above it for [`FORGET_AFTER_MS`] with no queue (a p95 of
//!   enough answers a bucket or more above its floor starts that time again), or at once when a
//!   load offered near it (50–110% of it) is answered with a p95 under 75% of the lowest the origin
//!   had for a load as high near it since it struggled there (the same load answered much faster:
//!   its capacity came back: the points of the lower capacity go, and only the highest stays).
//!   Near the target the rate holds, and so it does while the origin got under 90% of what it
//!   was sent through over the last three readings (at its capacity before the p95 shows it).
//!   Up to four trouble points are kept, the newest and higher ones from before (the highest
//!   the longest), so after a restored capacity the rate slows again near where the origin
//!   struggled at its best;
//! - **no evidence**: fewer than [`MIN_REQUESTS`] requests in the window hold the rate (a rate
//!   never rises on no evidence); signals older than [`SIGNALS_STALE_MS`] hold it at the last
//!   rate that was measured healthy, and after [`SIGNALS_LOST_MS`] without fresh signals it
//!   falls to `min`.
//!
//! The rate always stays in [`min`, `max`] of the room's [`AutoRate`]. The controller is pure
//! (time comes in as `now_ms`); a new leader starts one afresh from the room's current rate,
//! which is safe: a fresh controller only rises on fresh healthy signals.

use vestibule_shared::auto_rate::{AutoRate, AutoRateReason, OriginSignals};

mod drain;
pub mod health;
mod memory;
mod rising;
mod settling;
pub mod shown;
mod signals;
mod trouble;
pub mod window;

use drain::{Backlog, Drain};
use rising::rising;
use settling::{answers_stale, just_after};
use signals::{delivered_share, queue_wait_ms, sent_per_sec};
use trouble::Trouble;

/// Signals older than this (ms) are stale: the rate holds at its last safe value.
pub const SIGNALS_STALE_MS: u64 = 3_000;
/// After this long (ms) without fresh signals the rate falls to `min`.
pub const SIGNALS_LOST_MS: u64 = 10_000;
/// Fewest requests in a window for its latency and error rate to count as evidence.
pub const MIN_REQUESTS: u64 = 10;
/// How long (ms) the rate holds after a cut while the origin drains its backlog.
pub const SETTLE_MS: u64 = 2_000;
/// How long (ms) before a reading was taken the load it measured was offered: the window's
/// newest second ends up to a second before the reading, and an admitted shopper's request
/// reaches the origin a moment after the admission. The origin's capacity is read against the
/// rate in force then, not the rate now, which the loop may already have moved.
pub const OFFER_LAG_MS: u64 = 1_000;
/// A trouble point is forgotten once the rate has stayed more than 10% above it for this long
/// (ms) without trouble or a queue: the origin's capacity came back, and only then does the rate
/// rise fast.
pub const FORGET_AFTER_MS: u64 = 3_000;
/// Rise per second well under the targets (a fraction of the rate).
const HEADROOM_RISE_PER_SEC: f64 = 0.08;
/// Rise per second within 10% under a trouble point.
const PROBING_RISE_PER_SEC: f64 = 0.02;
/// Rise per second at or past a trouble point until it is forgotten: the loop sees a backlog a
/// second or two after it starts, so past the last capacity it creeps.
const PAST_TROUBLE_RISE_PER_SEC: f64 = 0.015;
/// Cut on errors over `maxErrorRate`.
const ERROR_CUT: f64 = 0.7;
/// Bounds of the latency cut (× target ÷ p95).
const LATENCY_CUT: (f64, f64) = (0.5, 0.85);
/// Below an overloaded origin's measured capacity by this factor, so its backlog drains.
const DRAIN: f64 = 0.8;
/// An overloaded origin's rate goes at least this far under its capacity (× target ÷ p95
/// between this and [`DRAIN`]: the further over the target, the bigger the backlog to drain).
const DEEPEST_DRAIN: f64 = 0.5;
/// Under this share of what it was sent answered over the last [`STEADY_READINGS`], an origin
/// under its targets is at its capacity: the rate holds. Lower than [`OVERLOADED_SHARE`]: at a
/// few dozen requests a second three readings' counts differ by several percent at any load.
const AT_CAPACITY_SHARE: f64 = 0.9;
/// Over this share of what it is sent answered, an origin's backlog is draining.
const DRAINING_SHARE: f64 = 1.1;
/// How long (ms) after a cut the rate may hold while the backlog drains: a cut that left the
/// rate only just under a capacity the lag overstated drains it too slowly to wait for.
const DRAINING_HOLD_MS: u64 = 10_000;
/// A backlog counted in flight holds the rate as draining only while, at the pace it shrinks,
/// what waits past the target is gone within this many seconds.
const DRAINED_WITHIN_SECS: f64 = 4.0;
/// The deepest single cut (× the rate), whatever the measured capacity says.
const DEEPEST_CUT: f64 = 0.3;
/// Under this share of the offered load got through, the origin is overloaded and the share
/// measures its capacity.
const OVERLOADED_SHARE: f64 = 0.95;
/// From this share of the latency target a p95 is elevated: a rise from there is a backlog.
const ELEVATED_SHARE: f64 = 0.4;
/// A p95 above the previous second's × this is rising: more than one latency bucket (× 1.19),
/// so a p95 that moves to the next bucket and back is not taken for a backlog.
const RISING: f64 = 1.2;
/// A p95 up on each of two readings and by this over both is climbing: a backlog growing.
const CLIMBING: f64 = 1.2;
/// Fewest answers under a reading for its p95's rise alone to trim the rate (else only a climb
/// over two readings does): with fewer, the p95 is one of the two or three slowest answers.
const ONE_READING_REQUESTS: u64 = 60;
/// From this share of the latency target a rising p95 trims the rate.
const RISING_FROM_SHARE: f64 = 0.6;
/// The trim on a rising p95.
const RISING_TRIM: f64 = 0.95;
/// On a forming backlog the rate goes at most to this share of the offered rate (it is just past
/// the capacity), so the backlog drains before the p95 reaches the target.
const RISING_TO_OFFERED: f64 = 0.9;
/// Under this share of the latency target the origin has headroom; between it and the target
/// the rate holds while the p95 does not grow.
const HEADROOM_SHARE: f64 = 0.8;
/// Trouble points remembered: the newest, and higher ones from before (a point within 10% of a
/// new one, or under it, is replaced by it).
const TROUBLE_POINTS: usize = 4;
/// A p95 between this and 1 × the one before is steady.
const STEADY: f64 = 0.95;
/// Near a trouble point, a p95 under this share of the lowest one the origin had near it before,
/// for a load at least [`AS_MUCH`] × as high, means its capacity came back: at the same capacity
/// a load as high is never answered that much faster (more than one latency bucket).
const FASTER: f64 = 0.75;
/// See [`FASTER`].
const AS_MUCH: f64 = 0.95;
/// The band under and around a trouble point (× its rate) whose steady readings say how the
/// origin answers there: wide, because after a cut the rate may spend a short halved phase far
/// under the point.
const NEAR: (f64, f64) = (0.5, 1.1);
/// A reading that sent over this × the mean of the ones before it is a burst.
const BURST: f64 = 1.3;
/// Readings a steady share of what got through is taken over.
const STEADY_READINGS: usize = 3;
/// How long (ms) the lowest p95 of the readings is kept as the origin's latency with no queue:
/// long enough to hold a quiet second, short enough to follow a capacity that fell (a slower
/// origin answers slower at any load).
const FLOOR_MS: u64 = 10_000;
/// A p95 this many times its floor, and from [`RISING_FROM_SHARE`] of the target, is queueing:
/// the origin is near its limit, and the rate rises slowly.
const QUEUEING: f64 = 1.5;
/// A p95 over this many times its floor is in a higher latency bucket (they are 19% apart): on
/// enough answers, a queue forming, which keeps a passed trouble point from being forgotten.
const ABOVE_FLOOR: f64 = 1.1;
/// Rates in force remembered, one per step or change.
const HISTORY: usize = 16;

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
    /// Where the origin last struggled, newest last.
    troubles: Vec<Trouble>,
    /// When the rate last fell (a cut over a target, or a trim on a rising p95).
    last_cut_ms: Option<u64>,
    /// When the rate last fell for a reading over a target (not a trim).
    last_over_ms: Option<u64>,
    /// The origin's capacity that cut measured (shoppers/s), when it did.
    measured_capacity: Option<f64>,
    /// The p95 of the previous fresh reading, to tell a draining backlog.
    last_p95_ms: Option<f64>,
    /// The p95 of the fresh reading before that.
    before_last_p95_ms: Option<f64>,
    /// When fresh signals were last seen (or the controller started).
    last_fresh_ms: Option<u64>,
    /// When the previous step ran (rises scale with the time since).
    last_step_ms: Option<u64>,
    /// The last readings' time, answers got through and requests sent, oldest first.
    counts: std::collections::VecDeque<(u64, f64, Option<u64>)>,
    /// The rates in force and since when (ms), oldest first.
    history: std::collections::VecDeque<(u64, f64)>,
    /// The last [`FLOOR_MS`] of readings' time and p95 (ms), oldest first.
    p95s: std::collections::VecDeque<(u64, f64)>,
    /// The last reading's time and requests in flight.
    in_flight: Option<(u64, u64)>,
    /// When the last fresh reading judged was taken.
    judged_at_ms: Option<u64>,
    /// A drain of a backlog counted in flight, under way.
    drain: Option<Drain>,
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
        self.in_force(now_ms, rate);
        let decision = self.decide(settings, (min, max), rate, reading, now_ms);
        self.in_force(now_ms, decision.rate);
        decision
    }

    fn decide(
        &mut self,
        settings: &AutoRate,
        (min, max): (f64, f64),
        rate: f64,
        reading: Option<&Reading>,
        now_ms: u64,
    ) -> Decision {
        let elapsed_secs = self
            .last_step_ms
            .map_or(1.0, |then| now_ms.saturating_sub(then) as f64 / 1000.0)
            .min(2.0);
        self.last_step_ms = Some(now_ms);
        let last_fresh = *self.last_fresh_ms.get_or_insert(now_ms);

        let fresh = reading.filter(|r| now_ms.saturating_sub(r.at_ms) <= SIGNALS_STALE_MS);
        let Some(reading) = fresh else {
            if now_ms.saturating_sub(last_fresh) >= SIGNALS_LOST_MS {
                return decision(min, AutoRateReason::SignalsLost);
            }
            let hold = self.last_safe.map_or(rate, |safe| safe.min(rate)).max(min);
            return decision(hold, AutoRateReason::SignalsStale);
        };
        self.last_fresh_ms = Some(now_ms);
        let signals = reading.signals;
        // A reading judged again (no new one came in time): the p95s before it stay as they were.
        let (previous_p95, before_previous_p95) =
            if self.judged_at_ms.replace(reading.at_ms) == Some(reading.at_ms) {
                (self.before_last_p95_ms, None)
            } else {
                let previous = self.last_p95_ms.replace(signals.p95_ms);
                let before = std::mem::replace(&mut self.before_last_p95_ms, previous);
                (previous, before)
            };
        if signals.requests < MIN_REQUESTS {
            return decision(rate, AutoRateReason::LittleTraffic);
        }

        let target = settings.target_p95_ms as f64;
        let floor_p95 = self.p95_floor(reading);
        let share = delivered_share(&signals);
        // Near capacity a second's counts are too noisy to measure a backlog by: the share over
        // the last few readings.
        let steady_share = self.steady_share(reading);
        // The rate whose load the reading measured.
        let offered = self.offered(reading.at_ms, rate);
        // How fast the count in flight grew since the reading before: `None` on the first
        // reading with traffic (a sale opening, a new leader), whose window's requests went out
        // over its second and are partly still on their way.
        let in_flight_growth = self.in_flight_growth(reading);
        // The wait a request sent now will have, by Little's law: what is in flight now ÷ what
        // the origin gets through a second. It is counted as the reading is taken, a second or
        // two before the answers of a growing backlog lift the p95. Not on a first reading: its
        // answers lag what was sent as the traffic starts.
        let in_flight_wait = queue_wait_ms(&signals).filter(|_| in_flight_growth.is_some());
        let wait_ms = in_flight_wait.unwrap_or(0.0);
        // The origin's capacity the growth in flight measures: the offered rate × the share of
        // the requests sent (per second) that did not pile up in flight.
        let sent_per_sec = sent_per_sec(&signals).filter(|_| share.is_some());
        let flow_capacity = in_flight_growth
            .zip(sent_per_sec)
            .filter(|(growth, _)| *growth > 0.0 && signals.in_flight >= MIN_REQUESTS)
            .map(|(growth, sent)| offered * (1.0 - growth / sent).max(DEEPEST_CUT));
        let errors_high = signals.error_rate > settings.max_error_rate;
        let latency_high = signals.p95_ms > target || wait_ms > target;
        let p95_ms = signals.p95_ms.max(wait_ms);
        // A drained backlog: back at once to just under the capacity the drain measured. Its
        // readings of load offered before then judge the drain, not the refill, as after a cut.
        let refill = (!errors_high)
            .then(|| self.refill(&signals, reading.at_ms, (rate, offered), (target, now_ms)))
            .flatten();
        if let Some(refill) = refill {
            self.last_cut_ms = Some(now_ms);
            self.last_over_ms = Some(now_ms);
            return decision(refill.min(max), AutoRateReason::Drained);
        }
        if errors_high || latency_high {
            let draining = self.draining(
                &signals,
                (rate, share),
                in_flight_wait.zip(in_flight_growth),
                target,
            );
            // A burst (far more sent this second than in the ones before: shoppers admitted
            // together reaching the origin together) is not a lower capacity: then the share
            // over the last readings measures it.
            let judged_share = if self.burst() { steady_share } else { share };
            let mut capacity = judged_share
                .filter(|share| *share < OVERLOADED_SHARE)
                .map(|share| offered * share);
            // Over the target on what is in flight, the backlog's growth measures the capacity
            // now, where the answers of the window (a second older) may not show it yet, or
            // show one the origin no longer has: the lower of the two.
            if wait_ms > target {
                let flow = flow_capacity.filter(|capacity| *capacity < offered * OVERLOADED_SHARE);
                capacity = match (capacity, flow) {
                    (Some(counted), Some(flow)) => Some(counted.min(flow)),
                    (counted, flow) => counted.or(flow),
                };
            }
            let judged_share = capacity.map_or(judged_share, |capacity| Some(capacity / offered));
            // A rate still over the capacity this reading measures drains no backlog however
            // long it holds: when the last cut was made before any capacity showed (on what was
            // in flight, or on the first slow answers), this one is sized by it.
            let over_capacity = self.measured_capacity.is_none()
                && capacity.is_some_and(|capacity| rate > capacity);
            // Over on what is in flight alone, a falling p95 is the answers of an older load,
            // not a backlog draining: it holds nothing.
            let in_flight_only = wait_ms > target && signals.p95_ms <= target;
            let stale = !errors_high && answers_stale(&signals, in_flight_growth, target);
            if !over_capacity
                && (stale
                    || self.settling(
                        now_ms,
                        reading.at_ms,
                        signals.p95_ms,
                        previous_p95.filter(|_| !in_flight_only),
                        draining,
                    ))
            {
                return decision(rate, AutoRateReason::Settling);
            }
            let (factor, reason) = if errors_high {
                (ERROR_CUT, AutoRateReason::ErrorsHigh)
            } else {
                let factor = (target / p95_ms).clamp(LATENCY_CUT.0, LATENCY_CUT.1);
                (factor, AutoRateReason::LatencyHigh)
            };
            let mut cut = rate * factor;
            if let Some((capacity, share)) = capacity.zip(judged_share) {
                // The further over the target, the bigger the backlog: drain it faster. And the
                // further the offered load was over the capacity, the more of it is still on its
                // way (admitted in the second or two the loop saw late) while the p95 has only
                // begun to rise: go under the capacity by at least that share, so the origin
                // answers clearly more than it is sent and the backlog drains, not cut twice.
                let by_latency = if latency_high {
                    (target / p95_ms).clamp(DEEPEST_DRAIN, DRAIN)
                } else {
                    DRAIN
                };
                let drain = by_latency.min(share.max(DEEPEST_DRAIN));
                cut = cut.min(capacity * drain).max(rate * DEEPEST_CUT);
                // Where what is in flight is counted, the backlog is known: drain it, then
                // refill (see [`drain`]).
                let backlog = in_flight_growth
                    .filter(|_| in_flight_wait.is_some() && !errors_high)
                    .map(|growth| Backlog {
                        capacity,
                        offered,
                        growth,
                    });
                cut = self.drain_cut(&signals, backlog, (rate, cut, min), (target, now_ms));
            } else {
                self.drain = None;
            }
            self.troubled(capacity.unwrap_or(offered), now_ms);
            self.last_over_ms = Some(now_ms);
            self.measured_capacity = capacity;
            let cut = cut.max(min);
            self.last_safe = Some(self.last_safe.map_or(cut, |safe| safe.min(cut)));
            return decision(cut, reason);
        }

        self.last_safe = Some(rate);
        if just_after(self.last_cut_ms, now_ms, reading.at_ms) {
            return decision(rate, AutoRateReason::Settling);
        }
        let growth = previous_p95.map_or(1.0, |previous| signals.p95_ms / previous.max(1.0));
        let rising = rising(
            &signals,
            (previous_p95, before_previous_p95),
            in_flight_wait,
            target,
        );
        if rising {
            // A backlog is forming at this rate: the origin is just past its capacity, which
            // the share of the load it got through measures when the signals say what was sent.
            let trim = (rate * RISING_TRIM).min(offered * RISING_TO_OFFERED);
            self.troubled(offered * RISING_TRIM, now_ms);
            return decision(trim.max(min), AutoRateReason::LatencyRising);
        }
        let settled = self
            .last_cut_ms
            .is_none_or(|cut| now_ms.saturating_sub(cut) >= 2 * SETTLE_MS);
        // Neither just cut nor draining (4 s or more after a cut, the p95 not falling by more
        // than 5%): the p95 says how the origin answers this load; a bucket or more above its
        // floor (on enough answers for one reading's p95 to count), with a queue.
        let steady = settled && previous_p95.is_some() && growth >= STEADY;
        let queueing =
            signals.requests >= ONE_READING_REQUESTS && signals.p95_ms > floor_p95 * ABOVE_FLOOR;
        self.heard(rate, (offered, signals.p95_ms), (steady, queueing), now_ms);
        if signals.p95_ms >= target * HEADROOM_SHARE {
            return decision(rate, AutoRateReason::AtTarget);
        }
        // The origin gets through clearly less than it is sent: a backlog is forming that the p95
        // does not show yet (at a few dozen answers a second it moves in whole buckets, and the
        // first second past the capacity still answers fast). Rising would add to it.
        if steady_share.is_some_and(|share| share < AT_CAPACITY_SHARE) {
            return decision(rate, AutoRateReason::AtCapacity);
        }
        if rate >= max {
            return decision(max, AutoRateReason::AtMax);
        }
        // Queueing (the p95 1.5× its floor of the last seconds, and from 60% of the target): the
        // origin is near its limit, where a backlog shows only a second or two late (and at a
        // few dozen answers a second, in whole buckets), so the rate creeps there.
        let near_limit =
            signals.p95_ms >= target * RISING_FROM_SHARE && signals.p95_ms >= floor_p95 * QUEUEING;
        let (per_sec, reason) = match self.probing(rate) {
            Some(per_sec) => (per_sec, AutoRateReason::Probing),
            None if near_limit => (PROBING_RISE_PER_SEC, AutoRateReason::Probing),
            None => (HEADROOM_RISE_PER_SEC, AutoRateReason::Headroom),
        };
        // At least 1/s a second well under the targets (a rate of 3/s rises too), less when
        // probing.
        let floor = elapsed_secs * per_sec / HEADROOM_RISE_PER_SEC;
        let risen = (rate * (1.0 + per_sec * elapsed_secs)).max(rate + floor);
        decision(risen.min(max), reason)
    }
}

fn decision(rate: f64, reason: AutoRateReason) -> Decision {
    Decision { rate, reason }
}

#[cfg(test)]
mod tests;
