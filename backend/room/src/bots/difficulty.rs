//! The difficulty in force: the room's setting, raised with the join rate when the room asks
//! (docs/bots.md, "The automatic rise": the curve).

/// Most bits the automatic rise adds to the room's difficulty.
pub const AUTO_EXTRA_BITS_MAX: u8 = 8;

/// Time constant of the join-rate meter, seconds: the rate follows a surge within seconds and
/// forgets it within about half a minute.
const RATE_TAU_SECS: f64 = 10.0;

/// The difficulty a challenge asks for now: 0 when the room's `base` is 0 (the rise never turns
/// proof of work on); else `base`, plus, with a threshold T joins/s and a measured rate r ≥ T,
/// 1 + ⌊log2(r / T)⌋ bits (r in [T, 2T) → +1, [2T, 4T) → +2, …), at most
/// [`AUTO_EXTRA_BITS_MAX`] more, never above `max`.
pub fn in_force(base: u8, auto_joins_per_sec: Option<u64>, joins_per_sec: f64, max: u8) -> u8 {
    if base == 0 {
        return 0;
    }
    let extra = match auto_joins_per_sec {
        Some(threshold) if threshold > 0 && joins_per_sec >= threshold as f64 => {
            let doublings = (joins_per_sec / threshold as f64).log2().floor();
            (1.0 + doublings).min(f64::from(AUTO_EXTRA_BITS_MAX)) as u8
        }
        _ => 0,
    };
    base.saturating_add(extra).min(max)
}

/// An exponentially decayed rate of events per second (time constant [`RATE_TAU_SECS`]).
#[derive(Debug, Default, Clone)]
pub struct RateMeter {
    /// Decayed event count at `at_ms`.
    count: f64,
    at_ms: u64,
}

impl RateMeter {
    fn decay_to(&mut self, now_ms: u64) {
        if now_ms > self.at_ms {
            let elapsed = (now_ms - self.at_ms) as f64 / 1000.0;
            self.count *= (-elapsed / RATE_TAU_SECS).exp();
            self.at_ms = now_ms;
        }
    }

    /// Counts one event at `now_ms`.
    pub fn record(&mut self, now_ms: u64) {
        self.decay_to(now_ms);
        self.count += 1.0;
    }

    /// Events per second at `now_ms`.
    pub fn per_sec(&mut self, now_ms: u64) -> f64 {
        self.decay_to(now_ms);
        self.count / RATE_TAU_SECS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_curve_adds_a_bit_per_doubling_above_the_threshold() {
        assert_eq!(in_force(0, Some(10), 1e6, 26), 0);
        assert_eq!(in_force(12, None, 1e6, 26), 12);
        assert_eq!(in_force(12, Some(100), 99.0, 26), 12);
        assert_eq!(in_force(12, Some(100), 100.0, 26), 13);
        assert_eq!(in_force(12, Some(100), 199.0, 26), 13);
        assert_eq!(in_force(12, Some(100), 200.0, 26), 14);
        assert_eq!(in_force(12, Some(100), 800.0, 26), 16);
        assert_eq!(in_force(12, Some(1), 1e9, 26), 20);
        assert_eq!(in_force(24, Some(1), 1e9, 26), 26);
    }

    #[test]
    fn the_meter_follows_a_steady_rate_and_forgets_it() {
        let mut meter = RateMeter::default();
        // 100 joins/s for 60 s.
        for i in 0..6_000 {
            meter.record(i * 10);
        }
        let steady = meter.per_sec(60_000);
        assert!((95.0..=101.0).contains(&steady), "{steady}");
        assert!(meter.per_sec(120_000) < 0.3);
    }
}
