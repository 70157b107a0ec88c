//! What the store contract tests share: every store under test, each with its rooms initialised.

use std::sync::Arc;

use vestibule::store::durable::{DurableOptions, DurableStore};
use vestibule::store::memory::MemoryStore;
use vestibule::store::redis::RedisStore;
use vestibule::store::{Settings, Store};
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
            store.init_room(room, settings).await.unwrap();
        }
    }
    all
}
