//! What one reading's signals say by themselves: the share of what was sent that got through,
//! and the wait in flight.

use vestibule_shared::auto_rate::OriginSignals;

use super::MIN_REQUESTS;

/// The wait (ms) a request sent now will have at the origin, by Little's law: the requests in
/// flight ÷ those the origin answered without error in the window, taken as a second's worth
/// (the window is one second at 30 answers a second or more; over a longer one this is under
/// the wait, on the safe side). Requests ÷ requests, so it holds however many requests a
/// shopper makes. `None` when the signals do not say what was sent, or fewer than
/// [`MIN_REQUESTS`] are in flight (a few requests admitted together are not a backlog).
pub(super) fn queue_wait_ms(signals: &OriginSignals) -> Option<f64> {
    signals.sent?;
    if signals.in_flight < MIN_REQUESTS {
        return None;
    }
    let answered = signals.requests as f64 * (1.0 - signals.error_rate);
    Some(signals.in_flight as f64 / answered.max(1.0) * 1e3)
}

/// The share of the requests sent in the window that the origin answered without error
/// (`requests × (1 − errorRate) ÷ sent`); `None` when the signals do not say what was sent or it
/// was too little to judge.
pub(super) fn delivered_share(signals: &OriginSignals) -> Option<f64> {
    let sent = signals.sent.filter(|sent| *sent >= MIN_REQUESTS)?;
    let answered = signals.requests as f64 * (1.0 - signals.error_rate);
    Some(answered / sent as f64)
}
