//! Presence in the embedded engine (docs/DESIGN.md "Presence"): when each waiting ticket was last
//! heard from, the tickets skipped for silence (held, with their arrival sequence, until their
//! hold time ends) and the ones that came back to their place.
//!
//! Every operation takes its time as an argument, like the rest of [`Room`]. Last-heard times are
//! not journaled (a poll is not a change): after a restart every waiting ticket counts as heard
//! at the start ([`Room::presume_present`]); skips and returns are journaled.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use vestibule_shared::TicketState;

use super::room::{Room, Settled};
use crate::{PollAnchor, QueueCursor, RoomId, SseRefresh, StoreError, TicketRecord};

/// Most tickets one tick skips (the rest wait for the next tick).
const SKIP_BATCH: usize = 10_000;

/// A ticket skipped for silence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// Its arrival sequence: where it goes back to.
    pub seq: u64,
    /// Until when it keeps its place, Unix ms.
    pub until_ms: u64,
}

/// The presence state of one room.
#[derive(Debug, Clone, Default)]
pub struct Presence {
    /// Waiting ticket → last heard, Unix ms.
    seen: HashMap<Arc<str>, u64>,
    /// The same, ordered by time (oldest first): the skip sweep's index.
    seen_order: BTreeSet<(u64, Arc<str>)>,
    /// Skipped tickets.
    pub(super) held: HashMap<Arc<str>, Held>,
    /// The same, by the end of their hold.
    held_order: BTreeSet<(u64, Arc<str>)>,
    /// Waiting tickets that came back to their place.
    pub(super) kept: HashSet<Arc<str>>,
}

impl Presence {
    /// Marks a waiting ticket heard from at `now_ms`.
    pub(super) fn touch(&mut self, id: &Arc<str>, now_ms: u64) {
        if let Some(old) = self.seen.insert(id.clone(), now_ms) {
            self.seen_order.remove(&(old, id.clone()));
        }
        self.seen_order.insert((now_ms, id.clone()));
    }

    /// When a waiting ticket was last heard from, Unix ms.
    pub(super) fn seen_at(&self, id: &str) -> Option<u64> {
        self.seen.get(id).copied()
    }

    /// Forgets a ticket that stopped waiting (admitted, left, skipped).
    pub(super) fn forget(&mut self, id: &Arc<str>) {
        if let Some(old) = self.seen.remove(id) {
            self.seen_order.remove(&(old, id.clone()));
        }
        self.kept.remove(id);
    }

    /// Holds a skipped ticket until `until_ms`.
    pub(super) fn hold(&mut self, id: &Arc<str>, held: Held) {
        self.forget(id);
        self.held.insert(id.clone(), held);
        self.held_order.insert((held.until_ms, id.clone()));
    }

    /// Takes a held ticket out of the hold.
    pub(super) fn unhold(&mut self, id: &str) -> Option<(Arc<str>, Held)> {
        let (id, held) = self.held.remove_entry(id)?;
        self.held_order.remove(&(held.until_ms, id.clone()));
        Some((id, held))
    }
}

impl Room {
    /// Whether `id` is a skipped ticket (held, in or past its hold).
    pub fn is_held(&self, id: &str) -> bool {
        self.presence.held.contains_key(id)
    }

    /// The record of a held ticket: `WAITING` without a position within its hold, then `EXPIRED`.
    pub(super) fn held_record(&self, id: &str, now_ms: u64) -> Option<TicketRecord> {
        let held = self.presence.held.get(id)?;
        let mut record = TicketRecord::waiting(id, 0);
        record.position = None;
        if held.until_ms <= now_ms {
            record.state = TicketState::Expired;
        }
        Some(record)
    }

    /// Hears from `ids` at `now_ms` (see `Store::hear`). Returns the records and the ids that
    /// came back to their place (the durable store journals those).
    pub fn hear(
        &mut self,
        ids: &[String],
        now_ms: u64,
    ) -> (Vec<Option<TicketRecord>>, Vec<String>) {
        let mut returned = Vec::new();
        let records = ids
            .iter()
            .map(|id| {
                let back = self
                    .presence
                    .held
                    .get(id.as_str())
                    .is_some_and(|held| held.until_ms > now_ms);
                if back && self.bring_back(id, now_ms) {
                    returned.push(id.clone());
                }
                if let Some((key, _)) = self.seq_of.get_key_value(id.as_str()) {
                    let key = key.clone();
                    self.presence.touch(&key, now_ms);
                }
                let mut record = self.record(id, now_ms)?;
                record.place_kept = self.presence.kept.contains(id.as_str());
                Some(record)
            })
            .collect();
        (records, returned)
    }

    /// Puts a held ticket back at its arrival sequence (a replayed return too).
    pub fn bring_back(&mut self, id: &str, now_ms: u64) -> bool {
        let Some((id, held)) = self.presence.unhold(id) else {
            return false;
        };
        if !self.queue.restore(held.seq, id.clone()) {
            return false;
        }
        self.seq_of.insert(id.clone(), held.seq);
        self.lottery_add(&id);
        self.presence.touch(&id, now_ms);
        self.presence.kept.insert(id);
        self.record_queue_event(-(held.seq as i64));
        true
    }

    /// The waiting tickets not heard from since `now_ms − abandon_after_ms`, oldest first (at
    /// most one batch).
    pub fn silent(&self, now_ms: u64, abandon_after_ms: u64) -> Vec<Arc<str>> {
        let cutoff = now_ms.saturating_sub(abandon_after_ms);
        self.presence
            .seen_order
            .iter()
            .take_while(|(at, _)| *at <= cutoff)
            .take(SKIP_BATCH)
            .map(|(_, id)| id.clone())
            .collect()
    }

    /// Skips waiting tickets for silence: out of the line (like a leave, so positions and the SSE
    /// cursor move), held until `now_ms + hold_place_ms`. Returns the ids skipped.
    pub fn skip(&mut self, ids: &[Arc<str>], now_ms: u64, hold_place_ms: u64) -> Vec<String> {
        let mut skipped = Vec::new();
        for id in ids {
            let Some((key, seq)) = self.seq_of.remove_entry(id) else {
                continue;
            };
            self.queue.remove(seq);
            self.lottery_remove(&key);
            self.record_queue_event(seq as i64);
            let until_ms = now_ms + hold_place_ms;
            self.presence.hold(&key, Held { seq, until_ms });
            skipped.push(key.to_string());
        }
        skipped
    }

    /// Parks the tickets of joins nobody heard the answer of (see `Presence::park_unconfirmed`):
    /// each of `ids` waiting in the line (not the pre-queue), joined in the second of
    /// `joined_ms` and not heard from since, is skipped now, held for `hold_place_ms`. Returns
    /// the ids parked.
    pub fn park_unconfirmed(
        &mut self,
        ids: &[String],
        joined_ms: u64,
        hold_place_ms: u64,
        now_ms: u64,
    ) -> Vec<String> {
        let unheard: Vec<Arc<str>> = ids
            .iter()
            .filter_map(|id| {
                let (key, seq) = self.seq_of.get_key_value(id.as_str())?;
                let born = *self.joined.get(seq)?;
                let heard = self.presence.seen_at(id)?;
                let parkable = !self.prequeue.contains(id.as_str())
                    && born / 1000 == joined_ms / 1000
                    && heard <= born;
                parkable.then(|| key.clone())
            })
            .collect();
        self.skip(&unheard, now_ms, hold_place_ms)
    }

    /// Ends the holds that ran out by `now_ms`: those tickets are `EXPIRED`.
    pub(super) fn expire_holds(&mut self, now_ms: u64, keep_ms: u64) {
        while let Some((until_ms, id)) = self.presence.held_order.first().cloned() {
            if until_ms > now_ms {
                break;
            }
            self.presence.unhold(&id);
            let expired = Settled {
                state: TicketState::Expired,
                token: None,
                expires_at_ms: 0,
                forget_at_ms: until_ms + keep_ms,
                order: None,
            };
            self.settle(&id, expired);
        }
    }

    /// Counts every waiting ticket as heard at `now_ms` (after a restart: last-heard times are
    /// not kept, so nobody is skipped for the time the process was down).
    pub fn presume_present(&mut self, now_ms: u64) {
        let waiting: Vec<Arc<str>> = self.seq_of.keys().cloned().collect();
        for id in waiting {
            self.presence.touch(&id, now_ms);
        }
    }
}

#[async_trait::async_trait]
impl crate::Presence for super::MemoryStore {
    async fn sse_refresh(
        &self,
        room: RoomId<'_>,
        since: Option<QueueCursor>,
        ids: &[String],
        now_ms: u64,
    ) -> Result<SseRefresh, StoreError> {
        self.with_room(room, |state| state.sse_refresh(since, ids, now_ms))
    }

    async fn hear(
        &self,
        room: RoomId<'_>,
        ids: &[String],
        now_ms: u64,
        _positions: bool,
    ) -> Result<Vec<Option<TicketRecord>>, StoreError> {
        self.with_room(room, |state| state.hear(ids, now_ms).0)
    }

    async fn park_unconfirmed(
        &self,
        room: RoomId<'_>,
        ids: &[String],
        joined_ms: u64,
        hold_place_ms: u64,
        now_ms: u64,
    ) -> Result<Vec<String>, StoreError> {
        self.with_room(room, |state| {
            state.park_unconfirmed(ids, joined_ms, hold_place_ms, now_ms)
        })
    }

    async fn hear_polled(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<(TicketRecord, Option<PollAnchor>)>, StoreError> {
        self.with_room(room, |state| {
            let record = state.hear(&[id.to_owned()], now_ms).0.pop().flatten()?;
            Some((record, state.poll_anchor(id)))
        })
    }
}
