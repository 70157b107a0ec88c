//! The store's Redis connection: one server through a `ConnectionManager`, or a Redis Cluster
//! through the `redis` crate's async cluster client, behind one type that is a
//! [`redis::aio::ConnectionLike`] (scripts, pipelines and commands take either).
//!
//! On a cluster, a command goes to the master of its first key's slot, a script (`EVALSHA`) to the
//! master of its first key's slot, and a pipeline (atomic or not) to the master of the slot of its
//! first command with a key: every pipeline must therefore stay within one slot (the client
//! refuses one that does not, `CROSSSLOT`), which the key layout guarantees (`{room}` per room,
//! `{_catalog}` for the catalog: docs/internals.md "Redis keys"). `SCAN`, `INFO` and `CONFIG`
//! have no key and are routed by [`RedisConnection::on_slot_master`] and
//! [`RedisConnection::on_every_node`].

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

/// How many times the cluster client resends a request that a node redirected (`MOVED`, `ASK`)
/// or refused for now (`TRYAGAIN`, `CLUSTERDOWN`, a node it cannot reach): enough to follow a
/// failover's new topology, few enough to stay well inside the store timeout. (Each call is
/// bounded by the store timeout whatever the client does.)
const CLUSTER_RETRIES: u32 = 4;

/// The connection to one Redis or to a Redis Cluster (cheap to clone: both are handles to one
/// multiplexed connection per server).
#[derive(Clone)]
pub enum RedisConnection {
    /// One server (`--redis-url`), reconnecting by itself.
    Single(ConnectionManager),
    /// A Redis Cluster (`--redis-cluster`): routes each command by its key's slot, follows
    /// redirections and failovers, reconnects by itself.
    Cluster(ClusterConnection),
}

impl RedisConnection {
    /// Connects to one Redis at `url` (`redis://…`, `rediss://…` or `redis+unix://…`).
    pub(super) async fn single(url: &str, timeout: Duration) -> RedisResult<Self> {
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        Ok(Self::Single(
            ConnectionManager::new_with_config(client, config).await?,
        ))
    }

    /// Connects to the Redis Cluster that `seeds` belong to (any one reachable is enough).
    pub(super) async fn cluster(seeds: &[&str], timeout: Duration) -> RedisResult<Self> {
        let client = ClusterClientBuilder::new(seeds.iter().copied())
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .retries(CLUSTER_RETRIES)
            // Waits between retries (ms): 10 · 2^n, jittered, within 20–200 ms.
            .min_retry_wait(20)
            .max_retry_wait(200)
            .retry_wait_formula(10, 2)
            .build()?;
        Ok(Self::Cluster(client.get_async_connection().await?))
    }

    /// Whether this is a cluster connection.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }

    /// Runs `cmd` on the master that holds `key`'s slot (on one server: there). For keyless
    /// commands that are about a key's slot, such as `SCAN … MATCH vestibule:{room}:*`.
    pub async fn on_slot_master(&mut self, key: &str, cmd: Cmd) -> RedisResult<Value> {
        match self {
            Self::Single(connection) => cmd.query_async(connection).await,
            Self::Cluster(connection) => {
                let route = Route::new(key_slot(key.as_bytes()), SlotAddr::Master);
                connection
                    .route_command(
                        cmd,
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                    )
                    .await
            }
        }
    }

    /// `PING`: on one server, there; on a cluster, a master at random, up to three tries, so
    /// that the cluster answering is what counts: a shard failing over shows as its rooms' 503s,
    /// not as every Vestibule replica unready at once (`/readyz`).
    pub async fn ping(&mut self) -> RedisResult<()> {
        match self {
            Self::Single(connection) => redis::cmd("PING").query_async(connection).await,
            Self::Cluster(connection) => {
                let mut tries = 0;
                loop {
                    tries += 1;
                    let answer = connection
                        .route_command(
                            redis::cmd("PING"),
                            RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
                        )
                        .await;
                    match answer {
                        Ok(_) => return Ok(()),
                        Err(error) if tries >= 3 => return Err(error),
                        Err(_) => {}
                    }
                }
            }
        }
    }

    /// Runs `cmd` on every node (masters and replicas) and returns each node's reply (one
    /// server: its only reply). For `INFO` and `CONFIG GET`, whose answer differs by node.
    pub async fn on_every_node(&mut self, cmd: Cmd) -> RedisResult<Vec<Value>> {
        match self {
            Self::Single(connection) => Ok(vec![cmd.query_async(connection).await?]),
            Self::Cluster(connection) => {
                let reply = connection
                    .route_command(
                        cmd,
                        RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllNodes, None)),
                    )
                    .await?;
                match reply {
                    Value::Map(by_node) => {
                        Ok(by_node.into_iter().map(|(_, value)| value).collect())
                    }
                    other => Ok(vec![other]),
                }
            }
        }
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(connection) => connection.req_packed_command(cmd),
            Self::Cluster(connection) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(connection) => connection.req_packed_commands(pipeline, offset, count),
            Self::Cluster(connection) => connection.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(connection) => connection.get_db(),
            Self::Cluster(connection) => connection.get_db(),
        }
    }
}

/// The Redis Cluster slot of `key`: CRC16 (XMODEM) of its hash tag (the part between the first
/// `{` and the next `}`, when not empty) or of the whole key, modulo 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16_xmodem(tagged) % 16384
}

fn crc16_xmodem(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::key_slot;

    #[test]
    fn slots_are_the_ones_redis_computes() {
        // Values from `CLUSTER KEYSLOT` (Redis 7).
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"vestibule:{main}:queue"), key_slot(b"main"));
        // An empty tag is no tag: the whole key is hashed.
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
    }
}
