//! A room's settings change (`change.lua`) and its scheduler lease (`lease.lua`,
//! `release_lease.lua`).

use super::doc::{self, Encoded};
use super::keys::RoomKeys;
use super::reply::{as_array, as_string, as_u64};
use super::RedisStore;
use crate::{
    Catalog, LeaseOutcome, Pace, RoomId, SettingsPatch, SettingsUpdate, StoreError,
    VersionedSettings,
};

/// How many times a change without `If-Match` is tried when other changes keep coming between
/// its read of the document and its compare-and-set.
const CHANGE_TRIES: usize = 5;

impl RedisStore {
    /// `change.lua`: `patch` applied to `base`, as a compare-and-set on the generation and
    /// `base`'s version: one call when `base` is what the store holds. With `expected_version`,
    /// only at that version (the document is read first when `base` is at another); without,
    /// tried again on the newer document the script answers when another change came between.
    pub(super) async fn update_room_in_redis(
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
            for triple in changed_fields(&before, &after) {
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

    pub(super) async fn lease_in_redis(
        &self,
        room: RoomId<'_>,
        holder: &str,
        lease_ms: u64,
    ) -> Result<LeaseOutcome, StoreError> {
        let keys = RoomKeys::new(room);
        // This process's copy of the room secret goes along, so that a Redis restarted without
        // persistence gets the same secret back and retried joins keep finding their tickets.
        let secret = self.cached_secret(room);
        let mut call = self.scripts.lease.call(&keys);
        call.arg("generation", room.generation)
            .arg("holder", holder)
            .arg("lease_ms", lease_ms)
            .arg("secret_offer", secret.as_deref().unwrap_or_default());
        let reply = self.link.run(&call).await?;
        let [epoch, secret, active, pace, fields] = reply.as_slice() else {
            return Err(StoreError::Corrupt("lease reply needs 5 fields".into()));
        };
        self.remember_secret(room, secret, false)?;
        let settings: VersionedSettings = doc::decode_live(room.slug, &as_array(fields.clone())?)?;
        let epoch = as_u64(epoch)?;
        Ok(LeaseOutcome {
            epoch: (epoch > 0).then_some(epoch),
            settings,
            active: as_u64(active)?,
            pace: Pace::decode(&as_string(pace)?),
        })
    }

    pub(super) async fn release_lease_in_redis(
        &self,
        room: RoomId<'_>,
        holder: &str,
    ) -> Result<(), StoreError> {
        let keys = RoomKeys::new(room);
        let mut call = self.scripts.release_lease.call(&keys);
        call.arg("holder", holder);
        self.link.run_value(&call).await.map(drop)
    }
}

/// The script fields whose value differs between two encodings, as `change.lua` takes them:
/// (field, value, `1` set | `0` removed).
fn changed_fields(before: &Encoded, after: &Encoded) -> Vec<[String; 3]> {
    let value = |encoded: &Encoded, field: &str| {
        encoded
            .set
            .iter()
            .find(|(name, _)| *name == field)
            .map(|(_, value)| value.clone())
    };
    after
        .triples()
        .into_iter()
        .filter(|[field, ..]| value(before, field) != value(after, field))
        .collect()
}
