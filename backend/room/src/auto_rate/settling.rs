//! When a reading over a target holds the rate instead of cutting it: a cut too recent for the
//! reading to show it, or a backlog still draining.

use super::{Controller, DRAINING_HOLD_MS, OFFER_LAG_MS, SETTLE_MS};

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

/// The move at `moved_ms` is under [`SETTLE_MS`] old, or the reading was measured before it took
/// effect (its load was offered before the move, a second of window after it not yet seen).
pub(super) fn just_after(moved_ms: Option<u64>, now_ms: u64, reading_at_ms: u64) -> bool {
    moved_ms.is_some_and(|moved| {
        now_ms.saturating_sub(moved) < SETTLE_MS || reading_at_ms < moved + OFFER_LAG_MS + 1_000
    })
}
