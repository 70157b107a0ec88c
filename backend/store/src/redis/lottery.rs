//! Random queueing on Redis (docs/DESIGN.md "Random queueing"): which rooms this process knows
//! to be random, and the filing of a switch's waiting tickets into the lottery
//! (`lottery_file.lua`, in batches: Lua has no HMAC, so the keys are computed here from the seed).

use std::sync::PoisonError;

use redis::Value;

use super::keys::{Key, RoomKeys};
use super::reply::as_string;
use super::RedisStore;
use crate::draw::draw_key;
use crate::{RoomId, StoreError};

/// Waiting tickets filed per script call: one batch's keys are computed here (one HMAC each),
/// and the script stays well under the store timeout.
const FILE_BATCH: usize = 5_000;

impl RedisStore {
    /// Whether this process knows `room` (at its generation) to be random.
    pub(super) fn is_lottery_room(&self, room: RoomId<'_>) -> bool {
        self.lottery_rooms
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(room.slug)
            .is_some_and(|generation| *generation == room.generation)
    }

    /// Records what this process learnt of `room`'s queueing method.
    pub(super) fn note_lottery(&self, room: RoomId<'_>, random: bool) {
        if random == self.is_lottery_room(room) {
            return;
        }
        let mut rooms = self
            .lottery_rooms
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if random {
            rooms.insert(room.slug.to_owned(), room.generation);
        } else if rooms.get(room.slug) == Some(&room.generation) {
            rooms.remove(room.slug);
        }
    }

    /// Files every waiting ticket of a random room into its lottery: the queue is scanned in
    /// arrival order, a page at a time, and each page's keys are sent to `lottery_file.lua`,
    /// which files those still waiting and not filed yet. The last page deletes
    /// `lottery_filing` if the lottery then holds every waiting ticket. Idempotent: any replica
    /// may run it again (the leader's tick does while `lottery_filing` exists).
    pub(super) async fn file_lottery(&self, room: RoomId<'_>) -> Result<(), StoreError> {
        let keys = RoomKeys::new(room);
        // Nothing to file unless a switch (or a return of a ticket skipped before it) asked:
        // a patch that leaves a random room random scans nothing.
        let mut connection = self.link.connection.clone();
        let filing: bool = self
            .link
            .bounded(
                redis::cmd("EXISTS")
                    .arg(keys.of(Key::LotteryFiling))
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)?;
        if !filing {
            return Ok(());
        }
        let seed = self.seed_for_joins(room).await?;
        let mut from = "-inf".to_owned();
        loop {
            let mut connection = self.link.connection.clone();
            let page: Vec<Value> = self
                .link
                .bounded(
                    redis::cmd("ZRANGE")
                        .arg(keys.of(Key::Queue))
                        .arg(&from)
                        .arg("+inf")
                        .arg("BYSCORE")
                        .arg("LIMIT")
                        .arg(0)
                        .arg(FILE_BATCH)
                        .arg("WITHSCORES")
                        .query_async(&mut connection),
                )
                .await
                .map_err(StoreError::for_read)?;
            let last = page.len() < FILE_BATCH * 2;
            let mut call = self.scripts.lottery_file.call(&keys);
            call.arg("generation", room.generation)
                .arg("last", if last { "1" } else { "0" });
            for pair in page.chunks(2) {
                let [id, seq] = pair else {
                    return Err(StoreError::Corrupt("a queue page without scores".into()));
                };
                let id = as_string(id)?;
                let mut member = draw_key(&seed, &id);
                member.push_str(&id);
                call.item(&[id, member]);
                from = format!("({}", as_string(seq)?);
            }
            let reply = self.link.run(&call).await?;
            if reply.first().map(as_string).transpose()?.as_deref() == Some("not_random") {
                // Switched back to FIFO meanwhile: nothing to file.
                self.note_lottery(room, false);
                return Ok(());
            }
            if last {
                return Ok(());
            }
        }
    }
}
