//! Bots at the door (docs/bots.md, docs/DESIGN.md "Bots at the door"):
//! proof of work on joins, the difficulty's automatic rise, and who joins most.
//!
//! - [`challenge`]: signed challenges, their stateless check and why one is refused.
//! - [`difficulty`]: the difficulty in force (the curve) and the join-rate meter.
//! - [`top_clients`]: joins per client address in the last minute.
//!
//! The HTTP side (the challenge endpoint, the join's checks, the admin view) is
//! `http/bots.rs`. The single-use mark is the store's (`Store::use_challenge`).

pub mod challenge;
pub mod difficulty;
pub mod top_clients;

use std::collections::HashMap;
use std::sync::Mutex;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

pub use challenge::{ChallengeKey, Refusal, Verified};

use vestibule_store::redis::RedisStore;
use vestibule_store::Settings;

/// The Redis key of the shared challenge key (URL-safe base64 of 32 bytes), written once with
/// `SET NX` by the first replica and read by every other at start.
pub const REDIS_KEY: &str = "vestibule:pow-key";

/// What a room's replica watches: its join rate and joins by client.
#[derive(Debug, Default)]
struct RoomWatch {
    joins: difficulty::RateMeter,
    clients: top_clients::MinuteCounts,
}

/// This replica's bot defences: the challenge key and, per room, the join rate and top clients.
#[derive(Debug)]
pub struct Bots {
    key: ChallengeKey,
    /// Per room, made at its first join (rooms are created at run time).
    rooms: Mutex<HashMap<String, std::sync::Arc<Mutex<RoomWatch>>>>,
}

impl Bots {
    /// Defences with `key` (each room's watch is made when it is first needed).
    pub fn new(key: ChallengeKey) -> Self {
        Self {
            key,
            rooms: Mutex::default(),
        }
    }

    /// `room`'s watch, made if it has none (callers name running rooms only).
    fn watch(&self, room: &str) -> std::sync::Arc<Mutex<RoomWatch>> {
        lock(&self.rooms)
            .entry(room.to_owned())
            .or_default()
            .clone()
    }

    /// `room`'s watch if it has one.
    fn watch_of(&self, room: &str) -> Option<std::sync::Arc<Mutex<RoomWatch>>> {
        lock(&self.rooms).get(room).cloned()
    }

    /// Forgets a deleted room's watch.
    pub fn forget_room(&self, room: &str) {
        lock(&self.rooms).remove(room);
    }

    /// The challenge key shared through Redis (generated and written with `SET NX` by the first
    /// replica).
    ///
    /// # Errors
    /// Redis unreachable, or a stored key that is not 32 bytes of URL-safe base64.
    pub async fn key_in_redis(redis: &RedisStore) -> anyhow::Result<ChallengeKey> {
        let candidate = URL_SAFE_NO_PAD.encode(random_key());
        let in_force = redis.shared_signing_key(REDIS_KEY, &candidate).await?;
        let bytes: [u8; 32] = URL_SAFE_NO_PAD
            .decode(in_force.trim())
            .ok()
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or_else(|| anyhow::anyhow!("{REDIS_KEY} is not 32 bytes of URL-safe base64"))?;
        Ok(ChallengeKey::new(bytes))
    }

    /// A key for this process only (the embedded store: one process).
    pub fn key_in_memory() -> ChallengeKey {
        ChallengeKey::new(random_key())
    }

    /// The challenge key.
    pub fn key(&self) -> &ChallengeKey {
        &self.key
    }

    /// Counts a join attempt in `room` by `client` (any outcome), for the top clients.
    pub fn record_attempt(&self, room: &str, client: Option<&str>, now_ms: u64) {
        if let Some(client) = client {
            lock(&self.watch(room)).clients.record(client, now_ms);
        }
    }

    /// Counts a join that passed the room's checks, for the join rate.
    pub fn record_join(&self, room: &str, now_ms: u64) {
        lock(&self.watch(room)).joins.record(now_ms);
    }

    /// The difficulty a challenge of `room` asks for now ([`difficulty::in_force`]).
    pub fn difficulty(&self, room: &str, settings: &Settings, now_ms: u64) -> u8 {
        let rate = self
            .watch_of(room)
            .map_or(0.0, |watch| lock(&watch).joins.per_sec(now_ms));
        difficulty::in_force(
            settings.pow_difficulty,
            settings.pow_auto_joins_per_sec,
            rate,
            vestibule_shared::settings::PROOF_OF_WORK_DIFFICULTY_MAX,
        )
    }

    /// The least difficulty a join's solution must have now: the difficulty in force less one bit
    /// (the meter may have moved while an honest client solved, and replicas' meters differ a
    /// little), never below the room's own. A farm that fetched cheap challenges before it
    /// started joining finds them refused once its joins raise the difficulty.
    pub fn least_difficulty(&self, room: &str, settings: &Settings, now_ms: u64) -> u8 {
        self.difficulty(room, settings, now_ms)
            .saturating_sub(1)
            .max(settings.pow_difficulty)
    }

    /// This replica's `limit` clients with most join attempts in `room` in the last minute.
    pub fn top_clients(&self, room: &str, limit: usize, now_ms: u64) -> Vec<(String, u64)> {
        self.watch_of(room)
            .map(|watch| lock(&watch).clients.top(limit, now_ms))
            .unwrap_or_default()
    }
}

fn random_key() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS CSPRNG is available");
    bytes
}

/// Locks `mutex`, recovering the data if a panicking thread poisoned it.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
