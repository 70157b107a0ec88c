//! The figures role of the embedded engine: a [`FigureTable`] per room generation beside the
//! room, fed with the room's own counters, line and front at each share.

use async_trait::async_trait;

use super::{lock, MemoryStore};
use crate::figures::{FigureShare, FigureTable, Figures, RoomView, SharedFigures};
use crate::{RoomId, StoreError};

#[async_trait]
impl Figures for MemoryStore {
    async fn share_figures(
        &self,
        room: RoomId<'_>,
        share: &FigureShare<'_>,
    ) -> Result<SharedFigures, StoreError> {
        let view = self.with_room(room, |state| {
            let front = state.queue.iter().next().map(|(seq, _)| seq);
            RoomView {
                joined: state.seq,
                admitted: state.popped,
                waiting: state.counts(share.now_ms).waiting,
                front_joined_ms: front.and_then(|seq| state.joined.get(&seq).copied()),
                sold_out: state.config.sale.sold_out,
            }
        })?;
        let mut tables = lock(&self.figures);
        let entry = tables
            .entry(room.slug.to_owned())
            .or_insert_with(|| (room.generation, FigureTable::default()));
        // A new generation of the slug starts its sale afresh.
        if entry.0 != room.generation {
            *entry = (room.generation, FigureTable::default());
        }
        Ok(entry.1.share(share, view))
    }
}
