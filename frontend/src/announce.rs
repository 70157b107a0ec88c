//! When the screen-reader live region speaks about the place in line.
//!
//! The position can change every second; announcing each change would drown out everything else
//! a screen reader says. A change is spoken when the position crosses a notable step (100, 50,
//! 10, 3, …) or when the last announcement is at least half a minute old.

/// Positions worth announcing as soon as the shopper reaches them.
const STEPS: [u64; 15] = [
    1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 50_000,
];
/// Longest silence while the position keeps changing.
const MAX_SILENCE_MS: f64 = 30_000.0;
/// Shortest gap between two step announcements (steps pass quickly near the front).
const MIN_STEP_GAP_MS: f64 = 5_000.0;

/// Remembers what was last announced about the position, and when.
#[derive(Debug, Default, Clone)]
pub struct PositionAnnouncer {
    last: Option<(u64, f64)>,
}

impl PositionAnnouncer {
    /// Whether a newly seen `position` should be announced at `now_ms`; records it if so.
    pub fn should_announce(&mut self, position: u64, now_ms: f64) -> bool {
        let speak = match self.last {
            None => true,
            Some((last_position, _)) if last_position == position => false,
            Some((last_position, at)) => {
                let silence = now_ms - at;
                let crossed = STEPS
                    .iter()
                    .any(|&step| position <= step && last_position > step);
                silence >= MAX_SILENCE_MS || (crossed && silence >= MIN_STEP_GAP_MS)
            }
        };
        if speak {
            self.record(position, now_ms);
        }
        speak
    }

    /// Notes that the position was announced by other means (e.g. after a reconnect).
    pub fn record(&mut self, position: u64, now_ms: f64) {
        self.last = Some((position, now_ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_position_is_always_announced() {
        assert!(PositionAnnouncer::default().should_announce(742, 0.0));
    }

    #[test]
    fn small_moves_stay_silent_until_half_a_minute_passes() {
        let mut a = PositionAnnouncer::default();
        a.should_announce(742, 0.0);
        assert!(!a.should_announce(741, 1_000.0));
        assert!(!a.should_announce(730, 29_000.0));
        assert!(a.should_announce(720, 30_000.0));
        assert!(!a.should_announce(719, 31_000.0));
    }

    #[test]
    fn crossing_a_step_is_announced_but_not_more_than_every_five_seconds() {
        let mut a = PositionAnnouncer::default();
        a.should_announce(120, 0.0);
        assert!(!a.should_announce(101, 6_000.0));
        assert!(a.should_announce(99, 7_000.0));
        assert!(
            !a.should_announce(49, 8_000.0),
            "too soon after the last one"
        );
        assert!(a.should_announce(48, 12_000.0));
    }

    #[test]
    fn an_unchanged_position_is_never_repeated() {
        let mut a = PositionAnnouncer::default();
        a.should_announce(5, 0.0);
        assert!(!a.should_announce(5, 120_000.0));
    }
}
