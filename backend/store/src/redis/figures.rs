//! The figures role on Redis: `figures.lua` writes this replica's record, raises the peaks and
//! reads every live record and the totals in one step.

use async_trait::async_trait;

use super::keys::RoomKeys;
use super::reply::{as_string, as_u64};
use super::RedisStore;
use crate::figures::{FigureShare, Figures, SaleTotals, SharedFigures};
use crate::{RoomId, StoreError};

#[async_trait]
impl Figures for RedisStore {
    async fn share_figures(
        &self,
        room: RoomId<'_>,
        share: &FigureShare<'_>,
    ) -> Result<SharedFigures, StoreError> {
        let keys = RoomKeys::new(room);
        let mut call = self.scripts.figures.call(&keys);
        call.arg("generation", room.generation)
            .arg("prefix", keys.prefix())
            .arg("replica", share.replica)
            .arg("record", share.record.unwrap_or(""))
            .arg("expired", share.expired)
            .arg("now_ms", share.now_ms)
            .arg("ttl_ms", share.ttl_ms);
        let reply = self.link.run(&call).await?;
        let Some((totals, records)) = reply.split_at_checked(6) else {
            return Err(StoreError::Corrupt("figures reply is short".into()));
        };
        let number = |at: usize| as_u64(&totals[at]);
        let sold_out_at = number(5)?;
        Ok(SharedFigures {
            records: records.iter().map(as_string).collect::<Result<_, _>>()?,
            totals: SaleTotals {
                joined: number(0)?,
                admitted: number(1)?,
                expired: number(2)?,
                peak_waiting: number(3)?,
                longest_wait_secs: number(4)?,
                sold_out_at_ms: (sold_out_at > 0).then_some(sold_out_at),
            },
        })
    }
}
