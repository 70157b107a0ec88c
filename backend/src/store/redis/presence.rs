//! Presence: `hear.lua` (docs/DESIGN.md "Presence"). Skipping silent tickets is part of the
//! leader tick (`admit.lua`).

use super::reply::{as_i64, as_string, settled_record};
use super::{Keys, RedisStore};
use crate::store::{StoreError, TicketRecord};

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
        let keys = Keys::new(room);
        let mut records = Vec::with_capacity(ids.len());
        for batch in ids.chunks(HEAR_BATCH) {
            let mut invocation = self.scripts.hear.key(keys.key("queue"));
            invocation
                .key(keys.key("left"))
                .key(keys.key("left_count"))
                .key(keys.key("prequeue"))
                .key(keys.key("settings"))
                .key(keys.key("lottery"))
                .key(keys.key("lottery_mac"))
                .key(keys.key("lottery_filing"))
                .arg(&keys.prefix)
                .arg(now_ms)
                .arg(if positions { "1" } else { "0" });
            for id in batch {
                invocation.arg(id);
            }
            // Being heard from is not a change the client must confirm: like a read, an
            // unanswered call is reported as unavailable (503), never 504.
            let reply = self
                .run_script(&invocation)
                .await
                .map_err(StoreError::for_read)?;
            if reply.len() != batch.len() * 5 {
                return Err(StoreError::Corrupt(
                    "hear reply has the wrong length".into(),
                ));
            }
            for (id, entry) in batch.iter().zip(reply.chunks_exact(5)) {
                let position = as_i64(&entry[0])?;
                let record = if position != 0 {
                    let mut record = TicketRecord::waiting(id, position.max(0) as u64);
                    record.position = (position > 0).then_some(position as u64);
                    record.place_kept = as_string(&entry[1])? == "1";
                    Some(record)
                } else {
                    settled_record(
                        id,
                        &as_string(&entry[2])?,
                        as_string(&entry[3])?,
                        &as_string(&entry[4])?,
                        now_ms,
                    )?
                };
                records.push(record);
            }
        }
        Ok(records)
    }
}
