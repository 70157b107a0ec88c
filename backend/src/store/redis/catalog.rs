//! Redis's half of [`Catalog`]: the set `vestibule:{_catalog}:rooms` names the rooms and the hash
//! `vestibule:{_catalog}:deleted` the deleted ones (keys of their own: no script nor pipeline
//! touches them together with a room's keys, and they share the hash tag `{_catalog}`, which no
//! room slug can be, so on a Redis Cluster they live on one slot and go in one pipeline), each
//! room's audit log is the stream `vestibule:{r}:audit` (`XADD MAXLEN ~ 10000`), and
//! `waiters.lua` reads a page of the line.

use async_trait::async_trait;
use redis::Value;

use super::reply::{as_array, as_string, as_u64};
use super::settings::GONE;
use super::{Keys, RedisStore};
use crate::store::catalog::AUDIT_KEPT;
use crate::store::{
    AuditRecord, Catalog, RoomDeletion, Settings, SettingsUpdate, StoreError, VersionedSettings,
    WaiterPage, WaiterRecord,
};

/// The set of room slugs.
pub const ROOMS_KEY: &str = "vestibule:{_catalog}:rooms";
/// The hash of deleted rooms: slug → when, Unix ms (removed when the slug is created again).
pub const DELETED_KEY: &str = "vestibule:{_catalog}:deleted";

/// The hash of room incarnations: slug → a random id written when the room is created (and by
/// the first start of a seeded room), so that a replica can tell a room deleted and created again
/// between two of its reads from the room it runs (`room::registry`).
pub const INCARNATIONS_KEY: &str = "vestibule:{_catalog}:incarnations";

/// The catalog's names before it moved to one hash tag (three slots on a cluster), read once
/// by [`RedisStore::move_old_catalog`]: (old, new) for the set, then the two hashes.
const OLD_CATALOG: [(&str, &str); 3] = [
    ("vestibule:rooms", ROOMS_KEY),
    ("vestibule:rooms:deleted", DELETED_KEY),
    ("vestibule:rooms:incarnations", INCARNATIONS_KEY),
];

/// The steps of `catalog.lua`.
#[derive(Clone, Copy)]
enum CatalogStep {
    /// List a new slug under its incarnation (a create).
    Create,
    /// List a slug, keeping its incarnation (seeding, a room the store lost).
    Ensure,
    /// Unlist a slug and drop its incarnation (a delete, after its mark).
    Delete,
    /// Take back a creation that failed after registering.
    Undo,
}

/// One step of `catalog.lua` on `room` over `link`; whether it changed the list (see the
/// script). Not resent: a creation sent twice would find its own slug listed and answer "exists".
async fn catalog_step(
    link: &super::Link,
    script: &redis::Script,
    room: &str,
    step: CatalogStep,
    incarnation: &str,
) -> Result<bool, StoreError> {
    let mode = match step {
        CatalogStep::Create => "create",
        CatalogStep::Ensure => "ensure",
        CatalogStep::Delete => "delete",
        CatalogStep::Undo => "undo",
    };
    let mut invocation = script.key(ROOMS_KEY);
    invocation
        .key(DELETED_KEY)
        .key(INCARNATIONS_KEY)
        .arg(room)
        .arg(incarnation)
        .arg(mode)
        .arg(crate::store::now_ms());
    let changed = super::reply::as_i64(&link.run_script_value(&invocation).await?)?;
    Ok(changed == 1)
}

/// The key a room's purge always leaves: its audit log outlives it.
const AUDIT: &str = "audit";

impl RedisStore {
    /// Moves a catalog written by an earlier version (`vestibule:rooms`, `…:deleted`,
    /// `…:incarnations`) to its names under `{_catalog}`, once: only while the new set does not
    /// exist and the old one does; then the old keys are deleted (README "Upgrading"). Otherwise
    /// one `EXISTS` per connection (and one `SMEMBERS` while no catalog exists yet).
    pub(super) async fn move_old_catalog(&self) -> Result<(), StoreError> {
        let mut connection = self.link.connection.clone();
        let exists: bool = self
            .link
            .bounded(
                redis::cmd("EXISTS")
                    .arg(ROOMS_KEY)
                    .query_async(&mut connection),
            )
            .await?;
        if exists {
            return Ok(());
        }
        let [(old_rooms, _), (old_deleted, _), (old_incarnations, _)] = OLD_CATALOG;
        let rooms: Vec<String> = self
            .link
            .bounded(
                redis::cmd("SMEMBERS")
                    .arg(old_rooms)
                    .query_async(&mut connection),
            )
            .await?;
        if rooms.is_empty() {
            return Ok(());
        }
        let deleted: Vec<(String, String)> = self
            .link
            .bounded(
                redis::cmd("HGETALL")
                    .arg(old_deleted)
                    .query_async(&mut connection),
            )
            .await?;
        let incarnations: Vec<(String, String)> = self
            .link
            .bounded(
                redis::cmd("HGETALL")
                    .arg(old_incarnations)
                    .query_async(&mut connection),
            )
            .await?;
        // One slot: one transaction. Nothing already under the new names is overwritten.
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("SADD")
            .arg(ROOMS_KEY)
            .arg(&rooms)
            .ignore();
        for (slug, at) in &deleted {
            pipe.cmd("HSETNX")
                .arg(DELETED_KEY)
                .arg(slug)
                .arg(at)
                .ignore();
        }
        for (slug, id) in &incarnations {
            pipe.cmd("HSETNX")
                .arg(INCARNATIONS_KEY)
                .arg(slug)
                .arg(id)
                .ignore();
        }
        let _: () = self.link.bounded(pipe.query_async(&mut connection)).await?;
        for (old, _) in OLD_CATALOG {
            let _: i64 = self
                .link
                .bounded(redis::cmd("DEL").arg(old).query_async(&mut connection))
                .await?;
        }
        tracing::info!(
            rooms = rooms.len(),
            "moved the room catalog to its new Redis keys (vestibule:{{_catalog}}:…)"
        );
        Ok(())
    }

    /// Adds `room` to the set of rooms (`catalog.lua`, one step as other replicas read the
    /// catalog); true when it was not there. With `create` (the new incarnation), only a slug
    /// not listed is registered, under that incarnation; otherwise (a seeded room, or one the
    /// store lost) the slug is listed, no longer marked deleted, and keeps its incarnation if it
    /// has one (else a fresh one).
    pub(super) async fn register_room(
        &self,
        room: &str,
        create: Option<&str>,
    ) -> Result<bool, StoreError> {
        match create {
            Some(incarnation) => {
                self.catalog_step(room, CatalogStep::Create, incarnation)
                    .await
            }
            None => {
                let fresh = crate::ids::random_id();
                self.catalog_step(room, CatalogStep::Ensure, &fresh).await
            }
        }
    }

    /// Lists `room` again (a room the store lost) under `incarnation`, the one the caller runs it
    /// under, if the store has none for it (else a fresh one): a new one would have every
    /// replica restart the room (found by a probe).
    pub(super) async fn relist_room(
        &self,
        room: &str,
        incarnation: Option<&str>,
    ) -> Result<bool, StoreError> {
        match incarnation {
            Some(incarnation) => {
                self.catalog_step(room, CatalogStep::Ensure, incarnation)
                    .await
            }
            None => self.register_room(room, None).await,
        }
    }

    /// One step of `catalog.lua` on `room`; whether it changed the list (see the script).
    async fn catalog_step(
        &self,
        room: &str,
        step: CatalogStep,
        incarnation: &str,
    ) -> Result<bool, StoreError> {
        catalog_step(&self.link, &self.scripts.catalog, room, step, incarnation).await
    }

    /// Takes back a create of `room` under `incarnation` that failed (`catalog.lua` undo: only
    /// while the slug is still under that incarnation, so it is safe whether or not the create's
    /// steps reached Redis). Tried at once, then, while Redis does not answer (the create failed
    /// for that, found by a probe: a stalled Redis left slugs listed with no settings), every
    /// half second for a minute in the background.
    fn take_back_create(&self, room: &str, incarnation: &str) {
        let (link, script) = (self.link.clone(), self.scripts.catalog.clone());
        let (room, incarnation) = (room.to_owned(), incarnation.to_owned());
        tokio::spawn(async move {
            for attempt in 0..120u32 {
                match catalog_step(&link, &script, &room, CatalogStep::Undo, &incarnation).await {
                    Ok(taken_back) => {
                        if taken_back {
                            tracing::info!(%room, "a create that failed was taken back: the slug is free");
                        }
                        return;
                    }
                    Err(error) if attempt == 119 => {
                        tracing::warn!(%room, %error, "a failed create could not be taken back; delete the room to free its slug");
                    }
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(500)).await,
                }
            }
        });
    }

    /// The steps of a create after its slug is registered, under the room's tombstone (the
    /// deleted room's, or one set here for a new slug) so that no script writes the room and
    /// nobody reads its settings until they are all written: the deleted room's keys purged,
    /// the settings and secret written (`init_room.lua`, the tombstone kept), then the rest of
    /// `settings`, the first version (above every earlier room's of the slug) and the removal of
    /// the tombstone in one last step (`update_room.lua`). Returns the settings in force.
    async fn write_new_room(
        &self,
        room: &str,
        settings: &Settings,
    ) -> Result<VersionedSettings, StoreError> {
        let mut connection = self.link.connection.clone();
        let _: Value = self
            .link
            .bounded(
                redis::cmd("SET")
                    .arg(Keys::new(room).key(GONE))
                    .arg(crate::store::now_ms())
                    .arg("NX")
                    .query_async(&mut connection),
            )
            .await?;
        self.purge_room(room, true).await?;
        self.write_initial_settings(room, settings, super::settings::InitStep::Create)
            .await?;
        match self
            .update_room_in_redis(
                room,
                &settings.as_patch(),
                None,
                super::settings::UpdateStep::Create(crate::store::catalog::first_version()),
            )
            .await?
        {
            SettingsUpdate::Applied(in_force) | SettingsUpdate::VersionMismatch(in_force) => {
                Ok(in_force)
            }
        }
    }

    /// Deletes every key of `room` but its audit log, its secret and, with `keep_tombstone`, its
    /// tombstone (`SCAN` + `UNLINK`, a batch at a time). The secret stays with the slug: a room
    /// created again derives the same ticket id for an `Idempotency-Key` on every replica, those
    /// that have not yet learnt of the new room (and still hold the secret) included (found by
    /// a probe: within a tick of a create, a replica made a second ticket for a key with the
    /// deleted room's secret).
    async fn purge_room(&self, room: &str, keep_tombstone: bool) -> Result<(), StoreError> {
        let keys = Keys::new(room);
        // This process's copies of the room's seed and queueing method go with it (another
        // replica's copies stay until it restarts: a slug deleted and created again).
        self.forget_seed(room);
        self.note_lottery(room, false);
        let audit = keys.key(AUDIT);
        let secret = keys.key("secret");
        let tombstone = keys.key(GONE);
        let pattern = format!("{}*", keys.prefix);
        let mut connection = self.link.connection.clone();
        let mut cursor = 0u64;
        loop {
            // On a cluster, SCAN has no key to be routed by: it goes to the master of the room's
            // slot, where all of the room's keys are.
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000);
            let reply = self
                .link
                .bounded(connection.on_slot_master(&keys.prefix, scan))
                .await?;
            let (next, found): (u64, Vec<String>) =
                redis::from_redis_value(reply).map_err(|error| {
                    StoreError::Corrupt(format!("SCAN answered something else: {error}"))
                })?;
            let doomed: Vec<&String> = found
                .iter()
                .filter(|key| {
                    **key != audit && **key != secret && !(keep_tombstone && **key == tombstone)
                })
                .collect();
            if !doomed.is_empty() {
                let _: i64 = self
                    .link
                    .bounded(
                        redis::cmd("UNLINK")
                            .arg(&doomed)
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
}

#[async_trait]
impl Catalog for RedisStore {
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

    async fn create_room(
        &self,
        room: &str,
        settings: &Settings,
        incarnation: &str,
    ) -> Result<Option<VersionedSettings>, StoreError> {
        // The set decides who creates: one SADD wins. Keys a deleted room's replicas may have
        // written back since are cleared before the settings are written. A deleted room's
        // tombstone stays through the purge: `init_room.lua` removes it in the same step as it
        // writes the settings and the secret, so a replica still running the deleted room
        // (it has not read the new incarnation yet) writes nothing meanwhile — with the
        // tombstone gone first, its lease wrote default settings and the old room's secret,
        // which the new room then kept (found by a review).
        let registered = match self.register_room(room, Some(incarnation)).await {
            Ok(registered) => registered,
            Err(error) => {
                // Maybe listed all the same (sent, not confirmed): taken back if so.
                self.take_back_create(room, incarnation);
                return Err(error);
            }
        };
        if !registered {
            return Ok(None);
        }
        match self.write_new_room(room, settings).await {
            Ok(in_force) => Ok(Some(in_force)),
            Err(error) => {
                // Listed with no settings (or not all of them), the slug would be stuck: every
                // replica failing to start it, a retried create answered 409. Taken back instead
                // (if still this creation's), the slug is deleted as before and can be created
                // again.
                self.take_back_create(room, incarnation);
                Err(error)
            }
        }
    }

    async fn delete_room(
        &self,
        room: &str,
        force: bool,
        now_ms: u64,
    ) -> Result<RoomDeletion, StoreError> {
        let mut connection = self.link.connection.clone();
        let member: i64 = self
            .link
            .bounded(
                redis::cmd("SISMEMBER")
                    .arg(ROOMS_KEY)
                    .arg(room)
                    .query_async(&mut connection),
            )
            .await?;
        if member == 0 {
            return Ok(RoomDeletion::NotFound);
        }
        let counts = self.counts_in_redis(room, now_ms).await?;
        if !force && (counts.waiting > 0 || counts.active > 0) {
            return Ok(RoomDeletion::NotEmpty {
                waiting: counts.waiting,
                active: counts.active,
            });
        }
        // The marks first: a replica that finds the room gone from the list then finds the mark
        // (`room::registry`), and never takes it for a room Redis lost; the tombstone stops
        // every replica's scripts from writing the room's settings back or changing them.
        // Two commands, not one pipeline: the mark is in the catalog's slot, the tombstone in
        // the room's (a Redis Cluster refuses a pipeline across slots). Stopped between them,
        // the room is still listed and works; the delete, retried, finishes it.
        let _: i64 = self
            .link
            .bounded(
                redis::cmd("HSET")
                    .arg(DELETED_KEY)
                    .arg(room)
                    .arg(now_ms)
                    .query_async(&mut connection),
            )
            .await?;
        let _: () = self
            .link
            .bounded(
                redis::cmd("SET")
                    .arg(Keys::new(room).key(GONE))
                    .arg(now_ms)
                    .query_async(&mut connection),
            )
            .await?;
        // Unlisted with its incarnation in one step: a replica that then finds the slug
        // missing under another incarnation knows it was created again, never deleted twice.
        let removed = self.catalog_step(room, CatalogStep::Delete, "").await?;
        if !removed {
            return Ok(RoomDeletion::NotFound);
        }
        self.purge_room(room, true).await?;
        Ok(RoomDeletion::Deleted {
            ended: counts.waiting + counts.active,
        })
    }

    async fn deleted_rooms(&self) -> Result<Vec<String>, StoreError> {
        let mut connection = self.link.connection.clone();
        self.link
            .bounded(
                redis::cmd("HKEYS")
                    .arg(DELETED_KEY)
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)
    }

    fn forget_room(&self, room: &str) {
        self.forget_seed(room);
        self.note_lottery(room, false);
        self.secrets
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(room);
    }

    async fn keep_incarnation(&self, room: &str, incarnation: &str) -> Result<(), StoreError> {
        let mut connection = self.link.connection.clone();
        let _: i64 = self
            .link
            .bounded(
                redis::cmd("HSETNX")
                    .arg(INCARNATIONS_KEY)
                    .arg(room)
                    .arg(incarnation)
                    .query_async(&mut connection),
            )
            .await?;
        Ok(())
    }

    async fn incarnations(&self) -> Result<std::collections::HashMap<String, String>, StoreError> {
        let mut connection = self.link.connection.clone();
        self.link
            .bounded(
                redis::cmd("HGETALL")
                    .arg(INCARNATIONS_KEY)
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)
    }

    async fn append_audit(
        &self,
        room: &str,
        entries: &[AuditRecord],
    ) -> Result<Vec<String>, StoreError> {
        let key = Keys::new(room).key("audit");
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

    async fn audit(&self, room: &str, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        let key = Keys::new(room).key("audit");
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

    async fn waiters(&self, room: &str, offset: u64, limit: u64) -> Result<WaiterPage, StoreError> {
        let keys = Keys::new(room);
        let mut invocation = self.scripts.waiters.key(keys.key("queue"));
        // Ranks as Redis reads them (i64): an offset past the end lists nobody.
        let first = offset.min(i64::MAX as u64 - 1);
        let last = first.saturating_add(limit.max(1) - 1).min(i64::MAX as u64);
        invocation.arg(&keys.prefix).arg(first).arg(last);
        let reply = self
            .link
            .run_script(&invocation)
            .await
            .map_err(StoreError::for_read)?;
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
