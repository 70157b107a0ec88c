//! `MemoryStore`: the embedded store's engine, all rooms in this process's memory.
//!
//! Same semantics as the Redis store (see the module docs of [`crate`]); each room is one
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
pub mod figures;
pub mod image;
pub mod lottery;
pub mod presence;
pub mod room;
pub mod tokens;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

pub use self::room::Room;
use super::{
    JoinKind, JoinReply, JoinRequest, LeaveOutcome, Queue, RoomCounts, RoomDoc, RoomId, Settings,
    Store, StoreError, StoreOptions, TicketRecord, VersionedSettings,
};

/// The embedded store: all rooms in this process's memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    /// The live generation of each room.
    rooms: Mutex<HashMap<String, Arc<Mutex<Room>>>>,
    /// What each slug ever had: its counter and its last deleted generation (`room_doc`).
    slugs: Mutex<HashMap<String, SlugRecord>>,
    challenges: Mutex<challenges::UsedChallenges>,
    /// The lease length and how long ended tickets are kept.
    options: StoreOptions,
    /// Each room's audit log, newest last (`catalog.rs`; in memory only, bounded).
    audit: Mutex<HashMap<String, std::collections::VecDeque<crate::AuditRecord>>>,
    /// The audit entries' running number (their ids).
    audit_seq: std::sync::atomic::AtomicU64,
    /// Each room's shared figures, with the generation they belong to (`figures.rs`).
    figures: Mutex<HashMap<String, (u64, crate::figures::FigureTable)>>,
}

/// What a slug ever had (never forgotten): the counter of its generations and versions, and
/// the generation last deleted while none is live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlugRecord {
    /// The last generation or version handed out.
    pub counter: u64,
    /// The generation last deleted, until the slug is created again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted: Option<u64>,
}

impl MemoryStore {
    /// An empty store with the default [`StoreOptions`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The same store with `options` (set before it is shared).
    #[must_use]
    pub fn with_options(mut self, options: StoreOptions) -> Self {
        self.set_options(options);
        self
    }

    /// Sets the options (before the store is shared).
    pub fn set_options(&mut self, options: StoreOptions) {
        self.options = options;
    }

    /// The options it was built with.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// Runs `apply` on `room`, under its lock.
    ///
    /// # Errors
    /// [`StoreError::RoomGone`] when `room`'s generation is not the live one.
    pub fn with_room<R>(
        &self,
        room: RoomId<'_>,
        apply: impl FnOnce(&mut Room) -> R,
    ) -> Result<R, StoreError> {
        let state = lock(&self.rooms)
            .get(room.slug)
            .cloned()
            .ok_or_else(|| StoreError::RoomGone(room.slug.to_owned()))?;
        let mut state = lock(&state);
        if state.generation != room.generation {
            return Err(StoreError::RoomGone(room.slug.to_owned()));
        }
        Ok(apply(&mut state))
    }

    /// Runs `apply` on the live generation of `slug` (a journal's replay, which knows no
    /// generations: it replays them in order).
    ///
    /// # Errors
    /// [`StoreError::RoomGone`] when no generation is live.
    pub fn with_live_room<R>(
        &self,
        slug: &str,
        apply: impl FnOnce(&mut Room) -> R,
    ) -> Result<R, StoreError> {
        let state = lock(&self.rooms)
            .get(slug)
            .cloned()
            .ok_or_else(|| StoreError::RoomGone(slug.to_owned()))?;
        let mut state = lock(&state);
        Ok(apply(&mut state))
    }

    /// The next value of `slug`'s counter: a new generation or version.
    pub fn next_count(&self, slug: &str) -> u64 {
        let mut slugs = lock(&self.slugs);
        let record = slugs.entry(slug.to_owned()).or_default();
        record.counter += 1;
        record.counter
    }

    /// Creates `slug` with `settings` as its next generation unless a live one holds it; the
    /// settings in force, and whether this call created the room.
    pub fn create_room(&self, slug: &str, settings: &Settings) -> (VersionedSettings, bool) {
        let mut rooms = lock(&self.rooms);
        if let Some(live) = rooms.get(slug) {
            return (lock(live).versioned(), false);
        }
        let generation = self.next_count(slug);
        let fresh = Room::new(settings.clone(), generation);
        let in_force = fresh.versioned();
        rooms.insert(slug.to_owned(), Arc::new(Mutex::new(fresh)));
        if let Some(record) = lock(&self.slugs).get_mut(slug) {
            record.deleted = None;
        }
        (in_force, true)
    }

    /// `slug`'s document.
    pub fn doc(&self, slug: &str) -> Option<RoomDoc> {
        if let Some(live) = lock(&self.rooms).get(slug).cloned() {
            return Some(RoomDoc::Live(lock(&live).versioned()));
        }
        lock(&self.slugs)
            .get(slug)
            .and_then(|record| record.deleted)
            .map(|generation| RoomDoc::Deleted { generation })
    }

    /// Every slug's record (for a snapshot).
    pub fn slug_records(&self) -> std::collections::BTreeMap<String, SlugRecord> {
        lock(&self.slugs)
            .iter()
            .map(|(slug, record)| (slug.clone(), *record))
            .collect()
    }

    /// Puts back the slugs' records of a snapshot.
    pub fn restore_slug_records(&self, records: std::collections::BTreeMap<String, SlugRecord>) {
        lock(&self.slugs).extend(records);
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

    /// Puts `state` in as the live room `room`, replacing any room of that name (snapshot
    /// loading); the slug's counter is moved up to its version.
    pub fn insert_room(&self, room: &str, state: Room) {
        {
            let mut slugs = lock(&self.slugs);
            let record = slugs.entry(room.to_owned()).or_default();
            record.counter = record.counter.max(state.version).max(state.generation);
            record.deleted = None;
        }
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
}

#[async_trait]
impl Queue for MemoryStore {
    async fn join(
        &self,
        room: RoomId<'_>,
        request: &JoinRequest<'_>,
    ) -> Result<JoinReply, StoreError> {
        let JoinRequest {
            dedup_key,
            new_id,
            limit,
            kind,
            ..
        } = *request;
        let keep_ms = self.options.keep_ms;
        match kind {
            JoinKind::Line => {
                let now = super::now_ms();
                self.with_room(room, |state| state.join(dedup_key, new_id, limit, now))
            }
            JoinKind::Admitting(instant) => self.with_room(room, |state| {
                state
                    .join_admitting(dedup_key, new_id, limit, instant, keep_ms)
                    .0
            }),
            JoinKind::PreQueue { settings_version } => {
                let now = super::now_ms();
                self.with_room(room, |state| {
                    state.join_prequeue(dedup_key, new_id, limit, now, settings_version)
                })
            }
        }
    }

    async fn ticket(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        self.with_room(room, |state| state.record(id, now_ms))
    }

    async fn keyed_ticket(
        &self,
        room: RoomId<'_>,
        key: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        self.with_room(room, |state| state.live_for_dedup(key, now_ms))
    }

    async fn leave(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<LeaveOutcome, StoreError> {
        let keep_ms = self.options.keep_ms;
        self.with_room(room, |state| state.leave(id, now_ms, keep_ms))
    }

    async fn counts(&self, room: RoomId<'_>, now_ms: u64) -> Result<RoomCounts, StoreError> {
        self.with_room(room, |state| state.counts(now_ms))
    }

    async fn use_challenge(
        &self,
        room: RoomId<'_>,
        id: &str,
        expires_at_ms: u64,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        Ok(lock(&self.challenges).use_once(room.slug, id, expires_at_ms, now_ms))
    }
}
