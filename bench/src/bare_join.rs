//! The stack's floor for a join: axum served by hyper-util (one single-threaded runtime per core,
//! each with its own Redis `ConnectionManager`, as Vestibule serves) answering
//! `POST /api/v1/rooms/{room}/tickets` with one Redis script call per join and a waiting
//! `TicketStatus` (201). The capacity stage measures it beside Vestibule's joins, so that the
//! join ratio can be read against what these libraries and this Redis allow on the same box.
//!
//! Two scripts:
//! - [`FloorScript::Join`]: the per-join commands of Vestibule's `join.lua` for a keyed first
//!   join (`ZRANK` of the id, `HMGET` of its ticket, `INCR` of the seq, `ZADD NX`, two `BITFIELD`
//!   writes, `ZCARD`), one call per join: a plain join on this stack, without the group commit;
//! - [`FloorScript::Incr`]: one `INCR`: the least a join that stores anything costs (one Redis
//!   round trip).
//!
//! The ticket id is the `Idempotency-Key` itself (no MAC), no join limit, no settings read, no
//! metrics, no tracing: a peer to measure against, not a waiting room.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use redis::aio::ConnectionManager;
use vestibule_shared::{RoomState, TicketStatus};

/// What one join asks of Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FloorScript {
    /// The per-join commands of a keyed first join in `join.lua` (7 commands).
    Join,
    /// One `INCR`.
    Incr,
}

const JOIN: &str = r"
local prefix = ARGV[1]
local id = ARGV[2]
if redis.call('ZRANK', KEYS[1], id) then
  return {0, redis.call('ZRANK', KEYS[1], id) + 1}
end
redis.call('HMGET', prefix .. 'ticket:' .. id, 'state', 'exp')
local seq = redis.call('INCR', KEYS[2])
local seq_s = string.format('%d', seq)
local bucket = string.format('%d', math.floor(seq / 65536))
local slot = string.format('#%d', seq % 65536)
local now_s = string.sub(ARGV[3], 1, -4)
redis.call('ZADD', KEYS[1], 'NX', seq_s, id)
redis.call('BITFIELD', prefix .. 'seen:' .. bucket, 'SET', 'u32', slot, now_s)
redis.call('BITFIELD', prefix .. 'born:' .. bucket, 'SET', 'u32', slot, now_s)
return {1, redis.call('ZCARD', KEYS[1])}
";

const INCR: &str = r"return {1, redis.call('INCR', KEYS[2])}";

struct Floor {
    redis: ConnectionManager,
    script: redis::Script,
}

/// Serves the floor on `bind` against `redis_url` until killed, with `threads` serving threads
/// (0: one per core). Prints `bare-join listening on http://ADDR` once bound.
///
/// # Errors
/// The address cannot be bound, a thread cannot start or Redis does not answer.
pub fn serve(
    bind: SocketAddr,
    redis_url: &str,
    script: FloorScript,
    threads: usize,
) -> anyhow::Result<()> {
    let client = redis::Client::open(redis_url).context("the Redis URL")?;
    let listener = std::net::TcpListener::bind(bind).context("binding the join floor")?;
    listener.set_nonblocking(true)?;
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, usize::from)
    } else {
        threads
    };
    let mut handles = Vec::new();
    let (ready, readiness) = std::sync::mpsc::channel();
    for n in 0..threads {
        // Every thread accepts on the same socket; the kernel hands each connection to one.
        let listener = listener.try_clone()?;
        let client = client.clone();
        let ready = ready.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("bare-join-{n}"))
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("a current-thread runtime");
                    runtime.block_on(async move {
                        let redis = match ConnectionManager::new(client).await {
                            Ok(redis) => redis,
                            Err(error) => {
                                let _ = ready.send(Err(error));
                                return;
                            }
                        };
                        let _ = ready.send(Ok(()));
                        serve_thread(listener, redis, script).await;
                    });
                })?,
        );
    }
    drop(ready);
    for _ in 0..threads {
        readiness
            .recv()
            .context("a serving thread ended")?
            .context("connecting to Redis")?;
    }
    println!("bare-join listening on http://{}", listener.local_addr()?);
    for handle in handles {
        let _ = handle.join();
    }
    Ok(())
}

async fn serve_thread(
    listener: std::net::TcpListener,
    redis: ConnectionManager,
    script: FloorScript,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let floor = Arc::new(Floor {
        redis,
        script: redis::Script::new(match script {
            FloorScript::Join => JOIN,
            FloorScript::Incr => INCR,
        }),
    });
    let app = Router::new()
        .route("/api/v1/rooms/{room}/tickets", post(join))
        .with_state(floor);
    let builder = Arc::new(Builder::new(TokioExecutor::new()));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            let _ = builder
                .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(app))
                .await;
        });
    }
}

async fn join(
    State(floor): State<Arc<Floor>>,
    Path(room): Path<String>,
    headers: HeaderMap,
) -> Result<(StatusCode, Json<TicketStatus>), (StatusCode, String)> {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .ok_or((StatusCode::BAD_REQUEST, "an Idempotency-Key".to_owned()))?;
    let prefix = format!("floor:{{{room}}}:");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut redis = floor.redis.clone();
    let (created, position): (i64, u64) = floor
        .script
        .key(format!("{prefix}queue"))
        .key(format!("{prefix}seq"))
        .arg(&prefix)
        .arg(key)
        .arg(now_ms.to_string())
        .invoke_async(&mut redis)
        .await
        .map_err(|e| (StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    let status =
        crate::baselines::waiting_status(key.to_owned(), room, position, RoomState::Open, 5_000);
    let code = if created == 1 {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((code, Json(status)))
}
