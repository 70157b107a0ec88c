//! A scheduled opening in Redis (docs/DESIGN.md "Scheduled opening and the draw"): the
//! pre-queue join (`join.lua` in pre-queue mode, with the ticket's place in the drawn order
//! computed here from the seed), the draw seed (`HSETNX`: the first replica's seed wins), the
//! draw (`draw.lua`, fenced steps of [`crate::store::DRAW_PLACES_PER_STEP`] places) and the
//! reads of `GET …/draw`.

use std::sync::{Arc, PoisonError};

use redis::Value;

use super::reply::{as_string, as_u64};
use super::{Keys, RedisStore};
use crate::store::{DrawOutcome, DrawRecord, DrawRequest, JoinLimit, JoinReply, StoreError};

impl RedisStore {
    pub(super) async fn join_prequeue_in_redis(
        &self,
        room: &str,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        settings_version: Option<u64>,
    ) -> Result<JoinReply, StoreError> {
        let seed = self.seed_for_joins(room).await?;
        let mode = super::queue::JoinMode {
            prequeue_seed: Some(&seed),
            settings_version,
        };
        self.join_with_limit_in_redis(room, dedup_key, new_id, limit, None, mode)
            .await
    }

    /// The room's seed, from this process's copy (a seed never changes) or from Redis, written
    /// there first if the room has none (the first pre-queue join may be the first to need it).
    /// Forgets this process's copy of `room`'s seed (the room is purged).
    pub(super) fn forget_seed(&self, room: &str) {
        self.seeds
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(room);
    }

    pub(super) async fn seed_for_joins(&self, room: &str) -> Result<Arc<[u8]>, StoreError> {
        if let Some(seed) = self
            .seeds
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(room)
        {
            return Ok(seed.clone());
        }
        let record = self
            .draw_seed_in_redis(room, &crate::room::opening::fresh_seed())
            .await?;
        let seed: Arc<[u8]> = crate::room::opening::seed_bytes(&record.seed)
            .ok_or_else(|| StoreError::Corrupt("the draw seed is not 64 hex digits".into()))?
            .into();
        self.seeds
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(room.to_owned(), seed.clone());
        Ok(seed)
    }

    pub(super) async fn draw_seed_in_redis(
        &self,
        room: &str,
        fresh_seed: &str,
    ) -> Result<DrawRecord, StoreError> {
        let key = Keys::new(room).key("draw");
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hset_nx(&key, "seed", fresh_seed)
            .ignore()
            .cmd("HMGET")
            .arg(&key)
            .arg(&["seed", "drawn_ms", "count"]);
        let mut connection = self.link.connection.clone();
        let (fields,): (Vec<Value>,) = self.link.bounded(pipe.query_async(&mut connection)).await?;
        parse_record(&fields)?.ok_or_else(|| StoreError::Corrupt("the draw seed vanished".into()))
    }

    pub(super) async fn draw_record_in_redis(
        &self,
        room: &str,
    ) -> Result<Option<DrawRecord>, StoreError> {
        let mut connection = self.link.connection.clone();
        let fields: Vec<Value> = self
            .link
            .bounded(
                redis::cmd("HMGET")
                    .arg(Keys::new(room).key("draw"))
                    .arg(&["seed", "drawn_ms", "count"])
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)?;
        parse_record(&fields)
    }

    pub(super) async fn draw_tags_in_redis(
        &self,
        room: &str,
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
                    .arg(Keys::new(room).key("draw_tags"))
                    .arg(start)
                    .arg(stop)
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)
    }

    pub(super) async fn prequeue_ids_in_redis(
        &self,
        room: &str,
    ) -> Result<Vec<String>, StoreError> {
        let mut connection = self.link.connection.clone();
        self.link
            .bounded(
                redis::cmd("SMEMBERS")
                    .arg(Keys::new(room).key("prequeue"))
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)
    }

    pub(super) async fn draw_in_redis(
        &self,
        room: &str,
        request: &DrawRequest<'_>,
    ) -> Result<DrawOutcome, StoreError> {
        let keys = Keys::new(room);
        let mut invocation = self.scripts.draw.key(keys.key("leader"));
        invocation
            .key(keys.key("epoch"))
            .key(keys.key("queue"))
            .key(keys.key("prequeue"))
            .key(keys.key("draw"))
            .key(keys.key("draw_tags"))
            .key(keys.key("prequeue_order"))
            .key(keys.key("prequeue_mac"))
            .key(keys.key("prequeue_seqs"))
            .key(keys.key(super::settings::GONE))
            .arg(request.holder)
            .arg(request.epoch)
            .arg(&keys.prefix)
            .arg(request.now_ms)
            .arg(request.places_per_step.max(1))
            .arg(request.lease_ms.max(1));
        let reply = self.link.run_script(&invocation).await?;
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
