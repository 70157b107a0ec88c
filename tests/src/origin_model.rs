//! A storefront with a true capacity, for the closed loop (`autoRate`) to be tried against: an
//! HTTP server whose every request takes one of `workers` workers for a service time, waits in
//! a queue in front of them while all are busy, and is answered 503 at once when that queue is
//! full. Latency rises with load: the service time is `base × (0.6 + 0.4 × busy share)`, so the
//! origin answers in 60% of its full-load time when idle and its capacity is exactly
//! `workers ÷ base` requests per second when it is saturated. The capacity can change during a
//! run ([`OriginModel::set_capacity`]), as a checkout's does when its database slows.
//!
//! Every answer is logged ([`OriginModel::answers`]) with when it ended, its latency as the
//! origin saw it (queue + service) and its status, so a test or the benchmark can read the
//! origin's p95 and error rate per second the way an operator's monitoring would.
//!
//! Shared by the black-box tests (tests/tests/gate/auto_rate.rs) and the benchmark's `auto-rate`
//! stage.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::sync::Semaphore;

/// The origin's shape: how many workers, how long a request takes, how much may queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OriginShape {
    /// Requests served at once.
    pub workers: usize,
    /// Requests per second the origin serves when saturated (its true capacity).
    pub capacity_per_sec: f64,
    /// Requests that may wait for a worker; one more is answered 503 at once.
    pub queue_limit: usize,
}

/// One answer of the origin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answer {
    /// When it was sent, ms since the Unix epoch.
    pub at_ms: u64,
    /// From the request's arrival to the answer, ms (queue + service; 0 for a 503).
    pub latency_ms: f64,
    /// 200, or 503 when the queue was full.
    pub status: u16,
}

/// The origin's figures over one stretch of time.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OriginFigures {
    /// Answers in the stretch.
    pub requests: u64,
    /// Of which 503.
    pub errors: u64,
    /// p95 latency of the answers, ms (0 when none).
    pub p95_ms: f64,
}

impl OriginFigures {
    /// Figures of `answers`.
    pub fn of<'a>(answers: impl IntoIterator<Item = &'a Answer>) -> Self {
        let mut latencies = Vec::new();
        let mut errors = 0;
        for answer in answers {
            latencies.push(answer.latency_ms);
            errors += u64::from(answer.status >= 500);
        }
        latencies.sort_by(f64::total_cmp);
        let p95_ms = if latencies.is_empty() {
            0.0
        } else {
            let index = ((latencies.len() as f64 * 0.95).ceil() as usize).clamp(1, latencies.len());
            latencies[index - 1]
        };
        Self {
            requests: latencies.len() as u64,
            errors,
            p95_ms,
        }
    }

    /// Share of the answers that were 5xx (0 when none).
    pub fn error_rate(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.errors as f64 / self.requests as f64
        }
    }
}

struct Inner {
    workers: usize,
    queue_limit: usize,
    permits: Semaphore,
    /// Full-load service time, µs (`workers ÷ capacity`).
    service_us: AtomicU64,
    busy: AtomicUsize,
    queued: AtomicUsize,
    answers: Mutex<Vec<Answer>>,
}

/// The origin model, serving on a free port of 127.0.0.1 until dropped.
pub struct OriginModel {
    inner: Arc<Inner>,
    address: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

/// Serves `app` on a free port of 127.0.0.1 until the task is aborted: a storefront's stand-in
/// (this model, a health endpoint).
///
/// # Panics
/// When no port of 127.0.0.1 can be bound.
pub async fn serve_locally(app: Router) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a port of 127.0.0.1");
    let address = listener.local_addr().expect("the bound address");
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (address, task)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn service_us(shape: &OriginShape) -> u64 {
    (shape.workers as f64 / shape.capacity_per_sec.max(0.001) * 1e6) as u64
}

impl OriginModel {
    /// Starts the origin with `shape`. Every path and method is served alike.
    ///
    /// # Panics
    /// When no port of 127.0.0.1 can be bound.
    pub async fn start(shape: OriginShape) -> Self {
        let inner = Arc::new(Inner {
            workers: shape.workers.max(1),
            queue_limit: shape.queue_limit,
            permits: Semaphore::new(shape.workers.max(1)),
            service_us: AtomicU64::new(service_us(&shape)),
            busy: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            answers: Mutex::new(Vec::new()),
        });
        let state = inner.clone();
        let app = Router::new().fallback(move || serve(state.clone()));
        let (address, task) = serve_locally(app).await;
        Self {
            inner,
            address,
            task,
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Changes the true capacity (requests per second when saturated) from now on; requests
    /// already in service finish at the old pace.
    pub fn set_capacity(&self, per_sec: f64) {
        let shape = OriginShape {
            workers: self.inner.workers,
            capacity_per_sec: per_sec,
            queue_limit: self.inner.queue_limit,
        };
        self.inner
            .service_us
            .store(service_us(&shape), Ordering::Relaxed);
    }

    /// Every answer so far, in the order they were sent.
    pub fn answers(&self) -> Vec<Answer> {
        self.inner.answers.lock().expect("answers").clone()
    }

    /// Figures of the answers sent in `[from_ms, to_ms)`.
    pub fn figures_between(&self, from_ms: u64, to_ms: u64) -> OriginFigures {
        let answers = self.inner.answers.lock().expect("answers");
        OriginFigures::of(
            answers
                .iter()
                .filter(|a| (from_ms..to_ms).contains(&a.at_ms)),
        )
    }

    /// Requests waiting for a worker now.
    pub fn queued(&self) -> usize {
        self.inner.queued.load(Ordering::Relaxed)
    }
}

impl Drop for OriginModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(inner: Arc<Inner>) -> Response {
    let arrived = Instant::now();
    let record = |status: u16, latency: Duration| {
        inner.answers.lock().expect("answers").push(Answer {
            at_ms: now_ms(),
            latency_ms: latency.as_secs_f64() * 1000.0,
            status,
        });
    };
    if inner.queued.fetch_add(1, Ordering::AcqRel) >= inner.queue_limit
        && inner.permits.available_permits() == 0
    {
        inner.queued.fetch_sub(1, Ordering::AcqRel);
        record(503, Duration::ZERO);
        return (StatusCode::SERVICE_UNAVAILABLE, "origin queue full").into_response();
    }
    let permit = inner
        .permits
        .acquire()
        .await
        .expect("the semaphore is never closed");
    inner.queued.fetch_sub(1, Ordering::AcqRel);
    let busy = inner.busy.fetch_add(1, Ordering::AcqRel) + 1;
    let share = busy as f64 / inner.workers as f64;
    let full = inner.service_us.load(Ordering::Relaxed) as f64;
    let service = Duration::from_micros((full * (0.6 + 0.4 * share.min(1.0))) as u64);
    tokio::time::sleep(service).await;
    inner.busy.fetch_sub(1, Ordering::AcqRel);
    drop(permit);
    record(200, arrived.elapsed());
    (StatusCode::OK, "ok").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_the_p95_and_the_errors() {
        let answers: Vec<Answer> = (1..=100)
            .map(|i| Answer {
                at_ms: i,
                latency_ms: i as f64,
                status: if i % 10 == 0 { 503 } else { 200 },
            })
            .collect();
        let figures = OriginFigures::of(&answers);
        assert_eq!(figures.requests, 100);
        assert_eq!(figures.errors, 10);
        assert_eq!(figures.p95_ms, 95.0);
        assert!((figures.error_rate() - 0.1).abs() < 1e-9);
        assert_eq!(OriginFigures::of(&[]).p95_ms, 0.0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_saturated_origin_serves_its_capacity_and_sheds_past_its_queue() {
        let origin = OriginModel::start(OriginShape {
            workers: 10,
            capacity_per_sec: 100.0,
            queue_limit: 20,
        })
        .await;
        let url = origin.url();
        // 60 at once: 10 in service, 20 queued, 30 shed.
        let client = reqwest::Client::new();
        let requests: Vec<_> = (0..60)
            .map(|_| {
                let (client, url) = (client.clone(), url.clone());
                tokio::spawn(
                    async move { client.get(&url).send().await.unwrap().status().as_u16() },
                )
            })
            .collect();
        let mut statuses = Vec::new();
        for request in requests {
            statuses.push(request.await.unwrap());
        }
        let shed = statuses.iter().filter(|s| **s == 503).count();
        assert!((25..=35).contains(&shed), "{shed} shed of 60");
        // 30 served by 10 workers at 100 ms each (full load): three rounds, ~300 ms.
        let figures = OriginFigures::of(&origin.answers());
        assert!(
            (200.0..=600.0).contains(&figures.p95_ms),
            "p95 {} ms",
            figures.p95_ms
        );
    }
}
