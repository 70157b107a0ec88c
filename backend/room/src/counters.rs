//! A room's running totals in this process, for the admin event stream's rates
//! (`http::admin_events`): the same events the Prometheus counters count (`vestibule_joins_total`,
//! …), kept where the stream can read them back each second without rendering `/metrics`.
//! Plus whether this process leads the room's scheduler, and at which fencing epoch.

use std::sync::atomic::{AtomicU64, Ordering};

/// Totals since the process started (they only grow) and the leadership, all lock-free.
#[derive(Debug, Default)]
pub struct RoomCounters {
    joins: AtomicU64,
    polls: AtomicU64,
    admitted: AtomicU64,
    tokens_used: AtomicU64,
    tokens_expired: AtomicU64,
    /// The fencing epoch while this process leads the room, 0 otherwise (epochs start at 1).
    leader_epoch: AtomicU64,
}

/// A reading of [`RoomCounters`]' totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterTotals {
    /// Joins answered (new tickets and repeats).
    pub joins: u64,
    /// Polls answered.
    pub polls: u64,
    /// Shoppers admitted by this process's ticks (and instant joins it saw), while leading.
    pub admitted: u64,
    /// Entry tokens used (orders, storefront consumes).
    pub tokens_used: u64,
    /// Entry tokens expired unused (counted by the leader's ticks).
    pub tokens_expired: u64,
}

impl CounterTotals {
    /// Per-second rates from `earlier` to `self` over `secs` (0 when `secs` is not positive).
    pub fn rates_since(&self, earlier: &Self, secs: f64) -> [f64; 5] {
        let rate = |now: u64, then: u64| {
            if secs > 0.0 {
                now.saturating_sub(then) as f64 / secs
            } else {
                0.0
            }
        };
        [
            rate(self.joins, earlier.joins),
            rate(self.polls, earlier.polls),
            rate(self.admitted, earlier.admitted),
            rate(self.tokens_used, earlier.tokens_used),
            rate(self.tokens_expired, earlier.tokens_expired),
        ]
    }
}

impl RoomCounters {
    /// One join answered.
    pub fn joined(&self) {
        self.joins.fetch_add(1, Ordering::Relaxed);
    }

    /// One poll answered.
    pub fn polled(&self) {
        self.polls.fetch_add(1, Ordering::Relaxed);
    }

    /// One entry token used.
    pub fn token_used(&self) {
        self.tokens_used.fetch_add(1, Ordering::Relaxed);
    }

    /// A leader's tick: `admitted` shoppers admitted, `expired` tokens expired.
    pub fn ticked(&self, admitted: u64, expired: u64) {
        self.admitted.fetch_add(admitted, Ordering::Relaxed);
        self.tokens_expired.fetch_add(expired, Ordering::Relaxed);
    }

    /// This process leads the room at `epoch` (`None`: it does not lead).
    pub fn set_leader_epoch(&self, epoch: Option<u64>) {
        self.leader_epoch
            .store(epoch.unwrap_or(0), Ordering::Relaxed);
    }

    /// The fencing epoch while this process leads the room.
    pub fn leader_epoch(&self) -> Option<u64> {
        Some(self.leader_epoch.load(Ordering::Relaxed)).filter(|epoch| *epoch > 0)
    }

    /// The totals now.
    pub fn totals(&self) -> CounterTotals {
        CounterTotals {
            joins: self.joins.load(Ordering::Relaxed),
            polls: self.polls.load(Ordering::Relaxed),
            admitted: self.admitted.load(Ordering::Relaxed),
            tokens_used: self.tokens_used.load(Ordering::Relaxed),
            tokens_expired: self.tokens_expired.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_differences_over_the_interval() {
        let counters = RoomCounters::default();
        let before = counters.totals();
        for _ in 0..10 {
            counters.joined();
        }
        counters.polled();
        counters.ticked(4, 1);
        counters.token_used();
        let rates = counters.totals().rates_since(&before, 2.0);
        assert_eq!(rates, [5.0, 0.5, 2.0, 0.5, 0.5]);
        assert_eq!(counters.totals().rates_since(&before, 0.0), [0.0; 5]);
    }

    #[test]
    fn the_epoch_shows_only_while_leading() {
        let counters = RoomCounters::default();
        assert_eq!(counters.leader_epoch(), None);
        counters.set_leader_epoch(Some(3));
        assert_eq!(counters.leader_epoch(), Some(3));
        counters.set_leader_epoch(None);
        assert_eq!(counters.leader_epoch(), None);
    }
}
