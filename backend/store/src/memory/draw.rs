//! The embedded engine's side of a scheduled opening: the pre-queue join, the draw seed and the
//! draw itself (docs/DESIGN.md "Scheduled opening and the draw"). Same semantics as Redis's
//! `join.lua` (pre-queue mode), the seed's `HSETNX` and `draw.lua` (whose steps end all at once
//! for shoppers; here the one step is under the room's lock).

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::room::Room;
use super::MemoryStore;
use crate::draw::{draw_order, mixed_seed, seed_bytes, tags_sha256};
use crate::ids::log_tag;
use crate::{Draw, DrawOutcome, DrawRecord, DrawRequest, JoinLimit, JoinReply, RoomId, StoreError};

/// A room's draw as the embedded engine keeps it (also in the snapshot image).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryDraw {
    /// The seed, 64 hex digits.
    pub seed: String,
    /// When the draw was made, Unix ms.
    pub drawn_at_ms: Option<u64>,
    /// The drawn tags in place order.
    pub tags: Vec<String>,
    /// [`crate::draw::tags_sha256`] of `tags`, mixed into the seed; `None` until the draw, and for
    /// a draw made before the mix (an older snapshot or journal).
    #[serde(default)]
    pub tags_sha256: Option<String>,
}

/// The ids of a draw in place order, and their tags.
pub type DrawnOrder = (Vec<String>, Vec<String>);

impl Room {
    /// A pre-queue join at `now_ms` (see `Store::join_prequeue`).
    pub fn join_prequeue(
        &mut self,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        now_ms: u64,
        settings_version: Option<u64>,
    ) -> JoinReply {
        if settings_version.is_some_and(|version| version != self.version) {
            return JoinReply::SettingsChanged;
        }
        let drawn = self.draw.as_ref().is_some_and(|d| d.drawn_at_ms.is_some());
        let mut reply = self.join(dedup_key, new_id, limit, now_ms);
        if let JoinReply::Joined(outcome) = &mut reply {
            if outcome.created && !drawn {
                self.prequeue.insert(Arc::from(new_id));
                self.lottery_remove(new_id);
                if let Some(record) = self.record(new_id, now_ms) {
                    outcome.ticket = record;
                }
            }
        }
        reply
    }

    /// Writes `fresh_seed` unless the room has a seed; the record in force.
    pub fn draw_seed(&mut self, fresh_seed: &str) -> DrawRecord {
        if self.draw.is_none() {
            self.draw = Some(MemoryDraw {
                seed: fresh_seed.to_owned(),
                drawn_at_ms: None,
                tags: Vec::new(),
                tags_sha256: None,
            });
            // A room switched to random before it had a seed starts its lottery now.
            self.sync_lottery();
        }
        self.draw_record().unwrap_or_else(|| DrawRecord {
            seed: fresh_seed.to_owned(),
            drawn_at_ms: None,
            count: 0,
            tags_sha256: None,
        })
    }

    /// The draw record, if the room has a seed.
    pub fn draw_record(&self) -> Option<DrawRecord> {
        self.draw.as_ref().map(|draw| DrawRecord {
            seed: draw.seed.clone(),
            drawn_at_ms: draw.drawn_at_ms,
            count: draw.tags.len() as u64,
            tags_sha256: draw.tags_sha256.clone(),
        })
    }

    /// The drawn tags from `offset`, at most `limit`.
    pub fn draw_tags(&self, offset: u64, limit: u64) -> Vec<String> {
        self.draw.as_ref().map_or_else(Vec::new, |draw| {
            draw.tags
                .iter()
                .skip(usize::try_from(offset).unwrap_or(usize::MAX))
                .take(usize::try_from(limit).unwrap_or(usize::MAX))
                .cloned()
                .collect()
        })
    }

    /// The pre-queue's ticket ids.
    pub fn prequeue_ids(&self) -> Vec<String> {
        self.prequeue.iter().map(|id| id.to_string()).collect()
    }

    /// The fenced draw (see `Store::draw`), the lease checked at the clock time `clock_ms`: every
    /// place in one step (the room's lock is held for it), the order computed here from the seed
    /// mixed with the hash of the pre-queue's tags ([`mixed_seed`]: the pre-queue closes in this
    /// same step, so the tags are final).
    /// With `Drawn`, the ids and tags in place order (the durable store journals them).
    pub fn draw(
        &mut self,
        request: &DrawRequest<'_>,
        clock_ms: u64,
    ) -> (DrawOutcome, Option<DrawnOrder>) {
        let holds_lease = self
            .lease
            .as_ref()
            .is_some_and(|lease| lease.holder == request.holder && lease.until_ms > clock_ms);
        if !holds_lease || self.epoch != request.epoch {
            return (DrawOutcome::Fenced, None);
        }
        let Some(draw) = self.draw.as_ref() else {
            return (DrawOutcome::NoSeed, None);
        };
        if draw.drawn_at_ms.is_some() {
            return (DrawOutcome::AlreadyDrawn, None);
        }
        let Some(seed) = seed_bytes(&draw.seed) else {
            return (DrawOutcome::NoSeed, None);
        };
        let ids = self.prequeue_ids();
        let tags: Vec<String> = ids.iter().map(|id| log_tag(id)).collect();
        let Some(mixed) = mixed_seed(&seed, &tags_sha256(&tags), None) else {
            return (DrawOutcome::NoSeed, None);
        };
        let ids = draw_order(&mixed, ids, |id| log_tag(id));
        let tags: Vec<String> = ids.iter().map(|id| log_tag(id)).collect();
        let outcome = self.draw_unfenced(&ids, &tags, request.now_ms, true);
        let drawn = matches!(outcome, DrawOutcome::Drawn { .. });
        (outcome, drawn.then_some((ids, tags)))
    }

    /// The draw without the fence (also the journal's replay); `mixed`: the order follows from
    /// the mixed seed (false only for a journal written before the mix).
    pub fn draw_unfenced(
        &mut self,
        ids: &[String],
        tags: &[String],
        now_ms: u64,
        mixed: bool,
    ) -> DrawOutcome {
        let Some(draw) = self.draw.as_ref() else {
            return DrawOutcome::NoSeed;
        };
        if draw.drawn_at_ms.is_some() {
            return DrawOutcome::AlreadyDrawn;
        }
        let given: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let same = ids.len() == tags.len()
            && given.len() == ids.len()
            && ids.len() == self.prequeue.len()
            && ids.iter().all(|id| self.prequeue.contains(id.as_str()));
        if !same {
            // Only a journal that does not match its engine gets here.
            return DrawOutcome::NoSeed;
        }
        let mut seqs: Vec<u64> = ids
            .iter()
            .filter_map(|id| self.seq_of.get(id.as_str()).copied())
            .collect();
        seqs.sort_unstable();
        let keys: Vec<Arc<str>> = ids
            .iter()
            .filter_map(|id| self.prequeue.get(id.as_str()).cloned())
            .collect();
        for (key, seq) in keys.iter().zip(&seqs) {
            self.queue.replace(*seq, key.clone());
            self.seq_of.insert(key.clone(), *seq);
            self.presence.touch(key, now_ms);
            self.lottery_add(key);
        }
        self.prequeue.clear();
        if let Some(draw) = self.draw.as_mut() {
            draw.drawn_at_ms = Some(now_ms);
            draw.tags = tags.to_vec();
            draw.tags_sha256 = mixed.then(|| tags_sha256(tags));
        }
        DrawOutcome::Drawn {
            count: ids.len() as u64,
        }
    }
}

#[async_trait::async_trait]
impl Draw for MemoryStore {
    async fn draw_seed(
        &self,
        room: RoomId<'_>,
        fresh_seed: &str,
    ) -> Result<DrawRecord, StoreError> {
        self.with_room(room, |state| state.draw_seed(fresh_seed))
    }

    async fn draw_record(&self, room: RoomId<'_>) -> Result<Option<DrawRecord>, StoreError> {
        self.with_room(room, |state| state.draw_record())
    }

    async fn draw_tags(
        &self,
        room: RoomId<'_>,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<String>, StoreError> {
        self.with_room(room, |state| state.draw_tags(offset, limit))
    }

    async fn prequeue_ids(&self, room: RoomId<'_>) -> Result<Vec<String>, StoreError> {
        self.with_room(room, |state| state.prequeue_ids())
    }

    async fn draw(
        &self,
        room: RoomId<'_>,
        request: &DrawRequest<'_>,
    ) -> Result<DrawOutcome, StoreError> {
        let clock = crate::now_ms();
        self.with_room(room, |state| state.draw(request, clock).0)
    }
}
