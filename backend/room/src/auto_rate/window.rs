//! The origin's signals over a sliding window, as a process measures them (gate mode sees every
//! gated request and its answer) or a storefront reports them: per-second buckets of request
//! counts, errors and a latency histogram, read as [`OriginSignals`]; and the merge of several
//! processes' signals into the room's.

use vestibule_shared::auto_rate::OriginSignals;

/// How far back the signals look at most, seconds.
pub const WINDOW_SECS: u64 = 5;
/// The signals read the newest complete seconds that hold at least this many answers (or all
/// [`WINDOW_SECS`]): at a few hundred requests a second one second is enough, so a backlog that
/// has drained stops counting within a second or two, while a trickle is still judged on enough
/// answers.
pub const ENOUGH_REQUESTS: u64 = 30;

/// Latency histogram buckets: bucket `i` holds latencies up to `FIRST_MS × GROWTH^i`
/// milliseconds (1 ms to about 66 s in 64 buckets, each 19% wider than the last), so a
/// percentile read at a bucket's upper bound is at most 19% high.
const BUCKETS: usize = 64;
const FIRST_MS: f64 = 1.0;
const GROWTH: f64 = 1.19;

/// One second's requests.
#[derive(Debug, Clone)]
struct Second {
    /// Which second (Unix seconds) this bucket holds; a stale one is reset on use.
    at_secs: u64,
    /// Requests sent in this second.
    sent: u64,
    /// Requests that ended in this second.
    requests: u64,
    errors: u64,
    latency: [u32; BUCKETS],
}

impl Second {
    fn empty(at_secs: u64) -> Self {
        Self {
            at_secs,
            sent: 0,
            requests: 0,
            errors: 0,
            latency: [0; BUCKETS],
        }
    }
}

/// The last [`WINDOW_SECS`] seconds of requests to the origin, and how many are in flight.
#[derive(Debug, Clone)]
pub struct OriginWindow {
    seconds: Vec<Second>,
    in_flight: u64,
}

impl Default for OriginWindow {
    fn default() -> Self {
        Self {
            seconds: (0..WINDOW_SECS).map(|_| Second::empty(0)).collect(),
            in_flight: 0,
        }
    }
}

/// The histogram bucket of a latency.
fn bucket(latency_ms: f64) -> usize {
    if latency_ms <= FIRST_MS {
        return 0;
    }
    let index = (latency_ms / FIRST_MS).ln() / GROWTH.ln();
    (index.ceil() as usize).min(BUCKETS - 1)
}

/// A bucket's upper bound, ms.
fn bucket_ms(index: usize) -> f64 {
    FIRST_MS * GROWTH.powi(index as i32)
}

impl OriginWindow {
    /// The bucket of the second of `now_ms`, emptied if it held an older second.
    fn slot(&mut self, now_ms: u64) -> &mut Second {
        let at_secs = now_ms / 1000;
        let slot = &mut self.seconds[(at_secs % WINDOW_SECS) as usize];
        if slot.at_secs != at_secs {
            *slot = Second::empty(at_secs);
        }
        slot
    }

    /// A request sent to the origin at `now_ms`.
    pub fn started(&mut self, now_ms: u64) {
        self.in_flight += 1;
        self.slot(now_ms).sent += 1;
    }

    /// A request sent at `sent_ms` and given up before the origin answered (the client went
    /// away and the forward was cancelled): no longer in flight, and no longer counted as sent
    /// while its second is in the window, so the share answered of what was sent does not read
    /// it as a request the origin failed to get through.
    pub fn abandoned(&mut self, sent_ms: u64) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let at_secs = sent_ms / 1000;
        let slot = &mut self.seconds[(at_secs % WINDOW_SECS) as usize];
        if slot.at_secs == at_secs {
            slot.sent = slot.sent.saturating_sub(1);
        }
    }

    /// A request's end at `now_ms` after `latency_ms`: `error` when the origin answered 5xx or
    /// did not answer in time.
    pub fn finished(&mut self, now_ms: u64, latency_ms: f64, error: bool) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let slot = self.slot(now_ms);
        slot.requests += 1;
        slot.errors += u64::from(error);
        slot.latency[bucket(latency_ms.max(0.0))] += 1;
    }

    /// The signals of the newest complete seconds before `now_ms` that hold
    /// [`ENOUGH_REQUESTS`] answers, at most [`WINDOW_SECS`] of them (the current, partial second
    /// is left out so a read never sees a second half counted); `None` when no request ended in
    /// the window.
    pub fn signals(&self, now_ms: u64) -> Option<OriginSignals> {
        let now_secs = now_ms / 1000;
        let mut latency = [0_u64; BUCKETS];
        let (mut requests, mut errors, mut sent, mut spanned) = (0, 0, 0, 0);
        let newest_first = (1..=WINDOW_SECS).filter_map(|back| {
            let at_secs = now_secs.checked_sub(back)?;
            let second = &self.seconds[(at_secs % WINDOW_SECS) as usize];
            (second.at_secs == at_secs).then_some((back, second))
        });
        for (back, second) in newest_first {
            if requests >= ENOUGH_REQUESTS {
                break;
            }
            spanned = back;
            sent += second.sent;
            requests += second.requests;
            errors += second.errors;
            for (total, count) in latency.iter_mut().zip(second.latency) {
                *total += u64::from(count);
            }
        }
        if requests == 0 {
            return None;
        }
        let percentile = |share: f64| {
            let wanted = (requests as f64 * share).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (index, count) in latency.iter().enumerate() {
                seen += count;
                if seen >= wanted {
                    return bucket_ms(index);
                }
            }
            bucket_ms(BUCKETS - 1)
        };
        Some(OriginSignals {
            requests,
            p50_ms: percentile(0.50),
            p95_ms: percentile(0.95),
            error_rate: errors as f64 / requests as f64,
            in_flight: self.in_flight,
            sent: Some(sent),
            window_secs: Some(spanned),
        })
    }
}

/// The room's signals from several processes' (or reporters'): requests and in-flight summed,
/// the error rate weighted by requests, and the worst p50/p95 among those with at least
/// `min_requests` (a replica that saw a handful of requests does not speak for the origin; the
/// worst of the rest keeps the loop on the safe side). `None` when no signals are given.
pub fn merge(signals: &[OriginSignals], min_requests: u64) -> Option<OriginSignals> {
    let requests: u64 = signals.iter().map(|s| s.requests).sum();
    if signals.is_empty() {
        return None;
    }
    let errors: f64 = signals
        .iter()
        .map(|s| s.error_rate * s.requests as f64)
        .sum();
    let speaking: Vec<_> = signals
        .iter()
        .filter(|s| s.requests >= min_requests)
        .collect();
    let judged: Vec<&OriginSignals> = if speaking.is_empty() {
        signals.iter().collect()
    } else {
        speaking
    };
    let worst =
        |pick: fn(&OriginSignals) -> f64| judged.iter().map(|s| pick(s)).fold(0.0_f64, f64::max);
    Some(OriginSignals {
        requests,
        p50_ms: worst(|s| s.p50_ms),
        p95_ms: worst(|s| s.p95_ms),
        error_rate: if requests > 0 {
            errors / requests as f64
        } else {
            0.0
        },
        in_flight: signals.iter().map(|s| s.in_flight).sum(),
        // Only when every part counted what it sent: a part that did not would make the origin
        // look as if it answered more than it was sent.
        sent: signals.iter().map(|s| s.sent).sum(),
        window_secs: merged_window_secs(signals),
    })
}

/// The span (seconds) over which the parts' summed counts are the sum of their paces: the
/// requests ÷ the sum of each part's requests ÷ its span (absent = one second). `None` when no
/// part states its span; the longest stated when none answered.
fn merged_window_secs(signals: &[OriginSignals]) -> Option<u64> {
    let longest = signals.iter().filter_map(|s| s.window_secs).max()?;
    let requests: u64 = signals.iter().map(|s| s.requests).sum();
    let per_sec: f64 = signals
        .iter()
        .map(|s| s.requests as f64 / super::signals::window_secs(s))
        .sum();
    if requests == 0 {
        return Some(longest);
    }
    Some(((requests as f64 / per_sec).round() as u64).clamp(1, longest))
}

/// A room's origin as this process knows it: its own window of the requests it forwarded (gate
/// mode) or was told of (a storefront's report), and the room's signals merged from every
/// replica's once a second by the figures reader, which the room's scheduler leader reads.
#[derive(Debug, Default)]
pub struct OriginState {
    own: std::sync::Mutex<OriginWindow>,
    /// The storefront's latest report here, with when it came.
    reported: std::sync::Mutex<Option<super::Reading>>,
    room: std::sync::Mutex<Option<super::Reading>>,
}

impl OriginState {
    fn own(&self) -> std::sync::MutexGuard<'_, OriginWindow> {
        self.own
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A request forwarded to the origin at `now_ms`: in flight until the returned guard is
    /// [`Forwarded::finished`], or dropped unanswered (the request given up).
    pub fn forwarded(&self, now_ms: u64) -> Forwarded<'_> {
        self.own().started(now_ms);
        Forwarded {
            origin: self,
            sent_ms: now_ms,
            done: false,
        }
    }

    /// A storefront's report of its origin's signals, received at `now_ms`.
    pub fn report(&self, now_ms: u64, signals: OriginSignals) {
        let mut reported = self
            .reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *reported = Some(super::Reading {
            at_ms: now_ms,
            signals,
        });
    }

    /// This process's signals now: its own window's and a report received within the last
    /// [`super::SIGNALS_STALE_MS`], merged; `None` when it has neither.
    pub fn own_signals(&self, now_ms: u64) -> Option<OriginSignals> {
        let reported = *self
            .reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let fresh = reported
            .filter(|r| now_ms.saturating_sub(r.at_ms) <= super::SIGNALS_STALE_MS)
            .map(|r| r.signals);
        let parts: Vec<_> = self
            .own()
            .signals(now_ms)
            .into_iter()
            .chain(fresh)
            .collect();
        merge(&parts, 0)
    }

    /// The room's signals, merged from every replica at `at_ms`.
    pub fn set_room(&self, at_ms: u64, signals: Option<OriginSignals>) {
        let reading = signals.map(|signals| super::Reading { at_ms, signals });
        let mut room = self
            .room
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if reading.is_some() {
            *room = reading;
        }
    }

    /// The room's latest merged signals (stale ones are the controller's to judge).
    pub fn room_reading(&self) -> Option<super::Reading> {
        *self
            .room
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One request forwarded to the origin and not answered yet. Its end is counted once: by
/// [`Forwarded::finished`], or, when the forward is dropped first (the client went away and the
/// request was cancelled), as not sent at all ([`OriginWindow::abandoned`]). A count in flight
/// that leaked would read as a backlog, and the loop cuts on a backlog.
#[derive(Debug)]
pub struct Forwarded<'a> {
    origin: &'a OriginState,
    sent_ms: u64,
    done: bool,
}

impl Forwarded<'_> {
    /// The request's end at `now_ms` after `latency_ms` ([`OriginWindow::finished`]).
    pub fn finished(mut self, now_ms: u64, latency_ms: f64, error: bool) {
        self.done = true;
        self.origin.own().finished(now_ms, latency_ms, error);
    }
}

impl Drop for Forwarded<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.origin.own().abandoned(self.sent_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forward_given_up_is_neither_in_flight_nor_sent() {
        let origin = OriginState::default();
        let answered = origin.forwarded(10_100);
        let given_up = origin.forwarded(10_200);
        assert_eq!(origin.own_signals(10_900), None);
        answered.finished(10_300, 200.0, false);
        drop(given_up);
        let signals = origin.own_signals(11_500).expect("one answer");
        assert_eq!(
            (signals.requests, signals.in_flight, signals.sent),
            (1, 0, Some(1))
        );
    }

    #[test]
    fn percentiles_are_read_within_a_bucket_and_the_partial_second_is_left_out() {
        let mut window = OriginWindow::default();
        for i in 0..100 {
            window.started(10_400);
            // 95 fast answers of 100 ms, 5 slow of 2 s, one an error.
            let latency = if i < 95 { 100.0 } else { 2_000.0 };
            window.finished(10_500, latency, i == 99);
        }
        assert_eq!(
            window.signals(10_900),
            None,
            "the current second is not read"
        );
        let signals = window.signals(11_000).expect("one complete second");
        assert_eq!(signals.requests, 100);
        assert!((100.0..=119.0).contains(&signals.p50_ms), "{signals:?}");
        assert!((100.0..=119.0).contains(&signals.p95_ms), "{signals:?}");
        assert!((signals.error_rate - 0.01).abs() < 1e-9);
        assert_eq!(signals.in_flight, 0);
        window.finished(11_200, 2_000.0, false);
        let p95 = window.signals(12_000).unwrap().p95_ms;
        assert!(p95 >= 2_000.0, "six slow of 101 are over 5%: p95 {p95}");
    }

    #[test]
    fn seconds_older_than_the_window_are_forgotten() {
        let mut window = OriginWindow::default();
        window.finished(1_000, 50.0, true);
        assert_eq!(window.signals(2_000).unwrap().requests, 1);
        assert_eq!(window.signals(6_000).unwrap().requests, 1);
        assert_eq!(window.signals(7_000), None);
        // A bucket reused for a later second starts empty.
        window.finished(6_100, 50.0, false);
        let signals = window.signals(7_000).unwrap();
        assert_eq!((signals.requests, signals.error_rate), (1, 0.0));
    }

    #[test]
    fn merged_signals_sum_the_counts_and_take_the_worst_speaking_latency() {
        let fast = OriginSignals {
            requests: 100,
            p50_ms: 50.0,
            p95_ms: 90.0,
            error_rate: 0.0,
            in_flight: 3,
            sent: None,
            window_secs: None,
        };
        let slow = OriginSignals {
            requests: 50,
            p50_ms: 300.0,
            p95_ms: 700.0,
            error_rate: 0.06,
            in_flight: 9,
            sent: None,
            window_secs: None,
        };
        let few = OriginSignals {
            requests: 2,
            p50_ms: 5_000.0,
            p95_ms: 9_000.0,
            error_rate: 0.5,
            in_flight: 1,
            sent: None,
            window_secs: None,
        };
        let merged = merge(&[fast, slow, few], 10).unwrap();
        assert_eq!((merged.requests, merged.in_flight), (152, 13));
        assert_eq!((merged.p50_ms, merged.p95_ms), (300.0, 700.0));
        assert!((merged.error_rate - 4.0 / 152.0).abs() < 1e-9);
        assert_eq!(merge(&[few], 10).unwrap().p95_ms, 9_000.0);
        assert_eq!(merge(&[], 10), None);
        assert_eq!(merged.sent, None, "not every part counted what it sent");
        let counted = |sent| OriginSignals {
            sent: Some(sent),
            ..fast
        };
        assert_eq!(
            merge(&[counted(120), counted(30)], 10).unwrap().sent,
            Some(150)
        );
        assert_eq!(merged.window_secs, None, "no part stated its span");
        // 100 answers in one second and 20 over five: 104 a second, so 120 span about one.
        let spanning = |requests, secs| OriginSignals {
            requests,
            window_secs: Some(secs),
            ..fast
        };
        let paced = merge(&[spanning(100, 1), spanning(20, 5)], 10).unwrap();
        assert_eq!(paced.window_secs, Some(1));
        // 12 over three seconds and 12 over one stated by no span: 16 a second, 24 span two.
        let unstated = OriginSignals {
            requests: 12,
            ..fast
        };
        let trickle = merge(&[spanning(12, 3), unstated], 10).unwrap();
        assert_eq!(trickle.window_secs, Some(2));
        assert_eq!(merge(&[spanning(0, 4)], 10).unwrap().window_secs, Some(4));
    }

    #[test]
    fn the_newest_seconds_with_enough_answers_are_read() {
        let mut window = OriginWindow::default();
        // Second 10: a backlog's slow answers; seconds 11 and 12: 20 quick ones each.
        for _ in 0..40 {
            window.started(10_000);
            window.finished(10_500, 3_000.0, false);
        }
        for at_ms in [11_500, 12_500] {
            for _ in 0..20 {
                window.started(at_ms);
                window.finished(at_ms, 100.0, false);
            }
        }
        let newest = window.signals(13_000).unwrap();
        assert_eq!((newest.requests, newest.sent), (40, Some(40)));
        assert_eq!(newest.window_secs, Some(2), "two seconds read");
        assert!(
            newest.p95_ms < 200.0,
            "the drained backlog no longer counts: {newest:?}"
        );
        // A trickle is judged on the whole window.
        let mut trickle = OriginWindow::default();
        for at_ms in [1_100, 2_100, 3_100, 4_100, 5_100] {
            trickle.started(at_ms);
            trickle.finished(at_ms, 50.0, false);
        }
        let whole = trickle.signals(6_000).unwrap();
        assert_eq!((whole.requests, whole.window_secs), (5, Some(5)));
    }
}
