//! What one HTTP/2 connection is doing: requests in flight (until their answer's body ends) and
//! when it last wrote, so that an idle connection gets `GOAWAY` and a stalled one is dropped.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, HttpBody};
use tokio::time::Instant;

/// Why an HTTP/2 connection is closed by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Close {
    /// Nothing in flight for the header read timeout.
    Idle,
    /// Something in flight, and nothing written for the stall limit.
    Stalled,
}

/// What one HTTP/2 connection is doing: requests in flight, since when none has been, and when
/// it last wrote (or began a request).
#[derive(Debug)]
pub(super) struct ConnectionWatch {
    /// Requests whose answer has not ended (headers read, handler running, or body streaming).
    in_flight: AtomicUsize,
    /// Milliseconds after `start` when `in_flight` last fell to zero.
    idle_since_ms: AtomicU64,
    /// Milliseconds after `start` of the last response bytes written or the last request begun.
    active_at_ms: AtomicU64,
    start: Instant,
}

impl ConnectionWatch {
    pub(super) fn new() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
            active_at_ms: AtomicU64::new(0),
            start: Instant::now(),
        }
    }

    fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.active();
    }

    fn request_ended(&self) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle_since_ms
                .store(self.elapsed_ms(), Ordering::Release);
        }
    }

    /// Something was written to the peer (or a request began).
    pub(super) fn active(&self) {
        self.active_at_ms
            .store(self.elapsed_ms(), Ordering::Release);
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Milliseconds since `mark` (milliseconds after `start`).
    fn since_ms(&self, mark: &AtomicU64) -> u64 {
        self.elapsed_ms()
            .saturating_sub(mark.load(Ordering::Acquire))
    }

    /// Resolves once nothing has been in flight nor written for `idle`, or something has been in
    /// flight and nothing was written for `stall`.
    pub(super) async fn idle_or_stalled(&self, idle: Duration, stall: Duration) -> Close {
        let idle_ms = millis(idle);
        let stall_ms = millis(stall);
        loop {
            let wait_ms = if self.in_flight.load(Ordering::Acquire) > 0 {
                let quiet_ms = self.since_ms(&self.active_at_ms);
                if quiet_ms >= stall_ms {
                    return Close::Stalled;
                }
                stall_ms - quiet_ms
            } else {
                // Idle: nothing in flight and nothing written, so an answer still leaving a
                // slow peer's window after its body was handed over is not cut short.
                let idle_for_ms = self
                    .since_ms(&self.idle_since_ms)
                    .min(self.since_ms(&self.active_at_ms));
                if idle_for_ms >= idle_ms {
                    // Checked again: a request may have started since the read above.
                    if self.in_flight.load(Ordering::Acquire) == 0 {
                        return Close::Idle;
                    }
                    continue;
                }
                idle_ms - idle_for_ms
            };
            tokio::time::sleep(Duration::from_millis(wait_ms.max(1))).await;
        }
    }

    /// Resolves once nothing has been written for `limit`.
    pub(super) async fn silent_for(&self, limit: Duration) {
        let limit_ms = millis(limit);
        loop {
            let quiet_ms = self.since_ms(&self.active_at_ms);
            if quiet_ms >= limit_ms {
                return;
            }
            tokio::time::sleep(Duration::from_millis((limit_ms - quiet_ms).max(1))).await;
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
/// One request in flight on a watched connection, for as long as it lives.
pub(super) struct InFlight(Arc<ConnectionWatch>);

impl InFlight {
    pub(super) fn new(watch: &Arc<ConnectionWatch>) -> Self {
        watch.request_started();
        Self(watch.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

/// An answer's body that keeps its request in flight until it ends or is dropped.
pub(super) struct Counted {
    pub(super) body: Body,
    pub(super) _guard: InFlight,
}

impl HttpBody for Counted {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(context)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_with_nothing_in_flight_for_the_whole_limit() {
        let watch = ConnectionWatch::new();
        let idle = Duration::from_secs(10);
        let stall = Duration::from_secs(30);
        watch.request_started();
        // A stream that writes now and then keeps its connection however long it lasts.
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_secs(20)).await;
            watch.active();
        }
        assert!(
            tokio::time::timeout(Duration::from_secs(25), watch.idle_or_stalled(idle, stall))
                .await
                .is_err()
        );
        watch.request_ended();
        let ended_at = tokio::time::Instant::now();
        assert_eq!(watch.idle_or_stalled(idle, stall).await, Close::Idle);
        assert!(ended_at.elapsed() >= idle, "{:?}", ended_at.elapsed());
        assert!(ended_at.elapsed() < idle + Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_that_writes_nothing_for_the_stall_limit_stalls() {
        let watch = ConnectionWatch::new();
        let stall = Duration::from_secs(30);
        tokio::time::sleep(Duration::from_secs(100)).await;
        // The limit counts from the request's start, not from the last write before it.
        watch.request_started();
        let started = tokio::time::Instant::now();
        assert_eq!(
            watch.idle_or_stalled(Duration::from_secs(10), stall).await,
            Close::Stalled
        );
        assert!(started.elapsed() >= stall && started.elapsed() < stall + Duration::from_secs(1));
        let silent = tokio::time::Instant::now();
        watch.silent_for(stall).await;
        assert!(
            silent.elapsed() < Duration::from_secs(1),
            "already silent that long"
        );
    }
}
