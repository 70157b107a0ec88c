//! The connections one process keeps to the same Redis learn together that Redis went away.
//!
//! A process keeps several connections to one Redis: the main one, one per serving thread and
//! one for the schedulers (`startup.rs`), each a `ConnectionManager` on its own runtime. Over
//! RESP2 a `ConnectionManager` notices that its connection dropped only when a call on it fails,
//! and such a call may have been sent, so it is answered 504 `store_timeout` ("may or may not
//! have happened"). Left alone, each of those connections would turn one request, at any time
//! after a Redis crash, into a 504 while the requests around it get the 503 `store_unavailable`
//! an outage should get. So when a call finds its connection dropped, it raises its [`Family`]'s
//! alarm: every connection of this process to the same Redis URL then checks its own with a `PING`
//! made on its own runtime (a reconnect runs on the runtime that starts it). One that finds its
//! connection dropped starts reconnecting, and every call made on it from then on waits for that
//! reconnect: answered 503 while Redis is away, served once it is back. What is left for a 504: the
//! calls in flight as the connection broke, and those that meet their own cut connection before the
//! alarm reaches it (the ones that mean the same sent twice then go once more:
//! `Link::bounded_repeatable`).
//!
//! The same goes the other way: a connection that reconnects does not retry by itself, it waits
//! for its next call, which gets the last failure (503) and only then starts reconnecting. So the
//! first call that succeeds after failures raises the alarm too, and every connection of the
//! family reconnects at once rather than failing its next call after Redis is back (and
//! `/readyz`, which asks every connection, turns ready with the first).
//!
//! A Redis Cluster connection follows its nodes itself and has no family.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use redis::Value;
use tokio::sync::Notify;
use tokio::task::AbortHandle;

/// The least time between two alarms of one family with the same news. During an outage every
/// call fails, and a check of a connection that is already reconnecting starts another
/// reconnect: one round of checks per 250 ms is plenty.
const ALARM_GAP: Duration = Duration::from_millis(250);

/// What a connection found out, and tells its family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum News {
    /// Its connection, which was up, dropped.
    Dropped,
    /// A call succeeded after calls had failed.
    Back,
}

/// Every family of this process, by Redis URL (weak: a family lives as long as a store uses it).
static FAMILIES: Mutex<Vec<(String, Weak<Family>)>> = Mutex::new(Vec::new());

/// The connections of this process to one Redis URL.
pub(super) struct Family {
    alarm: Notify,
    last_alarm: Mutex<Option<(News, Instant)>>,
}

impl Family {
    /// The family of the connections to `url` (the same URL string: another spelling of the same
    /// server makes another family, which only means those connections learn on their own).
    pub(super) fn of(url: &str) -> Arc<Self> {
        let mut families = FAMILIES.lock().unwrap_or_else(PoisonError::into_inner);
        families.retain(|(_, family)| family.strong_count() > 0);
        if let Some(family) = families
            .iter()
            .find(|(known, _)| known == url)
            .and_then(|(_, family)| family.upgrade())
        {
            return family;
        }
        let family = Arc::new(Self {
            alarm: Notify::new(),
            last_alarm: Mutex::new(None),
        });
        families.push((url.to_owned(), Arc::downgrade(&family)));
        family
    }

    /// Tells every connection of the family to check its own, unless the same news was told
    /// less than [`ALARM_GAP`] ago.
    pub(super) fn raise(&self, news: News) {
        let now = Instant::now();
        {
            let mut last = self
                .last_alarm
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if last.is_some_and(|(told, at)| told == news && now.duration_since(at) < ALARM_GAP) {
                return;
            }
            *last = Some((news, now));
        }
        self.alarm.notify_waiters();
    }

    /// Starts, on the current Tokio runtime, the task that checks `connection` (with a `PING`
    /// bounded by `timeout`) each time the alarm is raised. It stops when the returned
    /// [`Watch`] is dropped.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub(super) fn watch(
        self: &Arc<Self>,
        connection: ConnectionManager,
        timeout: Duration,
    ) -> Watch {
        let family = self.clone();
        let task = tokio::spawn(async move {
            loop {
                family.alarm.notified().await;
                let mut connection = connection.clone();
                // The answer does not matter: a dropped connection fails the PING, which makes
                // the `ConnectionManager` reconnect.
                let _ = tokio::time::timeout(
                    timeout,
                    redis::cmd("PING").query_async::<Value>(&mut connection),
                )
                .await;
            }
        });
        Watch(task.abort_handle())
    }
}

/// Stops a connection's check task when dropped (with the store that owns the connection).
pub(super) struct Watch(AbortHandle);

impl Drop for Watch {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Whether `error` says that a connection which was up has dropped (not that connecting was
/// refused: a connection that is refused already knows, and so does its family).
pub(super) fn is_news_of_a_drop(error: &redis::RedisError) -> bool {
    error.is_connection_dropped() && !error.is_connection_refusal()
}

/// One connection's part in its family: its check task, and whether its last call failed for
/// want of a connection (so that its next success is news).
pub(super) struct Member {
    family: Arc<Family>,
    _watch: Watch,
    failing: AtomicBool,
}

impl Member {
    /// Joins `connection` (to `url`) to its family; its check task runs on the current runtime.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub(super) fn join(url: &str, connection: ConnectionManager, timeout: Duration) -> Self {
        let family = Family::of(url);
        let watch = family.watch(connection, timeout);
        Self {
            family,
            _watch: watch,
            failing: AtomicBool::new(false),
        }
    }

    /// Notes a call's outcome; tells the family what is news.
    pub(super) fn saw<T>(&self, result: &redis::RedisResult<T>) {
        match result {
            Ok(_) => {
                // One relaxed load per call while all is well.
                if self.failing.load(Ordering::Relaxed)
                    && self.failing.swap(false, Ordering::Relaxed)
                {
                    self.family.raise(News::Back);
                }
            }
            Err(error) if error.is_connection_dropped() => {
                self.failing.store(true, Ordering::Relaxed);
                if is_news_of_a_drop(error) {
                    self.family.raise(News::Dropped);
                }
            }
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_to_one_url_share_a_family_and_others_do_not() {
        let first = Family::of("redis://family-test-a");
        let second = Family::of("redis://family-test-a");
        let other = Family::of("redis://family-test-b");
        assert!(Arc::ptr_eq(&first, &second));
        assert!(!Arc::ptr_eq(&first, &other));
        drop((first, second));
        // Gone with its last store: a new one starts afresh.
        let again = Family::of("redis://family-test-a");
        assert_eq!(Arc::strong_count(&again), 1);
    }

    #[tokio::test]
    async fn an_alarm_reaches_every_waiting_watcher_at_most_once_per_gap() {
        let family = Family::of("redis://family-test-c");
        let waiting = [family.alarm.notified(), family.alarm.notified()];
        let mut waiting = waiting.map(Box::pin);
        for notified in &mut waiting {
            notified.as_mut().enable();
        }
        family.raise(News::Dropped);
        for notified in waiting {
            tokio::time::timeout(Duration::from_secs(1), notified)
                .await
                .expect("every watcher hears the alarm");
        }
        let mut next = Box::pin(family.alarm.notified());
        next.as_mut().enable();
        family.raise(News::Dropped);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), next.as_mut())
                .await
                .is_err(),
            "the same news within the gap is not told again"
        );
        family.raise(News::Back);
        tokio::time::timeout(Duration::from_secs(1), next)
            .await
            .expect("other news is told at once");
    }

    #[test]
    fn only_a_drop_is_news() {
        use std::io;
        let dropped = redis::RedisError::from(io::Error::from(io::ErrorKind::BrokenPipe));
        let refused = redis::RedisError::from(io::Error::from(io::ErrorKind::ConnectionRefused));
        let missing = redis::RedisError::from(io::Error::from(io::ErrorKind::NotFound));
        assert!(is_news_of_a_drop(&dropped));
        assert!(!is_news_of_a_drop(&refused));
        assert!(!is_news_of_a_drop(&missing));
    }
}
