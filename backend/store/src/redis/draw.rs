//! A scheduled opening in Redis (docs/DESIGN.md "Scheduled opening and the draw"): the
//! pre-queue join (`join.lua` in pre-queue mode, filed under its key by the committed seed), the
//! draw seed (`draw_seed.lua`: the first replica's seed wins), the draw (`draw.lua`: its first
//! step closes the pre-queue; the mix, `draw_mix.lua`, files the closed pre-queue under the
//! mixed seed computed here; then fenced steps of [`crate::DRAW_PLACES_PER_STEP`] places) and
//! the reads of `GET …/draw`.

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

/// The draw hash's `seed, drawn_ms, count, tags_sha256` → a record (`None` without a seed).
fn parse_record(fields: &[Value]) -> Result<Option<DrawRecord>, StoreError> {
    let [seed, drawn, count, tags] = fields else {
        return Err(StoreError::Corrupt("draw record needs 4 fields".into()));
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
    let tags_sha256 = match tags {
        Value::Nil => None,
        other => Some(as_string(other)?),
    };
    Ok(Some(DrawRecord {
        seed,
        drawn_at_ms,
        count,
        tags_sha256,
    }))
}

/// Sealed members read per page, and filed per `draw_mix.lua` call.
const MIX_BATCH: isize = 5_000;

impl RedisStore {
    /// The draw's mix (issue 42): reads the pre-queue as it closed (`draw_sealed`, fixed by the
    /// draw's first step), computes the mixed seed from the committed seed and the hash of the
    /// sealed tags, and files every sealed ticket under its key by that seed (`draw_mix.lua`,
    /// fenced, in batches; the last one records the mix). Deterministic, so a leader that dies
    /// mid-way leaves the next one to do it all again with the same result.
    async fn mix_draw(
        &self,
        room: RoomId<'_>,
        request: &DrawRequest<'_>,
        seed_hex: &str,
    ) -> Result<Option<DrawOutcome>, StoreError> {
        let keys = RoomKeys::new(room);
        let seed = crate::draw::seed_bytes(seed_hex)
            .ok_or_else(|| StoreError::Corrupt("the draw seed is not 64 hex digits".into()))?;
        let mut sealed: Vec<String> = Vec::new();
        loop {
            let start = isize::try_from(sealed.len()).unwrap_or(isize::MAX);
            let mut connection = self.link.connection.clone();
            let page: Vec<String> = self
                .link
                .bounded(
                    redis::cmd("ZRANGE")
                        .arg(keys.of(Key::DrawSealed))
                        .arg(start)
                        .arg(start + MIX_BATCH - 1)
                        .query_async(&mut connection),
                )
                .await
                .map_err(StoreError::for_read)?;
            let done = (page.len() as isize) < MIX_BATCH;
            sealed.extend(page);
            if done {
                break;
            }
        }
        // A member is `mac (64) .. tag (12) .. id`.
        let mut tickets: Vec<(&str, &str)> = Vec::with_capacity(sealed.len());
        for member in &sealed {
            match (member.get(64..76), member.get(76..)) {
                (Some(tag), Some(id)) if !id.is_empty() => tickets.push((tag, id)),
                _ => {
                    return Err(StoreError::Corrupt(
                        "a sealed draw member is malformed".into(),
                    ))
                }
            }
        }
        let tags: Vec<&str> = tickets.iter().map(|(tag, _)| *tag).collect();
        let tags_hash = crate::draw::tags_sha256(&tags);
        let mixed = crate::draw::mixed_seed(&seed, &tags_hash, None)
            .ok_or_else(|| StoreError::Corrupt("the draw's tags hash is not hex".into()))?;
        let mixed_hex = crate::draw::hex32(&mixed);
        let chunk = usize::try_from(MIX_BATCH).unwrap_or(1).max(1);
        let batches = tickets.len().div_ceil(chunk).max(1);
        for batch in 0..batches {
            let mut call = self.scripts.draw_mix.call(&keys);
            call.arg("generation", room.generation)
                .arg("holder", request.holder)
                .arg("fence", request.epoch)
                .arg("last", if batch + 1 == batches { "1" } else { "0" })
                .arg("tags_sha256", &tags_hash)
                .arg("draw_seed", &mixed_hex);
            for (tag, id) in tickets.iter().skip(batch * chunk).take(chunk) {
                let mut member = crate::draw::hex32(&crate::draw::draw_mac(&mixed, tag));
                member.push_str(tag);
                member.push_str(id);
                call.item(&[member]);
            }
            let reply = self.link.run(&call).await?;
            match reply.first().map(as_string).transpose()?.as_deref() {
                Some("FILED") => {}
                Some("ALREADY") => return Ok(None),
                Some("FENCED") => return Ok(Some(DrawOutcome::Fenced)),
                other => {
                    return Err(StoreError::Corrupt(format!("draw mix outcome {other:?}")));
                }
            }
        }
        Ok(None)
    }
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
                    .arg(&["seed", "drawn_ms", "count", "tags_sha256"])
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
        // A step that answers MIX is made again once the mixed order is filed, so the caller's
        // step still places up to `places_per_step` tickets.
        let mut mixed = false;
        loop {
            match self.draw_step(room, request).await? {
                None if !mixed => {
                    mixed = true;
                    let record = self
                        .draw_record(room)
                        .await?
                        .ok_or(StoreError::Corrupt("the draw seed vanished".into()))?;
                    if let Some(outcome) = self.mix_draw(room, request, &record.seed).await? {
                        return Ok(outcome);
                    }
                }
                None => {
                    return Err(StoreError::Corrupt(
                        "the draw's mix was not recorded".into(),
                    ))
                }
                Some(outcome) => return Ok(outcome),
            }
        }
    }
}

impl RedisStore {
    /// One `draw.lua` step; `None` = MIX (the pre-queue is closed, its mixed order not filed).
    async fn draw_step(
        &self,
        room: RoomId<'_>,
        request: &DrawRequest<'_>,
    ) -> Result<Option<DrawOutcome>, StoreError> {
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
        Ok(Some(match outcome.as_str() {
            "DRAWN" => DrawOutcome::Drawn { count: count()? },
            "PLACED" => DrawOutcome::Placed { placed: count()? },
            "ALREADY" => DrawOutcome::AlreadyDrawn,
            "FENCED" => DrawOutcome::Fenced,
            "NO_SEED" => DrawOutcome::NoSeed,
            // The pre-queue is closed (this step or an earlier one), its mixed order not filed.
            "MIX" => return Ok(None),
            other => {
                return Err(StoreError::Corrupt(format!("draw outcome {other:?}")));
            }
        }))
    }
}
