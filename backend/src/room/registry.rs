//! The rooms this process runs (issue 14: rooms are data in the store, created and deleted at run
//! time): [`Rooms`], the registry of room runtimes every handler, scheduler and hub looks rooms up
//! in, and [`sync_loop`], which brings it in line with the store's list every tick on every
//! replica (a room created through another replica gets its runtime, scheduler and SSE hub here
//! within one tick; a deleted one is stopped).
//!
//! Starting a room's tasks is left to whoever listens ([`Rooms::starts`]): the scheduler thread
//! and the main runtime each start their half (scheduler, SSE hub) of every room added.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use tokio::sync::mpsc;

use crate::room::RoomRuntime;
use crate::state::AppState;
use crate::store::memory::lock;

/// The registry of running rooms by slug.
#[derive(Default)]
pub struct Rooms {
    running: RwLock<HashMap<String, Arc<RoomRuntime>>>,
    /// Rooms deleted while this process ran, and when (their tickets answer 410 `room_deleted`).
    deleted: RwLock<HashMap<String, Instant>>,
    /// Who starts the tasks of a room added (see [`Rooms::starts`]).
    starters: Mutex<Vec<mpsc::UnboundedSender<Arc<RoomRuntime>>>>,
    /// Rooms whose settings a sync could not read, warned of once until they can be (a slug
    /// left listed with no settings would otherwise log every tick: found by a probe).
    unreadable: Mutex<HashSet<String>>,
}

impl Rooms {
    /// A registry of `rooms`.
    pub fn new(rooms: impl IntoIterator<Item = Arc<RoomRuntime>>) -> Self {
        let registry = Self::default();
        {
            let mut running = write(&registry.running);
            for room in rooms {
                running.insert(room.name.clone(), room);
            }
        }
        registry
    }

    /// The runtime of a running room.
    pub fn get(&self, room: &str) -> Option<Arc<RoomRuntime>> {
        read(&self.running).get(room).cloned()
    }

    /// Whether `room` runs here.
    pub fn contains(&self, room: &str) -> bool {
        read(&self.running).contains_key(room)
    }

    /// Every running room, sorted by slug.
    pub fn list(&self) -> Vec<Arc<RoomRuntime>> {
        let mut rooms: Vec<Arc<RoomRuntime>> = read(&self.running).values().cloned().collect();
        rooms.sort_by(|a, b| a.name.cmp(&b.name));
        rooms
    }

    /// Whether `room` was deleted while this process ran (and not created again).
    pub fn was_deleted(&self, room: &str) -> bool {
        read(&self.deleted).contains_key(room)
    }

    /// Adds `runtime` and has its tasks started; a room already running is kept (and returned).
    pub fn add(&self, runtime: Arc<RoomRuntime>) -> Arc<RoomRuntime> {
        let mut running = write(&self.running);
        if let Some(existing) = running.get(&runtime.name) {
            return existing.clone();
        }
        running.insert(runtime.name.clone(), runtime.clone());
        write(&self.deleted).remove(&runtime.name);
        lock(&self.starters).retain(|starter| starter.send(runtime.clone()).is_ok());
        runtime
    }

    /// Puts `runtime` under its slug and has its tasks started, in one step; a runtime the slug
    /// had here (a deleted room's: the store just let this one be created) retires.
    pub fn put(&self, runtime: Arc<RoomRuntime>) {
        let old = {
            let mut running = write(&self.running);
            let old = running.insert(runtime.name.clone(), runtime.clone());
            write(&self.deleted).remove(&runtime.name);
            lock(&self.starters).retain(|starter| starter.send(runtime.clone()).is_ok());
            old
        };
        if let Some(old) = old {
            old.retire();
        }
    }

    /// Stops `runtime` (its scheduler gives up its lease, its hub and streams end) and marks its
    /// slug deleted, if it still runs under its slug; a runtime put there since (a room created
    /// again through this process) stays. Whether it was removed.
    pub fn remove(&self, runtime: &Arc<RoomRuntime>) -> bool {
        {
            let mut running = write(&self.running);
            match running.get(&runtime.name) {
                Some(current) if Arc::ptr_eq(current, runtime) => {}
                _ => return false,
            }
            running.remove(&runtime.name);
            write(&self.deleted).insert(runtime.name.clone(), Instant::now());
        }
        runtime.retire();
        true
    }

    /// Whether `room`'s settings are newly unreadable (to be warned of); `readable` clears it.
    fn unreadable_now(&self, room: &str, readable: bool) -> bool {
        let mut unreadable = lock(&self.unreadable);
        if readable {
            unreadable.remove(room);
            false
        } else {
            unreadable.insert(room.to_owned())
        }
    }

    /// A channel of rooms to start: every running room at once, then each room added.
    pub fn starts(&self) -> mpsc::UnboundedReceiver<Arc<RoomRuntime>> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let running = read(&self.running);
        for room in running.values() {
            let _ = sender.send(room.clone());
        }
        lock(&self.starters).push(sender);
        receiver
    }

    /// Replaces each running room of `listed` whose incarnation in the store is not the one it
    /// serves: the room was deleted and created again (through other replicas) between two
    /// syncs. The new room's settings are read first and the new runtime takes the old one's
    /// place in one step, so a request never finds the slug missing here (a CI run caught a
    /// replica answering 404 `room_not_found` for a room that existed, while it read them); until
    /// they can be read (the room is still being created), the old runtime stays and the next
    /// sync tries again. The old runtime then retires (its scheduler, hub and streams end; its
    /// tickets are gone from the store). A runtime that has not learnt its incarnation yet takes
    /// the store's.
    async fn replace_recreated(
        &self,
        state: &AppState,
        listed: &[String],
        incarnations: &HashMap<String, String>,
        read_at: Instant,
    ) {
        for name in listed {
            let (Some(room), Some(incarnation)) = (self.get(name), incarnations.get(name)) else {
                continue;
            };
            if room.made_at >= read_at {
                // Made here (a create) after the reads began: they may predate its incarnation.
                continue;
            }
            let held = room.incarnation.get_or_init(|| incarnation.clone());
            if held == incarnation {
                continue;
            }
            match state.store.room_settings(name).await {
                Ok(settings) => {
                    self.unreadable_now(name, true);
                    let fresh = RoomRuntime::new(name.clone(), settings, state.tokens.clone());
                    let _ = fresh.incarnation.set(incarnation.clone());
                    // The old room's cached secret, seed and method go before the new runtime
                    // serves: a join re-reads them from the store, where only the new room is.
                    state.forget_room(name);
                    if self.replace(&room, Arc::new(fresh)) {
                        tracing::info!(room = %name, "room deleted and created again (through another replica): restarted here");
                    }
                }
                Err(error) if self.unreadable_now(name, false) => {
                    tracing::warn!(room = %name, %error, "a room created again elsewhere: its settings could not be read yet; the old runtime stays until they can be (retried every tick)");
                }
                Err(_) => {}
            }
        }
    }

    /// Puts `fresh` in the place of `old` in one step, has its tasks started and retires `old`;
    /// false (and nothing done) when `old` no longer runs under its slug (deleted or replaced
    /// through this process meanwhile).
    fn replace(&self, old: &Arc<RoomRuntime>, fresh: Arc<RoomRuntime>) -> bool {
        {
            let mut running = write(&self.running);
            match running.get(&fresh.name) {
                Some(current) if Arc::ptr_eq(current, old) => {}
                _ => return false,
            }
            running.insert(fresh.name.clone(), fresh.clone());
            write(&self.deleted).remove(&fresh.name);
            lock(&self.starters).retain(|starter| starter.send(fresh.clone()).is_ok());
        }
        old.retire();
        true
    }

    /// Brings the registry in line with `listed` (the store's rooms, read at `read_at`),
    /// `deleted` (the rooms deleted through the admin API) and `incarnations` (read after both):
    /// starts the rooms missing here (reading their settings), stops the deleted ones, and lists
    /// again a running room the store lost without a deletion (Redis restarted without
    /// persistence). A running room missing from the list under another incarnation than its
    /// own was deleted and created again between the reads (the list read before, the rest
    /// after): it is left to the next sync, which finds it listed and replaces it; a runtime
    /// made here after `read_at` (a create through this process) is left alone.
    async fn sync(
        &self,
        state: &AppState,
        listed: &[String],
        deleted: &[String],
        incarnations: &HashMap<String, String>,
        read_at: Instant,
    ) {
        let listed_set: HashSet<&str> = listed.iter().map(String::as_str).collect();
        let missing: Vec<Arc<RoomRuntime>> = read(&self.running)
            .values()
            .filter(|room| !listed_set.contains(room.name.as_str()))
            .cloned()
            .collect();
        for room in missing {
            if room.made_at >= read_at {
                // Made here (a create) after the list was read: the list cannot know it.
                continue;
            }
            let recreated = incarnations
                .get(&room.name)
                .is_some_and(|id| room.incarnation.get().is_some_and(|held| held != id));
            if recreated {
                // Deleted and created again between the list's read and the incarnations':
                // listed again by then (a creation lists and re-incarnates in one step), so the
                // next sync replaces the runtime (`replace_recreated`); neither stopped here
                // (a 410 for a room that exists) nor listed again with the old room's settings.
                continue;
            }
            if deleted.contains(&room.name) {
                if self.remove(&room) {
                    tracing::info!(room = %room.name, "room deleted (through another replica): stopped here");
                    state.forget_room(&room.name);
                }
            } else if let Err(error) = relist(state, &room).await {
                tracing::warn!(room = %room.name, %error, "a room the store lost could not be listed again");
            } else {
                tracing::warn!(room = %room.name, "the store had lost this room: listed again");
            }
        }
        for name in listed {
            // A list read before this process deleted the room is stale for it.
            let deleted_since = read(&self.deleted)
                .get(name)
                .is_some_and(|at| *at >= read_at);
            if self.contains(name) || deleted_since {
                continue;
            }
            match state.store.room_settings(name).await {
                Ok(settings) => {
                    self.unreadable_now(name, true);
                    tracing::info!(room = %name, "room created (through another replica): started here");
                    let runtime = RoomRuntime::new(name.clone(), settings, state.tokens.clone());
                    // The incarnation read before the settings: if the room was created again
                    // in between, the next sync finds it changed and restarts the room.
                    if let Some(incarnation) = incarnations.get(name) {
                        let _ = runtime.incarnation.set(incarnation.clone());
                    }
                    self.add(Arc::new(runtime));
                }
                Err(error) if self.unreadable_now(name, false) => {
                    tracing::warn!(room = %name, %error, "a new room's settings could not be read; retrying every tick");
                }
                Err(_) => {}
            }
        }
    }
}

/// Lists again a running room the store lost, under the incarnation this process runs it under
/// (if it has one), with every field of the settings it holds ([`Store::restore_room`]; a lease
/// may have written the base ones first, from the same held settings).
///
/// [`Store::restore_room`]: crate::store::Store::restore_room
async fn relist(state: &AppState, room: &RoomRuntime) -> Result<(), crate::store::StoreError> {
    if let Some(incarnation) = room.incarnation.get() {
        state
            .store
            .keep_incarnation(&room.name, incarnation)
            .await?;
    }
    let in_force = state
        .store
        .restore_room(
            &room.name,
            &room.settings(),
            room.incarnation.get().map(String::as_str),
        )
        .await?;
    room.set_settings(in_force);
    Ok(())
}

/// Runs `task` for each room running now and for every room added later, on the current runtime,
/// until shutdown; then waits for the tasks (each ends on shutdown or when its room is removed).
pub async fn run_each_room<F>(state: AppState, task: impl Fn(Arc<RoomRuntime>) -> F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let mut rooms = state.rooms.starts();
    let mut shutdown = state.shutdown.clone();
    let mut running = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            room = rooms.recv() => match room {
                Some(room) => {
                    running.spawn(task(room));
                }
                None => break,
            },
            Some(_) = running.join_next(), if !running.is_empty() => {}
            _ = shutdown.wait_for(|stopping| *stopping) => break,
        }
    }
    while running.join_next().await.is_some() {}
}

/// Every tick, reads the store's list of rooms and brings this process's registry in line with
/// it. Ends on shutdown.
pub async fn sync_loop(state: AppState) {
    let tick = state.config.tick();
    let mut shutdown = state.shutdown.clone();
    let mut outage_logged = false;
    loop {
        tokio::select! {
            () = tokio::time::sleep(tick) => {}
            _ = shutdown.wait_for(|stopping| *stopping) => return,
        }
        let read_at = Instant::now();
        // The list first, then the deleted, then the incarnations: a deletion writes its mark
        // before it leaves the list, so a room missing from this list for a deletion is in the
        // later read, unless it was created again in between, which the incarnations then show
        // (a creation lists it, removes the mark and writes its incarnation in one step).
        let listed = async {
            let listed = state.store.list_rooms().await?;
            let deleted = state.store.deleted_rooms().await?;
            Ok::<_, crate::store::StoreError>((listed, deleted, state.store.incarnations().await?))
        };
        match listed.await {
            Ok((listed, deleted, incarnations)) => {
                outage_logged = false;
                state
                    .rooms
                    .replace_recreated(&state, &listed, &incarnations, read_at)
                    .await;
                state
                    .rooms
                    .sync(&state, &listed, &deleted, &incarnations, read_at)
                    .await;
            }
            Err(error) if !outage_logged => {
                tracing::warn!(%error, "the list of rooms cannot be read; rooms stay as they are");
                outage_logged = true;
            }
            Err(_) => {}
        }
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
