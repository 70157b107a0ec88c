//! The last few seconds of requests the guard passed to the inner service, in per-second
//! buckets of fixed size (counts and a latency histogram), read as [`OriginSignals`].
//!
//! The reading keeps the semantics of Vestibule's gate mode, which measures the requests it
//! forwards the same way (docs/DESIGN.md "Closed-loop admission"), so the room's loop reads a
//! guard's report and the gate's measurements alike: a request counts as sent in the second it
//! was passed in and as answered in the second its answer came; the reading takes the newest
//! complete seconds until they hold [`ENOUGH_ANSWERS`] (at most [`WINDOW_SECS`]), leaving out
//! the current, partial second; percentiles are read at a histogram bucket's upper bound.

use super::OriginSignals;

/// How far back a reading looks at most, seconds.
pub const WINDOW_SECS: u64 = 5;

/// A reading takes the newest complete seconds until they hold this many answers (or all
/// [`WINDOW_SECS`]): one second at a few hundred requests a second, so a backlog that has
/// drained stops counting at once, and the whole window for a trickle.
pub const ENOUGH_ANSWERS: u64 = 30;

/// Latency buckets: bucket `i` counts latencies up to `GROWTH^i` ms (1 ms, then each bound 19%
/// above the last, about 57 s for the last, which also takes anything slower). A percentile read
/// at a bound is at most 19% high.
const BUCKETS: usize = 64;
const GROWTH: f64 = 1.19;

/// Marks a bucket that holds no second yet.
const NO_SECOND: u64 = u64::MAX;

/// The bucket a latency (ms) falls in.
fn bucket_of(latency_ms: f64) -> usize {
    if latency_ms.is_nan() || latency_ms <= 1.0 {
        return 0;
    }
    let index = (latency_ms.ln() / GROWTH.ln()).ceil();
    if index >= BUCKETS as f64 {
        BUCKETS - 1
    } else {
        index as usize
    }
}

/// The upper bound of bucket `index`, ms.
fn upper_ms(index: usize) -> f64 {
    GROWTH.powi(i32::try_from(index).unwrap_or(i32::MAX))
}

/// What happened in one second.
#[derive(Debug, Clone, Copy)]
struct Second {
    /// Which second (of the window's clock) the bucket holds, or [`NO_SECOND`].
    second: u64,
    /// Requests passed in during the second.
    sent: u64,
    /// Answers (or failures) that came during the second.
    answers: u64,
    /// Of which 5xx or failures.
    errors: u64,
    /// The answers' latencies.
    latency: [u32; BUCKETS],
}

impl Second {
    const UNUSED: Self = Self {
        second: NO_SECOND,
        sent: 0,
        answers: 0,
        errors: 0,
        latency: [0; BUCKETS],
    };
}

/// The last [`WINDOW_SECS`] seconds and the requests in flight. Its size is fixed (about 1.4 kB)
/// whatever the traffic.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    seconds: [Second; WINDOW_SECS as usize],
    in_flight: u64,
}

impl Default for Window {
    fn default() -> Self {
        Self {
            seconds: [Second::UNUSED; WINDOW_SECS as usize],
            in_flight: 0,
        }
    }
}

impl Window {
    /// The bucket of the second of `now_ms`, cleared when it held an older second.
    fn second_mut(&mut self, now_ms: u64) -> &mut Second {
        let second = now_ms / 1000;
        let slot = &mut self.seconds[(second % WINDOW_SECS) as usize];
        if slot.second != second {
            *slot = Second {
                second,
                ..Second::UNUSED
            };
        }
        slot
    }

    /// The bucket of `second` if it holds that second.
    fn second(&self, second: u64) -> Option<&Second> {
        Some(&self.seconds[(second % WINDOW_SECS) as usize]).filter(|slot| slot.second == second)
    }

    /// A request passed in at `now_ms` (ms on the window's clock).
    pub(crate) fn sent(&mut self, now_ms: u64) {
        self.in_flight += 1;
        self.second_mut(now_ms).sent += 1;
    }

    /// A request's answer at `now_ms`, `latency_ms` after it was passed in; `error` for a 5xx
    /// or a failure.
    pub(crate) fn answered(&mut self, now_ms: u64, latency_ms: f64, error: bool) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let second = self.second_mut(now_ms);
        second.answers += 1;
        second.errors += u64::from(error);
        let count = &mut second.latency[bucket_of(latency_ms)];
        *count = count.saturating_add(1);
    }

    /// A request given up before its answer (the shopper went away): no longer in flight, and
    /// no answer either.
    pub(crate) fn abandoned(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// The signals at `now_ms`: the newest complete seconds until they hold [`ENOUGH_ANSWERS`]
    /// (at most [`WINDOW_SECS`]), and how many seconds back the oldest read was. With no answer
    /// in them, `requests` 0 with zero latencies and error rate (`sent` and `inFlight` still say
    /// what was passed in).
    pub(crate) fn read(&self, now_ms: u64) -> OriginSignals {
        let current = now_ms / 1000;
        let mut latency = [0_u64; BUCKETS];
        let (mut sent, mut answers, mut errors) = (0, 0, 0);
        // With nothing in the window, it spans the whole of it.
        let mut spanned = WINDOW_SECS;
        let complete =
            (1..=WINDOW_SECS).filter_map(|back| Some((back, current.checked_sub(back)?)));
        for (back, second) in complete.filter_map(|(back, at)| Some((back, self.second(at)?))) {
            if answers >= ENOUGH_ANSWERS {
                break;
            }
            spanned = back;
            sent += second.sent;
            answers += second.answers;
            errors += second.errors;
            for (sum, count) in latency.iter_mut().zip(second.latency) {
                *sum += u64::from(count);
            }
        }
        let percentile = |share: f64| -> f64 {
            if answers == 0 {
                return 0.0;
            }
            // The smallest bound under which at least `share` of the answers fall.
            let wanted = ((answers as f64 * share).ceil() as u64).max(1);
            let mut below = 0;
            latency
                .iter()
                .position(|count| {
                    below += count;
                    below >= wanted
                })
                .map_or(upper_ms(BUCKETS - 1), upper_ms)
        };
        OriginSignals {
            requests: answers,
            p50_ms: percentile(0.5),
            p95_ms: percentile(0.95),
            error_rate: if answers == 0 {
                0.0
            } else {
                errors as f64 / answers as f64
            },
            in_flight: self.in_flight,
            sent,
            window_secs: spanned,
        }
    }
}
