//! When a p95 still under the target is rising: a backlog forming at a rate just past the
//! origin's capacity, which a trim of the rate drains before the p95 reaches the target.

use vestibule_shared::auto_rate::OriginSignals;

use super::{
    CLIMBING, ELEVATED_SHARE, HEADROOM_SHARE, ONE_READING_REQUESTS, RISING, RISING_FROM_SHARE,
};

/// Whether `signals`' p95 (ms) is rising from the `previous` and `before_previous` readings'
/// toward `target_ms`, with `in_flight_wait` (ms) the wait of what is in flight, when known.
pub(super) fn rising(
    signals: &OriginSignals,
    (previous_p95, before_previous_p95): (Option<f64>, Option<f64>),
    in_flight_wait: Option<f64>,
    target_ms: f64,
) -> bool {
    let growth = previous_p95.map_or(1.0, |previous| signals.p95_ms / previous.max(1.0));
    // Latency alone counts only from an elevated p95 (the previous reading's at 40% of the
    // target or more): a single burst of requests lifts one second's p95 from a low base, and
    // trimming on it would ratchet the rate down. A backlog grows for seconds.
    let elevated = previous_p95.is_some_and(|previous| previous >= target_ms * ELEVATED_SHARE);
    // Up on each of the last two readings, by more than a latency bucket over the two: a
    // backlog growing slowly (the rate a few percent past capacity) shows so before a single
    // second's rise does.
    let climbing = match (previous_p95, before_previous_p95) {
        (Some(previous), Some(before)) => {
            signals.p95_ms > previous && previous > before && signals.p95_ms > before * CLIMBING
        }
        _ => false,
    };
    // One reading's rise counts only when its p95 stands on enough answers: of a few dozen it is
    // one of the two or three slowest, which a clump of checkouts admitted together moves by
    // buckets at half the capacity.
    // Nor when what is in flight waits no more than a bucket longer than the answers took: no
    // queue is forming now (an origin whose every answer takes about as long moves its p50 and
    // p95 by a whole bucket, 19%, without one).
    let queue_now = in_flight_wait.is_none_or(|wait| wait > signals.p50_ms * RISING);
    let judged = signals.requests >= ONE_READING_REQUESTS && queue_now;
    elevated
        && (climbing
            || (judged
                && ((signals.p95_ms >= target_ms * HEADROOM_SHARE && growth > 1.0)
                    || (signals.p95_ms >= target_ms * RISING_FROM_SHARE && growth > RISING))))
}
