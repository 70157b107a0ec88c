//! Writes a sale must not lose are answered only once a replica holds them.
//!
//! Redis replicates asynchronously: a master answers a script before its replicas have the
//! writes, and a failover promotes a replica that may lack the last of them. For most writes
//! that costs little (a join answered 504 is retried with its key; a poll is a read). For the
//! use of an entry token it is a second sale: the order answered 201, the promoted replica still
//! holds the token unused, and a retry through any Vestibule is answered 201 again with a new
//! order id and a second unit of stock. So a token's use (an order, a storefront's consume, and
//! the unit of stock it takes, all one `token.lua` step) is confirmed with `WAIT` on the master
//! that ran it, for every replica that master has online, before it is answered. A replica that
//! does not acknowledge within the store timeout makes the answer 504 `store_timeout` ("may or
//! may not have happened"): the caller retries with the same key, and after a failover the retry
//! finds either the confirmed use (a replay of the same receipt) or nothing (the use happens
//! then, once).
//!
//! A master with no replica (one Redis, or a shard whose only replica was promoted and which has
//! none yet) confirms nothing: its writes are answered at once, as they always were, and a crash
//! of it loses what its persistence lost. The replica count of each slot's master is read with
//! `INFO replication` at most once per [`RECOUNT`] and kept here.
//!
//! The use and its `WAIT` go over a connection of their own ([`UsesLink`]): Redis holds every
//! later command of a connection behind a `WAIT`, and polls and joins must not queue behind an
//! order.
//!
//! No Vestibule keeps its own memory of used tokens: every use is decided by the store, so the
//! answer does not depend on which Vestibule a retry reaches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::Value;

use super::connection::key_slot;
use super::keys::RoomKeys;
use super::link::{unavailable, Link};
use super::reply::as_string;
use super::script::Call;
use super::siblings::Member;
use super::{RedisConnection, RedisStore, RedisTarget};
use crate::StoreError;

/// How long a slot's replica count is trusted before it is read again.
pub(super) const RECOUNT: Duration = Duration::from_secs(1);

/// The replica count of the master of each slot this process wrote a token's use to, and when
/// it was read.
#[derive(Default)]
pub(super) struct ReplicaCounts(Mutex<HashMap<u16, (u32, Instant)>>);

impl ReplicaCounts {
    fn fresh(&self, slot: u16) -> Option<u32> {
        let counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        counts
            .get(&slot)
            .filter(|(_, read)| read.elapsed() < RECOUNT)
            .map(|(count, _)| *count)
    }

    fn keep(&self, slot: u16, count: u32) {
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        counts.insert(slot, (count, Instant::now()));
    }
}

/// The replicas a master's `INFO replication` lists as `state=online`.
pub(super) fn online_replicas(info: &str) -> u32 {
    let listed = info
        .lines()
        .filter(|line| line.starts_with("slave") && line.contains(':'))
        .filter(|line| line.contains("state=online"))
        .count();
    u32::try_from(listed).unwrap_or(u32::MAX)
}

/// Whether the replicas acknowledged a use.
enum Confirmed {
    Yes,
    No {
        acknowledged: u32,
        replicas: u32,
        timeout_ms: u64,
    },
}

/// Where the store connects, kept to make the uses' connection again.
enum Target {
    Single(String),
    Cluster(Vec<String>),
}

/// The connection of tokens' uses and their `WAIT`. It carries little traffic, so on a cluster
/// its map of slots would not follow a failover by itself: a call that fails drops it, and the
/// next use connects again (a new map of the cluster), within the store timeout. On one Redis it
/// is a member of the process's family of connections (`siblings.rs`).
pub(super) struct UsesLink {
    target: Target,
    timeout: Duration,
    current: tokio::sync::RwLock<Option<Arc<Link>>>,
}

impl UsesLink {
    /// Connects to `target` (bounded by `timeout` × 5, as the store's first connection).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when Redis cannot be reached.
    pub(super) async fn connect(
        target: &RedisTarget<'_>,
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        let uses = Self {
            target: match target {
                RedisTarget::Single(url) => Target::Single((*url).to_owned()),
                RedisTarget::Cluster(seeds) => {
                    Target::Cluster(seeds.iter().map(|seed| (*seed).to_owned()).collect())
                }
            },
            timeout,
            current: tokio::sync::RwLock::new(None),
        };
        uses.link(timeout * 5).await?;
        Ok(uses)
    }

    /// The live link, made now (within `bound`) if there is none.
    async fn link(&self, bound: Duration) -> Result<Arc<Link>, StoreError> {
        if let Some(link) = self.current.read().await.as_ref() {
            return Ok(link.clone());
        }
        let mut current = self.current.write().await;
        if let Some(link) = current.as_ref() {
            return Ok(link.clone());
        }
        let connecting = async {
            match &self.target {
                Target::Single(url) => RedisConnection::single(url, self.timeout).await,
                Target::Cluster(seeds) => {
                    let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
                    RedisConnection::cluster(&seeds, self.timeout).await
                }
            }
        };
        let connection = tokio::time::timeout(bound, connecting)
            .await
            .map_err(|_| StoreError::Unavailable("timed out connecting to Redis".into()))?
            .map_err(unavailable)?;
        // On one Redis the connection joins the process's others to it, which learn together
        // that Redis went away or came back (`siblings.rs`): a use right after a Redis restart
        // then finds its connection made again, not cut.
        let family = match (&self.target, &connection) {
            (Target::Single(url), RedisConnection::Single(manager)) => {
                Some(Member::join(url, manager.clone(), self.timeout))
            }
            _ => None,
        };
        let link = Arc::new(Link {
            connection,
            timeout: self.timeout,
            family,
        });
        *current = Some(link.clone());
        Ok(link)
    }

    /// Drops `failed` if it is still the live link (on a cluster only: one Redis's connection
    /// reconnects by itself, with its family).
    async fn forget(&self, failed: &Arc<Link>) {
        if matches!(self.target, Target::Single(_)) {
            return;
        }
        let mut current = self.current.write().await;
        if current
            .as_ref()
            .is_some_and(|link| Arc::ptr_eq(link, failed))
        {
            *current = None;
        }
    }
}

impl RedisStore {
    /// Runs a token's use (`token.lua` with `consume` = 1) on the uses' connection and, when it
    /// used the token or replayed a use, waits for the replicas ([`Self::confirm_on_replicas`]).
    ///
    /// # Errors
    /// As [`Link::run`]; [`StoreError::OutcomeUnknown`] when no replica confirmed in time.
    pub(super) async fn confirmed_use(
        &self,
        call: &Call<'_>,
        keys: &RoomKeys,
    ) -> Result<Vec<Value>, StoreError> {
        let link = self.uses.link(self.uses.timeout).await?;
        let outcome = async {
            let reply = link.run(call).await?;
            let verdict = reply.first().map(as_string).transpose()?;
            let confirmed = match verdict.as_deref() {
                Some("VALID" | "REPLAY") => self.confirm_on_replicas(&link, keys).await?,
                _ => Confirmed::Yes,
            };
            Ok((reply, confirmed))
        }
        .await;
        match outcome {
            Ok((reply, Confirmed::Yes)) => Ok(reply),
            Ok((
                _,
                Confirmed::No {
                    acknowledged,
                    replicas,
                    timeout_ms,
                },
            )) => {
                metrics::counter!("vestibule_store_unconfirmed_total").increment(1);
                Err(StoreError::OutcomeUnknown(format!(
                    "{acknowledged} of {replicas} Redis replicas confirmed the token's use \
                     within {timeout_ms} ms: it may not survive a failover"
                )))
            }
            // A connection that failed (or, on a cluster, may know an old map): made anew.
            Err(error @ (StoreError::Unavailable(_) | StoreError::OutcomeUnknown(_))) => {
                self.uses.forget(&link).await;
                Err(error)
            }
            Err(error) => Err(error),
        }
    }

    /// Waits until every online replica of the master that holds `keys`' room has the writes
    /// `link` sent so far (`WAIT n timeout`, ¾ of the store timeout): [`Confirmed::No`]
    /// when one did not acknowledge in time (the write is on the master and may or may not
    /// survive a failover).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] or `OutcomeUnknown` when Redis did not answer.
    async fn confirm_on_replicas(
        &self,
        link: &Link,
        keys: &RoomKeys,
    ) -> Result<Confirmed, StoreError> {
        let key = keys.prefix();
        let slot = key_slot(key.as_bytes());
        let replicas = match self.replicas.fresh(slot) {
            Some(count) => count,
            None => {
                let mut connection = link.connection.clone();
                let mut info = redis::cmd("INFO");
                info.arg("replication");
                let reply = link.bounded(connection.on_slot_master(key, info)).await?;
                let text = match reply {
                    Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                    Value::VerbatimString { text, .. } | Value::SimpleString(text) => text,
                    other => {
                        return Err(StoreError::Corrupt(format!(
                            "INFO replication answered {other:?}"
                        )))
                    }
                };
                let count = online_replicas(&text);
                self.replicas.keep(slot, count);
                count
            }
        };
        if replicas == 0 {
            return Ok(Confirmed::Yes);
        }
        // Within the client's own response timeout (the store timeout), which would otherwise
        // cut the WAIT short as a failed connection.
        let timeout_ms =
            (u64::try_from(link.timeout.as_millis()).unwrap_or(u64::MAX) * 3 / 4).max(1);
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(timeout_ms);
        let mut connection = link.connection.clone();
        // Redis answers a WAIT at its own timeout; this bound is for a master that answers
        // nothing at all.
        let bound = link.timeout;
        let acknowledged =
            match tokio::time::timeout(bound, connection.on_slot_master(key, wait)).await {
                Ok(Ok(Value::Int(count))) => u32::try_from(count).unwrap_or(0),
                Ok(Ok(other)) => {
                    return Err(StoreError::Corrupt(format!("WAIT answered {other:?}")));
                }
                Ok(Err(error)) => return Err(unavailable(error)),
                Err(_) => return Err(link.timed_out()),
            };
        Ok(if acknowledged >= replicas {
            Confirmed::Yes
        } else {
            Confirmed::No {
                acknowledged,
                replicas,
                timeout_ms,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::online_replicas;

    #[test]
    fn only_online_replicas_count() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
            slave0:ip=127.0.0.1,port=7001,state=online,offset=100,lag=0\r\n\
            slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n\
            master_failover_state:no-failover\r\n";
        assert_eq!(online_replicas(info), 1);
        assert_eq!(
            online_replicas("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"),
            0
        );
    }
}
