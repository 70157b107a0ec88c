//! Two load shapes, both bounded in count and time: closed loop (N workers, each sends its next
//! request when the last one is answered: measures capacity) and open loop (requests at a fixed
//! rate whatever the answers do: measures latency at a given load, without coordinated omission,
//! since each latency counts from the moment the request was due).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::http::{latency_histogram, Percentiles, SharedHistogram};

/// What a load run did.
#[derive(Debug, Clone)]
pub struct LoadResult {
    /// Requests answered as expected.
    pub ok: u64,
    /// Requests that failed or were answered unexpectedly.
    pub errors: u64,
    /// Requests an open loop could not send because too many were in flight.
    pub dropped: u64,
    /// Wall time from the first request to the last answer, seconds.
    pub secs: f64,
    /// Latency of every answered request, µs.
    pub latency: Histogram<u64>,
    /// The first failure seen, for the report.
    pub first_error: Option<String>,
}

impl LoadResult {
    /// Expected answers per second.
    pub fn rate(&self) -> f64 {
        self.ok as f64 / self.secs.max(1e-3)
    }

    /// p50/p99/p99.9 of the latency.
    pub fn percentiles(&self) -> Percentiles {
        Percentiles::of(&self.latency)
    }
}

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Tally {
    fn count(&self, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
                first.get_or_insert(error);
            }
        }
    }
}

/// Runs `workers` closed loops for `duration` or `max_requests` requests, whichever ends first.
/// `request(worker, n)` sends request number `n` and says whether it was answered as expected.
pub async fn closed_loop<F, Fut>(
    workers: usize,
    duration: Duration,
    max_requests: u64,
    request: F,
) -> LoadResult
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send,
{
    let request = Arc::new(request);
    let tally = Arc::new(Tally::default());
    let issued = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::with_capacity(workers);
    for worker in 0..workers {
        let request = request.clone();
        let tally = tally.clone();
        let issued = issued.clone();
        tasks.push(tokio::spawn(async move {
            let mut histogram = latency_histogram();
            while Instant::now() < deadline {
                let n = issued.fetch_add(1, Ordering::Relaxed);
                if n >= max_requests {
                    break;
                }
                let sent = Instant::now();
                let outcome = request(worker, n).await;
                if outcome.is_ok() {
                    histogram.saturating_record(sent.elapsed().as_micros().max(1) as u64);
                }
                tally.count(outcome);
            }
            histogram
        }));
    }
    let mut latency = latency_histogram();
    for task in tasks {
        if let Ok(histogram) = task.await {
            let _ = latency.add(&histogram);
        }
    }
    finish(&tally, started, latency, 0)
}

/// The open loop of the poll-latency figures: `profile.poll_rate` requests/s for
/// `profile.poll_rate_secs` (at most 4,096 in flight). The capacity stage's polls and the
/// baselines' bare-axum floor both run it, so the floor is measured at the same rate and length.
pub async fn at_poll_rate<F, Fut>(profile: &crate::profile::Profile, request: F) -> LoadResult
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    open_loop(
        profile.poll_rate,
        crate::profile::Profile::secs(profile.poll_rate_secs),
        4_096,
        request,
    )
    .await
}

/// Sends requests at `rate` per second for `duration` (at most `rate × duration` requests), never
/// more than `max_in_flight` at once (the rest count as dropped). Each latency counts from the
/// moment its request was due.
pub async fn open_loop<F, Fut>(
    rate: f64,
    duration: Duration,
    max_in_flight: u64,
    request: F,
) -> LoadResult
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let request = Arc::new(request);
    let tally = Arc::new(Tally::default());
    let histogram = SharedHistogram::default();
    let in_flight = Arc::new(AtomicU64::new(0));
    let total = (rate * duration.as_secs_f64()).round() as u64;
    let started = Instant::now();
    let mut dropped = 0;
    let mut tasks = tokio::task::JoinSet::new();
    let mut n = 0;
    while n < total {
        let now = Instant::now();
        let due_until = ((now - started).as_secs_f64() * rate) as u64 + 1;
        while n < total.min(due_until) {
            let due = started + Duration::from_secs_f64(n as f64 / rate);
            if in_flight.load(Ordering::Relaxed) >= max_in_flight {
                dropped += 1;
            } else {
                in_flight.fetch_add(1, Ordering::Relaxed);
                let request = request.clone();
                let tally = tally.clone();
                let histogram = histogram.clone();
                let in_flight = in_flight.clone();
                tasks.spawn(async move {
                    let outcome = request(n).await;
                    if outcome.is_ok() {
                        histogram.record_since(due);
                    }
                    tally.count(outcome);
                    in_flight.fetch_sub(1, Ordering::Relaxed);
                });
            }
            n += 1;
        }
        // Reap finished tasks so the set does not grow with the run.
        while tasks.try_join_next().is_some() {}
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    while tasks.join_next().await.is_some() {}
    finish(&tally, started, histogram.snapshot(), dropped)
}

fn finish(tally: &Tally, started: Instant, latency: Histogram<u64>, dropped: u64) -> LoadResult {
    LoadResult {
        ok: tally.ok.load(Ordering::Relaxed),
        errors: tally.errors.load(Ordering::Relaxed),
        dropped,
        secs: started.elapsed().as_secs_f64(),
        latency,
        first_error: tally
            .first_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
    }
}
