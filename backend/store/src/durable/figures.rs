//! The durable store's figures role: the engine's, not journaled (records live a few seconds;
//! a restart forgets the peaks, the sold-out time and the expired count, while the counters the
//! room keeps — joined, admitted, left — are journaled with the room).

use async_trait::async_trait;

use super::DurableStore;
use crate::figures::{FigureShare, Figures, SharedFigures};
use crate::{RoomId, StoreError};

#[async_trait]
impl Figures for DurableStore {
    async fn share_figures(
        &self,
        room: RoomId<'_>,
        share: &FigureShare<'_>,
    ) -> Result<SharedFigures, StoreError> {
        self.engine.share_figures(room, share).await
    }
}
