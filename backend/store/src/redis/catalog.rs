//! Redis's half of [`Catalog`]: each room's document (`doc.rs`) written by `create.lua`,
//! `write_back.lua` and `delete.lua`, the index of slugs ([`ROOMS_KEY`], written after a create and
//! removed after a delete), the purge of a generation's keys, each room's audit log (the stream
//! `vestibule:{r}:audit`, `XADD MAXLEN ~ 10000`), and `waiters.lua`, a page of the line.

use async_trait::async_trait;
use redis::Value;

use super::doc;
use super::keys::{generation_prefix, slug_prefix, Key, RoomKeys, ROOMS_KEY};
use super::reply::{as_array, as_string, as_u64};
use super::{fresh_secret, Link, RedisStore};
use crate::catalog::AUDIT_KEPT;
use crate::{
    AuditRecord, Catalog, RoomDeletion, RoomDoc, RoomId, Settings, SettingsPatch, SettingsUpdate,
    StoreError, VersionedSettings, WaiterPage, WaiterRecord,
};

/// How many times a change without `If-Match` is tried when other changes keep coming between
/// its read of the document and its compare-and-set.
const CHANGE_TRIES: usize = 5;

impl RedisStore {
    /// `create.lua`: a new generation of `slug` with `settings`, unless a live one holds it;
    /// the reply's status and the document in force.
    async fn create_generation(
        &self,
        slug: &str,
        settings: &Settings,
    ) -> Result<(bool, VersionedSettings), StoreError> {
        let encoded = doc::encode(settings)?;
        let keys = RoomKeys::slug(slug);
        let mut call = self.scripts.create.call(&keys);
        call.arg("slug_prefix", slug_prefix(slug))
            .arg("secret", &fresh_secret()[..])
            .arg("cfg", &encoded.cfg);
        for triple in encoded.triples() {
            call.item(&triple);
        }
        // Not resent: a create sent twice would find its own room and answer "exists".
        let reply = self.link.run(&call).await?;
        let [status, fields] = reply.as_slice() else {
            return Err(StoreError::Corrupt("create reply needs 2 fields".into()));
        };
        let in_force = doc::decode_live(slug, &as_array(fields.clone())?)?;
        let created = as_string(status)? == "created";
        if created {
            self.note_lottery(
                RoomId::new(slug, in_force.generation),
                in_force.settings.queueing_method.is_random(),
            );
            // The index after the document; a failure here is mended by the replicas' syncs,
            // which list every live room they run.
            if let Err(error) = self.index_room(slug, true).await {
                tracing::warn!(room = slug, %error, "a created room could not be indexed yet; the next sync does it");
            }
            // Keys an earlier generation left behind (a purge that failed) go now, in the
            // background: nothing writes them any more.
            let link = self.link.clone();
            let (slug, below) = (slug.to_owned(), in_force.generation);
            tokio::spawn(async move {
                if let Err(error) = purge(&link, &slug, Purge::Below(below)).await {
                    tracing::debug!(room = %slug, %error, "keys of earlier generations stay for now");
                }
            });
        }
        Ok((created, in_force))
    }
}

/// Which keys of a slug a purge removes.
#[derive(Debug, Clone, Copy)]
enum Purge {
    /// Those of one generation.
    Generation(u64),
    /// Those of every generation below this one.
    Below(u64),
}

/// The generation a key of `slug` belongs to (`None`: a key of the slug itself).
fn generation_of(slug: &str, key: &str) -> Option<u64> {
    let rest = key.strip_prefix(&slug_prefix(slug))?;
    if [Key::Doc, Key::Gen, Key::Audit]
        .iter()
        .any(|own| rest == own.name())
        || rest.starts_with("pow:")
    {
        return None;
    }
    // `g<n>:…` is generation n's; anything else is generation 0's (before generations).
    let numbered = rest
        .strip_prefix('g')
        .and_then(|tail| tail.split_once(':'))
        .and_then(|(n, _)| n.parse().ok());
    Some(numbered.unwrap_or(0))
}

/// Removes the keys of `slug` that `which` names (`SCAN` on the slot's master + `UNLINK`, a batch
/// at a time). Safe at any time: no script writes a generation that is not live.
async fn purge(link: &Link, slug: &str, which: Purge) -> Result<(), StoreError> {
    let pattern = match which {
        Purge::Generation(generation) if generation > 0 => {
            format!("{}*", generation_prefix(slug, generation))
        }
        _ => format!("{}*", slug_prefix(slug)),
    };
    let doomed = |key: &String| match (which, generation_of(slug, key)) {
        (Purge::Generation(generation), Some(of)) => of == generation,
        (Purge::Below(below), Some(of)) => of < below,
        (_, None) => false,
    };
    let mut connection = link.connection.clone();
    let mut cursor = 0u64;
    loop {
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000);
        // On a cluster SCAN has no key to be routed by: it goes to the master of the room's
        // slot, where all of the room's keys are.
        let reply = link
            .bounded(connection.on_slot_master(&slug_prefix(slug), scan))
            .await?;
        let (next, found): (u64, Vec<String>) =
            redis::from_redis_value(reply).map_err(|error| {
                StoreError::Corrupt(format!("SCAN answered something else: {error}"))
            })?;
        let batch: Vec<&String> = found.iter().filter(|key| doomed(key)).collect();
        if !batch.is_empty() {
            let _: i64 = link
                .bounded(
                    redis::cmd("UNLINK")
                        .arg(&batch)
                        .query_async(&mut connection),
                )
                .await?;
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

#[async_trait]
impl Catalog for RedisStore {
    /// `change.lua`: `patch` applied to `base`, as a compare-and-set on the generation and
    /// `base`'s version: one call when `base` is what the store holds. With `expected_version`,
    /// only at that version (the document is read first when `base` is at another); without,
    /// tried again on the newer document the script answers when another change came between.
    async fn update_room(
        &self,
        room: RoomId<'_>,
        base: &VersionedSettings,
        patch: &SettingsPatch,
        expected_version: Option<u64>,
    ) -> Result<SettingsUpdate, StoreError> {
        let stale_base = base.generation != room.generation
            || expected_version.is_some_and(|expected| expected != base.version);
        let mut current = if stale_base {
            self.room_settings(room.slug).await?
        } else {
            base.clone()
        };
        for _ in 0..CHANGE_TRIES {
            if current.generation != room.generation {
                return Err(StoreError::RoomGone(room.slug.to_owned()));
            }
            if expected_version.is_some_and(|expected| expected != current.version) {
                return Ok(SettingsUpdate::VersionMismatch(current));
            }
            let new = current.settings.patched(patch);
            let before = doc::encode(&current.settings)?;
            let after = doc::encode(&new)?;
            let keys = RoomKeys::new(room);
            let mut call = self.scripts.change.call(&keys);
            call.arg("generation", room.generation)
                .arg("expected", current.version)
                .arg("cfg", &after.cfg);
            for triple in doc::changed_fields(&before, &after) {
                call.item(&triple);
            }
            let reply = self.link.run(&call).await?;
            let [status, fields] = reply.as_slice() else {
                return Err(StoreError::Corrupt("change reply needs 2 fields".into()));
            };
            let in_force = doc::decode_live(room.slug, &as_array(fields.clone())?)?;
            match as_string(status)?.as_str() {
                "applied" => {
                    let random = in_force.settings.queueing_method.is_random();
                    self.note_lottery(room, random);
                    // A switch to random files every waiting ticket under its key before
                    // answering (lottery_file.lua, in batches); until then nobody is admitted.
                    if random && !current.settings.queueing_method.is_random() {
                        self.file_lottery(room).await?;
                    }
                    return Ok(SettingsUpdate::Applied(in_force));
                }
                "mismatch" if expected_version.is_none() => current = in_force,
                "mismatch" => return Ok(SettingsUpdate::VersionMismatch(in_force)),
                other => return Err(StoreError::Corrupt(format!("change answered {other:?}"))),
            }
        }
        Err(StoreError::Unavailable(format!(
            "room {} changed under each of {CHANGE_TRIES} tries; try again",
            room.slug
        )))
    }

    async fn list_rooms(&self) -> Result<Vec<String>, StoreError> {
        let mut connection = self.link.connection.clone();
        let mut rooms: Vec<String> = self
            .link
            .bounded(
                redis::cmd("SMEMBERS")
                    .arg(ROOMS_KEY)
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)?;
        rooms.sort_unstable();
        Ok(rooms)
    }

    async fn room_doc(&self, slug: &str) -> Result<Option<RoomDoc>, StoreError> {
        let mut connection = self.link.connection.clone();
        let fields: Vec<Value> = self
            .link
            .bounded(
                redis::cmd("HGETALL")
                    .arg(RoomKeys::slug(slug).of(Key::Doc))
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)?;
        doc::decode(&fields)
    }

    async fn create_room(
        &self,
        slug: &str,
        settings: &Settings,
    ) -> Result<Option<VersionedSettings>, StoreError> {
        let (created, in_force) = self.create_generation(slug, settings).await?;
        Ok(created.then_some(in_force))
    }

    async fn seed_room(
        &self,
        slug: &str,
        defaults: &Settings,
    ) -> Result<VersionedSettings, StoreError> {
        let (created, in_force) = self.create_generation(slug, defaults).await?;
        if !created {
            // Seeding lists a live room that the index lacks (a create whose last step failed).
            self.index_room(slug, true).await?;
        }
        Ok(in_force)
    }

    async fn write_back_room(
        &self,
        slug: &str,
        held: &VersionedSettings,
    ) -> Result<VersionedSettings, StoreError> {
        let encoded = doc::encode(&held.settings)?;
        let keys = RoomKeys::slug(slug);
        let mut call = self.scripts.write_back.call(&keys);
        call.arg("generation", held.generation)
            .arg("version", held.version)
            .arg("cfg", &encoded.cfg);
        for triple in encoded.triples() {
            call.item(&triple);
        }
        // Means the same sent twice: the first write wins.
        let reply = self.link.run_repeatable(&call).await?;
        let [status, fields] = reply.as_slice() else {
            return Err(StoreError::Corrupt(
                "write_back reply needs 2 fields".into(),
            ));
        };
        let in_force = doc::decode_live(slug, &as_array(fields.clone())?)?;
        if in_force.generation != held.generation {
            return Err(StoreError::RoomGone(slug.to_owned()));
        }
        if as_string(status)? == "written" {
            tracing::warn!(
                room = slug,
                generation = held.generation,
                version = held.version,
                "the store had lost this room: written back as this replica held it"
            );
        }
        self.index_room(slug, true).await?;
        Ok(in_force)
    }

    async fn delete_room(
        &self,
        room: RoomId<'_>,
        force: bool,
        now_ms: u64,
    ) -> Result<RoomDeletion, StoreError> {
        let keys = RoomKeys::new(room);
        let mut call = self.scripts.delete.call(&keys);
        call.arg("generation", room.generation)
            .arg("force", if force { "1" } else { "0" })
            .arg("now_ms", now_ms);
        let reply = match self.link.run(&call).await {
            Ok(reply) => reply,
            Err(StoreError::RoomGone(_)) => return Ok(RoomDeletion::NotFound),
            Err(error) => return Err(error),
        };
        let [status, waiting, active] = reply.as_slice() else {
            return Err(StoreError::Corrupt("delete reply needs 3 fields".into()));
        };
        let (waiting, active) = (as_u64(waiting)?, as_u64(active)?);
        if as_string(status)? == "not_empty" {
            return Ok(RoomDeletion::NotEmpty { waiting, active });
        }
        self.note_lottery(room, false);
        // The document says deleted: the index and the keys follow. A failure of either is left
        // to later (the syncs mend the index; the next create purges what is left).
        if let Err(error) = self.index_room(room.slug, false).await {
            tracing::warn!(room = room.slug, %error, "a deleted room stays in the index until the next sync");
        }
        if let Err(error) = purge(&self.link, room.slug, Purge::Generation(room.generation)).await {
            tracing::warn!(room = room.slug, %error, "a deleted room's keys stay until it is created again");
        }
        Ok(RoomDeletion::Deleted {
            ended: waiting + active,
        })
    }

    async fn index_room(&self, slug: &str, listed: bool) -> Result<(), StoreError> {
        let mut connection = self.link.connection.clone();
        let command = if listed { "SADD" } else { "SREM" };
        let _: i64 = self
            .link
            .bounded(
                redis::cmd(command)
                    .arg(ROOMS_KEY)
                    .arg(slug)
                    .query_async(&mut connection),
            )
            .await?;
        Ok(())
    }

    async fn append_audit(
        &self,
        slug: &str,
        entries: &[AuditRecord],
    ) -> Result<Vec<String>, StoreError> {
        let key = RoomKeys::slug(slug).of(Key::Audit);
        let mut pipe = redis::pipe();
        for entry in entries {
            let json = serde_json::to_string(entry)
                .map_err(|error| StoreError::Corrupt(format!("audit entry: {error}")))?;
            pipe.cmd("XADD")
                .arg(&key)
                .arg("MAXLEN")
                .arg("~")
                .arg(AUDIT_KEPT)
                .arg("*")
                .arg("entry")
                .arg(json);
        }
        let mut connection = self.link.connection.clone();
        self.link.bounded(pipe.query_async(&mut connection)).await
    }

    async fn audit(&self, slug: &str, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        let key = RoomKeys::slug(slug).of(Key::Audit);
        let mut connection = self.link.connection.clone();
        let reply: Value = self
            .link
            .bounded(
                redis::cmd("XREVRANGE")
                    .arg(&key)
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(limit)
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)?;
        let mut entries = Vec::new();
        for item in as_array(reply)? {
            let [id, fields] = as_array(item)?.try_into().map_err(|_| {
                StoreError::Corrupt("an audit stream entry is not [id, fields]".into())
            })?;
            let fields = as_array(fields)?;
            let Some(json) = fields.get(1) else {
                return Err(StoreError::Corrupt(
                    "an audit entry without its JSON".into(),
                ));
            };
            let mut entry: AuditRecord = serde_json::from_str(&as_string(json)?)
                .map_err(|error| StoreError::Corrupt(format!("audit entry: {error}")))?;
            entry.id = as_string(&id)?;
            entries.push(entry);
        }
        Ok(entries)
    }

    async fn waiters(
        &self,
        room: RoomId<'_>,
        offset: u64,
        limit: u64,
    ) -> Result<WaiterPage, StoreError> {
        let keys = RoomKeys::new(room);
        // Ranks as Redis reads them (i64): an offset past the end lists nobody.
        let first = offset.min(i64::MAX as u64 - 1);
        let last = first.saturating_add(limit.max(1) - 1).min(i64::MAX as u64);
        let mut call = self.scripts.waiters.call(&keys);
        call.arg("generation", room.generation)
            .arg("prefix", keys.prefix())
            .arg("first", first)
            .arg("last", last);
        let reply = self.link.run(&call).await.map_err(StoreError::for_read)?;
        let Some((total, rows)) = reply.split_first() else {
            return Err(StoreError::Corrupt("waiters reply is empty".into()));
        };
        let seconds = |value: &Value| -> Result<Option<u64>, StoreError> {
            let secs = as_u64(value)?;
            Ok((secs > 0).then_some(secs * 1000))
        };
        let mut waiters = Vec::with_capacity(rows.len() / 3);
        for (row, position) in rows.chunks_exact(3).zip(offset + 1..) {
            waiters.push(WaiterRecord {
                position,
                ticket_id: as_string(&row[0])?,
                joined_ms: seconds(&row[1])?,
                seen_ms: seconds(&row[2])?,
            });
        }
        Ok(WaiterPage {
            total: as_u64(total)?,
            waiters,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_of_a_slug_belongs_to_its_generation() {
        assert_eq!(generation_of("a", "vestibule:{a}:g12:queue"), Some(12));
        assert_eq!(generation_of("a", "vestibule:{a}:g3:ticket:xyz"), Some(3));
        assert_eq!(generation_of("a", "vestibule:{a}:queue"), Some(0));
        assert_eq!(generation_of("a", "vestibule:{a}:gone"), Some(0));
        assert_eq!(generation_of("a", "vestibule:{a}:room"), None);
        assert_eq!(generation_of("a", "vestibule:{a}:gen"), None);
        assert_eq!(generation_of("a", "vestibule:{a}:audit"), None);
        assert_eq!(generation_of("a", "vestibule:{a}:pow:abc"), None);
        assert_eq!(generation_of("a", "vestibule:{b}:g1:queue"), None);
    }
}
