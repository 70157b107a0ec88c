//! The durable store's queue role: the engine's, with every join that made a ticket and every
//! leave journaled.

use async_trait::async_trait;

use super::change::{Change, InstantJoin};
use super::DurableStore;
use crate::{
    now_ms, JoinKind, JoinReply, JoinRequest, LeaveOutcome, Queue, RoomCounts, RoomId, StoreError,
    TicketRecord,
};

#[async_trait]
impl Queue for DurableStore {
    async fn join(
        &self,
        room: RoomId<'_>,
        request: &JoinRequest<'_>,
    ) -> Result<JoinReply, StoreError> {
        let JoinRequest {
            dedup_key,
            new_id,
            limit,
            kind,
            unconfirmed,
        } = *request;
        let keep_ms = self.options().keep_ms;
        let line_now = now_ms();
        let joined = self.change(|engine| {
            let (reply, (now, instant)) = match kind {
                JoinKind::Line => {
                    let now = line_now;
                    let reply = engine
                        .with_room(room, |state| state.join(dedup_key, new_id, limit, now))?;
                    (reply, (now, None))
                }
                JoinKind::Admitting(instant) => {
                    let (reply, admitted) = engine.with_room(room, |state| {
                        state.join_admitting(dedup_key, new_id, limit, instant, keep_ms)
                    })?;
                    let journaled = admitted.then(|| InstantJoin {
                        token: instant.token.clone(),
                        token_ttl_ms: instant.token_ttl_ms,
                        keep_ms,
                    });
                    (reply, (instant.now_ms, journaled))
                }
                JoinKind::PreQueue { settings_version } => {
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
                    return Ok((reply, change));
                }
            };
            let created = matches!(&reply, JoinReply::Joined(outcome) if outcome.created);
            let change = created.then(|| Change::Join {
                room: room.slug.to_owned(),
                key: dedup_key.map(str::to_owned),
                id: new_id.to_owned(),
                limit: limit.cloned(),
                now_ms: now,
                instant,
            });
            Ok((reply, change))
        });
        if let Err(StoreError::OutcomeUnknown(_)) = &joined {
            // Made in memory, its journal record maybe not on disk, and its shopper told 504: the
            // ticket is parked at once (docs/DESIGN.md "Joins nobody heard the answer of"). Not
            // journaled: the journal has just failed, and the snapshot the next change takes
            // first holds the join and the park together.
            let joined_ms = match kind {
                JoinKind::Line => Some(line_now),
                JoinKind::Admitting(instant) => Some(instant.now_ms),
                JoinKind::PreQueue { .. } => None,
            };
            if let Some(joined_ms) = joined_ms {
                let ids = [new_id.to_owned()];
                let _ = self.engine.with_room(room, |state| {
                    state.park_unconfirmed(&ids, joined_ms, unconfirmed.hold_place_ms, now_ms())
                });
            }
        }
        joined
    }

    async fn ticket(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        self.engine.ticket(room, id, now_ms).await
    }

    async fn keyed_ticket(
        &self,
        room: RoomId<'_>,
        key: &str,
        now: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        self.engine.keyed_ticket(room, key, now).await
    }

    async fn leave(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<LeaveOutcome, StoreError> {
        let keep_ms = self.options().keep_ms;
        self.change(|engine| {
            let outcome = engine.with_room(room, |state| state.leave(id, now_ms, keep_ms))?;
            let change = (outcome == LeaveOutcome::Left).then(|| Change::Leave {
                room: room.slug.to_owned(),
                id: id.to_owned(),
                now_ms,
                keep_ms,
            });
            Ok((outcome, change))
        })
    }

    async fn counts(&self, room: RoomId<'_>, now_ms: u64) -> Result<RoomCounts, StoreError> {
        self.engine.counts(room, now_ms).await
    }

    /// Not journaled: the embedded store's challenge key lives in this process only, so a
    /// challenge from before a restart never verifies again.
    async fn use_challenge(
        &self,
        room: RoomId<'_>,
        id: &str,
        expires_at_ms: u64,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        self.engine
            .use_challenge(room, id, expires_at_ms, now_ms)
            .await
    }
}
