//! Draining a backlog counted in flight, then refilling. When a cut over the latency target
//! measures the origin's capacity and counts what is in flight, the backlog is known: the
//! requests waiting past [`HEADROOM_SHARE`] of the target, and those still on their way from
//! the rate the loop saw late. The rate goes under the capacity by as much as drains that
//! backlog within [`DRAIN_SECS`] (however deep: a drain is short), and once what is in flight
//! waits no longer than that share of the target, it returns at once to [`REFILL`] × what the
//! origin answers a second (at most the capacity the cut measured), instead of climbing back
//! from the drain's depth at 8% a second.
//!
//! A drain only as deep as the × 0.3 floor of an ordinary cut takes 5–10 s to empty a backlog
//! of one or two seconds of a halved capacity, and the p95 stays over the target all along.
//!
//! A drain is planned only on a reading of [`ONE_SECOND_REQUESTS`] answers or more, whose
//! window is one second at a steady pace: a trickle's window spans several seconds (see
//! [`super::window`]), whose answers are of loads offered seconds apart.

use vestibule_shared::auto_rate::OriginSignals;

use super::signals::{answered_per_sec, delivered_share, queue_wait_ms, sent_per_sec};
use super::window::ENOUGH_REQUESTS;
use super::{Controller, HEADROOM_SHARE, MIN_REQUESTS, OFFER_LAG_MS};

/// Seconds a backlog counted in flight is drained within: one, as short as the loop's step.
/// Over two, the bench's halving held the p95 over the target for 3–7 s; over one, 2–3 s.
const DRAIN_SECS: f64 = 1.0;
/// The deepest a drain goes (× the rate before it), whatever the backlog: a count in flight
/// that jumps (a replica joining) must not stop admission.
const DEEPEST_DRAIN_CUT: f64 = 0.1;
/// The share of the measured capacity a drained origin is refilled to: under it by as much as
/// the lag may have overstated it (a capacity read on a window that straddled the change).
const REFILL: f64 = 0.85;
/// Fewest answers in the cut's reading for a drain: at a steady pace a window of this many is
/// one second long (it stops adding seconds at [`ENOUGH_REQUESTS`]).
const ONE_SECOND_REQUESTS: u64 = 2 * ENOUGH_REQUESTS;
/// How far (shoppers/s) the rate may be from the drain's and the drain still be the loop's: the
/// room keeps its rate to a tenth.
const SAME_RATE: f64 = 0.1;
/// How long (ms) after the drain began a refill may still come: past it the backlog did not
/// drain as planned, and the rate rises as after any cut.
const REFILL_WITHIN_MS: u64 = 8_000;

/// A drain under way: when it began, at what rate (shoppers/s), the capacity the cut measured
/// (shoppers/s) and the requests sent per shopper offered then (to read a later answered count
/// in shoppers).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Drain {
    began_ms: u64,
    rate: f64,
    capacity: f64,
    per_shopper: f64,
}

/// What a reading says of the backlog, and where the loop admits from.
pub(super) struct Backlog {
    /// The capacity a cut measured, shoppers/s.
    pub(super) capacity: f64,
    /// The rate whose load the reading measured, shoppers/s.
    pub(super) offered: f64,
    /// How fast the count in flight grew, requests/s (negative while it shrinks).
    pub(super) growth: f64,
}

/// The rate (shoppers/s) that drains the backlog `signals` count in flight within
/// [`DRAIN_SECS`]: the capacity less the backlog's shoppers spread over those seconds. The
/// backlog is what is in flight past the requests the origin answers in [`HEADROOM_SHARE`] of
/// `target_ms`, and what still arrives for [`OFFER_LAG_MS`] at the pace it grows now (the
/// shoppers admitted before the cut). Requests are turned into shoppers by the requests sent per
/// shopper offered. `None` when the signals do not count what was sent and what is in flight, or
/// nothing waits past that share of the target.
fn drain_rate(signals: &OriginSignals, backlog: &Backlog, target_ms: f64) -> Option<f64> {
    let wait_ms = queue_wait_ms(signals)?;
    signals.sent.filter(|sent| *sent >= MIN_REQUESTS)?;
    let sent = sent_per_sec(signals)?;
    if backlog.offered <= 0.0 {
        return None;
    }
    let per_shopper = per_shopper(sent, backlog.offered);
    let waiting = signals.in_flight as f64 * (1.0 - target_ms * HEADROOM_SHARE / wait_ms.max(1.0));
    let arriving = backlog.growth.max(0.0) * OFFER_LAG_MS as f64 / 1000.0;
    let excess = waiting + arriving;
    (waiting > 0.0).then(|| backlog.capacity - excess / per_shopper / DRAIN_SECS)
}

/// Requests sent per shopper offered: `sent` requests a second at `offered` shoppers/s.
fn per_shopper(sent: f64, offered: f64) -> f64 {
    sent / offered.max(1e-9)
}

/// Whether the `in_flight` requests wait no longer than [`HEADROOM_SHARE`] of `target_ms` at
/// `through` requests answered a second: a drained backlog.
fn drained(in_flight: u64, through: f64, target_ms: f64) -> bool {
    in_flight as f64 / through.max(1e-9) * 1e3 <= target_ms * HEADROOM_SHARE
}

impl Controller {
    /// The cut once the backlog is known: the lower of `cut` and the rate that drains it (see
    /// [`drain_rate`]), not under [`DEEPEST_DRAIN_CUT`] × `rate` nor `min`. A drain deeper than
    /// the refill plans one, replacing any under way; a cut with no `backlog`, or on a reading
    /// of fewer than [`ONE_SECOND_REQUESTS`] answers, drops it.
    pub(super) fn drain_cut(
        &mut self,
        signals: &OriginSignals,
        backlog: Option<Backlog>,
        (rate, cut, min): (f64, f64, f64),
        (target_ms, now_ms): (f64, u64),
    ) -> f64 {
        self.drain = None;
        let Some(backlog) = backlog.filter(|_| signals.requests >= ONE_SECOND_REQUESTS) else {
            return cut;
        };
        let Some(drain_to) = drain_rate(signals, &backlog, target_ms) else {
            return cut;
        };
        let cut = cut.min(drain_to.max(rate * DEEPEST_DRAIN_CUT)).max(min);
        self.drain = sent_per_sec(signals)
            .filter(|_| backlog.capacity * REFILL > cut)
            .map(|sent| Drain {
                began_ms: now_ms,
                rate: cut,
                capacity: backlog.capacity,
                per_shopper: per_shopper(sent, backlog.offered),
            });
        cut
    }

    /// The rate to refill to, when a drain is under way, a reading taken after it began counts
    /// its backlog gone, and that rate is above `rate`: [`REFILL`] × what the origin answers a
    /// second (working through the backlog, it answers at its capacity), in shoppers, at most
    /// the capacity the cut measured (a window that straddled the change overstates it).
    ///
    /// What the origin answers a second is the lowest of three readings, each of which runs
    /// high in its own case: the answers a second (a report that does not say its window spans
    /// several seconds), the share of what was sent × what the `offered` rate sends (a window
    /// that straddles a change of rate), and the capacity the cut measured.
    ///
    /// A drain is given up past [`REFILL_WITHIN_MS`], once the rate is no longer the drain's
    /// (an operator's change, or a rise), and once its backlog is gone.
    pub(super) fn refill(
        &mut self,
        signals: &OriginSignals,
        reading_at_ms: u64,
        (rate, offered): (f64, f64),
        (target_ms, now_ms): (f64, u64),
    ) -> Option<f64> {
        let drain = self.drain?;
        if now_ms.saturating_sub(drain.began_ms) > REFILL_WITHIN_MS
            || (rate - drain.rate).abs() > SAME_RATE
        {
            self.drain = None;
            return None;
        }
        signals.sent?;
        let answered = answered_per_sec(signals);
        let mut through = answered.min(drain.capacity * drain.per_shopper);
        if let Some(share) = delivered_share(signals) {
            through = through.min(share * offered * drain.per_shopper);
        }
        if reading_at_ms <= drain.began_ms || !drained(signals.in_flight, through, target_ms) {
            return None;
        }
        self.drain = None;
        let refill = REFILL * through / drain.per_shopper.max(1e-9);
        (refill > rate).then_some(refill)
    }
}
