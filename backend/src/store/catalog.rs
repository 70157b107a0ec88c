//! Rooms as data (issue 14): which rooms exist, creating and deleting them, each room's audit
//! log of admin changes, and the list of who is waiting. A supertrait of [`super::Store`], kept
//! apart so the main trait stays about one room's queue.
//!
//! Redis: the set `vestibule:{_catalog}:rooms` names the rooms and the hash
//! `vestibule:{_catalog}:deleted` the deleted ones (slug → Unix ms; keys of their own, under the
//! catalog's hash tag, never a room's), the stream `vestibule:{r}:audit` keeps the audit log
//! (`XADD MAXLEN ~ 10000`), and
//! `vestibule:{r}:born:<n>` each waiting shopper's join time (u32 Unix seconds per arrival seq,
//! as `seen:`). The embedded stores keep the audit log in memory (bounded the same way); the
//! durable store journals it and keeps it in its snapshots.

use async_trait::async_trait;

use super::{Settings, StoreError, VersionedSettings};

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

/// The settings version a room created through the admin API starts at: the time of its creation
/// in Unix microseconds, so that every version a room of the same slug had before (created
/// earlier and changed less than once a microsecond, which no store call can beat) is below it,
/// and an `If-Match` read from a deleted room never applies to the new one (found by a probe: both
/// started again at 0). A room seeded by `--rooms` starts at 0.
pub fn first_version() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as u64)
}

/// Rooms as data; every store implements it (docs/DESIGN.md "Rooms at run time").
#[async_trait]
pub trait Catalog: Send + Sync {
    /// Every room's slug, sorted.
    async fn list_rooms(&self) -> Result<Vec<String>, StoreError>;

    /// Creates `room` with `settings` under `incarnation` (a fresh random id the caller's runtime
    /// of the room holds; see [`Catalog::incarnations`]; a store without incarnations ignores
    /// it), in one step as seen by other replicas (the room appears in [`Catalog::list_rooms`]
    /// with its settings written); `None` when it exists.
    async fn create_room(
        &self,
        room: &str,
        settings: &Settings,
        incarnation: &str,
    ) -> Result<Option<VersionedSettings>, StoreError>;

    /// Deletes `room`: refused while tickets wait or are active unless `force`; then every
    /// ticket, token and setting of the room is gone (its audit log stays).
    async fn delete_room(
        &self,
        room: &str,
        force: bool,
        now_ms: u64,
    ) -> Result<RoomDeletion, StoreError>;

    /// Rooms deleted through the admin API (and not created again): a replica stops these when
    /// they leave the list. A running room missing from the list but not deleted here was lost
    /// by the store (Redis restarted without persistence) and is listed again.
    async fn deleted_rooms(&self) -> Result<Vec<String>, StoreError>;

    /// Each room's incarnation: an id written when the room is created, so that a replica can
    /// tell a room deleted and created again between two of its reads (Redis) from the one it
    /// runs. A store that one process owns has none (the empty map): its registry sees every
    /// deletion and creation itself.
    async fn incarnations(&self) -> Result<std::collections::HashMap<String, String>, StoreError> {
        Ok(std::collections::HashMap::new())
    }

    /// Writes `incarnation` back as `room`'s, unless the room has one: a replica listing again a
    /// room the store lost keeps the id it runs the room under, so that no replica (itself
    /// included) takes the room for one created again and restarts it. A store without
    /// incarnations does nothing.
    async fn keep_incarnation(&self, _room: &str, _incarnation: &str) -> Result<(), StoreError> {
        Ok(())
    }

    /// Forgets what this process cached of `room` (Redis: its secret, draw seed and queueing
    /// method), called for every handle of the process (`AppState::forget_room`) when the room
    /// stops here (deleted here or through another replica, or deleted and created again): the
    /// next call reads the new room's. Nothing by default.
    fn forget_room(&self, _room: &str) {}

    /// Appends entries to `room`'s audit log (bounded to [`AUDIT_KEPT`]); returns their ids.
    async fn append_audit(
        &self,
        room: &str,
        entries: &[AuditRecord],
    ) -> Result<Vec<String>, StoreError>;

    /// The newest `limit` entries of `room`'s audit log, newest first.
    async fn audit(&self, room: &str, limit: usize) -> Result<Vec<AuditRecord>, StoreError>;

    /// Waiting shoppers from 0-based `offset` in queue order, at most `limit`, and the total.
    async fn waiters(&self, room: &str, offset: u64, limit: u64) -> Result<WaiterPage, StoreError>;
}
