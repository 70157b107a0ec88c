//! The arithmetic of the report: FIFO order (Kendall-tau distance), admission rate against the
//! configured one, and tick bursts.

/// Kendall-tau distance between arrival order and admission order, counted only over pairs
/// whose arrival order is certain from outside: shopper A arrived before B when A's join was
/// answered before B's join was sent. Such a pair is discordant when B was admitted strictly
/// before A (a shopper not admitted counts as admitted last). Returns (discordant, comparable).
///
/// `shoppers[i] = (join sent µs, join answered µs, admission time or u64::MAX)`.
pub fn fifo_discordance(shoppers: &[(u64, u64, u64)]) -> (u64, u64) {
    if shoppers.is_empty() {
        return (0, 0);
    }
    let mut admission_times: Vec<u64> = shoppers.iter().map(|s| s.2).collect();
    admission_times.sort_unstable();
    admission_times.dedup();
    let rank = |time: u64| admission_times.partition_point(|&t| t < time) + 1;
    let ranks: Vec<usize> = shoppers.iter().map(|s| rank(s.2)).collect();
    let mut by_answer: Vec<usize> = (0..shoppers.len()).collect();
    by_answer.sort_by_key(|&i| shoppers[i].1);
    let mut by_send: Vec<usize> = (0..shoppers.len()).collect();
    by_send.sort_by_key(|&i| shoppers[i].0);
    let mut tree = Fenwick::new(admission_times.len() + 1);
    let (mut inserted, mut discordant, mut comparable) = (0usize, 0u64, 0u64);
    for &b in &by_send {
        while inserted < by_answer.len() && shoppers[by_answer[inserted]].1 < shoppers[b].0 {
            tree.add(ranks[by_answer[inserted]]);
            inserted += 1;
        }
        comparable += inserted as u64;
        discordant += inserted as u64 - tree.prefix(ranks[b]);
    }
    (discordant, comparable)
}

struct Fenwick(Vec<u64>);

impl Fenwick {
    fn new(size: usize) -> Self {
        Self(vec![0; size + 1])
    }
    fn add(&mut self, mut i: usize) {
        while i < self.0.len() {
            self.0[i] += 1;
            i += i & i.wrapping_neg();
        }
    }
    /// How many added at ranks ≤ i.
    fn prefix(&self, mut i: usize) -> u64 {
        let mut sum = 0;
        while i > 0 {
            sum += self.0[i];
            i -= i & i.wrapping_neg();
        }
        sum
    }
}

/// Admissions grouped by scheduler tick: (tick time Unix ms, shoppers admitted), in time order.
/// Every shopper admitted in one tick carries that tick's timestamp.
pub fn ticks(mut admitted_ms: Vec<u64>) -> Vec<(u64, u64)> {
    admitted_ms.sort_unstable();
    let mut ticks: Vec<(u64, u64)> = Vec::new();
    for at in admitted_ms {
        match ticks.last_mut() {
            Some((time, count)) if *time == at => *count += 1,
            _ => ticks.push((at, 1)),
        }
    }
    ticks
}

/// How closely admissions followed `rate_per_sec` while the queue was backlogged.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct RateFit {
    /// Admissions per second over the whole backlogged span.
    pub overall_rate: f64,
    /// Largest |admitted − rate × span| / (rate × span) over tick-aligned windows of ~1 s.
    pub max_deviation_1s: f64,
    /// The same over ~10 s windows.
    pub max_deviation_10s: f64,
    /// Windows of ~1 s looked at.
    pub windows_1s: u64,
    /// Backlogged span, seconds.
    pub span_secs: f64,
    /// Where the worst ~1 s window starts, seconds after the first admission.
    pub worst_window_at_secs: f64,
    /// Where the worst ~1 s window starts, Unix ms (the tick's timestamp).
    pub worst_window_unix_ms: u64,
    /// Shoppers the worst ~1 s window admitted, its ticks (after its start) and what its span
    /// owed at the rate.
    pub worst_window: (u64, usize, f64),
    /// Longest time between two ticks that admitted, ms (nominal: the tick).
    pub largest_tick_gap_ms: u64,
    /// Ticks that admitted more than their own elapsed time's worth plus one carried shopper.
    pub ticks_above_own_quota: u64,
}

/// Fits the backlogged ticks against the rate: from the first tick that admitted a full
/// `full_tick` (before it, the queue was still filling) to the one before the last (which may
/// have found the queue short). A window runs from one tick to the last tick within `window_ms`
/// after it and counts the admissions of the ticks after its start, so it needs no alignment.
pub fn rate_fit(ticks: &[(u64, u64)], rate_per_sec: f64, full_tick: u64) -> RateFit {
    let first_full = ticks
        .iter()
        .position(|t| t.1 >= full_tick)
        .unwrap_or(ticks.len());
    let backlogged = &ticks[first_full.min(ticks.len())..ticks.len().saturating_sub(1)];
    if backlogged.is_empty() {
        return RateFit::default();
    }
    if backlogged.len() < 2 || rate_per_sec <= 0.0 {
        return RateFit::default();
    }
    let span_ms = backlogged[backlogged.len() - 1].0 - backlogged[0].0;
    let after_first: u64 = backlogged[1..].iter().map(|t| t.1).sum();
    let deviation = |window_ms: u64| -> (f64, u64, u64, (u64, usize, f64)) {
        let mut worst = 0.0f64;
        let mut worst_at = 0;
        let mut worst_window = (0, 0, 0.0);
        let mut windows = 0;
        let mut end = 0;
        for start in 0..backlogged.len() {
            end = end.max(start);
            while end + 1 < backlogged.len()
                && backlogged[end + 1].0 - backlogged[start].0 <= window_ms
            {
                end += 1;
            }
            let span = backlogged[end].0 - backlogged[start].0;
            // Only windows that span at least 90% of the asked length.
            if span * 10 < window_ms * 9 {
                continue;
            }
            let admitted: u64 = backlogged[start + 1..=end].iter().map(|t| t.1).sum();
            let expected = rate_per_sec * span as f64 / 1000.0;
            let off = ((admitted as f64 - expected) / expected).abs();
            if off > worst {
                worst = off;
                worst_at = backlogged[start].0 - backlogged[0].0;
                worst_window = (admitted, end - start, expected);
            }
            windows += 1;
        }
        (worst, windows, worst_at, worst_window)
    };
    let (max_1s, windows_1s, worst_at, worst_window) = deviation(1000);
    let (max_10s, _, _, _) = deviation(10_000);
    let gaps = backlogged.windows(2).map(|w| (w[1].0 - w[0].0, w[1].1));
    let largest_tick_gap_ms = gaps.clone().map(|(gap, _)| gap).max().unwrap_or(0);
    let ticks_above_own_quota = gaps
        .filter(|&(gap, admitted)| admitted as f64 > rate_per_sec * gap as f64 / 1000.0 + 1.0)
        .count() as u64;
    RateFit {
        overall_rate: after_first as f64 / (span_ms as f64 / 1000.0).max(1e-3),
        max_deviation_1s: max_1s,
        max_deviation_10s: max_10s,
        windows_1s,
        span_secs: span_ms as f64 / 1000.0,
        worst_window_at_secs: worst_at as f64 / 1000.0,
        worst_window_unix_ms: backlogged[0].0 + worst_at,
        worst_window,
        largest_tick_gap_ms,
        ticks_above_own_quota,
    }
}

/// A quantile of unsorted values (nearest rank); 0 when empty.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_order_has_no_discordant_pair() {
        // Four shoppers, each answered before the next is sent, admitted in order (two per tick).
        let shoppers = [(0, 1, 100), (2, 3, 100), (4, 5, 200), (6, 7, 200)];
        assert_eq!(fifo_discordance(&shoppers), (0, 6));
    }

    #[test]
    fn an_overtaking_shopper_is_counted() {
        // C arrived last but was admitted first; D was never admitted.
        let shoppers = [(0, 1, 200), (2, 3, 300), (4, 5, 100), (6, 7, u64::MAX)];
        // Discordant: (A,C), (B,C). D is last and admitted last: concordant.
        assert_eq!(fifo_discordance(&shoppers), (2, 6));
    }

    #[test]
    fn concurrent_joins_are_not_compared() {
        // Both in flight at once: either order is fair.
        let shoppers = [(0, 10, 200), (5, 12, 100)];
        assert_eq!(fifo_discordance(&shoppers), (0, 0));
    }

    #[test]
    fn steady_ticks_fit_the_rate() {
        // 175/s at 100 ms: 17, 18, 17, 18, … then a short last tick.
        let mut ticks: Vec<(u64, u64)> = (0..100).map(|i| (i * 100, 17 + (i % 2))).collect();
        ticks.push((10_000, 3));
        let fit = rate_fit(&ticks, 175.0, 17);
        assert!((fit.overall_rate - 175.0).abs() < 1.0, "{fit:?}");
        assert!(fit.max_deviation_1s < 0.01, "{fit:?}");
        assert!(fit.windows_1s > 80);
    }

    #[test]
    fn ticks_group_equal_timestamps() {
        assert_eq!(ticks(vec![5, 1, 5, 1, 9]), vec![(1, 2), (5, 2), (9, 1)]);
    }
}
