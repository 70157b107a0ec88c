//! What one reading's signals say by themselves: the share of what was sent that got through,
//! the pace of answers and sends, and the wait in flight.

use vestibule_shared::auto_rate::OriginSignals;

use super::MIN_REQUESTS;

/// Seconds the signals' counts span: their `windowSecs`, one when they do not say (a
/// storefront's report of one second's counts).
pub(super) fn window_secs(signals: &OriginSignals) -> f64 {
    signals.window_secs.unwrap_or(1).max(1) as f64
}

/// Requests the origin answered without error a second over the window.
pub(super) fn answered_per_sec(signals: &OriginSignals) -> f64 {
    signals.requests as f64 * (1.0 - signals.error_rate) / window_secs(signals)
}

/// Requests sent to the origin a second over the window, when the signals count them.
pub(super) fn sent_per_sec(signals: &OriginSignals) -> Option<f64> {
    signals.sent.map(|sent| sent as f64 / window_secs(signals))
}

/// The wait (ms) a request sent now will have at the origin, by Little's law: the requests in
/// flight ÷ those the origin answers without error a second. Requests ÷ requests, so it holds
/// however many requests a shopper makes. `None` when the signals do not say what was sent, or
/// fewer than [`MIN_REQUESTS`] are in flight (a few requests admitted together are not a
/// backlog).
pub(super) fn queue_wait_ms(signals: &OriginSignals) -> Option<f64> {
    signals.sent?;
    if signals.in_flight < MIN_REQUESTS {
        return None;
    }
    Some(wait_now_ms(signals))
}

/// The wait (ms) of what is in flight now at the pace the origin answers, however few are in
/// flight.
pub(super) fn wait_now_ms(signals: &OriginSignals) -> f64 {
    // At least one answer over the window: a stalled origin's wait is long, not infinite.
    let answered = answered_per_sec(signals).max(1.0 / window_secs(signals));
    signals.in_flight as f64 / answered * 1e3
}

/// The share of the requests sent in the window that the origin answered without error
/// (`requests × (1 − errorRate) ÷ sent`); `None` when the signals do not say what was sent or it
/// was too little to judge.
pub(super) fn delivered_share(signals: &OriginSignals) -> Option<f64> {
    let sent = signals.sent.filter(|sent| *sent >= MIN_REQUESTS)?;
    let answered = signals.requests as f64 * (1.0 - signals.error_rate);
    Some(answered / sent as f64)
}
