//! Rooms as data: which rooms exist (their documents, `room_doc`), creating and deleting them,
//! each room's audit log of admin changes, and the list of who is waiting. The catalog role
//! of [`super::Store`]; a room's settings change ([`Catalog::update_room`]) is here too.
//!
//! Redis keeps the documents and the index of slugs (`store/redis/keys.rs`), the audit log in
//! the stream `vestibule:{r}:audit` (`XADD MAXLEN ~ 10000`). The embedded stores keep the audit
//! log in memory (bounded the same way); the durable store journals it and keeps it in its
//! snapshots.

use async_trait::async_trait;

use super::{
    RoomDoc, RoomId, Settings, SettingsPatch, SettingsUpdate, StoreError, VersionedSettings,
};

/// Most audit entries kept per room (older ones are dropped).
pub const AUDIT_KEPT: usize = 10_000;

/// What a room deletion did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoomDeletion {
    /// Deleted; this many tickets (waiting or active) ended with it.
    Deleted {
        /// Tickets that were waiting or held an unused entry token.
        ended: u64,
    },
    /// Not deleted: tickets wait or are active, and the deletion was not forced.
    NotEmpty {
        /// Shoppers waiting.
        waiting: u64,
        /// Active users.
        active: u64,
    },
    /// No such room.
    NotFound,
}

/// One audit entry: an admin change of one field.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    /// The store's id of the entry (Redis stream id, e.g. `1764530000000-0`).
    #[serde(default)]
    pub id: String,
    /// When, Unix ms.
    pub at_ms: u64,
    /// The admin API field changed (`admissionRatePerSec`), or `room` for a create/delete.
    pub field: String,
    /// The value before (JSON; null = none).
    pub old: serde_json::Value,
    /// The value after.
    pub new: serde_json::Value,
    /// The replica that made the change.
    pub replica: String,
}

/// One waiting shopper as the admin API lists them (never the ticket id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaiterRecord {
    /// 1-based position.
    pub position: u64,
    /// The ticket id (the caller turns it into a tag; never sent out).
    pub ticket_id: String,
    /// When it joined, Unix ms (`None` = unknown, e.g. a place handed out by a draw).
    pub joined_ms: Option<u64>,
    /// When it was last heard from, Unix ms (`None` = unknown).
    pub seen_ms: Option<u64>,
}

/// A page of the waiting line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WaiterPage {
    /// Shoppers waiting in all.
    pub total: u64,
    /// The page, in queue order.
    pub waiters: Vec<WaiterRecord>,
}

/// Rooms as data; every store implements it (docs/DESIGN.md "Rooms at run time").
///
/// The document of each slug ([`RoomDoc`]) is the one source of truth for whether the room
/// exists and what its settings are; the list of rooms is an index of the documents, written
/// after a create and removed after a delete, and where the two disagree the document wins.
#[async_trait]
pub trait Catalog: Send + Sync {
    /// Applies a settings change in one atomic step: `patch` applied to `base` (the caller's
    /// copy of the settings, e.g. its runtime's) as a compare-and-set on `room`'s generation and
    /// `base`'s version, so that a change is one store call. When the store holds another
    /// version it changes nothing and, without `expected_version`, applies the patch to the
    /// version it holds instead; with `expected_version` (`If-Match`), only at that version.
    ///
    /// # Errors
    /// [`StoreError::RoomGone`] when `room`'s generation is not the live one,
    /// [`StoreError::RoomLost`] when the store lost the room; else the call's error.
    async fn update_room(
        &self,
        room: RoomId<'_>,
        base: &VersionedSettings,
        patch: &SettingsPatch,
        expected_version: Option<u64>,
    ) -> Result<SettingsUpdate, StoreError>;

    /// Every slug in the index of rooms, sorted.
    async fn list_rooms(&self) -> Result<Vec<String>, StoreError>;

    /// `slug`'s document: live, deleted, or `None` (never created, or lost by the store).
    async fn room_doc(&self, slug: &str) -> Result<Option<RoomDoc>, StoreError>;

    /// The live generation's settings of `slug`.
    ///
    /// # Errors
    /// [`StoreError::RoomGone`] when its document says deleted, [`StoreError::RoomLost`] when
    /// there is none; else the call's error.
    async fn room_settings(&self, slug: &str) -> Result<VersionedSettings, StoreError> {
        match self.room_doc(slug).await? {
            Some(RoomDoc::Live(settings)) => Ok(settings),
            Some(RoomDoc::Deleted { .. }) => Err(StoreError::RoomGone(slug.to_owned())),
            None => Err(StoreError::RoomLost(slug.to_owned())),
        }
    }

    /// Creates `slug` with `settings`: the slug's next generation, its whole document in one
    /// step, then the index. `None` when a live generation holds the slug.
    async fn create_room(
        &self,
        slug: &str,
        settings: &Settings,
    ) -> Result<Option<VersionedSettings>, StoreError>;

    /// Seeds `slug` (`--rooms`): the live generation's settings if there is one, else a room
    /// created with `defaults` (a seeded room an operator deleted comes back).
    async fn seed_room(
        &self,
        slug: &str,
        defaults: &Settings,
    ) -> Result<VersionedSettings, StoreError>;

    /// Writes back the document of a room the store lost, as a replica running it `held` it
    /// (generation, version and every setting), only if the document is still missing: the
    /// first replica to write it wins. Then indexes the slug. Returns the live document's
    /// settings (the restored ones, or those another replica restored first).
    ///
    /// # Errors
    /// [`StoreError::RoomGone`] when the document found says deleted or another generation.
    async fn write_back_room(
        &self,
        slug: &str,
        held: &VersionedSettings,
    ) -> Result<VersionedSettings, StoreError>;

    /// Deletes `room`: refused while tickets wait or are active unless `force`; then its
    /// document says deleted (in one step with the check), the slug leaves the index and the
    /// generation's tickets, tokens and settings are removed (its audit log stays).
    /// [`RoomDeletion::NotFound`] when `room`'s generation is not the live one.
    async fn delete_room(
        &self,
        room: RoomId<'_>,
        force: bool,
        now_ms: u64,
    ) -> Result<RoomDeletion, StoreError>;

    /// Puts `slug` in the index of rooms (`listed`) or takes it out: a replica mending the index
    /// after a create or delete whose last step did not reach the store. Nothing by default
    /// (a store whose index cannot disagree with its documents).
    async fn index_room(&self, _slug: &str, _listed: bool) -> Result<(), StoreError> {
        Ok(())
    }

    /// Appends entries to `slug`'s audit log (bounded to [`AUDIT_KEPT`]); returns their ids.
    async fn append_audit(
        &self,
        slug: &str,
        entries: &[AuditRecord],
    ) -> Result<Vec<String>, StoreError>;

    /// The newest `limit` entries of `slug`'s audit log, newest first.
    async fn audit(&self, slug: &str, limit: usize) -> Result<Vec<AuditRecord>, StoreError>;

    /// Waiting shoppers from 0-based `offset` in queue order, at most `limit`, and the total.
    async fn waiters(
        &self,
        room: RoomId<'_>,
        offset: u64,
        limit: u64,
    ) -> Result<WaiterPage, StoreError>;
}
