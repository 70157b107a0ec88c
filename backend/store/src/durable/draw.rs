//! The durable store's draw role: the draw seed and the draw, each journaled like the other
//! changes (docs/DESIGN.md "Scheduled opening and the draw"); the pre-queue join is a
//! [`crate::Queue::join`].

use async_trait::async_trait;

use super::change::Change;
use super::DurableStore;
use crate::{now_ms, Draw, DrawOutcome, DrawRecord, DrawRequest, RoomId, StoreError};

#[async_trait]
impl Draw for DurableStore {
    async fn draw_seed(
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

    async fn draw_record(&self, room: RoomId<'_>) -> Result<Option<DrawRecord>, StoreError> {
        self.engine.draw_record(room).await
    }

    async fn draw_tags(
        &self,
        room: RoomId<'_>,
        from: u64,
        n: u64,
    ) -> Result<Vec<String>, StoreError> {
        self.engine.draw_tags(room, from, n).await
    }

    async fn prequeue_ids(&self, room: RoomId<'_>) -> Result<Vec<String>, StoreError> {
        self.engine.prequeue_ids(room).await
    }

    async fn draw(
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
                mixed: true,
            });
            Ok((outcome, change))
        })
    }
}
