//! `MemoryStore`: the embedded store's engine, all rooms in this process's memory.
//!
//! Same semantics as the Redis store (see the module docs of [`crate::store`]); each room is one
//! mutex-guarded [`Room`], never held across an `.await`. Positions come from an
//! [`OrderIndex`](super::order_index::OrderIndex) in O(log N). On its own nothing survives a
//! restart (`--data-dir none`); the default embedded store wraps it in
//! [`DurableStore`](super::durable::DurableStore), which journals every change.
//!
//! - [`room`]: one room's state and operations, each at an explicit time (replayable).
//! - [`admission`]: the scheduler lease and admission of a room.
//! - [`image`]: a room as plain serde data, for snapshots.
//! - [`draw`]: the pre-queue, the draw seed and the draw of a scheduled opening.

pub mod admission;
pub mod catalog;
pub mod challenges;
pub mod draw;
pub mod image;
pub mod lottery;
pub mod presence;
pub mod room;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

pub use self::room::Room;
use super::{
    AdmitOutcome, AdmitRequest, DrawOutcome, DrawRecord, DrawRequest, InstantAdmission, JoinLimit,
    JoinReply, LeaseOutcome, LeaveOutcome, OrderClaim, PollAnchor, QueueCursor, RoomCounts,
    Settings, SettingsPatch, SettingsUpdate, SseRefresh, Store, StoreError, TicketRecord,
    TokenCheck, TokenUse, VersionedSettings,
};

/// The embedded store: all rooms in this process's memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    rooms: Mutex<HashMap<String, Arc<Mutex<Room>>>>,
    challenges: Mutex<challenges::UsedChallenges>,
    /// Each room's audit log, newest last (`catalog.rs`; in memory only, bounded).
    audit: Mutex<HashMap<String, std::collections::VecDeque<crate::store::AuditRecord>>>,
    /// Rooms deleted (and not created again) since this process started.
    deleted: Mutex<std::collections::HashSet<String>>,
    /// The audit entries' running number (their ids).
    audit_seq: std::sync::atomic::AtomicU64,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `apply` on the room named `room`, under its lock.
    ///
    /// # Errors
    /// [`StoreError::NoSuchRoom`] when the room was never initialised (or was deleted).
    pub fn with_room<R>(
        &self,
        room: &str,
        apply: impl FnOnce(&mut Room) -> R,
    ) -> Result<R, StoreError> {
        let state = lock(&self.rooms)
            .get(room)
            .cloned()
            .ok_or_else(|| StoreError::NoSuchRoom(room.to_owned()))?;
        let mut state = lock(&state);
        Ok(apply(&mut state))
    }

    /// Creates `room` with `defaults` at settings version `first_version` unless it exists; the
    /// settings in force, and whether this call created the room.
    pub fn create_room(
        &self,
        room: &str,
        defaults: &Settings,
        first_version: u64,
    ) -> (VersionedSettings, bool) {
        let mut rooms = lock(&self.rooms);
        let mut created = false;
        let state = rooms.entry(room.to_owned()).or_insert_with(|| {
            created = true;
            let mut fresh = Room::new(defaults.clone());
            fresh.version = first_version;
            Arc::new(Mutex::new(fresh))
        });
        let config = lock(state).versioned();
        if created {
            lock(&self.deleted).remove(room);
        }
        (config, created)
    }

    /// The first settings version of `room` seeded by `--rooms`: 0, or, for a room an operator
    /// deleted earlier, the time in Unix µs as a created room's (so an ETag of the deleted room
    /// never matches the revived one). Deleted earlier: marked so in this process, or (after a
    /// restart of the durable store, whose snapshot keeps audit logs but not the marks) absent
    /// with an audit log, which its deletion always wrote to.
    pub fn seed_version(&self, room: &str) -> u64 {
        let absent = !lock(&self.rooms).contains_key(room);
        let deleted = lock(&self.deleted).contains(room)
            || (absent
                && lock(&self.audit)
                    .get(room)
                    .is_some_and(|log| !log.is_empty()));
        if deleted {
            crate::store::catalog::first_version()
        } else {
            0
        }
    }

    /// Names of every room, sorted.
    pub fn room_names(&self) -> Vec<String> {
        let mut names: Vec<String> = lock(&self.rooms).keys().cloned().collect();
        names.sort_unstable();
        names
    }

    /// A copy of every room, by name. The caller keeps changes out meanwhile (the durable
    /// store's lock) when the copies must be of one instant.
    pub fn clone_rooms(&self) -> Vec<(String, Room)> {
        let rooms: Vec<(String, Arc<Mutex<Room>>)> = lock(&self.rooms)
            .iter()
            .map(|(name, room)| (name.clone(), room.clone()))
            .collect();
        rooms
            .into_iter()
            .map(|(name, room)| (name, lock(&room).clone()))
            .collect()
    }

    /// Puts `state` in as the room `room`, replacing any room of that name (snapshot loading).
    pub fn insert_room(&self, room: &str, state: Room) {
        lock(&self.rooms).insert(room.to_owned(), Arc::new(Mutex::new(state)));
    }
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it: every change to a room
/// is made in an order that leaves it consistent at each step.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[async_trait]
impl Store for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn init_room(
        &self,
        room: &str,
        defaults: &Settings,
    ) -> Result<VersionedSettings, StoreError> {
        Ok(self.create_room(room, defaults, self.seed_version(room)).0)
    }

    async fn room_settings(&self, room: &str) -> Result<VersionedSettings, StoreError> {
        self.with_room(room, |state| state.versioned())
    }

    async fn update_room(
        &self,
        room: &str,
        patch: &SettingsPatch,
        expected_version: Option<u64>,
    ) -> Result<SettingsUpdate, StoreError> {
        self.with_room(room, |state| state.update(patch, expected_version))
    }

    async fn join_with_limit(
        &self,
        room: &str,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
    ) -> Result<JoinReply, StoreError> {
        let now = super::now_ms();
        self.with_room(room, |state| state.join(dedup_key, new_id, limit, now))
    }

    async fn join_prequeue(
        &self,
        room: &str,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        settings_version: Option<u64>,
    ) -> Result<JoinReply, StoreError> {
        let now = super::now_ms();
        self.with_room(room, |state| {
            state.join_prequeue(dedup_key, new_id, limit, now, settings_version)
        })
    }

    async fn draw_seed(&self, room: &str, fresh_seed: &str) -> Result<DrawRecord, StoreError> {
        self.with_room(room, |state| state.draw_seed(fresh_seed))
    }

    async fn draw_record(&self, room: &str) -> Result<Option<DrawRecord>, StoreError> {
        self.with_room(room, |state| state.draw_record())
    }

    async fn draw_tags(
        &self,
        room: &str,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<String>, StoreError> {
        self.with_room(room, |state| state.draw_tags(offset, limit))
    }

    async fn keyed_ticket(
        &self,
        room: &str,
        key: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        self.with_room(room, |state| state.live_for_dedup(key, now_ms))
    }

    async fn prequeue_ids(&self, room: &str) -> Result<Vec<String>, StoreError> {
        self.with_room(room, |state| state.prequeue_ids())
    }

    async fn draw(&self, room: &str, request: &DrawRequest<'_>) -> Result<DrawOutcome, StoreError> {
        let clock = super::now_ms();
        self.with_room(room, |state| state.draw(request, clock).0)
    }

    async fn join_admitting(
        &self,
        room: &str,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        instant: &InstantAdmission,
    ) -> Result<JoinReply, StoreError> {
        self.with_room(room, |state| {
            state.join_admitting(dedup_key, new_id, limit, instant).0
        })
    }

    async fn ticket(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        self.with_room(room, |state| state.record(id, now_ms))
    }

    async fn hear(
        &self,
        room: &str,
        ids: &[String],
        now_ms: u64,
        _positions: bool,
    ) -> Result<Vec<Option<TicketRecord>>, StoreError> {
        self.with_room(room, |state| state.hear(ids, now_ms).0)
    }

    async fn hear_polled(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<(TicketRecord, Option<PollAnchor>)>, StoreError> {
        self.with_room(room, |state| {
            let record = state.hear(&[id.to_owned()], now_ms).0.pop().flatten()?;
            Some((record, state.poll_anchor(id)))
        })
    }

    async fn sse_refresh(
        &self,
        room: &str,
        since: Option<QueueCursor>,
        ids: &[String],
        now_ms: u64,
    ) -> Result<SseRefresh, StoreError> {
        self.with_room(room, |state| state.sse_refresh(since, ids, now_ms))
    }

    async fn leave(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<LeaveOutcome, StoreError> {
        self.with_room(room, |state| state.leave(id, now_ms, keep_ms))
    }

    async fn counts(&self, room: &str, now_ms: u64) -> Result<RoomCounts, StoreError> {
        self.with_room(room, |state| state.counts(now_ms))
    }

    async fn lease(
        &self,
        room: &str,
        holder: &str,
        lease_ms: u64,
    ) -> Result<LeaseOutcome, StoreError> {
        let clock = super::now_ms();
        self.with_room(room, |state| state.lease(holder, lease_ms, clock))
    }

    async fn release_lease(&self, room: &str, holder: &str) -> Result<(), StoreError> {
        self.with_room(room, |state| state.release_lease(holder))
    }

    async fn admit(
        &self,
        room: &str,
        request: &AdmitRequest<'_>,
    ) -> Result<AdmitOutcome, StoreError> {
        let clock = super::now_ms();
        self.with_room(room, |state| state.admit(request, clock))
    }

    async fn use_challenge(
        &self,
        room: &str,
        id: &str,
        expires_at_ms: u64,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        Ok(lock(&self.challenges).use_once(room, id, expires_at_ms, now_ms))
    }

    async fn check_token(
        &self,
        room: &str,
        token: &str,
        now_ms: u64,
    ) -> Result<TokenCheck, StoreError> {
        self.with_room(room, |state| state.check_token(token, now_ms))
    }

    async fn consume_token(
        &self,
        room: &str,
        token: &str,
        order: &OrderClaim<'_>,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<TokenUse, StoreError> {
        self.with_room(room, |state| {
            state.consume_token(token, order, now_ms, keep_ms)
        })
    }
}
