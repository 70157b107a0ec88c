//! The durable store's side of a scheduled opening: the pre-queue join, the draw seed and the
//! draw, each journaled like the other changes (docs/DESIGN.md "Scheduled opening and the draw").

use super::change::Change;
use super::DurableStore;
use crate::{
    now_ms, DrawOutcome, DrawRecord, DrawRequest, JoinLimit, JoinReply, RoomId, StoreError,
};

impl DurableStore {
    pub(super) fn join_prequeue_kept(
        &self,
        room: RoomId<'_>,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        settings_version: Option<u64>,
    ) -> Result<JoinReply, StoreError> {
        self.change(|engine| {
            let now = now_ms();
            let reply = engine.with_room(room, |state| {
                state.join_prequeue(dedup_key, new_id, limit, now, settings_version)
            })?;
            let created = matches!(&reply, JoinReply::Joined(outcome) if outcome.created);
            let change = created.then(|| Change::JoinPrequeue {
                room: room.slug.to_owned(),
                key: dedup_key.map(str::to_owned),
                id: new_id.to_owned(),
                limit: limit.cloned(),
                now_ms: now,
            });
            Ok((reply, change))
        })
    }

    pub(super) fn draw_seed_kept(
        &self,
        room: RoomId<'_>,
        fresh_seed: &str,
    ) -> Result<DrawRecord, StoreError> {
        self.change(|engine| {
            let existed = engine
                .with_room(room, |state| state.draw_record())?
                .is_some();
            let record = engine.with_room(room, |state| state.draw_seed(fresh_seed))?;
            let change = (!existed).then(|| Change::DrawSeed {
                room: room.slug.to_owned(),
                seed: fresh_seed.to_owned(),
            });
            Ok((record, change))
        })
    }

    pub(super) fn draw_kept(
        &self,
        room: RoomId<'_>,
        request: &DrawRequest<'_>,
    ) -> Result<DrawOutcome, StoreError> {
        self.change(|engine| {
            let clock = now_ms();
            let (outcome, drawn) = engine.with_room(room, |state| state.draw(request, clock))?;
            let change = drawn.map(|(ids, tags)| Change::Draw {
                room: room.slug.to_owned(),
                ids,
                tags,
                now_ms: request.now_ms,
            });
            Ok((outcome, change))
        })
    }
}
