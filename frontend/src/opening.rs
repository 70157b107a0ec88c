//! Before a room takes joins (409 `room_not_open`): when the page joins by itself, and the
//! "Opens at 09:00 (in 12 min)" words of the waiting view's countdown.
//!
//! The join waits for the opening, read from the shopper's clock
//! where it agrees with the server's `Retry-After` (whole seconds, rounded up), else from
//! `Retry-After` alone (never early whatever the clock says), plus a short lead and a jitter,
//! so thousands of pages that waited together join over [`JITTER_MS`], not in one millisecond,
//! and each within about a second of the opening.

use crate::i18n::{minutes_words, Lang};

/// Longest single wait: a page asks again at least this often (the server caps `Retry-After`
/// there too, and an operator may move the opening meanwhile).
pub const MAX_WAIT_MS: f64 = 300_000.0;
/// Joins start this long after the opening at the earliest: a clock a hair early is not refused.
pub const LEAD_MS: f64 = 100.0;
/// Joins spread over this much after the lead.
pub const JITTER_MS: f64 = 900.0;
/// The wait when the answer named neither a time nor `Retry-After`.
const NO_HINT_MS: f64 = 30_000.0;

/// Milliseconds from `now_ms` to the join: `joins_at_ms` is when joins start by the body's
/// times (Unix ms), `retry_after_secs` the server's `Retry-After`, `random` in [0, 1).
pub fn join_delay_ms(
    now_ms: f64,
    joins_at_ms: Option<f64>,
    retry_after_secs: Option<u64>,
    random: f64,
) -> u64 {
    let by_clock = joins_at_ms.map(|at| (at - now_ms).max(0.0));
    let wait = match (by_clock, retry_after_secs) {
        (Some(clock), Some(secs)) => {
            // The server rounds its wait up: the true wait lies in (secs − 1, secs] seconds.
            let latest = secs as f64 * 1000.0;
            if clock > latest - 1000.0 && clock <= latest {
                clock
            } else {
                latest
            }
        }
        (Some(clock), None) => clock,
        (None, Some(secs)) => secs as f64 * 1000.0,
        (None, None) => NO_HINT_MS,
    };
    let jitter = random.clamp(0.0, 1.0) * JITTER_MS;
    // Only a wait that ends at the opening gets the lead and jitter; a long one is a re-check.
    if wait >= MAX_WAIT_MS {
        return (MAX_WAIT_MS + jitter) as u64;
    }
    (wait + LEAD_MS + jitter) as u64
}

/// `"Opens at 09:00 (in 12 min)"` / `"09:00 오픈 (12분 후)"`: the local time `hour`:`minute`
/// and the whole minutes left, rounded up.
pub fn opens_at_words(lang: Lang, (hour, minute): (u32, u32), left_ms: f64) -> String {
    let minutes = (left_ms.max(0.0) / 60_000.0).ceil() as u64;
    let left = minutes_words(lang, minutes.max(1));
    match lang {
        Lang::En => format!("Opens at {hour:02}:{minute:02} (in {left})"),
        Lang::Ko => format!("{hour:02}:{minute:02} 오픈 ({left} 후)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_that_agrees_with_retry_after_times_the_join_to_the_millisecond() {
        // 2.4 s to go: the server says 3 s, the clock 2,400 ms; both agree.
        let delay = join_delay_ms(1_000.0, Some(3_400.0), Some(3), 0.0);
        assert_eq!(delay, 2_400 + LEAD_MS as u64);
        let latest = join_delay_ms(1_000.0, Some(3_400.0), Some(3), 0.999_999);
        assert!(
            latest < 2_400 + 1_000,
            "within a second of the opening: {latest}"
        );
    }

    #[test]
    fn a_wrong_clock_falls_back_to_retry_after_and_is_never_early() {
        // A clock ten minutes late thinks the opening passed; one ten minutes early, that it is
        // far off: both follow the server's 3 s.
        for joins_at in [-600_000.0, 603_000.0] {
            let delay = join_delay_ms(0.0, Some(joins_at), Some(3), 0.0);
            assert_eq!(delay, 3_000 + LEAD_MS as u64, "{joins_at}");
        }
        assert_eq!(join_delay_ms(0.0, None, Some(1), 0.5), 1_550);
    }

    #[test]
    fn jitter_spreads_the_joins_and_long_waits_become_re_checks() {
        let early = join_delay_ms(0.0, Some(10_000.0), Some(10), 0.0);
        let late = join_delay_ms(0.0, Some(10_000.0), Some(10), 0.99);
        assert!(late - early >= 800, "{early}..{late}");
        assert!(late <= 10_000 + 1_000);
        // Two hours off, `Retry-After` capped at 300 s by the page: ask again in 5 minutes.
        let check = join_delay_ms(0.0, Some(7_200_000.0), Some(300), 0.0);
        assert_eq!(check, MAX_WAIT_MS as u64);
        let no_header = join_delay_ms(0.0, Some(7_200_000.0), None, 0.0);
        assert_eq!(no_header, MAX_WAIT_MS as u64);
        assert_eq!(join_delay_ms(0.0, None, None, 0.0), 30_100);
    }

    #[test]
    fn the_opening_reads_as_local_time_and_minutes_left() {
        let words = opens_at_words(Lang::En, (9, 5), 11.5 * 60_000.0);
        assert_eq!(words, "Opens at 09:05 (in 12 min)");
        assert_eq!(
            opens_at_words(Lang::Ko, (21, 0), 90.0 * 60_000.0),
            "21:00 오픈 (1시간 30분 후)"
        );
        assert_eq!(
            opens_at_words(Lang::En, (0, 0), 500.0),
            "Opens at 00:00 (in 1 min)"
        );
    }
}
