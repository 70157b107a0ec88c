//! `RedisStore`: the production store, shared by every replica.
//!
//! One multiplexed connection that reconnects by itself (`ConnectionManager`); every call bounded
//! by the store timeout so nothing hangs during an outage. Every multi-step change is one Lua
//! script (`store/lua/*.lua`); all keys of a room share the hash tag `{room}` so a room lives on
//! one Redis Cluster slot. The key layout is documented in ARCHITECTURE.md.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Script, Value};
use vestibule_shared::TicketState;

use crate::ids::derived_id;

use super::{
    AdmitOutcome, AdmitRequest, JoinLimit, JoinOutcome, JoinReply, LeaseOutcome, LeaveOutcome,
    OrderClaim, QueueCursor, QueueDelta, RoomConfig, RoomConfigPatch, RoomCounts, SettingsUpdate,
    SseRefresh, Store, StoreError, StoreSafety, TicketRecord, TokenCheck, TokenUse,
    VersionedConfig,
};

/// Seconds the dedup hash of a room lives after its last keyed join (± [`SECRET_RECHECK`]).
const DEDUP_TTL_SECS: u64 = 24 * 3600;

struct Scripts {
    join: Script,
    lease: Script,
    admit: Script,
    token: Script,
    leave: Script,
    sse_refresh: Script,
    init_room: Script,
    update_room: Script,
}

/// The Redis-backed store.
pub struct RedisStore {
    connection: ConnectionManager,
    timeout: Duration,
    scripts: Scripts,
    /// Each room's secret (`vestibule:{room}:secret`), the HMAC key of derived ticket ids, as
    /// last read from Redis; written back there if Redis lost it. Never logged.
    secrets: RwLock<HashMap<String, CachedSecret>>,
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

/// A room's settings as script arguments: rate, paused (`1`/`0`), TTL in ms, cap (`""` = none).
fn config_args(invocation: &mut redis::ScriptInvocation<'_>, config: &RoomConfig) {
    invocation
        .arg(config.admission_rate_per_sec)
        .arg(if config.paused { "1" } else { "0" })
        .arg(config.token_ttl_ms)
        .arg(
            config
                .max_active_users
                .map(|cap| cap.to_string())
                .unwrap_or_default(),
        );
}

/// The names of one room's keys.
struct Keys {
    prefix: String,
}

impl Keys {
    fn new(room: &str) -> Self {
        Self {
            prefix: format!("vestibule:{{{room}}}:"),
        }
    }
    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }
}

/// Classifies a Redis failure by what the caller may assume about its effect: refused before
/// anything was sent, or an error reply (Redis ran nothing of it) → surely not applied; a broken
/// connection or a timeout after sending → the outcome is unknown.
fn unavailable(error: redis::RedisError) -> StoreError {
    let sent_maybe = !error.is_connection_refusal()
        && (error.is_io_error() || error.is_timeout() || error.is_connection_dropped());
    if sent_maybe {
        StoreError::OutcomeUnknown(error.to_string())
    } else {
        StoreError::Unavailable(error.to_string())
    }
}

impl RedisStore {
    /// Connects to `url` (`redis://…`, `rediss://…` or `redis+unix://…`).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the URL is invalid or Redis does not answer within
    /// `timeout` × 5.
    pub async fn connect(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(unavailable)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let connection = tokio::time::timeout(
            timeout * 5,
            ConnectionManager::new_with_config(client, config),
        )
        .await
        .map_err(|_| StoreError::Unavailable("timed out connecting to Redis".into()))?
        .map_err(unavailable)?;
        Ok(Self {
            connection,
            timeout,
            scripts: Scripts {
                join: Script::new(include_str!("lua/join.lua")),
                lease: Script::new(include_str!("lua/lease.lua")),
                admit: Script::new(include_str!("lua/admit.lua")),
                token: Script::new(include_str!("lua/token.lua")),
                leave: Script::new(include_str!("lua/leave.lua")),
                sse_refresh: Script::new(include_str!("lua/sse_refresh.lua")),
                init_room: Script::new(include_str!("lua/init_room.lua")),
                update_room: Script::new(include_str!("lua/update_room.lua")),
            },
            secrets: RwLock::new(HashMap::new()),
        })
    }

    /// A clone of the connection, for tools that read Redis directly (benchmarks, tests).
    pub fn connection(&self) -> ConnectionManager {
        self.connection.clone()
    }

    /// Runs a script, bounded by the store timeout, expecting an array reply.
    async fn run_script(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<Vec<Value>, StoreError> {
        let mut connection = self.connection.clone();
        as_array(
            self.bounded(invocation.invoke_async(&mut connection))
                .await?,
        )
    }

    async fn bounded<T>(
        &self,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result.map_err(unavailable),
            Err(_) => Err(StoreError::OutcomeUnknown(format!(
                "Redis did not answer within {} ms",
                self.timeout.as_millis()
            ))),
        }
    }

    /// This process's copy of a room's secret, if it has one.
    fn cached_secret(&self, room: &str) -> Option<Arc<[u8]>> {
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
    fn remember_secret(&self, room: &str, value: &Value, upkeep: bool) -> Result<(), StoreError> {
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
    /// within [`SECRET_RECHECK`]; else (one join per period does this) one round trip writes the
    /// copy back with `SET NX`, reads the secret in force, and renews the dedup hash's TTL, which
    /// thus lives [`DEDUP_TTL_SECS`] past the room's last keyed join without a command per join.
    /// A store whose room was never initialised offers a fresh secret the same way.
    async fn room_secret(&self, room: &str) -> Result<Arc<[u8]>, StoreError> {
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
        let key = keys.key("secret");
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("SET")
            .arg(&key)
            .arg(&*offer)
            .arg("NX")
            .ignore()
            .cmd("EXPIRE")
            .arg(keys.key("dedup"))
            .arg(DEDUP_TTL_SECS)
            .ignore()
            .cmd("GET")
            .arg(&key);
        let mut connection = self.connection.clone();
        let (value,): (Value,) = self.bounded(pipe.query_async(&mut connection)).await?;
        self.remember_secret(room, &value, true)?;
        self.cached_secret(room)
            .ok_or_else(|| StoreError::Corrupt("the room secret is missing".into()))
    }
}

impl RedisStore {
    /// `token.lua`: a check (`order` = `None`) or an order's consume.
    async fn run_token_script(
        &self,
        room: &str,
        token: &str,
        now_ms: u64,
        order: Option<&OrderClaim<'_>>,
        keep_ms: u64,
    ) -> Result<TokenUse, StoreError> {
        let keys = Keys::new(room);
        let mut invocation = self.scripts.token.key(keys.key("active"));
        invocation
            .arg(token)
            .arg(now_ms)
            .arg(if order.is_some() { "1" } else { "0" })
            .arg(keep_ms)
            .arg(&keys.prefix)
            .arg(order.and_then(|o| o.idempotency_key).unwrap_or_default())
            .arg(order.map(|o| o.receipt).unwrap_or_default());
        let reply = self.run_script(&invocation).await?;
        let (verdict, ticket_id) = two_strings(&reply)?;
        Ok(match verdict.as_str() {
            "VALID" => TokenUse::Consumed { ticket_id },
            "REPLAY" => TokenUse::Replayed {
                ticket_id,
                receipt: reply.get(2).map(as_string).transpose()?.unwrap_or_default(),
            },
            "EXPIRED" => TokenUse::Refused(TokenCheck::Expired),
            "USED" => TokenUse::Refused(TokenCheck::Used),
            _ => TokenUse::Refused(TokenCheck::Unknown),
        })
    }
}

/// A stored settings version (absent = never changed).
fn version_of(value: &Value) -> Result<u64, StoreError> {
    match value {
        Value::Nil => Ok(0),
        other => as_u64(other),
    }
}

/// 32 bytes from the OS CSPRNG: a new room's secret.
fn fresh_secret() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    bytes
}

fn as_u64(value: &Value) -> Result<u64, StoreError> {
    match value {
        Value::Int(n) => u64::try_from(*n).map_err(|_| corrupt("negative count", value)),
        Value::BulkString(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| corrupt("number", value)),
        _ => Err(corrupt("number", value)),
    }
}

fn as_i64(value: &Value) -> Result<i64, StoreError> {
    match value {
        Value::Int(n) => Ok(*n),
        _ => as_u64(value).map(|n| n as i64),
    }
}

fn as_string(value: &Value) -> Result<String, StoreError> {
    match value {
        Value::BulkString(bytes) => {
            String::from_utf8(bytes.clone()).map_err(|_| corrupt("text", value))
        }
        Value::SimpleString(text) => Ok(text.clone()),
        Value::Nil => Ok(String::new()),
        Value::Int(n) => Ok(n.to_string()),
        _ => Err(corrupt("text", value)),
    }
}

/// The first two entries of a reply as text (missing = empty).
fn two_strings(reply: &[Value]) -> Result<(String, String), StoreError> {
    let text = |index: usize| {
        reply
            .get(index)
            .map(as_string)
            .transpose()
            .map(Option::unwrap_or_default)
    };
    Ok((text(0)?, text(1)?))
}

fn as_array(value: Value) -> Result<Vec<Value>, StoreError> {
    match value {
        Value::Array(items) => Ok(items),
        other => Err(corrupt("array", &other)),
    }
}

fn corrupt(expected: &str, value: &Value) -> StoreError {
    StoreError::Corrupt(format!("expected {expected}, got {value:?}"))
}

fn parse_state(text: &str) -> Result<TicketState, StoreError> {
    Ok(match text {
        "WAITING" => TicketState::Waiting,
        "TOKEN_ISSUED" => TicketState::TokenIssued,
        "COMPLETED" => TicketState::Completed,
        "EXPIRED" => TicketState::Expired,
        "LEFT" => TicketState::Left,
        other => {
            return Err(StoreError::Corrupt(format!(
                "unknown ticket state {other:?}"
            )))
        }
    })
}

/// Settings fields `rate, paused, ttl_ms, cap, ver` as stored → versioned settings.
fn parse_versioned(fields: &[Value]) -> Result<VersionedConfig, StoreError> {
    let [settings @ .., version] = fields else {
        return Err(StoreError::Corrupt("room settings need 5 fields".into()));
    };
    Ok(VersionedConfig {
        config: parse_config(settings)?,
        version: version_of(version)?,
    })
}

/// Settings fields `rate, paused, ttl_ms, cap` as stored (empty = absent) → a config.
fn parse_config(fields: &[Value]) -> Result<RoomConfig, StoreError> {
    let text: Vec<String> = fields.iter().map(as_string).collect::<Result<_, _>>()?;
    let [rate, paused, ttl_ms, cap] = text.as_slice() else {
        return Err(StoreError::Corrupt("room settings need 4 fields".into()));
    };
    if rate.is_empty() {
        return Err(StoreError::Corrupt("room settings are missing".into()));
    }
    Ok(RoomConfig {
        admission_rate_per_sec: rate
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("rate {rate:?}")))?,
        paused: paused == "1",
        token_ttl_ms: ttl_ms
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("ttl {ttl_ms:?}")))?,
        max_active_users: if cap.is_empty() {
            None
        } else {
            Some(
                cap.parse()
                    .map_err(|_| StoreError::Corrupt(format!("cap {cap:?}")))?,
            )
        },
    })
}

/// A ticket off the queue from its stored hash fields `state, tok, exp`.
fn settled_record(
    id: &str,
    state: &str,
    token: String,
    expires: &str,
    now_ms: u64,
) -> Result<Option<TicketRecord>, StoreError> {
    if state.is_empty() {
        return Ok(None);
    }
    let mut state = parse_state(state)?;
    let expires_at_ms = expires.parse::<u64>().ok();
    if state == TicketState::TokenIssued && expires_at_ms.is_none_or(|exp| exp <= now_ms) {
        state = TicketState::Expired;
    }
    let issued = state == TicketState::TokenIssued;
    Ok(Some(TicketRecord {
        id: id.to_owned(),
        state,
        position: None,
        entry_token: issued.then_some(token),
        token_expires_at_ms: expires_at_ms.filter(|_| issued),
    }))
}

#[async_trait]
impl Store for RedisStore {
    fn kind(&self) -> &'static str {
        "redis"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        self.bounded(redis::cmd("PING").query_async::<String>(&mut connection))
            .await
            .map(drop)
            .map_err(StoreError::for_read)
    }

    async fn init_room(
        &self,
        room: &str,
        defaults: &RoomConfig,
    ) -> Result<VersionedConfig, StoreError> {
        let keys = Keys::new(room);
        let mut connection = self.connection.clone();
        let mut invocation = self.scripts.init_room.key(keys.key("settings"));
        invocation.key(keys.key("secret"));
        config_args(&mut invocation, defaults);
        invocation.arg(&fresh_secret()[..]);
        let fields: Vec<Value> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        let [settings @ .., secret] = fields.as_slice() else {
            return Err(StoreError::Corrupt("init_room reply is empty".into()));
        };
        self.remember_secret(room, secret, true)?;
        parse_versioned(settings)
    }

    async fn room_settings(&self, room: &str) -> Result<VersionedConfig, StoreError> {
        let keys = Keys::new(room);
        let mut connection = self.connection.clone();
        let fields: Vec<Value> = self
            .bounded(
                redis::cmd("HMGET")
                    .arg(keys.key("settings"))
                    .arg(&["rate", "paused", "ttl_ms", "cap", "ver"])
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)?;
        parse_versioned(&fields)
    }

    async fn update_room(
        &self,
        room: &str,
        patch: &RoomConfigPatch,
        expected_version: Option<u64>,
    ) -> Result<SettingsUpdate, StoreError> {
        let keys = Keys::new(room);
        let unchanged = || "-".to_owned();
        let mut invocation = self.scripts.update_room.key(keys.key("settings"));
        invocation
            .arg(expected_version.map(|v| v.to_string()).unwrap_or_default())
            .arg(
                patch
                    .admission_rate_per_sec
                    .map_or_else(unchanged, |rate| rate.to_string()),
            )
            .arg(patch.paused.map_or_else(unchanged, |paused| {
                if paused { "1" } else { "0" }.to_owned()
            }))
            .arg(
                patch
                    .token_ttl_ms
                    .map_or_else(unchanged, |ttl| ttl.to_string()),
            )
            .arg(patch.max_active_users.map_or_else(unchanged, |cap| {
                cap.map(|c| c.to_string()).unwrap_or_default()
            }));
        let reply = self.run_script(&invocation).await?;
        let [applied, settings @ ..] = reply.as_slice() else {
            return Err(StoreError::Corrupt("update_room reply is empty".into()));
        };
        let in_force = parse_versioned(settings)?;
        Ok(if as_i64(applied)? == 1 {
            SettingsUpdate::Applied(in_force)
        } else {
            SettingsUpdate::VersionMismatch(in_force)
        })
    }

    async fn join_with_limit(
        &self,
        room: &str,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
    ) -> Result<JoinReply, StoreError> {
        let keys = Keys::new(room);
        // A key's first ticket takes an id derived from the key, so that a retry finds it without
        // a dedup entry (join.lua); `new_id` serves joins without a key and re-joins after LEFT
        // or EXPIRED.
        let derived = match dedup_key {
            Some(key) => derived_id(&self.room_secret(room).await?, key),
            None => String::new(),
        };
        let now_ms = super::now_ms();
        let mut invocation = self.scripts.join.key(keys.key("queue"));
        invocation
            .key(keys.key("seq"))
            .key(keys.key("dedup"))
            .arg(new_id)
            .arg(dedup_key.unwrap_or(""))
            .arg(&keys.prefix)
            .arg(DEDUP_TTL_SECS)
            .arg(&derived)
            .arg(now_ms);
        match limit {
            Some(limit) => invocation
                .arg(&limit.client)
                .arg(limit.period_ms())
                .arg(limit.per_minute),
            None => invocation.arg("").arg(0).arg(0),
        };
        let reply = self.run_script(&invocation).await?;
        let [id, created, position] = reply.as_slice() else {
            return Err(StoreError::Corrupt("join reply needs 3 fields".into()));
        };
        let created = as_i64(created)?;
        let position = as_i64(position)?;
        if created == -2 {
            return Ok(JoinReply::RateLimited {
                retry_after_ms: position.max(0) as u64,
            });
        }
        let id = as_string(id)?;
        let ticket = if position > 0 {
            TicketRecord::waiting(&id, position as u64)
        } else {
            // The deduplicated ticket has been admitted since: read it whole.
            self.ticket(room, &id, now_ms)
                .await?
                .ok_or_else(|| StoreError::Corrupt("deduplicated ticket vanished".into()))?
        };
        Ok(JoinReply::Joined(JoinOutcome {
            ticket,
            created: created == 1,
        }))
    }

    async fn ticket(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        let keys = Keys::new(room);
        // ZRANK first: if it finds the ticket it is waiting, whatever happens after.
        let mut pipe = redis::pipe();
        pipe.zrank(keys.key("queue"), id)
            .cmd("HMGET")
            .arg(keys.key(&format!("ticket:{id}")))
            .arg(&["state", "tok", "exp"]);
        let mut connection = self.connection.clone();
        let (rank, fields): (Option<u64>, Vec<Option<String>>) = self
            .bounded(pipe.query_async(&mut connection))
            .await
            .map_err(StoreError::for_read)?;
        if let Some(rank) = rank {
            return Ok(Some(TicketRecord::waiting(id, rank + 1)));
        }
        let mut fields = fields.into_iter().map(Option::unwrap_or_default);
        let state = fields.next().unwrap_or_default();
        let token = fields.next().unwrap_or_default();
        let expires = fields.next().unwrap_or_default();
        settled_record(id, &state, token, &expires, now_ms)
    }

    async fn sse_refresh(
        &self,
        room: &str,
        since: Option<QueueCursor>,
        ids: &[String],
        now_ms: u64,
    ) -> Result<SseRefresh, StoreError> {
        let keys = Keys::new(room);
        let mut invocation = self.scripts.sse_refresh.key(keys.key("queue"));
        invocation
            .key(keys.key("popped"))
            .key(keys.key("left"))
            .key(keys.key("left_count"))
            .arg(&keys.prefix);
        match since {
            Some(cursor) => invocation.arg("1").arg(cursor.popped).arg(cursor.left),
            None => invocation.arg("0").arg(0).arg(0),
        };
        for id in ids {
            invocation.arg(id);
        }
        let reply = self
            .run_script(&invocation)
            .await
            .map_err(StoreError::for_read)?;
        let number = |index: usize| {
            reply
                .get(index)
                .map_or(Err(corrupt("number", &Value::Nil)), as_u64)
        };
        let cursor = QueueCursor {
            popped: number(0)?,
            left: number(1)?,
        };
        let reset = number(2)? == 1;
        let popped = number(3)?;
        let leavers = number(4)? as usize;
        let mut left_seqs: Vec<u64> = (5..5 + leavers).map(number).collect::<Result<_, _>>()?;
        left_seqs.sort_unstable();
        let entries = reply.get(5 + leavers..).unwrap_or_default();
        if entries.len() != ids.len() * 5 {
            return Err(StoreError::Corrupt(
                "sse_refresh reply has the wrong length".into(),
            ));
        }
        let tickets = ids
            .iter()
            .zip(entries.chunks_exact(5))
            .map(|(id, entry)| {
                let position = as_u64(&entry[0])?;
                if position > 0 {
                    let seq = as_string(&entry[1])?.parse().ok();
                    return Ok(Some((TicketRecord::waiting(id, position), seq)));
                }
                let record = settled_record(
                    id,
                    &as_string(&entry[2])?,
                    as_string(&entry[3])?,
                    &as_string(&entry[4])?,
                    now_ms,
                )?;
                Ok(record.map(|record| (record, None)))
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(SseRefresh {
            cursor,
            delta: (!reset).then_some(QueueDelta { popped, left_seqs }),
            tickets,
        })
    }

    async fn leave(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<LeaveOutcome, StoreError> {
        let keys = Keys::new(room);
        let mut invocation = self.scripts.leave.key(keys.key("queue"));
        invocation
            .key(keys.key("active"))
            .key(keys.key("left"))
            .key(keys.key("left_count"))
            .arg(id)
            .arg(now_ms)
            .arg(keep_ms)
            .arg(&keys.prefix);
        let reply = self.run_script(&invocation).await?;
        let (outcome, state) = two_strings(&reply)?;
        Ok(match outcome.as_str() {
            "LEFT" => LeaveOutcome::Left,
            "NOT_FOUND" => LeaveOutcome::NotFound,
            _ => LeaveOutcome::AlreadyEnded(parse_state(&state)?),
        })
    }

    async fn counts(&self, room: &str, now_ms: u64) -> Result<RoomCounts, StoreError> {
        let keys = Keys::new(room);
        let mut pipe = redis::pipe();
        pipe.zcard(keys.key("queue"))
            .zcount(keys.key("active"), format!("({now_ms}"), "+inf");
        let mut connection = self.connection.clone();
        let (waiting, active): (u64, u64) = self
            .bounded(pipe.query_async(&mut connection))
            .await
            .map_err(StoreError::for_read)?;
        Ok(RoomCounts { waiting, active })
    }

    async fn lease(
        &self,
        room: &str,
        holder: &str,
        lease_ms: u64,
        defaults: &RoomConfig,
    ) -> Result<LeaseOutcome, StoreError> {
        let keys = Keys::new(room);
        // This process's copy of the room secret goes along, so that a Redis restarted without
        // persistence gets the same secret back and retried joins keep finding their tickets.
        let secret = self.cached_secret(room);
        let mut invocation = self.scripts.lease.key(keys.key("leader"));
        invocation
            .key(keys.key("epoch"))
            .key(keys.key("settings"))
            .key(keys.key("secret"))
            .key(keys.key("active"))
            .arg(holder)
            .arg(lease_ms);
        config_args(&mut invocation, defaults);
        invocation.arg(secret.as_deref().unwrap_or_default());
        let reply = self.run_script(&invocation).await?;
        let [epoch, settings @ .., secret, active] = reply.as_slice() else {
            return Err(StoreError::Corrupt("lease reply needs 8 fields".into()));
        };
        self.remember_secret(room, secret, false)?;
        let epoch = as_u64(epoch)?;
        Ok(LeaseOutcome {
            epoch: (epoch > 0).then_some(epoch),
            config: parse_versioned(settings)?,
            active: as_u64(active)?,
        })
    }

    async fn release_lease(&self, room: &str, holder: &str) -> Result<(), StoreError> {
        let keys = Keys::new(room);
        let script = Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end return 1",
        );
        let mut invocation = script.key(keys.key("leader"));
        invocation.arg(holder);
        let mut connection = self.connection.clone();
        self.bounded(invocation.invoke_async::<i64>(&mut connection))
            .await
            .map(drop)
    }

    async fn admit(
        &self,
        room: &str,
        request: &AdmitRequest<'_>,
    ) -> Result<AdmitOutcome, StoreError> {
        let keys = Keys::new(room);
        let mut invocation = self.scripts.admit.key(keys.key("queue"));
        invocation
            .key(keys.key("active"))
            .key(keys.key("leader"))
            .key(keys.key("epoch"))
            .key(keys.key("settings"))
            .key(keys.key("popped"))
            .arg(request.holder)
            .arg(request.epoch)
            .arg(request.now_ms)
            .arg(request.token_ttl_ms)
            .arg(request.keep_ms)
            .arg(request.max_active_users.map_or(-1, |cap| cap as i64))
            .arg(&keys.prefix)
            .arg(request.lease_ms);
        for token in request.tokens {
            invocation.arg(token);
        }
        let reply = self.run_script(&invocation).await?;
        if reply.len() != 9 {
            return Err(StoreError::Corrupt("admit reply needs 9 fields".into()));
        }
        let numbers: Vec<i64> = reply[..4].iter().map(as_i64).collect::<Result<_, _>>()?;
        let [admitted, expired, waiting, active] = numbers.as_slice() else {
            unreachable!("four numbers");
        };
        if *admitted < 0 {
            return Ok(AdmitOutcome {
                fenced: true,
                ..AdmitOutcome::default()
            });
        }
        Ok(AdmitOutcome {
            fenced: false,
            admitted: *admitted as u64,
            expired: *expired as u64,
            waiting: *waiting as u64,
            active: *active as u64,
            config: parse_versioned(&reply[4..]).ok(),
        })
    }

    async fn check_token(
        &self,
        room: &str,
        token: &str,
        now_ms: u64,
    ) -> Result<TokenCheck, StoreError> {
        let reply = self
            .run_token_script(room, token, now_ms, None, 0)
            .await
            .map_err(StoreError::for_read)?;
        Ok(match reply {
            TokenUse::Consumed { ticket_id } | TokenUse::Replayed { ticket_id, .. } => {
                TokenCheck::Valid { ticket_id }
            }
            TokenUse::Refused(check) => check,
        })
    }

    async fn consume_token(
        &self,
        room: &str,
        token: &str,
        order: &OrderClaim<'_>,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<TokenUse, StoreError> {
        self.run_token_script(room, token, now_ms, Some(order), keep_ms)
            .await
    }

    async fn safety(&self) -> Result<Option<StoreSafety>, StoreError> {
        let mut connection = self.connection.clone();
        let info: String = self
            .bounded(
                redis::cmd("INFO")
                    .arg("memory")
                    .arg("persistence")
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)?;
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        let maxmemory_policy = field("maxmemory_policy")
            .ok_or_else(|| StoreError::Corrupt("INFO has no maxmemory_policy".into()))?
            .to_owned();
        let maxmemory_bytes = field("maxmemory").and_then(|v| v.parse().ok()).unwrap_or(0);
        let aof_enabled = field("aof_enabled") == Some("1");
        // Managed Redis services often refuse CONFIG: then the snapshot schedule is unknown.
        let rdb_save = self
            .bounded(
                redis::cmd("CONFIG")
                    .arg("GET")
                    .arg("save")
                    .query_async::<Vec<String>>(&mut connection),
            )
            .await
            .ok()
            .and_then(|pair| pair.into_iter().nth(1));
        Ok(Some(StoreSafety {
            maxmemory_policy,
            maxmemory_bytes,
            aof_enabled,
            rdb_save,
        }))
    }
}
