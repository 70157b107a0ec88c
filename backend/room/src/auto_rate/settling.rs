//! When a reading over a target holds the rate instead of cutting it: a cut too recent for the
//! reading to show it, or a backlog still draining.

use vestibule_shared::auto_rate::OriginSignals;

use super::signals::wait_now_ms;
use super::{
    Controller, DRAIN, DRAINED_WITHIN_SECS, DRAINING_HOLD_MS, DRAINING_SHARE, HEADROOM_SHARE,
    OFFER_LAG_MS, SETTLE_MS,
};

impl Controller {
    /// Just cut over a target (see [`just_after`]), or the backlog the old rate left is still
    /// draining after a cut or a trim: the latency falls fast or the origin answers clearly more
    /// than it is sent (`draining`). A trim alone does not hold a cut: it takes 5–10% off a rate
    /// the origin is just past, so a reading over the target after it is a backlog the trim
    /// cannot drain (a capacity that fell), and waiting for the trim's readings lets it grow.
    pub(super) fn settling(
        &self,
        now_ms: u64,
        reading_at_ms: u64,
        p95_ms: f64,
        previous_p95_ms: Option<f64>,
        draining: bool,
    ) -> bool {
        let Some(cut) = self.last_cut_ms else {
            return false;
        };
        let since = now_ms.saturating_sub(cut);
        just_after(self.last_over_ms, now_ms, reading_at_ms)
            || (draining && since < DRAINING_HOLD_MS)
            || (since < 4 * SETTLE_MS
                && previous_p95_ms.is_some_and(|previous| p95_ms < previous * 0.9))
    }
}

impl Controller {
    /// Whether the origin's backlog is draining, by a reading over a target: it answers clearly
    /// more than it is sent (`share` of it; an origin merely slow at any load answers what it is
    /// sent), though the p95 may still grow meanwhile (the answers coming out are the ones that
    /// waited longest). So it is, too, when it answers at least what it is sent at a `rate`
    /// already under the capacity the last cut measured by the margin that cut chose: the
    /// backlog drains as that cut planned, and another cut for the answers still coming out of
    /// it would halve the rate twice for one overload.
    ///
    /// Where what is in flight is counted (`in_flight`: the wait in flight, ms, and how fast the
    /// count grows, requests/s), that count alone says it: it falls fast enough for what waits
    /// past `target_ms` to be gone within [`DRAINED_WITHIN_SECS`] (a cut that left the rate only
    /// just under a capacity the lag overstated drains it at a few requests a second).
    pub(super) fn draining(
        &self,
        signals: &OriginSignals,
        (rate, share): (f64, Option<f64>),
        in_flight: Option<(f64, f64)>,
        target_ms: f64,
    ) -> bool {
        // Counted in flight, the backlog's own pace says it: the window's share is a second
        // older, and a sent count still holds the shoppers admitted before the cut whose
        // requests come late.
        if let Some((wait_ms, growth)) = in_flight {
            let excess = signals.in_flight as f64 * (1.0 - target_ms / wait_ms.max(1.0));
            return growth < 0.0 && excess <= -growth * DRAINED_WITHIN_SECS;
        }
        let under_measured = self
            .measured_capacity
            .is_some_and(|capacity| rate <= capacity * DRAIN);
        share.is_some_and(|share| share >= DRAINING_SHARE || (under_measured && share >= 1.0))
    }
}

/// Whether a reading over the latency target stands on answers older than what is in flight:
/// its window spans two seconds or more (a trickle: see [`super::window::ENOUGH_REQUESTS`]),
/// and what is in flight now, not growing (`growth`, requests/s, when known), waits under
/// [`HEADROOM_SHARE`] of `target_ms` at the pace the origin answers. The slow answers are then
/// a backlog's that has drained since: answered over the window's seconds, they were sent
/// before it, and a cut for them would cut the same overload again. An origin slow at any load
/// keeps as much in flight as its answers take (Little's law), so its wait now is as long.
pub(super) fn answers_stale(signals: &OriginSignals, growth: Option<f64>, target_ms: f64) -> bool {
    signals.window_secs.is_some_and(|secs| secs >= 2)
        && growth.is_none_or(|growth| growth <= 0.0)
        && wait_now_ms(signals) <= target_ms * HEADROOM_SHARE
}

/// The move at `moved_ms` is under [`SETTLE_MS`] old, or the reading was measured before it took
/// effect (its load was offered before the move, a second of window after it not yet seen).
pub(super) fn just_after(moved_ms: Option<u64>, now_ms: u64, reading_at_ms: u64) -> bool {
    moved_ms.is_some_and(|moved| {
        now_ms.saturating_sub(moved) < SETTLE_MS || reading_at_ms < moved + OFFER_LAG_MS + 1_000
    })
}
