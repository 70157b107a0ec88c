//! One connection to Redis with its store timeout: what every call of the store goes through.

use std::future::Future;
use std::time::{Duration, Instant};

use redis::Value;

use super::reply::as_array;
use super::script::{self, Call};
use super::siblings::{self, Member};
use super::RedisConnection;
use crate::StoreError;

/// One connection to Redis with its store timeout, and its part in its family: what every call
/// goes through (bounded by the timeout, resent once where that is safe). Shared with the task
/// that sends a room's joins together (`group_commit.rs`).
pub(super) struct Link {
    pub(super) connection: RedisConnection,
    pub(super) timeout: Duration,
    /// This connection's part among the other connections of this process to the same Redis,
    /// which it tells when it finds Redis gone or back (`siblings.rs`; none on a Redis Cluster).
    pub(super) family: Option<Member>,
}

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
    pub(super) async fn run(&self, call: &Call<'_>) -> Result<Vec<Value>, StoreError> {
        as_array(self.run_value(call).await?)
    }

    /// Runs `call`, bounded by the store timeout: its reply as it came.
    pub(super) async fn run_value(&self, call: &Call<'_>) -> Result<Value, StoreError> {
        let mut connection = self.connection.clone();
        self.bounded(call.invocation.invoke_async(&mut connection))
            .await
    }

    /// Runs `call` like [`Self::run`], once more if the connection turns out to have dropped
    /// ([`Self::bounded_repeatable`]): only for a script that means the same when run twice.
    pub(super) async fn run_repeatable(&self, call: &Call<'_>) -> Result<Vec<Value>, StoreError> {
        as_array(self.run_value_repeatable(call).await?)
    }

    /// [`Self::run_repeatable`] with the reply as it came.
    pub(super) async fn run_value_repeatable(&self, call: &Call<'_>) -> Result<Value, StoreError> {
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
    /// (`CLIENT KILL`, a proxy or a failover closing connections) then costs no failed answer,
    /// not even for the first call on each serving thread's connection. When the second try
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
