//! A room's scheduled opening and its draw (docs/DESIGN.md "Scheduled opening and the draw").
//!
//! - [`opening_phase`]: where a room stands at a time (before the pre-queue, pre-queue, open) —
//!   the one rule joins, the scheduler and the room's public state follow.
//! - [`fresh_seed`], [`seed_commitment`], [`tags_sha256`], [`mixed_seed`], [`draw_mac`],
//!   [`draw_order`]: the published algorithm
//!   ([`vestibule_shared::draw::DRAW_ALGORITHM`]), kept with the store that orders by it
//!   (`vestibule_store::draw`); `verify-draw` recomputes with the same code.
//! - [`leader_step`]: what the leader's tick does for the opening: make sure the seed exists once
//!   the pre-queue is open, and make the draw once the opening has passed.

use crate::RoomRuntime;
use sha2::{Digest, Sha256};

pub use vestibule_store::draw::{
    draw_key, draw_mac, draw_order, fresh_seed, hex32, hex_bytes, mixed_seed, seed_bytes,
    seed_commitment, tags_sha256,
};
use vestibule_store::{
    DrawOutcome, DrawRequest, Settings, Store, StoreError, DRAW_PLACES_PER_STEP,
};

/// Where a room stands with respect to its scheduled opening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Joins are refused (`room_not_open`) until `joins_from_ms` (the pre-queue's opening, or the
    /// opening itself without a pre-queue).
    NotOpen {
        /// When joins start, Unix ms.
        joins_from_ms: u64,
    },
    /// Joins get `PRE_QUEUE` tickets; the draw places them at `opens_at_ms`.
    PreQueue {
        /// The opening, Unix ms.
        opens_at_ms: u64,
    },
    /// Joins queue in arrival order (behind the drawn pre-queue, if any); admission runs.
    Open,
}

/// The phase of a room with `settings` at `now_ms`. No `opensAt`, or `now_ms` ≥ `opensAt`: open.
/// Before `opensAt`: pre-queue from `prequeueOpensAt` on, not open before it (or at all, without
/// a pre-queue). The room's public state (`GET /api/v1/rooms/{room}`) maps `PreQueue` and
/// `NotOpen` to `PRE_QUEUE`.
pub fn opening_phase(settings: &Settings, now_ms: u64) -> Phase {
    let Some(opens_at_ms) = settings.opens_at_ms.filter(|at| now_ms < *at) else {
        return Phase::Open;
    };
    match settings.prequeue_opens_at_ms {
        Some(from) if now_ms >= from => Phase::PreQueue { opens_at_ms },
        Some(from) => Phase::NotOpen {
            joins_from_ms: from,
        },
        None => Phase::NotOpen {
            joins_from_ms: opens_at_ms,
        },
    }
}

/// Whether a room has a draw: a pre-queue window before its opening.
pub fn has_draw(settings: &Settings) -> bool {
    settings.opens_at_ms.is_some() && settings.prequeue_opens_at_ms.is_some()
}

/// Spread of the pre-queue's first polls after the opening, ms: 20,000 clients poll over these
/// 4.5 s (about 4,400/s), not in one millisecond.
pub const OPENING_POLL_SPREAD_MS: u64 = 4_500;

/// The poll hint of a `PRE_QUEUE` ticket at `now_ms`: the far tier (`far_ms`) while the opening
/// is further away, else a wake-up just after the opening — 500 ms (the draw runs at the
/// leader's first tick after it) plus an offset in [0, [`OPENING_POLL_SPREAD_MS`]) fixed per
/// ticket (from its id's SHA-256, so every replica gives a ticket the same offset). Never under
/// 1000 ms.
pub fn prequeue_poll_after_ms(ticket_id: &str, opens_at_ms: u64, now_ms: u64, far_ms: u64) -> u64 {
    let until = opens_at_ms.saturating_sub(now_ms);
    if until > far_ms {
        return far_ms.max(1_000);
    }
    let digest = Sha256::digest(ticket_id.as_bytes());
    let spread = u64::from_be_bytes(digest[..8].try_into().unwrap_or_default());
    (until + 500 + spread % OPENING_POLL_SPREAD_MS).max(1_000)
}

/// What the leader's tick did for the opening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepDone {
    /// Nothing to do (no draw, or not yet time, or done before).
    Nothing,
    /// This tick made (or ended) the draw of `count` tickets, its steps taking `millis`.
    Drew {
        /// Tickets drawn.
        count: u64,
        /// The draw's duration, ms.
        millis: u64,
        /// Its longest step (the longest Redis was busy with it at once), ms.
        longest_step_ms: u64,
    },
    /// The draw was refused (another replica made it, the lease was lost, no seed); the next
    /// tick looks again (a new leader goes on from the last step made).
    Retry(DrawOutcome),
}

/// The leader's opening work at `now_ms`: from the pre-queue's opening on, make sure the seed
/// exists (the first caller's CSPRNG seed wins, [`Store::draw_seed`]); from the opening on, make
/// the draw once ([`Store::draw`]'s steps, fenced by `epoch`, each renewing the lease, one
/// after the other until the last). Cached in `room` once done.
///
/// # Errors
/// The store's, when it cannot be reached; the next tick tries again.
pub async fn leader_step(
    store: &dyn Store,
    room: &RoomRuntime,
    holder: &str,
    epoch: u64,
    now_ms: u64,
) -> Result<StepDone, StoreError> {
    let settings = room.settings();
    // A seed known here with its times cleared since still gets its draw: the pre-queue's
    // tickets must not wait for ever (the store admits nobody while they are undrawn).
    if !(has_draw(&settings) || room.seeded()) || room.drawn() {
        return Ok(StepDone::Nothing);
    }
    let phase = opening_phase(&settings, now_ms);
    if matches!(phase, Phase::NotOpen { .. }) {
        return Ok(StepDone::Nothing);
    }
    let record = ensure_seed(store, room).await?;
    if phase != Phase::Open {
        return Ok(StepDone::Nothing);
    }
    if record.drawn_at_ms.is_some() {
        room.set_drawn();
        return Ok(StepDone::Nothing);
    }
    // Fenced steps until the last one (Redis: each places DRAW_PLACES_PER_STEP, well under the
    // store timeout; shoppers see nothing until the last). A step that fails leaves the rest to
    // the next tick, of this leader or the next one.
    let started = std::time::Instant::now();
    let mut longest_step_ms = 0;
    loop {
        let step_started = std::time::Instant::now();
        let request = DrawRequest {
            holder,
            epoch,
            now_ms: vestibule_store::now_ms().max(now_ms),
            places_per_step: DRAW_PLACES_PER_STEP,
        };
        let outcome = store.draw(room.id(), &request).await?;
        longest_step_ms = longest_step_ms.max(step_started.elapsed().as_millis() as u64);
        match outcome {
            DrawOutcome::Drawn { count } => {
                room.set_drawn();
                return Ok(StepDone::Drew {
                    count,
                    millis: started.elapsed().as_millis() as u64,
                    longest_step_ms,
                });
            }
            DrawOutcome::Placed { .. } => {}
            DrawOutcome::AlreadyDrawn => {
                room.set_drawn();
                return Ok(StepDone::Retry(DrawOutcome::AlreadyDrawn));
            }
            other => return Ok(StepDone::Retry(other)),
        }
    }
}

/// The room's seed record, creating the seed if this is the first replica to need it.
///
/// # Errors
/// The store's.
pub async fn ensure_seed(
    store: &dyn Store,
    room: &RoomRuntime,
) -> Result<vestibule_store::DrawRecord, StoreError> {
    let record = store.draw_seed(room.id(), &fresh_seed()).await?;
    if record.drawn_at_ms.is_some() {
        room.set_drawn();
    }
    room.set_seeded();
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(opens: Option<u64>, pre: Option<u64>) -> Settings {
        Settings {
            opens_at_ms: opens,
            prequeue_opens_at_ms: pre,
            ..crate::test_settings::settings()
        }
    }

    #[test]
    fn the_phase_follows_the_two_times() {
        let s = settings(Some(2_000), Some(1_000));
        assert_eq!(
            opening_phase(&s, 999),
            Phase::NotOpen {
                joins_from_ms: 1_000
            }
        );
        assert_eq!(
            opening_phase(&s, 1_000),
            Phase::PreQueue { opens_at_ms: 2_000 }
        );
        assert_eq!(
            opening_phase(&s, 1_999),
            Phase::PreQueue { opens_at_ms: 2_000 }
        );
        assert_eq!(opening_phase(&s, 2_000), Phase::Open);
        let no_pre = settings(Some(2_000), None);
        assert_eq!(
            opening_phase(&no_pre, 1_500),
            Phase::NotOpen {
                joins_from_ms: 2_000
            }
        );
        assert_eq!(opening_phase(&settings(None, None), 0), Phase::Open);
    }

    #[test]
    fn pre_queue_hints_wake_clients_after_the_opening_spread_over_seconds() {
        assert_eq!(prequeue_poll_after_ms("a", 100_000, 0, 30_000), 30_000);
        let hints: Vec<u64> = (0..2_000)
            .map(|i| prequeue_poll_after_ms(&format!("ticket{i}"), 10_000, 0, 30_000))
            .collect();
        assert!(hints
            .iter()
            .all(|h| (10_500..10_500 + OPENING_POLL_SPREAD_MS).contains(h)));
        let distinct: std::collections::HashSet<u64> = hints.iter().map(|h| h / 100).collect();
        assert!(
            distinct.len() >= 40,
            "spread over the window: {}",
            distinct.len()
        );
        assert_eq!(
            prequeue_poll_after_ms("a", 0, 5_000, 30_000),
            prequeue_poll_after_ms("a", 0, 9_000, 30_000)
        );
    }

    #[test]
    fn the_order_is_by_hmac_of_the_tag_and_the_commitment_is_sha256() {
        let seed = seed_bytes(&"07".repeat(32)).unwrap();
        let tags: Vec<String> = (0..50).map(|i| format!("{i:012x}")).collect();
        let ordered = draw_order(&seed, tags.clone(), Clone::clone);
        let macs: Vec<[u8; 32]> = ordered.iter().map(|t| draw_mac(&seed, t)).collect();
        assert!(macs.windows(2).all(|w| w[0] <= w[1]));
        assert_ne!(
            ordered, tags,
            "50 tags in their given order would be a 1 in 50! chance"
        );
        assert_eq!(
            seed_commitment(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(seed_bytes("xyz").is_none() && fresh_seed().len() == 64);
        let ids: Vec<String> = (0..200).map(|i| format!("ticket{i}")).collect();
        let by_hmac = draw_order(&seed, ids.clone(), |id| vestibule_store::ids::log_tag(id));
        let mut by_key = ids;
        by_key.sort_by_cached_key(|id| draw_key(&seed, id));
        assert_eq!(by_key, by_hmac, "the stored keys sort in drawn order");
    }
}
