//! The rooms this process runs: [`Rooms`], the registry of room runtimes every handler,
//! scheduler and hub looks rooms up in, kept in line with the rooms' documents every tick by
//! `room::sync` (docs/DESIGN.md "Rooms at run time").
//!
//! One rule decides: a runtime serves one generation of its slug, and only a document of that
//! generation or a later one changes it. A live document of a later generation puts a new
//! runtime in its place; a deleted one of its generation or later stops it; a document of an
//! earlier generation (read before a create here) is old news. A running room whose document
//! is missing was lost by the store: it is written back as this runtime holds it. The index of
//! slugs only says which documents to read; where it disagrees with them it is mended.
//!
//! Whoever listens ([`Rooms::starts`]) starts a room's tasks (scheduler, SSE hub).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::mpsc;

use crate::tokens::TokenService;
use crate::RoomRuntime;
use vestibule_store::{RoomDoc, Store, StoreError};

/// The registry of running rooms by slug.
#[derive(Default)]
pub struct Rooms {
    running: RwLock<HashMap<String, Arc<RoomRuntime>>>,
    /// The last generation of each slug deleted while this process ran (its tickets answer 410
    /// `room_deleted`; a document read before the deletion cannot start it again).
    deleted: RwLock<HashMap<String, u64>>,
    /// Who starts the tasks of a room put (see [`Rooms::starts`]).
    starters: Mutex<Vec<mpsc::UnboundedSender<Arc<RoomRuntime>>>>,
}

impl Rooms {
    /// A registry of `rooms`.
    pub fn new(rooms: impl IntoIterator<Item = Arc<RoomRuntime>>) -> Self {
        let registry = Self::default();
        for room in rooms {
            registry.put(room);
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
        !self.contains(room) && read(&self.deleted).contains_key(room)
    }

    /// Puts `runtime` under its slug and has its tasks started, unless the slug runs the same
    /// or a later generation here, or had it deleted here; a runtime of an earlier generation
    /// retires. Returns the runtime in force for the slug (`None` if deleted).
    pub fn put(&self, runtime: Arc<RoomRuntime>) -> Option<Arc<RoomRuntime>> {
        let old = {
            let mut running = write(&self.running);
            if let Some(current) = running.get(&runtime.name) {
                if current.generation >= runtime.generation {
                    return Some(current.clone());
                }
            }
            let deleted = read(&self.deleted).get(&runtime.name).copied();
            if deleted.is_some_and(|deleted| deleted >= runtime.generation) {
                return None;
            }
            lock(&self.starters).retain(|starter| starter.send(runtime.clone()).is_ok());
            running.insert(runtime.name.clone(), runtime.clone())
        };
        if let Some(old) = old {
            old.retire();
        }
        Some(runtime)
    }

    /// Stops the runtime of `slug` if it serves `generation` or an earlier one (its scheduler
    /// gives up its lease, its hub and streams end) and remembers the deletion. Whether a
    /// runtime stopped.
    pub fn stop(&self, slug: &str, generation: u64) -> bool {
        let stopped = {
            let mut running = write(&self.running);
            let mut deleted = write(&self.deleted);
            let last = deleted.entry(slug.to_owned()).or_default();
            *last = (*last).max(generation);
            match running.get(slug) {
                Some(current) if current.generation <= generation => running.remove(slug),
                _ => None,
            }
        };
        stopped.map(|runtime| runtime.retire()).is_some()
    }

    /// A channel of rooms to start: every running room at once, then each room put.
    pub fn starts(&self) -> mpsc::UnboundedReceiver<Arc<RoomRuntime>> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let running = read(&self.running);
        for room in running.values() {
            let _ = sender.send(room.clone());
        }
        lock(&self.starters).push(sender);
        receiver
    }

    /// Reads `slug`'s document now and brings the registry in line with it (a request found its
    /// runtime's generation gone: within one round trip, not one tick).
    pub async fn refresh(&self, store: &dyn Store, tokens: &Arc<TokenService>, slug: &str) {
        if let Ok(doc) = store.room_doc(slug).await {
            self.apply(store, tokens, slug, doc, None).await;
        }
    }

    /// Brings `slug`'s runtime in line with its document `doc`, and mends the index when it
    /// disagrees (`listed`: whether the index holds the slug; `None` = not read).
    pub(super) async fn apply(
        &self,
        store: &dyn Store,
        tokens: &Arc<TokenService>,
        slug: &str,
        doc: Option<RoomDoc>,
        listed: Option<bool>,
    ) {
        let running = self.get(slug);
        match doc {
            Some(RoomDoc::Live(settings)) => {
                match &running {
                    Some(room) if room.generation == settings.generation => {
                        room.set_settings(settings);
                    }
                    Some(room) if room.generation > settings.generation => {}
                    _ => {
                        let generation = settings.generation;
                        let runtime = RoomRuntime::new(slug.to_owned(), settings, tokens.clone());
                        if self.put(Arc::new(runtime)).is_some() {
                            if running.is_some() {
                                tracing::info!(room = %slug, generation, "room deleted and created again (through another replica): restarted here");
                            } else {
                                tracing::info!(room = %slug, generation, "room created (through another replica): started here");
                            }
                        }
                    }
                }
                if listed == Some(false) {
                    let _ = store.index_room(slug, true).await;
                }
            }
            Some(RoomDoc::Deleted { generation }) => {
                if self.stop(slug, generation) {
                    tracing::info!(room = %slug, "room deleted (through another replica): stopped here");
                }
                if listed == Some(true) {
                    let _ = store.index_room(slug, false).await;
                }
            }
            None => {
                let Some(room) = running else { return };
                match store
                    .write_back_room(slug, &room.versioned_settings())
                    .await
                {
                    Ok(in_force) => room.take_restored(in_force),
                    Err(StoreError::RoomGone(_)) => {}
                    Err(error) => {
                        tracing::warn!(room = %slug, %error, "a room the store lost could not be written back yet; retrying every tick");
                    }
                }
            }
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

/// Locks `mutex`, recovering the data if a panicking thread poisoned it.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
