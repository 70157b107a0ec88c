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
//! - [`catalog`]: `create.lua`, `change.lua`, `write_back.lua`, `delete.lua`, the document read,
//!   the index, the purge of a generation's keys; [`doc`]: a document as a hash.
//! - [`settings`]: `lease.lua`, `release_lease.lua`.
//! - [`queue`]: `join.lua`, `sse_refresh.lua`, `leave.lua`, a ticket's read, the counts.
//! - [`draw`]: the pre-queue join, `draw_seed.lua`, `draw.lua`.
//! - [`admission`]: `admit.lua`. [`tokens`]: `token.lua`. [`safety`]: `INFO`, `CONFIG GET`.
//! - [`reply`]: reading Redis replies into the store's types.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

mod admission;
mod bots;
pub mod catalog;
mod connection;
mod doc;
mod draw;
mod group_commit;
pub mod keys;
mod lottery;
mod migrate;
mod presence;
mod queue;
mod reply;
mod safety;
mod script;
mod settings;
mod siblings;
mod specs;
mod tokens;

use async_trait::async_trait;
use redis::Value;

pub use self::connection::{key_slot, RedisConnection};

use self::keys::RoomKeys;
use self::reply::as_array;
use self::script::{Call, Loaded};
use self::siblings::Member;
use super::{
    AdmitOutcome, AdmitRequest, DrawOutcome, DrawRecord, DrawRequest, InstantAdmission, JoinLimit,
    JoinReply, LeaseOutcome, LeaveOutcome, OrderClaim, PollAnchor, PolledTicket, QueueCursor,
    RoomCounts, RoomId, SettingsPatch, SettingsUpdate, SseRefresh, Store, StoreError, StoreSafety,
    TicketRecord, TokenCheck, TokenUse, VersionedSettings,
};

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
    sse_refresh: Loaded,
    hear: Loaded,
    draw: Loaded,
    draw_seed: Loaded,
    waiters: Loaded,
    lottery_file: Loaded,
    room_secret: Loaded,
}

/// One connection to Redis with its store timeout, and its part in its family: what every call
/// goes through (bounded by the timeout, resent once where that is safe). Shared with the task
/// that sends a room's joins together (`group_commit.rs`).
pub(super) struct Link {
    pub(super) connection: RedisConnection,
    pub(super) timeout: Duration,
    /// This connection's part among the other connections of this process to the same Redis,
    /// which it tells when it finds Redis gone or back (`siblings.rs`; none on a Redis Cluster).
    family: Option<Member>,
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

/// Classifies a Redis failure by what the caller may assume about its effect: a script's refusal
/// of a room (`script::script_error`: nothing written); refused before anything was sent, or an
/// error reply (Redis ran nothing of it) → surely not applied; a broken connection or a timeout
/// after sending → the outcome is unknown.
pub(super) fn unavailable(error: redis::RedisError) -> StoreError {
    if let Some(refusal) = script::script_error(&error) {
        return refusal;
    }
    let sent_maybe = !error.is_connection_refusal()
        && (error.is_io_error() || error.is_timeout() || error.is_connection_dropped());
    if sent_maybe {
        StoreError::OutcomeUnknown(error.to_string())
    } else {
        StoreError::Unavailable(error.to_string())
    }
}

impl Link {
    /// Runs `call`, bounded by the store timeout, expecting an array reply.
    async fn run(&self, call: &Call<'_>) -> Result<Vec<Value>, StoreError> {
        as_array(self.run_value(call).await?)
    }

    /// Runs `call`, bounded by the store timeout: its reply as it came.
    async fn run_value(&self, call: &Call<'_>) -> Result<Value, StoreError> {
        let mut connection = self.connection.clone();
        self.bounded(call.invocation.invoke_async(&mut connection))
            .await
    }

    /// Runs `call` like [`Self::run`], once more if the connection turns out to have dropped
    /// ([`Self::bounded_repeatable`]): only for a script that means the same when run twice.
    async fn run_repeatable(&self, call: &Call<'_>) -> Result<Vec<Value>, StoreError> {
        as_array(self.run_value_repeatable(call).await?)
    }

    /// [`Self::run_repeatable`] with the reply as it came.
    async fn run_value_repeatable(&self, call: &Call<'_>) -> Result<Value, StoreError> {
        self.bounded_repeatable(|| {
            let mut connection = self.connection.clone();
            async move { call.invocation.invoke_async(&mut connection).await }
        })
        .await
    }

    /// Runs `pipe` bounded by the store timeout, once more if the connection turns out to have
    /// dropped ([`Self::bounded_repeatable`]): only for commands that mean the same sent twice.
    pub(super) async fn query_repeatable<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, StoreError> {
        self.bounded_repeatable(|| {
            let mut connection = self.connection.clone();
            async move { pipe.query_async(&mut connection).await }
        })
        .await
    }

    pub(super) async fn bounded<T>(
        &self,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => {
                self.saw(&result);
                result.map_err(unavailable)
            }
            Err(_) => Err(self.timed_out()),
        }
    }

    /// [`Self::bounded`] for a call that means the same when sent twice (a read; a join with a
    /// key, which finds its ticket again): when its connection turns out to have dropped, the
    /// call goes once more, on the connection the `ConnectionManager` starts making at that
    /// failure, within what is left of the store timeout. A connection cut while Redis stays up
    /// (`CLIENT KILL`, a proxy or a failover closing connections) then costs no failed answer;
    /// before, the first such call on each serving thread's connection failed (a black-box probe:
    /// 7 of 40 requests sent just after a `CLIENT KILL` got 503 or 504). When the second try
    /// fails too, the first failure is the answer (that one may have been sent). One server only:
    /// the cluster client resends by itself.
    pub(super) async fn bounded_repeatable<T, F, Fut>(&self, call: F) -> Result<T, StoreError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let started = Instant::now();
        let first = tokio::time::timeout(self.timeout, call())
            .await
            .map_err(|_| self.timed_out())?;
        self.saw(&first);
        let dropped = match first {
            Ok(value) => return Ok(value),
            Err(error) if self.family.is_some() && siblings::is_news_of_a_drop(&error) => error,
            Err(error) => return Err(unavailable(error)),
        };
        let left = self.timeout.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, call()).await {
            Ok(second) => {
                self.saw(&second);
                second.map_err(|error| {
                    script::script_error(&error).unwrap_or_else(|| unavailable(dropped))
                })
            }
            Err(_) => Err(unavailable(dropped)),
        }
    }

    /// Tells this connection's family what a call found (`siblings.rs`).
    pub(super) fn saw<T>(&self, result: &redis::RedisResult<T>) {
        if let Some(member) = &self.family {
            member.saw(result);
        }
    }

    pub(super) fn timed_out(&self) -> StoreError {
        StoreError::OutcomeUnknown(format!(
            "Redis did not answer within {} ms",
            self.timeout.as_millis()
        ))
    }
}

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
        let family = match (target, &connection) {
            (RedisTarget::Single(url), RedisConnection::Single(manager)) => {
                Some(Member::join(url, manager.clone(), timeout))
            }
            _ => None,
        };
        let store = Self::with_connection(connection, timeout, family);
        store.migrate().await?;
        Ok(store)
    }

    fn with_connection(
        connection: RedisConnection,
        timeout: Duration,
        family: Option<Member>,
    ) -> Self {
        let link = Arc::new(Link {
            connection,
            timeout,
            family,
        });
        Self {
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
                sse_refresh: specs::SSE_REFRESH.load(),
                hear: specs::HEAR.load(),
                draw: specs::DRAW.load(),
                draw_seed: specs::DRAW_SEED.load(),
                waiters: specs::WAITERS.load(),
                lottery_file: specs::LOTTERY_FILE.load(),
                room_secret: specs::ROOM_SECRET.load(),
            },
            secrets: RwLock::new(HashMap::new()),
            seeds: RwLock::new(HashMap::new()),
            lottery_rooms: RwLock::new(HashMap::new()),
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

    async fn update_room(
        &self,
        room: RoomId<'_>,
        base: &VersionedSettings,
        patch: &SettingsPatch,
        expected_version: Option<u64>,
    ) -> Result<SettingsUpdate, StoreError> {
        self.update_room_in_redis(room, base, patch, expected_version)
            .await
    }

    async fn join_with_limit(
        &self,
        room: RoomId<'_>,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
    ) -> Result<JoinReply, StoreError> {
        let mode = queue::JoinMode::default();
        self.join_with_limit_in_redis(room, dedup_key, new_id, limit, None, mode)
            .await
    }

    async fn join_admitting(
        &self,
        room: RoomId<'_>,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        instant: &InstantAdmission,
    ) -> Result<JoinReply, StoreError> {
        let mode = queue::JoinMode {
            prequeue_seed: None,
            settings_version: instant.settings_version,
        };
        self.join_with_limit_in_redis(room, dedup_key, new_id, limit, Some(instant), mode)
            .await
    }

    async fn join_prequeue(
        &self,
        room: RoomId<'_>,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        settings_version: Option<u64>,
    ) -> Result<JoinReply, StoreError> {
        self.join_prequeue_in_redis(room, dedup_key, new_id, limit, settings_version)
            .await
    }

    async fn draw_seed(&self, room: RoomId<'_>, seed: &str) -> Result<DrawRecord, StoreError> {
        self.draw_seed_in_redis(room, seed).await
    }

    async fn draw_record(&self, room: RoomId<'_>) -> Result<Option<DrawRecord>, StoreError> {
        self.draw_record_in_redis(room).await
    }

    async fn draw_tags(
        &self,
        room: RoomId<'_>,
        from: u64,
        n: u64,
    ) -> Result<Vec<String>, StoreError> {
        self.draw_tags_in_redis(room, from, n).await
    }

    async fn keyed_ticket(
        &self,
        room: RoomId<'_>,
        key: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        self.keyed_ticket_in_redis(room, key, now_ms).await
    }

    async fn prequeue_ids(&self, room: RoomId<'_>) -> Result<Vec<String>, StoreError> {
        self.prequeue_ids_in_redis(room).await
    }

    async fn draw(
        &self,
        room: RoomId<'_>,
        request: &DrawRequest<'_>,
    ) -> Result<DrawOutcome, StoreError> {
        self.draw_in_redis(room, request).await
    }

    async fn ticket(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        self.ticket_in_redis(room, id, now_ms).await
    }

    async fn hear(
        &self,
        room: RoomId<'_>,
        ids: &[String],
        now_ms: u64,
        positions: bool,
    ) -> Result<Vec<Option<TicketRecord>>, StoreError> {
        self.hear_in_redis(room, ids, now_ms, positions).await
    }

    async fn mark_heard(
        &self,
        room: RoomId<'_>,
        polled: &[PolledTicket],
        now_ms: u64,
    ) -> Result<(), StoreError> {
        self.mark_heard_in_redis(room, polled, now_ms).await
    }

    async fn hear_polled(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<(TicketRecord, Option<PollAnchor>)>, StoreError> {
        self.hear_polled_in_redis(room, id, now_ms).await
    }

    async fn sse_refresh(
        &self,
        room: RoomId<'_>,
        since: Option<QueueCursor>,
        ids: &[String],
        now_ms: u64,
    ) -> Result<SseRefresh, StoreError> {
        self.sse_refresh_in_redis(room, since, ids, now_ms).await
    }

    async fn leave(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<LeaveOutcome, StoreError> {
        self.leave_in_redis(room, id, now_ms, keep_ms).await
    }

    async fn counts(&self, room: RoomId<'_>, now_ms: u64) -> Result<RoomCounts, StoreError> {
        self.counts_in_redis(room, now_ms).await
    }

    async fn lease(
        &self,
        room: RoomId<'_>,
        holder: &str,
        lease_ms: u64,
    ) -> Result<LeaseOutcome, StoreError> {
        self.lease_in_redis(room, holder, lease_ms).await
    }

    async fn release_lease(&self, room: RoomId<'_>, holder: &str) -> Result<(), StoreError> {
        self.release_lease_in_redis(room, holder).await
    }

    async fn admit(
        &self,
        room: RoomId<'_>,
        request: &AdmitRequest<'_>,
    ) -> Result<AdmitOutcome, StoreError> {
        self.admit_in_redis(room, request).await
    }

    async fn use_challenge(
        &self,
        room: RoomId<'_>,
        id: &str,
        expires_at_ms: u64,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        self.use_challenge_in_redis(room, id, expires_at_ms, now_ms)
            .await
    }

    async fn check_token(
        &self,
        room: RoomId<'_>,
        token: &str,
        now_ms: u64,
    ) -> Result<TokenCheck, StoreError> {
        self.check_token_in_redis(room, token, now_ms).await
    }

    async fn consume_token(
        &self,
        room: RoomId<'_>,
        token: &str,
        order: &OrderClaim<'_>,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<TokenUse, StoreError> {
        self.consume_token_in_redis(room, token, order, now_ms, keep_ms)
            .await
    }

    async fn safety(&self) -> Result<Option<StoreSafety>, StoreError> {
        self.safety_in_redis().await
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
