//! What the store contract tests share: every store under test, each with its rooms initialised.

#![allow(dead_code)]

use std::sync::Arc;

use vestibule_store::durable::{DurableOptions, DurableStore};
use vestibule_store::ids::entry_token;
use vestibule_store::memory::MemoryStore;
use vestibule_store::redis::RedisStore;
use vestibule_store::{
    now_ms, AdmitRequest, JoinOutcome, JoinRequest, Queue, RoomId, Settings, SettingsPatch,
    SettingsUpdate, Store, StoreError, StoreOptions,
};
use vestibule_tests::RedisServer;

/// The options of every store under test: a lease that cannot lapse between a test's calls on a
/// loaded machine (a test of a lapse builds its own), ended tickets kept for an hour.
pub const TESTING: StoreOptions = StoreOptions {
    lease_ms: 60_000,
    keep_ms: 3_600_000,
};

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
        .expect("private redis-server answers")
        .with_options(TESTING);
    let dir = tempfile::tempdir().expect("temp dir");
    let durable = DurableStore::open(dir.path(), DurableOptions::default())
        .expect("data dir")
        .with_options(TESTING);
    let all: Vec<UnderTest> = vec![
        (
            Arc::new(MemoryStore::new().with_options(TESTING)),
            None,
            None,
        ),
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

/// The settings every contract test starts from: open at 100 shoppers/s, 60 s tokens, no cap,
/// the default presence times; a test changes only what it is about (`..defaults()`).
pub fn defaults() -> Settings {
    Settings {
        admission_rate_per_sec: 100.0,
        paused: false,
        token_ttl_ms: 60_000,
        max_active_users: None,
        checkout_url: None,
        share_token_with_embedder: false,
        abandon_after_ms: vestibule_store::default_abandon_after_ms(),
        hold_place_ms: vestibule_store::default_hold_place_ms(),
        expected_checkout_ms: None,
        sale: Default::default(),
        opens_at_ms: None,
        prequeue_opens_at_ms: None,
        pow_difficulty: 0,
        pow_auto_joins_per_sec: None,
        require_user_assertion: false,
        labels: Default::default(),
        queueing_method: Default::default(),
        auto_rate: None,
    }
}

/// A shopper's plain join at the back of the line, for tests that are not about how a join is
/// asked: [`Queue::join`] with [`JoinRequest::new`]`(id).keyed(key)`, its refusals as errors.
#[async_trait::async_trait]
pub trait JoinLine {
    /// The ticket joined as `id` (or found again under `key`).
    ///
    /// # Errors
    /// The store's; a refusal as [`StoreError::Refused`].
    async fn join_line(
        &self,
        room: RoomId<'_>,
        key: Option<&str>,
        id: &str,
    ) -> Result<JoinOutcome, StoreError>;
}

#[async_trait::async_trait]
impl<T: Queue + ?Sized> JoinLine for T {
    async fn join_line(
        &self,
        room: RoomId<'_>,
        key: Option<&str>,
        id: &str,
    ) -> Result<JoinOutcome, StoreError> {
        self.join(room, &JoinRequest::new(id).keyed(key))
            .await?
            .joined()
    }
}

/// Takes `slug`'s lease as holder "a" and admits up to `count`; returns how many were admitted.
pub async fn admit(store: &dyn Store, slug: &str, count: usize) -> u64 {
    let lease = store.lease(room_id(slug), "a").await.unwrap();
    let epoch = lease.epoch.expect("the only holder leads");
    let tokens: Vec<String> = (0..count).map(|_| entry_token(slug)).collect();
    let outcome = store
        .admit(
            room_id(slug),
            &AdmitRequest {
                holder: "a",
                epoch,
                now_ms: now_ms(),
                token_ttl_ms: 60_000,
                max_active_users: None,
                tokens: &tokens,
                abandon_after_ms: u64::MAX / 2,
                hold_place_ms: 0,
                instant_bank_max: 0,
                pace: None,
            },
        )
        .await
        .unwrap();
    assert!(!outcome.fenced, "{}", store.kind());
    outcome.admitted
}
