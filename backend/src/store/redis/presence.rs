//! Presence: `hear.lua` (docs/DESIGN.md "Presence"). Skipping silent tickets is part of the
//! leader tick (`admit.lua`).

use super::reply::{as_i64, as_string, as_u64, settled_record};
use super::{Keys, RedisStore};
use crate::store::{PollAnchor, QueueCursor, StoreError, TicketRecord};

/// Most ids in one `hear.lua` call, so one call never blocks Redis for long.
const HEAR_BATCH: usize = 1000;

impl RedisStore {
    pub(super) async fn hear_in_redis(
        &self,
        room: &str,
        ids: &[String],
        now_ms: u64,
        positions: bool,
    ) -> Result<Vec<Option<TicketRecord>>, StoreError> {
        let mut records = Vec::with_capacity(ids.len());
        for batch in ids.chunks(HEAR_BATCH) {
            let mode = if positions { "1" } else { "0" };
            let reply = self.run_hear(room, batch, now_ms, mode).await?;
            records.extend(parsed_records(batch, &reply, now_ms)?);
        }
        Ok(records)
    }

    /// `Store::mark_heard`: `hear.lua` in mode 3, which reads nothing back.
    pub(super) async fn mark_heard_in_redis(
        &self,
        room: &str,
        ids: &[String],
        now_ms: u64,
    ) -> Result<(), StoreError> {
        for batch in ids.chunks(HEAR_BATCH) {
            self.run_hear(room, batch, now_ms, "3").await?;
        }
        Ok(())
    }

    /// `Store::hear_polled`: `hear.lua` in mode 2, the anchor read in the same step.
    pub(super) async fn hear_polled_in_redis(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<(TicketRecord, Option<PollAnchor>)>, StoreError> {
        let batch = [id.to_owned()];
        let reply = self.run_hear(room, &batch, now_ms, "2").await?;
        let (entry, anchor) = reply.split_at(reply.len().saturating_sub(3));
        let record = parsed_records(&batch, entry, now_ms)?.pop().flatten();
        let anchor = match anchor {
            [popped, left, seq] if !as_string(seq)?.is_empty() => Some(PollAnchor {
                seq: as_u64(seq)?,
                cursor: QueueCursor {
                    popped: as_u64(popped)?,
                    left: as_u64(left)?,
                },
            }),
            _ => None,
        };
        Ok(record.map(|record| (record, anchor)))
    }

    async fn run_hear(
        &self,
        room: &str,
        batch: &[String],
        now_ms: u64,
        mode: &str,
    ) -> Result<Vec<redis::Value>, StoreError> {
        let keys = Keys::new(room);
        let mut invocation = self.scripts.hear.key(keys.key("queue"));
        invocation
            .key(keys.key("left"))
            .key(keys.key("left_count"))
            .key(keys.key("prequeue"))
            .key(keys.key("settings"))
            .key(keys.key("lottery"))
            .key(keys.key("lottery_mac"))
            .key(keys.key("lottery_filing"))
            .key(keys.key("popped"))
            .arg(&keys.prefix)
            .arg(now_ms)
            .arg(mode);
        for id in batch {
            invocation.arg(id);
        }
        // Being heard from is not a change the client must confirm: like a read, an
        // unanswered call is reported as unavailable (503), never 504. Heard twice is heard
        // once: it may go again when the connection drops.
        let reply = self
            .link
            .run_script_repeatable(&invocation)
            .await
            .map_err(StoreError::for_read)?;
        let expected = match mode {
            "2" => batch.len() * 5 + 3,
            "3" => 0,
            _ => batch.len() * 5,
        };
        if reply.len() != expected {
            return Err(StoreError::Corrupt(
                "hear reply has the wrong length".into(),
            ));
        }
        Ok(reply)
    }
}

/// The records of a `hear.lua` reply (5 entries per id).
fn parsed_records(
    batch: &[String],
    reply: &[redis::Value],
    now_ms: u64,
) -> Result<Vec<Option<TicketRecord>>, StoreError> {
    batch
        .iter()
        .zip(reply.chunks_exact(5))
        .map(|(id, entry)| {
            let position = as_i64(&entry[0])?;
            if position != 0 {
                let mut record = TicketRecord::waiting(id, position.max(0) as u64);
                record.position = (position > 0).then_some(position as u64);
                record.place_kept = as_string(&entry[1])? == "1";
                Ok(Some(record))
            } else {
                settled_record(
                    id,
                    &as_string(&entry[2])?,
                    as_string(&entry[3])?,
                    &as_string(&entry[4])?,
                    now_ms,
                )
            }
        })
        .collect()
}
