//! `RedisStore`: the production store, shared by every replica.
//!
//! One multiplexed connection that reconnects by itself: to one Redis (`ConnectionManager`) or to
//! a Redis Cluster (the `redis` crate's cluster client), behind [`RedisConnection`]; every call
//! bounded by the store timeout so nothing hangs during an outage. Every multi-step change is one
//! Lua script (`store/redis/lua/*.lua`); all keys of a room share the hash tag `{room}` so a room
//! lives on one Redis Cluster slot, and the catalog's keys share `{_catalog}`. The key layout is
//! documented in ARCHITECTURE.md.
//!
//! Each script's Rust half (its arguments and its reply) lives in the file of its concern:
//! - [`settings`]: `init_room.lua`, `update_room.lua`, `lease.lua`, `release_lease.lua`.
//! - [`queue`]: `join.lua`, `sse_refresh.lua`, `leave.lua`, a ticket's read, the counts.
//! - [`draw`]: the pre-queue join, the draw seed, `draw.lua`.
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
mod draw;
mod group_commit;
mod lottery;
mod presence;
mod queue;
mod reply;
mod safety;
mod settings;
mod siblings;
mod tokens;

use async_trait::async_trait;
use redis::{Script, Value};

pub use self::connection::{key_slot, RedisConnection};
pub use self::group_commit::JOIN_KEYS;
use crate::config::RedisTarget;

use self::reply::as_array;
use self::siblings::Member;
use super::{
    AdmitOutcome, AdmitRequest, DrawOutcome, DrawRecord, DrawRequest, InstantAdmission, JoinLimit,
    JoinReply, LeaseOutcome, LeaveOutcome, OrderClaim, PollAnchor, PolledTicket, QueueCursor,
    RoomCounts, Settings, SettingsPatch, SettingsUpdate, SseRefresh, Store, StoreError,
    StoreSafety, TicketRecord, TokenCheck, TokenUse, VersionedSettings,
};

/// Seconds the dedup hash of a room lives after its last keyed join (± [`SECRET_RECHECK`]).
pub(super) const DEDUP_TTL_SECS: u64 = 24 * 3600;

struct Scripts {
    lease: Script,
    admit: Script,
    token: Script,
    leave: Script,
    sse_refresh: Script,
    hear: Script,
    init_room: Script,
    update_room: Script,
    release_lease: Script,
    draw: Script,
    waiters: Script,
    lottery_file: Script,
    room_secret: Script,
    catalog: Script,
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
    /// Each room's secret (`vestibule:{room}:secret`), the HMAC key of derived ticket ids, as
    /// last read from Redis; written back there if Redis lost it. Never logged.
    secrets: RwLock<HashMap<String, CachedSecret>>,
    /// Each room's draw seed as read from Redis (it never changes once written): pre-queue joins
    /// compute their place in the drawn order with it (`draw.rs`). Never logged.
    seeds: RwLock<HashMap<String, Arc<[u8]>>>,
    /// Rooms this process knows to be random (docs/DESIGN.md "Random queueing"): their joins
    /// carry lottery keys from the first try (`lottery.rs`).
    lottery_rooms: RwLock<std::collections::HashSet<String>>,
}

/// A room secret, and when a join last checked it against Redis (the upkeep round trip of
/// `RedisStore::room_secret`; lease calls update the secret but not this time).
#[derive(Clone)]
struct CachedSecret {
    secret: Arc<[u8]>,
    checked: Instant,
}

/// How long a join trusts a cached room secret before checking it against Redis again (followers
/// also check at every lease call; the leader makes none while it leads).
const SECRET_RECHECK: Duration = Duration::from_secs(5);

/// The names of one room's keys.
pub(super) struct Keys {
    pub(super) prefix: String,
}

impl Keys {
    pub(super) fn new(room: &str) -> Self {
        Self {
            prefix: format!("vestibule:{{{room}}}:"),
        }
    }
    pub(super) fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }
}

/// Classifies a Redis failure by what the caller may assume about its effect: refused before
/// anything was sent, or an error reply (Redis ran nothing of it) → surely not applied; a broken
/// connection or a timeout after sending → the outcome is unknown.
pub(super) fn unavailable(error: redis::RedisError) -> StoreError {
    let sent_maybe = !error.is_connection_refusal()
        && (error.is_io_error() || error.is_timeout() || error.is_connection_dropped());
    if sent_maybe {
        StoreError::OutcomeUnknown(error.to_string())
    } else {
        StoreError::Unavailable(error.to_string())
    }
}

impl Link {
    /// Runs a script, bounded by the store timeout, expecting an array reply.
    pub(super) async fn run_script(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<Vec<Value>, StoreError> {
        as_array(self.run_script_value(invocation).await?)
    }

    /// Runs a script, bounded by the store timeout: its reply as it came.
    pub(super) async fn run_script_value(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<Value, StoreError> {
        let mut connection = self.connection.clone();
        self.bounded(invocation.invoke_async(&mut connection)).await
    }

    /// Runs `script` like [`Self::run_script`], once more if the connection turns out to have
    /// dropped ([`Self::bounded_repeatable`]): only for a script that means the same when run
    /// twice.
    pub(super) async fn run_script_repeatable(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<Vec<Value>, StoreError> {
        as_array(self.run_script_value_repeatable(invocation).await?)
    }

    /// [`Self::run_script_repeatable`] with the reply as it came.
    pub(super) async fn run_script_value_repeatable(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<Value, StoreError> {
        self.bounded_repeatable(|| {
            let mut connection = self.connection.clone();
            async move { invocation.invoke_async(&mut connection).await }
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
                second.map_err(|_| unavailable(dropped))
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

    /// Connects to one Redis or to a Redis Cluster (its seed nodes).
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
        store.move_old_catalog().await?;
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
                lease: Script::new(include_str!("lua/lease.lua")),
                admit: Script::new(include_str!("lua/admit.lua")),
                token: Script::new(include_str!("lua/token.lua")),
                leave: Script::new(include_str!("lua/leave.lua")),
                sse_refresh: Script::new(include_str!("lua/sse_refresh.lua")),
                hear: Script::new(include_str!("lua/hear.lua")),
                init_room: Script::new(include_str!("lua/init_room.lua")),
                update_room: Script::new(include_str!("lua/update_room.lua")),
                release_lease: Script::new(include_str!("lua/release_lease.lua")),
                draw: Script::new(include_str!("lua/draw.lua")),
                waiters: Script::new(include_str!("lua/waiters.lua")),
                lottery_file: Script::new(include_str!("lua/lottery_file.lua")),
                room_secret: Script::new(include_str!("lua/room_secret.lua")),
                catalog: Script::new(include_str!("lua/catalog.lua")),
            },
            secrets: RwLock::new(HashMap::new()),
            seeds: RwLock::new(HashMap::new()),
            lottery_rooms: RwLock::new(std::collections::HashSet::new()),
        }
    }

    /// A clone of the connection, for tools that read Redis directly (benchmarks, tests).
    pub fn connection(&self) -> RedisConnection {
        self.link.connection.clone()
    }

    /// This process's copy of a room's secret, if it has one.
    pub(super) fn cached_secret(&self, room: &str) -> Option<Arc<[u8]>> {
        self.secrets
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(room)
            .map(|cached| cached.secret.clone())
    }

    /// Keeps the secret Redis answered for `room` (Nil: none there, nothing to keep). Redis
    /// wins over an older copy: after Redis lost the key and another replica wrote a new one,
    /// every replica converges on the one in Redis at its next lease call or join upkeep.
    /// `upkeep`: this answer came from the join upkeep round trip (or starts the cache entry).
    pub(super) fn remember_secret(
        &self,
        room: &str,
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
        let checked = match secrets.get(room) {
            Some(cached) if !upkeep => cached.checked,
            _ => Instant::now(),
        };
        if secrets
            .get(room)
            .is_some_and(|cached| cached.secret != secret)
        {
            tracing::warn!(
                room,
                "the room secret in Redis changed (Redis lost it and another replica wrote a new \
                 one): retried joins now derive ticket ids with the new one"
            );
        }
        secrets.insert(room.to_owned(), CachedSecret { secret, checked });
        Ok(())
    }

    /// A room's secret for a keyed join: this process's copy while it was checked against Redis
    /// within [`SECRET_RECHECK`]; else (one join per period does this) one round trip
    /// (`room_secret.lua`) writes the copy back with `SET NX`, reads the secret in force, and
    /// renews the dedup hash's TTL, which thus lives [`DEDUP_TTL_SECS`] past the room's last keyed
    /// join without a command per join. A store whose room was never initialised offers a fresh
    /// secret the same way.
    ///
    /// # Errors
    /// [`StoreError::RoomDeleted`] when the room's tombstone is there (nothing written: a secret
    /// written behind the purge's `SCAN` would outlive it); else the call's error.
    pub(super) async fn room_secret(&self, room: &str) -> Result<Arc<[u8]>, StoreError> {
        let offer = {
            let mut secrets = self.secrets.write().unwrap_or_else(PoisonError::into_inner);
            match secrets.get_mut(room) {
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
        let keys = Keys::new(room);
        let mut invocation = self.scripts.room_secret.key(keys.key("secret"));
        invocation
            .key(keys.key("dedup"))
            .key(keys.key(settings::GONE))
            .arg(&*offer)
            .arg(DEDUP_TTL_SECS);
        // SET NX, EXPIRE and GET mean the same sent twice.
        let value = self.link.run_script_value_repeatable(&invocation).await?;
        if value == Value::Nil {
            // Deleted through another replica (its tombstone): nothing was written.
            return Err(StoreError::RoomDeleted(room.to_owned()));
        }
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

    async fn init_room(
        &self,
        room: &str,
        defaults: &Settings,
    ) -> Result<VersionedSettings, StoreError> {
        self.init_room_in_redis(room, defaults).await
    }

    async fn restore_room(
        &self,
        room: &str,
        held: &Settings,
        incarnation: Option<&str>,
    ) -> Result<VersionedSettings, StoreError> {
        // Every field in one step, only if still missing (`update_room.lua`'s restore); the
        // secret goes back with the lease and the keyed joins (each replica's cached copy).
        let version = crate::store::catalog::first_version();
        let in_force = match self
            .update_room_in_redis(
                room,
                &held.as_patch(),
                None,
                settings::UpdateStep::Restore(version),
            )
            .await?
        {
            SettingsUpdate::Applied(in_force) | SettingsUpdate::VersionMismatch(in_force) => {
                in_force
            }
        };
        self.relist_room(room, incarnation).await?;
        Ok(in_force)
    }

    async fn room_settings(&self, room: &str) -> Result<VersionedSettings, StoreError> {
        self.room_settings_in_redis(room).await
    }

    async fn update_room(
        &self,
        room: &str,
        patch: &SettingsPatch,
        expected_version: Option<u64>,
    ) -> Result<SettingsUpdate, StoreError> {
        self.update_room_in_redis(room, patch, expected_version, settings::UpdateStep::Change)
            .await
    }

    async fn join_with_limit(
        &self,
        room: &str,
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
        room: &str,
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
        room: &str,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        settings_version: Option<u64>,
    ) -> Result<JoinReply, StoreError> {
        self.join_prequeue_in_redis(room, dedup_key, new_id, limit, settings_version)
            .await
    }

    async fn draw_seed(&self, room: &str, seed: &str) -> Result<DrawRecord, StoreError> {
        self.draw_seed_in_redis(room, seed).await
    }

    async fn draw_record(&self, room: &str) -> Result<Option<DrawRecord>, StoreError> {
        self.draw_record_in_redis(room).await
    }

    async fn draw_tags(&self, room: &str, from: u64, n: u64) -> Result<Vec<String>, StoreError> {
        self.draw_tags_in_redis(room, from, n).await
    }

    async fn keyed_ticket(
        &self,
        room: &str,
        key: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        self.keyed_ticket_in_redis(room, key, now_ms).await
    }

    async fn prequeue_ids(&self, room: &str) -> Result<Vec<String>, StoreError> {
        self.prequeue_ids_in_redis(room).await
    }

    async fn draw(&self, room: &str, request: &DrawRequest<'_>) -> Result<DrawOutcome, StoreError> {
        self.draw_in_redis(room, request).await
    }

    async fn ticket(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        self.ticket_in_redis(room, id, now_ms).await
    }

    async fn hear(
        &self,
        room: &str,
        ids: &[String],
        now_ms: u64,
        positions: bool,
    ) -> Result<Vec<Option<TicketRecord>>, StoreError> {
        self.hear_in_redis(room, ids, now_ms, positions).await
    }

    async fn mark_heard(
        &self,
        room: &str,
        polled: &[PolledTicket],
        now_ms: u64,
    ) -> Result<(), StoreError> {
        self.mark_heard_in_redis(room, polled, now_ms).await
    }

    async fn hear_polled(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<(TicketRecord, Option<PollAnchor>)>, StoreError> {
        self.hear_polled_in_redis(room, id, now_ms).await
    }

    async fn sse_refresh(
        &self,
        room: &str,
        since: Option<QueueCursor>,
        ids: &[String],
        now_ms: u64,
    ) -> Result<SseRefresh, StoreError> {
        self.sse_refresh_in_redis(room, since, ids, now_ms).await
    }

    async fn leave(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<LeaveOutcome, StoreError> {
        self.leave_in_redis(room, id, now_ms, keep_ms).await
    }

    async fn counts(&self, room: &str, now_ms: u64) -> Result<RoomCounts, StoreError> {
        self.counts_in_redis(room, now_ms).await
    }

    async fn lease(
        &self,
        room: &str,
        holder: &str,
        lease_ms: u64,
    ) -> Result<LeaseOutcome, StoreError> {
        self.lease_in_redis(room, holder, lease_ms).await
    }

    async fn release_lease(&self, room: &str, holder: &str) -> Result<(), StoreError> {
        self.release_lease_in_redis(room, holder).await
    }

    async fn admit(
        &self,
        room: &str,
        request: &AdmitRequest<'_>,
    ) -> Result<AdmitOutcome, StoreError> {
        self.admit_in_redis(room, request).await
    }

    async fn use_challenge(
        &self,
        room: &str,
        id: &str,
        expires_at_ms: u64,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        self.use_challenge_in_redis(room, id, expires_at_ms, now_ms)
            .await
    }

    async fn check_token(
        &self,
        room: &str,
        token: &str,
        now_ms: u64,
    ) -> Result<TokenCheck, StoreError> {
        self.check_token_in_redis(room, token, now_ms).await
    }

    async fn consume_token(
        &self,
        room: &str,
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

/// 32 bytes from the OS CSPRNG: a new room's secret.
pub(super) fn fresh_secret() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    bytes
}
