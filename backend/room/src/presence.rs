//! Presence rules (docs/DESIGN.md "Presence"): the abandon time in force, the heartbeat hint, and
//! how often the SSE hub tells the store its streams are open. Pure; the store keeps the times.

use std::time::Duration;

use crate::eta::PollTiers;
use crate::options::RoomOptions;
use crate::ticket_watch::PollRules;
use vestibule_store::Settings;

/// The abandon time is never under this many of the longest poll hint a ticket can be given.
pub const POLL_HINTS_PER_ABANDON: u64 = 3;

/// The abandon time in force, ms: the room's `abandonAfterSecs`, raised to 3× the longest poll
/// hint. Every hint is at most its tier's delay (`eta::next_poll_after_ms` only lowers it), so a
/// client that follows its hints is heard from at least three times within the abandon time.
pub fn effective_abandon_ms(settings: &Settings, tiers: &PollTiers) -> u64 {
    let longest = tiers
        .0
        .iter()
        .map(|tier| tier.after_ms)
        .max()
        .unwrap_or(30_000);
    settings
        .abandon_after_ms
        .max(POLL_HINTS_PER_ABANDON * longest)
}

/// Heartbeat hint for a client that does not poll (a hidden tab), ms: a fifth of the abandon time
/// (so even a browser that runs a hidden tab's timers once a minute is heard in time), ≥ 1 s.
pub fn heartbeat_after_ms(abandon_ms: u64) -> u64 {
    (abandon_ms / 5).max(1000)
}

/// How often the SSE hub marks its streamed tickets heard: a fifth of the abandon time, 1–30 s
/// (one batched store call per room and period, however many streams).
pub fn stream_presence_every(abandon_ms: u64) -> Duration {
    Duration::from_millis((abandon_ms / 5).clamp(1000, 30_000))
}

/// The rules a poll answered from memory follows in a room with `settings` (see
/// [`crate::ticket_watch::SseHub::answer_poll`]).
pub fn poll_rules(options: &RoomOptions, settings: &Settings) -> PollRules {
    let longest = options.poll_tiers.after_ms(u64::MAX);
    PollRules {
        refresh: Duration::from_millis(options.sse_refresh_ms),
        abandon: Duration::from_millis(effective_abandon_ms(settings, &options.poll_tiers)),
        rate_per_sec: settings.admission_rate_per_sec,
        lease: Duration::from_millis(2 * longest + 1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(abandon_after_ms: u64) -> Settings {
        Settings {
            abandon_after_ms,
            hold_place_ms: 1_800_000,
            ..crate::test_settings::settings()
        }
    }

    #[test]
    fn the_abandon_time_is_never_under_three_of_the_longest_poll_hint() {
        let tiers: PollTiers = "10:3000,100:10000,*:30000".parse().unwrap();
        assert_eq!(effective_abandon_ms(&settings(2_000), &tiers), 90_000);
        assert_eq!(effective_abandon_ms(&settings(300_000), &tiers), 300_000);
        let fast: PollTiers = "*:1000".parse().unwrap();
        assert_eq!(effective_abandon_ms(&settings(2_000), &fast), 3_000);
        assert_eq!(heartbeat_after_ms(300_000), 60_000);
        assert_eq!(heartbeat_after_ms(3_000), 1_000);
        assert_eq!(stream_presence_every(3_000), Duration::from_secs(1));
        assert_eq!(stream_presence_every(3_600_000), Duration::from_secs(30));
    }
}
