//! The durable store's half of [`Catalog`]: creating and deleting a room and the audit log are
//! journaled (`initRoom`, `deleteRoom`, `audit`; the snapshot keeps the audit logs too); the
//! waiters list is the engine's.

use async_trait::async_trait;

use super::change::Change;
use super::DurableStore;
use crate::{
    AuditRecord, Catalog, RoomDeletion, RoomDoc, RoomId, Settings, SettingsPatch, SettingsUpdate,
    StoreError, VersionedSettings, WaiterPage,
};

#[async_trait]
impl Catalog for DurableStore {
    async fn update_room(
        &self,
        room: RoomId<'_>,
        _base: &VersionedSettings,
        patch: &SettingsPatch,
        expected_version: Option<u64>,
    ) -> Result<SettingsUpdate, StoreError> {
        self.change(|engine| {
            let update = engine.with_room(room, |state| {
                state.update(patch, expected_version, || engine.next_count(room.slug))
            })?;
            let change = match &update {
                SettingsUpdate::Applied(in_force) => Some(Change::UpdateRoom {
                    room: room.slug.to_owned(),
                    config: in_force.settings.clone(),
                }),
                SettingsUpdate::VersionMismatch(_) => None,
            };
            Ok((update, change))
        })
    }

    async fn list_rooms(&self) -> Result<Vec<String>, StoreError> {
        self.engine.list_rooms().await
    }

    async fn room_doc(&self, slug: &str) -> Result<Option<RoomDoc>, StoreError> {
        self.engine.room_doc(slug).await
    }

    async fn create_room(
        &self,
        slug: &str,
        settings: &Settings,
    ) -> Result<Option<VersionedSettings>, StoreError> {
        self.change(|engine| {
            let (in_force, created) = engine.create_room(slug, settings);
            let change = created.then(|| Change::InitRoom {
                room: slug.to_owned(),
                defaults: settings.clone(),
            });
            Ok((created.then_some(in_force), change))
        })
    }

    async fn seed_room(
        &self,
        slug: &str,
        defaults: &Settings,
    ) -> Result<VersionedSettings, StoreError> {
        self.change(|engine| {
            let (in_force, created) = engine.create_room(slug, defaults);
            let change = created.then(|| Change::InitRoom {
                room: slug.to_owned(),
                defaults: defaults.clone(),
            });
            Ok((in_force, change))
        })
    }

    async fn write_back_room(
        &self,
        slug: &str,
        held: &VersionedSettings,
    ) -> Result<VersionedSettings, StoreError> {
        self.engine.write_back_room(slug, held).await
    }

    async fn delete_room(
        &self,
        room: RoomId<'_>,
        force: bool,
        now_ms: u64,
    ) -> Result<RoomDeletion, StoreError> {
        self.change(|engine| {
            let outcome = engine.remove_room(room.slug, Some(room.generation), force, now_ms);
            let change =
                matches!(outcome, RoomDeletion::Deleted { .. }).then(|| Change::DeleteRoom {
                    room: room.slug.to_owned(),
                    now_ms,
                });
            Ok((outcome, change))
        })
    }

    async fn append_audit(
        &self,
        room: &str,
        entries: &[AuditRecord],
    ) -> Result<Vec<String>, StoreError> {
        self.change(|engine| {
            let ids = engine.push_audit(room, entries, false);
            let kept = entries
                .iter()
                .zip(&ids)
                .map(|(entry, id)| AuditRecord {
                    id: id.clone(),
                    ..entry.clone()
                })
                .collect();
            let change = Change::Audit {
                room: room.to_owned(),
                entries: kept,
            };
            Ok((ids, Some(change)))
        })
    }

    async fn audit(&self, room: &str, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        self.engine.audit(room, limit).await
    }

    async fn waiters(
        &self,
        room: RoomId<'_>,
        offset: u64,
        limit: u64,
    ) -> Result<WaiterPage, StoreError> {
        self.engine.waiters(room, offset, limit).await
    }
}
