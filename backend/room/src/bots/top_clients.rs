//! Joins per client address in the last minute, counted by this replica (the admin API's
//! top clients; docs/bots.md, "What operators see").

use std::collections::{HashMap, VecDeque};

/// The window, seconds.
const WINDOW_SECS: u64 = 60;
/// Distinct clients counted per second; joins of further ones in that second go uncounted (a
/// spoofed-address flood cannot grow memory without bound: ≤ 60 × this entries).
const CLIENTS_PER_SEC_MAX: usize = 10_000;

/// Per-second join counts by client, for the last [`WINDOW_SECS`] seconds.
#[derive(Debug, Default)]
pub struct MinuteCounts {
    seconds: VecDeque<(u64, HashMap<String, u32>)>,
}

impl MinuteCounts {
    fn forget_before(&mut self, now_sec: u64) {
        while self
            .seconds
            .front()
            .is_some_and(|(sec, _)| sec + WINDOW_SECS <= now_sec)
        {
            self.seconds.pop_front();
        }
    }

    /// Counts a join by `client` at `now_ms`.
    pub fn record(&mut self, client: &str, now_ms: u64) {
        let now_sec = now_ms / 1000;
        self.forget_before(now_sec);
        if self.seconds.back().is_none_or(|(sec, _)| *sec != now_sec) {
            self.seconds.push_back((now_sec, HashMap::new()));
        }
        let Some((_, counts)) = self.seconds.back_mut() else {
            return;
        };
        if let Some(count) = counts.get_mut(client) {
            *count += 1;
        } else if counts.len() < CLIENTS_PER_SEC_MAX {
            counts.insert(client.to_owned(), 1);
        }
    }

    /// The `limit` clients with most joins in the last minute at `now_ms`, most first (ties by
    /// address).
    pub fn top(&mut self, limit: usize, now_ms: u64) -> Vec<(String, u64)> {
        self.forget_before(now_ms / 1000);
        let mut totals: HashMap<&str, u64> = HashMap::new();
        for (_, counts) in &self.seconds {
            for (client, count) in counts {
                *totals.entry(client).or_default() += u64::from(*count);
            }
        }
        let mut top: Vec<(String, u64)> = totals
            .into_iter()
            .map(|(client, joins)| (client.to_owned(), joins))
            .collect();
        top.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        top.truncate(limit);
        top
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_counts_the_last_minute_only() {
        let mut counts = MinuteCounts::default();
        for i in 0..30 {
            counts.record("203.0.113.7", 1_000 + i * 100);
        }
        counts.record("198.51.100.1", 2_000);
        counts.record("198.51.100.1", 30_000);
        assert_eq!(
            counts.top(10, 30_000),
            vec![
                ("203.0.113.7".to_owned(), 30),
                ("198.51.100.1".to_owned(), 2)
            ]
        );
        assert_eq!(counts.top(1, 30_000).len(), 1);
        // The burst's last second (3) is forgotten at second 63: then only the join at 30 s.
        assert_eq!(counts.top(10, 62_000)[0].1, 10);
        assert_eq!(counts.top(10, 63_000), vec![("198.51.100.1".to_owned(), 1)]);
    }
}
