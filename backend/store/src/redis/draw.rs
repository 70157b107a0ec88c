//! A scheduled opening in Redis (docs/DESIGN.md "Scheduled opening and the draw"): the
//! pre-queue join (`join.lua` in pre-queue mode, with the ticket's place in the drawn order
//! computed here from the seed), the draw seed (`draw_seed.lua`: the first replica's seed wins), the
//! draw (`draw.lua`, fenced steps of [`crate::DRAW_PLACES_PER_STEP`] places) and the
//! reads of `GET …/draw`.

use std::sync::{Arc, PoisonError};

use redis::Value;

use super::keys::{Key, RoomKeys};
use super::reply::{as_string, as_u64};
use super::RedisStore;
use async_trait::async_trait;

use crate::{Draw, DrawOutcome, DrawRecord, DrawRequest, JoinLimit, JoinReply, RoomId, StoreError};

impl RedisStore {
    pub(super) async fn join_prequeue(
        &self,
        room: RoomId<'_>,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        settings_version: Option<u64>,
    ) -> Result<JoinReply, StoreError> {
        let seed = self.seed_for_joins(room).await?;
        let mode = super::queue::JoinMode {
            prequeue_seed: Some(&seed),
            settings_version,
            ..Default::default()
        };
        self.join_line(room, dedup_key, new_id, limit, None, mode)
            .await
    }

    /// The room's seed, from this process's copy of its generation's (a seed never changes) or
    /// from Redis, written there first if the room has none (the first pre-queue join may be the
    /// first to need it).
    pub(super) async fn seed_for_joins(&self, room: RoomId<'_>) -> Result<Arc<[u8]>, StoreError> {
        if let Some((_, seed)) = self
            .seeds
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(room.slug)
            .filter(|(generation, _)| *generation == room.generation)
        {
            return Ok(seed.clone());
        }
        let record = self.draw_seed(room, &crate::draw::fresh_seed()).await?;
        let seed: Arc<[u8]> = crate::draw::seed_bytes(&record.seed)
            .ok_or_else(|| StoreError::Corrupt("the draw seed is not 64 hex digits".into()))?
            .into();
        self.seeds
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(room.slug.to_owned(), (room.generation, seed.clone()));
        Ok(seed)
    }
}

/// The draw hash's `seed, drawn_ms, count` → a record (`None` without a seed).
fn parse_record(fields: &[Value]) -> Result<Option<DrawRecord>, StoreError> {
    let [seed, drawn, count] = fields else {
        return Err(StoreError::Corrupt("draw record needs 3 fields".into()));
    };
    let seed = as_string(seed)?;
    if seed.is_empty() {
        return Ok(None);
    }
    let drawn_at_ms = match drawn {
        Value::Nil => None,
        other => Some(as_u64(other)?),
    };
    let count = match count {
        Value::Nil => 0,
        other => as_u64(other)?,
    };
    Ok(Some(DrawRecord {
        seed,
        drawn_at_ms,
        count,
    }))
}

#[async_trait]
impl Draw for RedisStore {
    async fn draw_seed(
        &self,
        room: RoomId<'_>,
        fresh_seed: &str,
    ) -> Result<DrawRecord, StoreError> {
        let keys = RoomKeys::new(room);
        let mut call = self.scripts.draw_seed.call(&keys);
        call.arg("generation", room.generation)
            .arg("seed", fresh_seed);
        let fields = self.link.run(&call).await?;
        parse_record(&fields)?.ok_or_else(|| StoreError::Corrupt("the draw seed vanished".into()))
    }

    async fn draw_record(&self, room: RoomId<'_>) -> Result<Option<DrawRecord>, StoreError> {
        let mut connection = self.link.connection.clone();
        let fields: Vec<Value> = self
            .link
            .bounded(
                redis::cmd("HMGET")
                    .arg(RoomKeys::new(room).of(Key::Draw))
                    .arg(&["seed", "drawn_ms", "count"])
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)?;
        parse_record(&fields)
    }

    async fn draw_tags(
        &self,
        room: RoomId<'_>,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<String>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        // Past the end of any list (and past LRANGE's signed range): nothing.
        let Ok(start) = isize::try_from(offset) else {
            return Ok(Vec::new());
        };
        let stop = isize::try_from(offset.saturating_add(limit - 1)).unwrap_or(isize::MAX);
        let mut connection = self.link.connection.clone();
        self.link
            .bounded(
                redis::cmd("LRANGE")
                    .arg(RoomKeys::new(room).of(Key::DrawTags))
                    .arg(start)
                    .arg(stop)
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)
    }

    async fn prequeue_ids(&self, room: RoomId<'_>) -> Result<Vec<String>, StoreError> {
        let mut connection = self.link.connection.clone();
        self.link
            .bounded(
                redis::cmd("SMEMBERS")
                    .arg(RoomKeys::new(room).of(Key::Prequeue))
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)
    }

    async fn draw(
        &self,
        room: RoomId<'_>,
        request: &DrawRequest<'_>,
    ) -> Result<DrawOutcome, StoreError> {
        let keys = RoomKeys::new(room);
        let mut call = self.scripts.draw.call(&keys);
        call.arg("generation", room.generation)
            .arg("holder", request.holder)
            .arg("fence", request.epoch)
            .arg("prefix", keys.prefix())
            .arg("now_ms", request.now_ms)
            .arg("per_step", request.places_per_step.max(1))
            .arg("lease_ms", self.options.lease_ms.max(1));
        let reply = self.link.run(&call).await?;
        let outcome = reply
            .first()
            .map(as_string)
            .transpose()?
            .unwrap_or_default();
        let count = || reply.get(1).map_or(Ok(0), as_u64);
        Ok(match outcome.as_str() {
            "DRAWN" => DrawOutcome::Drawn { count: count()? },
            "PLACED" => DrawOutcome::Placed { placed: count()? },
            "ALREADY" => DrawOutcome::AlreadyDrawn,
            "FENCED" => DrawOutcome::Fenced,
            "NO_SEED" => DrawOutcome::NoSeed,
            other => {
                return Err(StoreError::Corrupt(format!("draw outcome {other:?}")));
            }
        })
    }
}
