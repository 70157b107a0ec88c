//! `RedisStore`: the production store, shared by every replica.
//!
//! One multiplexed connection that reconnects by itself: to one Redis (`ConnectionManager`) or to
//! a Redis Cluster (the `redis` crate's cluster client), behind [`RedisConnection`]; every call
//! bounded by the store timeout so nothing hangs during an outage. Every multi-step change is one
//! Lua script (`store/redis/lua/*.lua`), whose contract is declared once in Rust (`script.rs`,
//! `specs.rs`); all keys of a room share the hash tag `{room}` so a room lives on one Redis
//! Cluster slot (`keys.rs`).
//!
//! Each script's Rust half (its arguments and its reply) lives in the file of its concern:
//! - [`catalog`]: `create.lua`, `change.lua` (a settings change), `write_back.lua`, `delete.lua`, the document read,
//!   the index, the purge of a generation's keys; [`doc`]: a document as a hash.
//! - [`queue`]: `join.lua`, `leave.lua`, a ticket's read, the counts, used challenges.
//! - [`presence`]: `hear.lua`, `sse_refresh.lua`, the poll's read.
//! - [`draw`]: the pre-queue join, `draw_seed.lua`, `draw.lua`, `draw_mix.lua`.
//! - [`admission`]: `lease.lua`, `release_lease.lua`, `admit.lua`, and the token checks and
//!   orders ([`tokens`]: `token.lua`), confirmed on the replicas ([`confirm`]: `WAIT`).
//!   [`safety`]: `INFO`, `CONFIG GET`.
//! - [`link`]: the connection every call goes through, bounded by the store timeout.
//! - [`reply`]: reading Redis replies into the store's types.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

mod admission;
pub mod catalog;
mod confirm;
mod connection;
mod doc;
mod draw;
mod figures;
mod group_commit;
pub mod keys;
mod link;
mod lottery;
mod migrate;
mod presence;
mod queue;
mod reply;
mod safety;
mod script;
mod siblings;
mod specs;
mod tokens;

use async_trait::async_trait;
use redis::Value;

pub use self::connection::{key_slot, RedisConnection};

use self::keys::RoomKeys;
use self::link::unavailable;
use self::link::Link;
use self::script::Loaded;
use self::siblings::Member;
use super::{RoomId, Store, StoreError, StoreOptions, StoreSafety};

/// Where the Redis store lives: one server, or a Redis Cluster's seed nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisTarget<'a> {
    /// One Redis server (`--redis-url`): a `ConnectionManager`.
    Single(&'a str),
    /// A Redis Cluster's seed nodes (`--redis-cluster`): the cluster client.
    Cluster(Vec<&'a str>),
}

/// Seconds the dedup hash of a room lives after its last keyed join (± [`SECRET_RECHECK`]).
pub(super) const DEDUP_TTL_SECS: u64 = 24 * 3600;

/// Every script of the store, loaded from its spec (`specs.rs`).
struct Scripts {
    create: Loaded,
    change: Loaded,
    write_back: Loaded,
    delete: Loaded,
    lease: Loaded,
    release_lease: Loaded,
    admit: Loaded,
    token: Loaded,
    leave: Loaded,
    park: Loaded,
    sse_refresh: Loaded,
    hear: Loaded,
    draw: Loaded,
    draw_seed: Loaded,
    draw_mix: Loaded,
    waiters: Loaded,
    lottery_file: Loaded,
    room_secret: Loaded,
    figures: Loaded,
}

/// The Redis-backed store.
pub struct RedisStore {
    link: Arc<Link>,
    /// Joins sent to Redis together, per room (`join.lua` takes several in one call).
    joins: Arc<group_commit::GroupCommit>,
    scripts: Scripts,
    /// Each room's secret (the HMAC key of derived ticket ids) as last read from Redis, for the
    /// generation it is of: another generation's is no copy at all. Never logged.
    secrets: RwLock<HashMap<String, CachedSecret>>,
    /// Each room's draw seed as read from Redis (it never changes once written), for the
    /// generation it is of: pre-queue joins compute their place in the drawn order with it
    /// (`draw.rs`). Never logged.
    seeds: RwLock<HashMap<String, GenerationSeed>>,
    /// The generation of each room this process knows to be random (docs/DESIGN.md "Random
    /// queueing"): their joins carry lottery keys from the first try (`lottery.rs`).
    lottery_rooms: RwLock<HashMap<String, u64>>,
    /// The lease length and how long ended tickets are kept.
    options: StoreOptions,
    /// How many replicas each slot's master has, for confirming a token's use (`confirm.rs`).
    replicas: confirm::ReplicaCounts,
    /// The connection of tokens' uses and their `WAIT` (`confirm.rs`).
    uses: confirm::UsesLink,
}

/// A draw seed and the generation it is of.
type GenerationSeed = (u64, Arc<[u8]>);

/// A room secret, the generation it is of, and when a join last checked it against Redis (the
/// upkeep round trip of `RedisStore::room_secret`; lease calls update the secret but not this
/// time).
#[derive(Clone)]
struct CachedSecret {
    generation: u64,
    secret: Arc<[u8]>,
    checked: Instant,
}

/// How long a join trusts a cached room secret before checking it against Redis again (followers
/// also check at every lease call; the leader makes none while it leads).
const SECRET_RECHECK: Duration = Duration::from_secs(5);

impl RedisStore {
    /// Connects to `url` (`redis://…`, `rediss://…` or `redis+unix://…`).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the URL is invalid or Redis does not answer within
    /// `timeout` × 5.
    pub async fn connect(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        Self::open(&RedisTarget::Single(url), timeout).await
    }

    /// Connects to one Redis or to a Redis Cluster (its seed nodes), and moves the rooms an
    /// earlier version wrote into documents ([`RedisStore::migrate`]).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when a URL is invalid or Redis does not answer within
    /// `timeout` × 5.
    pub async fn open(target: &RedisTarget<'_>, timeout: Duration) -> Result<Self, StoreError> {
        let connecting = async {
            match target {
                RedisTarget::Single(url) => RedisConnection::single(url, timeout).await,
                RedisTarget::Cluster(seeds) => RedisConnection::cluster(seeds, timeout).await,
            }
        };
        let connection = tokio::time::timeout(timeout * 5, connecting)
            .await
            .map_err(|_| StoreError::Unavailable("timed out connecting to Redis".into()))?
            .map_err(unavailable)?;
        // A token's use waits for the replicas on a connection of its own: `WAIT` holds up
        // every command behind it on its connection, and polls must not queue behind an order.
        let uses = confirm::UsesLink::connect(target, timeout).await?;
        let family = match (target, &connection) {
            (RedisTarget::Single(url), RedisConnection::Single(manager)) => {
                Some(Member::join(url, manager.clone(), timeout))
            }
            _ => None,
        };
        let store = Self::with_connection(connection, uses, timeout, family);
        store.migrate().await?;
        Ok(store)
    }

    /// The same store with `options` (set before it is shared).
    #[must_use]
    pub fn with_options(self, options: StoreOptions) -> Self {
        Self { options, ..self }
    }

    fn with_connection(
        connection: RedisConnection,
        uses: confirm::UsesLink,
        timeout: Duration,
        family: Option<Member>,
    ) -> Self {
        let link = Arc::new(Link {
            connection,
            timeout,
            family,
        });
        Self {
            uses,
            joins: Arc::new(group_commit::GroupCommit::new(link.clone())),
            link,
            scripts: Scripts {
                create: specs::CREATE.load(),
                change: specs::CHANGE.load(),
                write_back: specs::WRITE_BACK.load(),
                delete: specs::DELETE.load(),
                lease: specs::LEASE.load(),
                release_lease: specs::RELEASE_LEASE.load(),
                admit: specs::ADMIT.load(),
                token: specs::TOKEN.load(),
                leave: specs::LEAVE.load(),
                park: specs::PARK.load(),
                sse_refresh: specs::SSE_REFRESH.load(),
                hear: specs::HEAR.load(),
                draw: specs::DRAW.load(),
                draw_seed: specs::DRAW_SEED.load(),
                draw_mix: specs::DRAW_MIX.load(),
                waiters: specs::WAITERS.load(),
                lottery_file: specs::LOTTERY_FILE.load(),
                room_secret: specs::ROOM_SECRET.load(),
                figures: specs::FIGURES.load(),
            },
            options: StoreOptions::default(),
            secrets: RwLock::new(HashMap::new()),
            seeds: RwLock::new(HashMap::new()),
            lottery_rooms: RwLock::new(HashMap::new()),
            replicas: confirm::ReplicaCounts::default(),
        }
    }

    /// A clone of the connection, for tools that read Redis directly (benchmarks, tests).
    pub fn connection(&self) -> RedisConnection {
        self.link.connection.clone()
    }

    /// This process's copy of `room`'s secret, if it has one of that generation.
    pub(super) fn cached_secret(&self, room: RoomId<'_>) -> Option<Arc<[u8]>> {
        self.secrets
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(room.slug)
            .filter(|cached| cached.generation == room.generation)
            .map(|cached| cached.secret.clone())
    }

    /// Keeps the secret Redis answered for `room` (Nil or empty: none there, nothing to keep).
    /// Redis wins over an older copy: after Redis lost the key and another replica wrote a new
    /// one, every replica converges on the one in Redis at its next lease call or join upkeep.
    /// `upkeep`: this answer came from the join upkeep round trip (or starts the cache entry).
    pub(super) fn remember_secret(
        &self,
        room: RoomId<'_>,
        value: &Value,
        upkeep: bool,
    ) -> Result<(), StoreError> {
        let secret: Arc<[u8]> = match value {
            Value::BulkString(bytes) if !bytes.is_empty() => bytes.as_slice().into(),
            Value::BulkString(_) | Value::Nil => return Ok(()),
            // Not echoed: whatever is stored there is meant to be secret.
            _ => {
                return Err(StoreError::Corrupt(
                    "the room secret is not a string".into(),
                ))
            }
        };
        let mut secrets = self.secrets.write().unwrap_or_else(PoisonError::into_inner);
        let held = secrets
            .get(room.slug)
            .filter(|cached| cached.generation == room.generation);
        let checked = match held {
            Some(cached) if !upkeep => cached.checked,
            _ => Instant::now(),
        };
        if held.is_some_and(|cached| cached.secret != secret) {
            tracing::warn!(
                room = room.slug,
                "the room secret in Redis changed (Redis lost it and another replica wrote a new \
                 one): retried joins now derive ticket ids with the new one"
            );
        }
        // A later generation's secret replaces an earlier one's; an earlier one's never
        // replaces a later one's.
        if secrets
            .get(room.slug)
            .is_none_or(|cached| cached.generation <= room.generation)
        {
            secrets.insert(
                room.slug.to_owned(),
                CachedSecret {
                    generation: room.generation,
                    secret,
                    checked,
                },
            );
        }
        Ok(())
    }

    /// A room's secret for a keyed join: this process's copy while it was checked against Redis
    /// within [`SECRET_RECHECK`]; else (one join per period does this) one round trip
    /// (`room_secret.lua`) writes the copy back with `SET NX`, reads the secret in force, and
    /// renews the dedup hash's TTL, which thus lives [`DEDUP_TTL_SECS`] past the room's last keyed
    /// join without a command per join.
    ///
    /// # Errors
    /// [`StoreError::RoomGone`] when `room`'s generation is not the live one; else the call's
    /// error.
    pub(super) async fn room_secret(&self, room: RoomId<'_>) -> Result<Arc<[u8]>, StoreError> {
        let offer = {
            let mut secrets = self.secrets.write().unwrap_or_else(PoisonError::into_inner);
            match secrets
                .get_mut(room.slug)
                .filter(|cached| cached.generation == room.generation)
            {
                Some(cached) if cached.checked.elapsed() < SECRET_RECHECK => {
                    return Ok(cached.secret.clone());
                }
                Some(cached) => {
                    // Claimed: the other joins of this period keep using the copy meanwhile.
                    cached.checked = Instant::now();
                    cached.secret.clone()
                }
                None => Arc::from(&fresh_secret()[..]),
            }
        };
        let keys = RoomKeys::new(room);
        let mut call = self.scripts.room_secret.call(&keys);
        call.arg("generation", room.generation)
            .arg("offer", &*offer)
            .arg("dedup_ttl", DEDUP_TTL_SECS);
        // SET NX, EXPIRE and GET mean the same sent twice.
        let value = self.link.run_value_repeatable(&call).await?;
        self.remember_secret(room, &value, true)?;
        self.cached_secret(room)
            .ok_or_else(|| StoreError::Corrupt("the room secret is missing".into()))
    }
}

#[async_trait]
impl Store for RedisStore {
    fn kind(&self) -> &'static str {
        // One kind for one server and a cluster: the same store, the same semantics.
        "redis"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let mut connection = self.link.connection.clone();
        self.link
            .bounded(connection.ping())
            .await
            .map_err(StoreError::for_read)
    }

    async fn safety(&self) -> Result<Option<StoreSafety>, StoreError> {
        let mut connection = self.link.connection.clone();
        let mut info = redis::cmd("INFO");
        info.arg("memory").arg("persistence");
        let replies = self
            .link
            .bounded(connection.on_every_node(info))
            .await
            .map_err(StoreError::for_read)?;
        // Managed Redis services often refuse CONFIG: then the snapshot schedule is unknown.
        let mut config = redis::cmd("CONFIG");
        config.arg("GET").arg("save");
        let saves = self
            .link
            .bounded(connection.on_every_node(config))
            .await
            .unwrap_or_default();
        let mut nodes = Vec::with_capacity(replies.len());
        for (i, reply) in replies.into_iter().enumerate() {
            let info: String = redis::from_redis_value(reply)
                .map_err(|error| StoreError::Unavailable(format!("INFO: {error}")))?;
            let save = saves.get(i).cloned().and_then(|reply: Value| {
                redis::from_redis_value::<Vec<String>>(reply)
                    .ok()
                    .and_then(|pair| pair.into_iter().nth(1))
            });
            nodes.push(safety::node_safety(&info, save)?);
        }
        Ok(safety::riskiest(nodes))
    }
}

/// The script `<name>.lua` as the store runs it (its bindings and prelude included) and its KEYS
/// for `room`, in order; `None` for a name no script has. For tests that run a script directly.
pub fn script_parts(name: &str, room: RoomId<'_>) -> Option<(String, Vec<String>)> {
    let spec = script::SPECS.iter().find(|spec| spec.name == name)?;
    let keys = RoomKeys::new(room);
    Some((
        spec.source(),
        spec.keys.iter().map(|key| keys.of(*key)).collect(),
    ))
}

/// 32 bytes from the OS CSPRNG: a new room's secret.
pub(super) fn fresh_secret() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    bytes
}
