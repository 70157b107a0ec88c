//! The durable store's presence role: the engine's; only a skipped ticket's return to its place
//! is journaled (last-heard times are not kept, docs/DESIGN.md "Presence").

use async_trait::async_trait;

use super::change::Change;
use super::DurableStore;
use crate::{PollAnchor, Presence, QueueCursor, RoomId, SseRefresh, StoreError, TicketRecord};

#[async_trait]
impl Presence for DurableStore {
    async fn sse_refresh(
        &self,
        room: RoomId<'_>,
        since: Option<QueueCursor>,
        ids: &[String],
        now_ms: u64,
    ) -> Result<SseRefresh, StoreError> {
        self.engine.sse_refresh(room, since, ids, now_ms).await
    }

    async fn hear(
        &self,
        room: RoomId<'_>,
        ids: &[String],
        now_ms: u64,
        _positions: bool,
    ) -> Result<Vec<Option<TicketRecord>>, StoreError> {
        // Last-heard times are not journaled; only a return to the line is a change. Without a
        // held ticket among `ids` (checked under the room's lock) no writer lock is taken.
        let quick = self.engine.with_room(room, |state| {
            let any_held = ids.iter().any(|id| state.is_held(id));
            (!any_held).then(|| state.hear(ids, now_ms).0)
        })?;
        if let Some(records) = quick {
            return Ok(records);
        }
        self.change(|engine| {
            let (records, ids) = engine.with_room(room, |state| state.hear(ids, now_ms))?;
            let change = (!ids.is_empty()).then(|| Change::Return {
                room: room.slug.to_owned(),
                ids,
                now_ms,
            });
            Ok((records, change))
        })
    }

    async fn park_unconfirmed(
        &self,
        room: RoomId<'_>,
        ids: &[String],
        joined_ms: u64,
        hold_place_ms: u64,
        now_ms: u64,
    ) -> Result<Vec<String>, StoreError> {
        self.change(|engine| {
            let parked = engine.with_room(room, |state| {
                state.park_unconfirmed(ids, joined_ms, hold_place_ms, now_ms)
            })?;
            let change = (!parked.is_empty()).then(|| Change::Park {
                room: room.slug.to_owned(),
                ids: parked.clone(),
                now_ms,
                hold_place_ms,
            });
            Ok((parked, change))
        })
    }

    async fn hear_polled(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<(TicketRecord, Option<PollAnchor>)>, StoreError> {
        // As `hear`: a ticket that is not held changes nothing the journal keeps, so it is read
        // with its anchor under one lock; a held one comes back through the journal (no anchor:
        // the next poll gets one).
        let ids = [id.to_owned()];
        let quick = self.engine.with_room(room, |state| {
            (!state.is_held(id)).then(|| {
                let record = state.hear(&ids, now_ms).0.pop().flatten();
                record.map(|record| (record, state.poll_anchor(id)))
            })
        })?;
        if let Some(read) = quick {
            return Ok(read);
        }
        crate::hear_unanchored(self, room, id, now_ms).await
    }
}
