//! The store a process runs on: Redis (with the keys its replicas share there) or the embedded
//! store (durable in `--data-dir`, or memory only), and each thread's own connection to Redis.

use std::sync::Arc;

use anyhow::Context as _;

use crate::bots::{Bots, ChallengeKey};
use crate::config::Config;
use crate::state::AppState;
use crate::store::durable::{DurableOptions, DurableStore};
use crate::store::memory::MemoryStore;
use crate::store::redis::RedisStore;
use crate::store::Store;
use crate::tokens::keys::SharedKey;
use crate::tokens::{KeyRing, TokenService};

/// The store opened at start, with the keys that live beside it.
pub(super) struct OpenedStore {
    pub(super) store: Arc<dyn Store>,
    /// The entry-token signing keys, as loaded (the caller adds the context).
    pub(super) keys: anyhow::Result<KeyRing>,
    /// The proof-of-work challenge key (shared through Redis, else this process's own).
    pub(super) challenge_key: ChallengeKey,
    /// Redis, when the store is Redis.
    pub(super) redis: Option<Arc<RedisStore>>,
}

/// Opens the store `config` names, and loads the signing keys and the challenge key from it.
///
/// # Errors
/// An unreachable Redis, the shared challenge key unreadable, or an embedded store that cannot
/// be opened.
pub(super) async fn open_store(config: &Config) -> anyhow::Result<OpenedStore> {
    let mut redis_handle = None;
    let (store, keys, challenge_key): (Arc<dyn Store>, _, _) = match config.redis_target() {
        Some(target) => {
            let redis = RedisStore::open(&target, config.store_timeout())
                .await
                .with_context(|| {
                    format!(
                        "connecting to Redis at {}",
                        config.redis_url_for_logs().unwrap_or_default()
                    )
                })?
                .with_options(config.store_options());
            let keys = KeyRing::load(&config.tokens, SharedKey::Redis(&redis)).await;
            let challenge_key = Bots::key_in_redis(&redis)
                .await
                .context("loading the shared proof-of-work challenge key")?;
            let redis = Arc::new(redis);
            redis_handle = Some(redis.clone());
            (redis as Arc<dyn Store>, keys, challenge_key)
        }
        None => {
            let store = embedded_store(config)?;
            let shared = config
                .data_dir
                .0
                .as_deref()
                .map_or(SharedKey::Memory, SharedKey::DataDir);
            let keys = KeyRing::load(&config.tokens, shared).await;
            (store, keys, Bots::key_in_memory())
        }
    };
    Ok(OpenedStore {
        store,
        keys,
        challenge_key,
        redis: redis_handle,
    })
}

/// The entry-token service, signing with the current key of `keys`.
pub(super) fn token_service(keys: KeyRing, config: &Config) -> Arc<TokenService> {
    tracing::info!(
        kid = keys.current_kid(),
        "entry tokens signed with this key"
    );
    Arc::new(TokenService::new(
        keys,
        &config.tokens.token_issuer,
        &config.tokens.token_audience,
    ))
}

/// The embedded store: durable in `--data-dir`, or memory only with `--data-dir none`.
fn embedded_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    let Some(dir) = &config.data_dir.0 else {
        tracing::info!(
            "embedded store in memory only (--data-dir none): a restart forgets the queue"
        );
        return Ok(Arc::new(
            MemoryStore::new().with_options(config.store_options()),
        ));
    };
    let options = DurableOptions {
        fsync: config.data_fsync,
        ..DurableOptions::default()
    };
    let store = DurableStore::open(dir, options)?;
    Ok(Arc::new(store.with_options(config.store_options())))
}

/// A connection to Redis of `whose` own (made on the runtime this runs on, whose driver task it
/// then stays on), or the shared store (embedded stores, or when Redis cannot be reached now).
pub(super) async fn own_store(state: &AppState, config: &Config, whose: &str) -> Arc<dyn Store> {
    let Some(target) = config.redis_target() else {
        return state.store.clone();
    };
    match RedisStore::open(&target, config.store_timeout()).await {
        Ok(store) => Arc::new(store.with_options(config.store_options())),
        Err(error) => {
            tracing::warn!(%error, "{whose} shares the main connection to Redis");
            state.store.clone()
        }
    }
}
