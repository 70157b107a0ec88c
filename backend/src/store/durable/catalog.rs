//! The durable store's half of [`Catalog`]: creating and deleting a room and the audit log are
//! journaled (`initRoom`, `deleteRoom`, `audit`; the snapshot keeps the audit logs too); the
//! waiters list is the engine's.

use async_trait::async_trait;

use super::change::Change;
use super::DurableStore;
use crate::store::{
    AuditRecord, Catalog, RoomDeletion, Settings, StoreError, VersionedSettings, WaiterPage,
};

#[async_trait]
impl Catalog for DurableStore {
    async fn list_rooms(&self) -> Result<Vec<String>, StoreError> {
        self.engine.list_rooms().await
    }

    async fn create_room(
        &self,
        room: &str,
        settings: &Settings,
        _incarnation: &str,
    ) -> Result<Option<VersionedSettings>, StoreError> {
        let first_version = crate::store::catalog::first_version();
        self.change(|engine| {
            let (in_force, created) = engine.create_room(room, settings, first_version);
            let change = created.then(|| Change::InitRoom {
                room: room.to_owned(),
                defaults: settings.clone(),
                first_version,
            });
            Ok((created.then_some(in_force), change))
        })
    }

    async fn delete_room(
        &self,
        room: &str,
        force: bool,
        now_ms: u64,
    ) -> Result<RoomDeletion, StoreError> {
        self.change(|engine| {
            let outcome = engine.remove_room(room, force, now_ms);
            let change =
                matches!(outcome, RoomDeletion::Deleted { .. }).then(|| Change::DeleteRoom {
                    room: room.to_owned(),
                    now_ms,
                });
            Ok((outcome, change))
        })
    }

    async fn deleted_rooms(&self) -> Result<Vec<String>, StoreError> {
        self.engine.deleted_rooms().await
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

    async fn waiters(&self, room: &str, offset: u64, limit: u64) -> Result<WaiterPage, StoreError> {
        self.engine.waiters(room, offset, limit).await
    }
}
