//! What the store contract tests share: every store under test, each with its rooms initialised.

#![allow(dead_code)]

use std::sync::Arc;

use vestibule_store::durable::{DurableOptions, DurableStore};
use vestibule_store::memory::MemoryStore;
use vestibule_store::redis::RedisStore;
use vestibule_store::{RoomId, Settings, SettingsPatch, SettingsUpdate, Store, StoreError};
use vestibule_tests::RedisServer;

/// A store under test, with what must live as long as it: its Redis server or its data dir.
pub type UnderTest = (
    Arc<dyn Store>,
    Option<RedisServer>,
    Option<tempfile::TempDir>,
);

/// The memory store, the durable store (in a fresh temp dir) and a Redis store (on a private
/// `redis-server`), each with `rooms` initialised to `settings`.
pub async fn stores(rooms: &[&str], settings: &Settings) -> Vec<UnderTest> {
    let redis = RedisServer::start();
    let redis_store = RedisStore::connect(&redis.url(), std::time::Duration::from_secs(2))
        .await
        .expect("private redis-server answers");
    let dir = tempfile::tempdir().expect("temp dir");
    let durable = DurableStore::open(dir.path(), DurableOptions::default()).expect("data dir");
    let all: Vec<UnderTest> = vec![
        (Arc::new(MemoryStore::new()), None, None),
        (Arc::new(durable), None, Some(dir)),
        (Arc::new(redis_store), Some(redis), None),
    ];
    for (store, _, _) in &all {
        for room in rooms {
            store.seed_room(room, settings).await.unwrap();
        }
    }
    all
}

/// The first generation of `slug`: the one a room seeded once (by [`stores`] or `seed_room`) is.
pub fn room_id(slug: &str) -> RoomId<'_> {
    RoomId::new(slug, 1)
}

/// A settings change of `slug`'s live generation, based on the settings the store holds now
/// (as the admin API bases one on its runtime's copy).
///
/// # Errors
/// The store's.
pub async fn change(
    store: &(impl Store + ?Sized),
    slug: &str,
    patch: &SettingsPatch,
    expected_version: Option<u64>,
) -> Result<SettingsUpdate, StoreError> {
    let base = store.room_settings(slug).await?;
    let room = RoomId::new(slug, base.generation);
    store
        .update_room(room, &base, patch, expected_version)
        .await
}
