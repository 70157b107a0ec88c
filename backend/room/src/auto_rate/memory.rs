//! What the controller remembers of the recent past: the rates in force (so a reading is judged
//! against the rate that offered its load), the last readings' counts (a share of what got
//! through that one burst does not swing), their p95s (the origin's pace with no queue) and what
//! was in flight (how fast a backlog grows now).

use super::{
    Controller, Reading, BURST, FLOOR_MS, HISTORY, MIN_REQUESTS, OFFER_LAG_MS, STEADY_READINGS,
};

impl Controller {
    /// The share of what was sent that the origin got through over the last [`STEADY_READINGS`]
    /// readings (this one among them), when each says what was sent.
    pub(super) fn steady_share(&mut self, reading: &Reading) -> Option<f64> {
        let signals = &reading.signals;
        if self
            .counts
            .back()
            .is_none_or(|(at_ms, ..)| *at_ms != reading.at_ms)
        {
            if self.counts.len() == STEADY_READINGS {
                self.counts.pop_front();
            }
            let answered = signals.requests as f64 * (1.0 - signals.error_rate);
            self.counts
                .push_back((reading.at_ms, answered, signals.sent));
        }
        let (mut answered, mut sent) = (0.0, 0);
        for (_, through, offered) in &self.counts {
            answered += through;
            sent += (*offered)?;
        }
        (sent >= MIN_REQUESTS).then(|| answered / sent as f64)
    }

    /// Whether the newest reading sent over [`BURST`] × the mean of the ones before it.
    pub(super) fn burst(&self) -> bool {
        let Some((_, _, Some(newest))) = self.counts.back() else {
            return false;
        };
        let before: Vec<u64> = self
            .counts
            .iter()
            .rev()
            .skip(1)
            .filter_map(|(_, _, sent)| *sent)
            .collect();
        !before.is_empty()
            && *newest as f64 > BURST * before.iter().sum::<u64>() as f64 / before.len() as f64
    }

    /// Notes what a reading counted in flight and returns how fast that count grew since the
    /// reading before (requests/s; negative while it shrinks). `None` when fewer than
    /// [`MIN_REQUESTS`] are in flight now and were before, or the reading before is missing or
    /// not 0.5–2.5 s older. Counted as each reading is taken, it shows a backlog forming or
    /// draining a second or more before the window's answers do.
    pub(super) fn in_flight_growth(&mut self, reading: &Reading) -> Option<f64> {
        let now = (reading.at_ms, reading.signals.in_flight);
        let (then_ms, then) = match self.in_flight {
            Some(last) if last.0 == now.0 => return None,
            last => {
                self.in_flight = Some(now);
                last?
            }
        };
        let secs = now.0.saturating_sub(then_ms) as f64 / 1000.0;
        ((0.5..=2.5).contains(&secs) && now.1.max(then) >= MIN_REQUESTS)
            .then(|| (now.1 as f64 - then as f64) / secs)
    }

    /// Notes a reading's p95 and returns the lowest of those taken in the last [`FLOOR_MS`]
    /// (this one among them), ms: how fast the origin answers with no queue at its present
    /// capacity (as TCP Vegas takes its base round-trip time).
    pub(super) fn p95_floor(&mut self, reading: &Reading) -> f64 {
        let at_ms = reading.at_ms;
        if self.p95s.back().is_none_or(|(last, _)| *last != at_ms) {
            self.p95s.push_back((at_ms, reading.signals.p95_ms));
        }
        while self
            .p95s
            .front()
            .is_some_and(|(then, _)| then + FLOOR_MS <= at_ms)
        {
            self.p95s.pop_front();
        }
        self.p95s
            .iter()
            .map(|(_, p95_ms)| *p95_ms)
            .fold(reading.signals.p95_ms, f64::min)
    }

    /// Notes that `rate` is in force from `at_ms` (a step's start, an operator's change, the
    /// step's own decision).
    pub(super) fn in_force(&mut self, at_ms: u64, rate: f64) {
        if self.history.back().is_some_and(|(_, last)| *last == rate) {
            return;
        }
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back((at_ms, rate));
    }

    /// The rate in force [`OFFER_LAG_MS`] before a reading taken at `reading_at_ms`: the one
    /// whose load the reading measured (the oldest remembered, or `rate`, before any).
    pub(super) fn offered(&self, reading_at_ms: u64, rate: f64) -> f64 {
        let at = reading_at_ms.saturating_sub(OFFER_LAG_MS);
        self.history
            .iter()
            .rev()
            .find(|(since, _)| *since <= at)
            .or(self.history.front())
            .map_or(rate, |(_, rate)| *rate)
    }
}
