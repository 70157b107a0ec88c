//! The embedded engine's half of [`Catalog`]: rooms are the map's entries; the audit log is a
//! bounded deque per room in this process's memory.

use std::sync::atomic::Ordering;

use async_trait::async_trait;

use super::{lock, MemoryStore};
use crate::catalog::AUDIT_KEPT;
use crate::{
    AuditRecord, Catalog, RoomDeletion, RoomDoc, RoomId, Settings, SettingsPatch, SettingsUpdate,
    StoreError, VersionedSettings, WaiterPage, WaiterRecord,
};

impl MemoryStore {
    /// Removes `room`'s live generation unless tickets wait or are active at `now_ms` and
    /// `force` is off; [`RoomDeletion::NotFound`] when `room`'s generation is not live. With
    /// `room` `None` (a journal's replay), whichever generation is live.
    pub fn remove_room(
        &self,
        slug: &str,
        generation: Option<u64>,
        force: bool,
        now_ms: u64,
    ) -> RoomDeletion {
        let mut rooms = lock(&self.rooms);
        let Some(state) = rooms.get(slug).cloned() else {
            return RoomDeletion::NotFound;
        };
        let (counts, live) = {
            let state = lock(&state);
            (state.counts(now_ms), state.generation)
        };
        if generation.is_some_and(|generation| generation != live) {
            return RoomDeletion::NotFound;
        }
        if !force && (counts.waiting > 0 || counts.active > 0) {
            return RoomDeletion::NotEmpty {
                waiting: counts.waiting,
                active: counts.active,
            };
        }
        rooms.remove(slug);
        lock(&self.slugs)
            .entry(slug.to_owned())
            .or_default()
            .deleted = Some(live);
        RoomDeletion::Deleted {
            ended: counts.waiting + counts.active,
        }
    }

    /// Appends `entries` to `room`'s audit log (bounded to [`AUDIT_KEPT`]); their ids. New
    /// entries get `<atMs>-<n>` ids; with `keep_ids` (a journal replay, a snapshot) the entries'
    /// own ids are kept and later ids follow them.
    pub fn push_audit(&self, room: &str, entries: &[AuditRecord], keep_ids: bool) -> Vec<String> {
        let mut audit = lock(&self.audit);
        let log = audit.entry(room.to_owned()).or_default();
        let mut ids = Vec::with_capacity(entries.len());
        for entry in entries {
            let id = if keep_ids {
                let n = entry
                    .id
                    .rsplit('-')
                    .next()
                    .and_then(|n| n.parse::<u64>().ok());
                if let Some(n) = n {
                    self.audit_seq.fetch_max(n + 1, Ordering::Relaxed);
                }
                entry.id.clone()
            } else {
                let n = self.audit_seq.fetch_add(1, Ordering::Relaxed);
                format!("{}-{n}", entry.at_ms)
            };
            ids.push(id.clone());
            log.push_back(AuditRecord {
                id,
                ..entry.clone()
            });
            if log.len() > AUDIT_KEPT {
                log.pop_front();
            }
        }
        ids
    }

    /// Every room's audit log, oldest entry first (for a snapshot).
    pub fn audit_logs(&self) -> std::collections::BTreeMap<String, Vec<AuditRecord>> {
        lock(&self.audit)
            .iter()
            .map(|(room, log)| (room.clone(), log.iter().cloned().collect()))
            .collect()
    }

    /// A page of `room`'s waiting line (see [`Catalog::waiters`]).
    ///
    /// # Errors
    /// [`StoreError::RoomGone`].
    pub fn waiter_page(
        &self,
        room: RoomId<'_>,
        offset: u64,
        limit: u64,
    ) -> Result<WaiterPage, StoreError> {
        self.with_room(room, |state| WaiterPage {
            total: state.queue.len() as u64,
            waiters: state
                .queue
                .iter()
                .skip(usize::try_from(offset).unwrap_or(usize::MAX))
                .take(usize::try_from(limit).unwrap_or(usize::MAX))
                .zip(offset + 1..)
                .map(|((seq, id), position)| WaiterRecord {
                    position,
                    ticket_id: id.to_string(),
                    joined_ms: state.joined.get(&seq).copied(),
                    seen_ms: state.presence.seen_at(id),
                })
                .collect(),
        })
    }
}

#[async_trait]
impl Catalog for MemoryStore {
    async fn update_room(
        &self,
        room: RoomId<'_>,
        _base: &VersionedSettings,
        patch: &SettingsPatch,
        expected_version: Option<u64>,
    ) -> Result<SettingsUpdate, StoreError> {
        self.with_room(room, |state| {
            state.update(patch, expected_version, || self.next_count(room.slug))
        })
    }

    async fn list_rooms(&self) -> Result<Vec<String>, StoreError> {
        Ok(self.room_names())
    }

    async fn room_doc(&self, slug: &str) -> Result<Option<RoomDoc>, StoreError> {
        Ok(self.doc(slug))
    }

    async fn create_room(
        &self,
        slug: &str,
        settings: &Settings,
    ) -> Result<Option<VersionedSettings>, StoreError> {
        let (in_force, created) = MemoryStore::create_room(self, slug, settings);
        Ok(created.then_some(in_force))
    }

    async fn seed_room(
        &self,
        slug: &str,
        defaults: &Settings,
    ) -> Result<VersionedSettings, StoreError> {
        Ok(MemoryStore::create_room(self, slug, defaults).0)
    }

    async fn write_back_room(
        &self,
        slug: &str,
        held: &VersionedSettings,
    ) -> Result<VersionedSettings, StoreError> {
        // One process owns this store: it never loses a room its replica runs.
        match self.doc(slug) {
            Some(RoomDoc::Live(in_force)) if in_force.generation == held.generation => Ok(in_force),
            _ => Err(StoreError::RoomGone(slug.to_owned())),
        }
    }

    async fn delete_room(
        &self,
        room: RoomId<'_>,
        force: bool,
        now_ms: u64,
    ) -> Result<RoomDeletion, StoreError> {
        Ok(self.remove_room(room.slug, Some(room.generation), force, now_ms))
    }

    async fn append_audit(
        &self,
        slug: &str,
        entries: &[AuditRecord],
    ) -> Result<Vec<String>, StoreError> {
        Ok(self.push_audit(slug, entries, false))
    }

    async fn audit(&self, slug: &str, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        Ok(lock(&self.audit)
            .get(slug)
            .map(|log| log.iter().rev().take(limit).cloned().collect())
            .unwrap_or_default())
    }

    async fn waiters(
        &self,
        room: RoomId<'_>,
        offset: u64,
        limit: u64,
    ) -> Result<WaiterPage, StoreError> {
        self.waiter_page(room, offset, limit)
    }
}
