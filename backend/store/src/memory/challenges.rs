//! The embedded store's used proof-of-work challenges: a map swept by expiry (docs/bots.md,
//! "Proof of work"). Not journaled: the embedded challenge key lives in the process only.

use std::collections::HashMap;

/// How often, at most, the map is swept of expired entries (ms).
const SWEEP_EVERY_MS: u64 = 1_000;

/// Challenge ids used so far, by room, with the time each may be forgotten (Unix ms).
#[derive(Debug, Default)]
pub struct UsedChallenges {
    used: HashMap<(String, String), u64>,
    next_sweep_ms: u64,
}

impl UsedChallenges {
    /// Marks `id` of `room` used until `expires_at_ms`: true the first time, false if it was
    /// already used and has not expired. Sweeps expired entries at most once a second, so the map
    /// holds only the challenges of the last expiry window.
    pub fn use_once(&mut self, room: &str, id: &str, expires_at_ms: u64, now_ms: u64) -> bool {
        if now_ms >= self.next_sweep_ms {
            self.used.retain(|_, until| *until > now_ms);
            self.next_sweep_ms = now_ms + SWEEP_EVERY_MS;
        }
        let key = (room.to_owned(), id.to_owned());
        match self.used.get(&key) {
            Some(until) if *until > now_ms => false,
            _ => {
                self.used.insert(key, expires_at_ms);
                true
            }
        }
    }

    /// Entries held now (for tests).
    pub fn len(&self) -> usize {
        self.used.len()
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_is_used_once_per_room_and_forgotten_after_its_expiry() {
        let mut used = UsedChallenges::default();
        assert!(used.use_once("main", "a", 10_000, 1_000));
        assert!(!used.use_once("main", "a", 10_000, 2_000));
        assert!(used.use_once("other", "a", 10_000, 2_000));
        assert!(used.use_once("main", "b", 10_000, 2_000));
        assert_eq!(used.len(), 3);
        // Past the expiry the sweep drops them all.
        assert!(used.use_once("main", "c", 30_000, 20_000));
        assert_eq!(used.len(), 1);
    }
}
