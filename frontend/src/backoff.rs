//! Exponential back-off with jitter for a lost connection, honouring `Retry-After`.
//!
//! Two ceilings: a server that answers with an error is busy or failing, and thousands of pages
//! coming back at once would hurt it, so those waits grow to 30 s. A missing answer (a cut or
//! hung link) costs the server nothing, and a shopper whose link comes back must see their turn
//! within seconds, so those waits stop at 6 s.

use std::time::Duration;

/// First retry waits between half of this and this.
const BASE_MS: f64 = 1_000.0;
/// No retry after an error answer waits longer than this (unless `Retry-After` asks for more).
const CAP_MS: f64 = 30_000.0;
/// No retry after a missing answer (network error, timeout) waits longer than this.
const NO_ANSWER_CAP_MS: f64 = 6_000.0;

/// Consecutive failed attempts, turned into the wait before the next one.
#[derive(Debug, Default, Clone)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// How long to wait before retrying after one more failure.
    ///
    /// The ceiling doubles per failure (1 s, 2 s, 4 s … 30 s) and the wait is drawn from its
    /// upper half, so thousands of shoppers cut off at once do not come back at the same instant.
    /// `random` is uniform in `[0, 1)`; `retry_after` is a floor; `server_answered` picks the
    /// ceiling (30 s after an error answer, 6 s after none).
    pub fn next_delay(
        &mut self,
        random: f64,
        retry_after: Option<Duration>,
        server_answered: bool,
    ) -> Duration {
        let cap = if server_answered {
            CAP_MS
        } else {
            NO_ANSWER_CAP_MS
        };
        let ceiling = (BASE_MS * 2f64.powi(self.failures.min(16) as i32)).min(cap);
        self.failures = self.failures.saturating_add(1);
        let jittered = ceiling / 2.0 + random.clamp(0.0, 1.0) * ceiling / 2.0;
        let delay = Duration::from_millis(jittered as u64);
        retry_after.map_or(delay, |floor| delay.max(floor))
    }

    /// Forgets the failures after a success.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_within_jitter_and_stop_at_the_cap() {
        let mut low = Backoff::default();
        let mut high = Backoff::default();
        let lows: Vec<u64> = (0..8)
            .map(|_| low.next_delay(0.0, None, true).as_millis() as u64)
            .collect();
        let highs: Vec<u64> = (0..8)
            .map(|_| high.next_delay(0.999_999, None, true).as_millis() as u64)
            .collect();
        assert_eq!(
            lows,
            [500, 1_000, 2_000, 4_000, 8_000, 15_000, 15_000, 15_000]
        );
        assert_eq!(
            highs,
            [999, 1_999, 3_999, 7_999, 15_999, 29_999, 29_999, 29_999]
        );
    }

    #[test]
    fn retry_after_is_a_floor_and_reset_starts_over() {
        let mut backoff = Backoff::default();
        let floor = Duration::from_secs(10);
        assert_eq!(backoff.next_delay(0.5, Some(floor), true), floor);
        backoff.reset();
        assert_eq!(
            backoff.next_delay(0.0, None, true),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn a_missing_answer_is_retried_within_six_seconds() {
        let mut backoff = Backoff::default();
        let delays: Vec<u64> = (0..6)
            .map(|_| backoff.next_delay(0.999_999, None, false).as_millis() as u64)
            .collect();
        assert_eq!(delays, [999, 1_999, 3_999, 5_999, 5_999, 5_999]);
    }
}
