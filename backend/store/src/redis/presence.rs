//! Presence: `hear.lua` (docs/DESIGN.md "Presence"). Skipping silent tickets is part of the
//! leader tick (`admit.lua`); parking the tickets of joins nobody heard the answer of is
//! `park.lua` ([`park`]).

use super::keys::RoomKeys;
use async_trait::async_trait;
use redis::Value;

use super::reply::{as_i64, as_string, as_u64, corrupt, settled_record};
use super::script::Loaded;
use super::{Link, RedisStore};
use crate::{
    PollAnchor, PolledTicket, Presence, QueueCursor, QueueDelta, RoomId, SseRefresh, StoreError,
    TicketRecord,
};

/// Most ids in one `hear.lua` call, so one call never blocks Redis for long.
const HEAR_BATCH: usize = 1000;

/// What [`park`] parks: ticket ids a join may have made at `joined_ms`, held for `hold_ms`.
#[derive(Debug, Clone)]
pub(super) struct Parking {
    pub ids: Vec<String>,
    pub joined_ms: u64,
    pub hold_ms: u64,
    pub keep_ms: u64,
}

/// One `park.lua` call on `link` (see `Presence::park_unconfirmed`): the ids it parked.
///
/// # Errors
/// The call's error.
pub(super) async fn park(
    link: &Link,
    script: &Loaded,
    room: RoomId<'_>,
    parking: &Parking,
    now_ms: u64,
) -> Result<Vec<String>, StoreError> {
    let keys = RoomKeys::new(room);
    let mut call = script.call(&keys);
    call.arg("generation", room.generation)
        .arg("prefix", keys.prefix())
        .arg("now_ms", now_ms)
        .arg("joined_ms", parking.joined_ms)
        .arg("hold_ms", parking.hold_ms)
        .arg("keep_ms", parking.keep_ms);
    for id in &parking.ids {
        call.item(&[id]);
    }
    // Means the same run twice: a ticket parked, or heard from since, is not parked again.
    link.run_repeatable(&call)
        .await?
        .iter()
        .map(as_string)
        .collect()
}

impl RedisStore {
    /// One `hear.lua` call in `mode`; `batch` holds its ticket ids (mode 3: the slot groups of
    /// [`slots_by_chunk`]).
    async fn run_hear(
        &self,
        room: RoomId<'_>,
        batch: &[String],
        now_ms: u64,
        mode: &str,
    ) -> Result<Vec<redis::Value>, StoreError> {
        let keys = RoomKeys::new(room);
        let mut call = self.scripts.hear.call(&keys);
        call.arg("generation", room.generation)
            .arg("prefix", keys.prefix())
            .arg("now_ms", now_ms)
            .arg("mode", mode);
        for id in batch {
            call.item(&[id]);
        }
        // Being heard from is not a change the client must confirm: like a read, an
        // unanswered call is reported as unavailable (503), never 504. Heard twice is heard
        // once: it may go again when the connection drops.
        let reply = self
            .link
            .run_repeatable(&call)
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

/// Most slots in one `BITFIELD` of `hear.lua`'s mode 3 (4 arguments each; Lua's `unpack` takes
/// a few thousand values at most).
const SLOTS_PER_GROUP: usize = 256;

/// `hear.lua`'s mode-3 arguments for ascending `seqs`: per `seen:` chunk (`seq / 65536`), the
/// chunk, how many slots follow, and each slot as BITFIELD's `#index` (`seq % 65536`); at most
/// [`SLOTS_PER_GROUP`] slots per group.
fn slots_by_chunk(seqs: &[u64]) -> Vec<String> {
    let mut args = Vec::with_capacity(seqs.len() + 8);
    let mut rest = seqs;
    while let Some(&first) = rest.first() {
        let chunk = first / 65_536;
        let same = rest
            .iter()
            .take(SLOTS_PER_GROUP)
            .take_while(|&&seq| seq / 65_536 == chunk)
            .count();
        args.push(chunk.to_string());
        args.push(same.to_string());
        for seq in &rest[..same] {
            args.push(format!("#{}", seq % 65_536));
        }
        rest = &rest[same..];
    }
    args
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

#[async_trait]
impl Presence for RedisStore {
    async fn park_unconfirmed(
        &self,
        room: RoomId<'_>,
        ids: &[String],
        joined_ms: u64,
        hold_place_ms: u64,
        now_ms: u64,
    ) -> Result<Vec<String>, StoreError> {
        let parking = Parking {
            ids: ids.to_vec(),
            joined_ms,
            hold_ms: hold_place_ms,
            keep_ms: self.options.keep_ms,
        };
        park(&self.link, &self.scripts.park, room, &parking, now_ms).await
    }

    async fn sse_refresh(
        &self,
        room: RoomId<'_>,
        since: Option<QueueCursor>,
        ids: &[String],
        now_ms: u64,
    ) -> Result<SseRefresh, StoreError> {
        let keys = RoomKeys::new(room);
        let mut call = self.scripts.sse_refresh.call(&keys);
        call.arg("generation", room.generation)
            .arg("prefix", keys.prefix());
        match since {
            Some(cursor) => call
                .arg("has_cursor", "1")
                .arg("since_popped", cursor.popped)
                .arg("since_left", cursor.left),
            None => call
                .arg("has_cursor", "0")
                .arg("since_popped", 0)
                .arg("since_left", 0),
        };
        for id in ids {
            call.item(&[id]);
        }
        let reply = self.link.run(&call).await.map_err(StoreError::for_read)?;
        let number = |index: usize| {
            reply
                .get(index)
                .map_or(Err(corrupt("number", &Value::Nil)), as_u64)
        };
        let cursor = QueueCursor {
            popped: number(0)?,
            left: number(1)?,
        };
        let reset = number(2)? == 1;
        let popped = number(3)?;
        let leavers = number(4)? as usize;
        // A leaver's seq, or a return's -seq (a skipped ticket back at its place: hear.lua).
        let events: Vec<i64> = (5..5 + leavers)
            .map(|index| reply.get(index).map_or(Ok(0), as_i64))
            .collect::<Result<_, _>>()?;
        let (returned, left): (Vec<i64>, Vec<i64>) = events.into_iter().partition(|e| *e < 0);
        let mut left_seqs: Vec<u64> = left.into_iter().map(|seq| seq as u64).collect();
        let mut returned_seqs: Vec<u64> = returned.into_iter().map(i64::unsigned_abs).collect();
        left_seqs.sort_unstable();
        returned_seqs.sort_unstable();
        let entries = reply.get(5 + leavers..).unwrap_or_default();
        if entries.len() != ids.len() * 5 {
            return Err(StoreError::Corrupt(
                "sse_refresh reply has the wrong length".into(),
            ));
        }
        let tickets = ids
            .iter()
            .zip(entries.chunks_exact(5))
            .map(|(id, entry)| {
                let position = as_u64(&entry[0])?;
                if position > 0 {
                    let seq = as_string(&entry[1])?.parse().ok();
                    return Ok(Some((TicketRecord::waiting(id, position), seq)));
                }
                let record = settled_record(
                    id,
                    &as_string(&entry[2])?,
                    as_string(&entry[3])?,
                    &as_string(&entry[4])?,
                    now_ms,
                )?;
                Ok(record.map(|record| (record, None)))
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(SseRefresh {
            cursor,
            delta: (!reset).then_some(QueueDelta {
                popped,
                left_seqs,
                returned_seqs,
            }),
            tickets,
        })
    }

    async fn hear(
        &self,
        room: RoomId<'_>,
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

    /// `Store::mark_heard`: `hear.lua` in mode 3, which writes the `seen:` slots of the seqs
    /// (grouped by chunk: [`slots_by_chunk`]) and reads nothing back.
    async fn mark_heard(
        &self,
        room: RoomId<'_>,
        polled: &[PolledTicket],
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let mut seqs: Vec<u64> = polled.iter().map(|ticket| ticket.seq).collect();
        seqs.sort_unstable();
        seqs.dedup();
        for batch in seqs.chunks(HEAR_BATCH) {
            self.run_hear(room, &slots_by_chunk(batch), now_ms, "3")
                .await?;
        }
        Ok(())
    }

    /// `Store::hear_polled`: `hear.lua` in mode 2, the anchor read in the same step.
    async fn hear_polled(
        &self,
        room: RoomId<'_>,
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
}

#[cfg(test)]
mod tests {
    use super::slots_by_chunk;

    #[test]
    fn slots_go_by_chunk_and_at_most_a_group_at_a_time() {
        assert_eq!(
            slots_by_chunk(&[5, 9, 65_541]),
            ["0", "2", "#5", "#9", "1", "1", "#5"]
        );
        let many: Vec<u64> = (0..300).collect();
        let args = slots_by_chunk(&many);
        assert_eq!(args.len(), 300 + 4);
        assert_eq!(args[..3], ["0", "256", "#0"]);
        assert_eq!(args[257..261], ["#255", "0", "44", "#256"]);
        assert!(slots_by_chunk(&[]).is_empty());
    }
}
