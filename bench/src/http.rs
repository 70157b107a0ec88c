//! The HTTP/1.1 client of the load generator: hyper's pooled client with a bound on requests in
//! flight (so on open connections), and latency histograms in microseconds.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt as _, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::Semaphore;

/// Longest a single request may take before it counts as an error.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A pooled HTTP/1.1 client to one server, at most `connections` requests in flight.
#[derive(Clone)]
pub struct HttpClient {
    client: Client<HttpConnector, Full<Bytes>>,
    base: Arc<str>,
    in_flight: Arc<Semaphore>,
}

/// An answer: status and body.
pub struct Answer {
    /// HTTP status.
    pub status: StatusCode,
    /// The whole body.
    pub body: Bytes,
}

impl HttpClient {
    /// A client for `base` (`http://ADDR`) with at most `connections` connections.
    pub fn new(base: &str, connections: usize) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(connections)
            .pool_idle_timeout(Duration::from_secs(60))
            .build(connector);
        Self {
            client,
            base: Arc::from(base),
            in_flight: Arc::new(Semaphore::new(connections)),
        }
    }

    /// Sends one request and reads the whole answer.
    ///
    /// # Errors
    /// A connection error or no answer within [`REQUEST_TIMEOUT`].
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&'static str>,
    ) -> anyhow::Result<Answer> {
        let _permit = self.in_flight.acquire().await.context("client closed")?;
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if body.is_some() {
            request = request.header("content-type", "application/json");
        }
        let request = request.body(Full::new(Bytes::from_static(
            body.unwrap_or_default().as_bytes(),
        )))?;
        let exchange = async {
            let response = self.client.request(request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            anyhow::Ok(Answer { status, body })
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, exchange).await {
            Ok(answer) => answer,
            Err(_) => bail!("no answer within {} s", REQUEST_TIMEOUT.as_secs()),
        }
    }

    /// `PATCH`es `room`'s admission rate (per second) as the operator would, with the bench's
    /// admin token.
    ///
    /// # Errors
    /// As [`HttpClient::send`], or the answer is not a 2xx.
    pub async fn set_admission_rate(&self, room: &str, rate: f64) -> anyhow::Result<()> {
        self.patch_room(room, &format!(r#"{{"admissionRatePerSec":{rate}}}"#))
            .await
            .map_err(|error| error.context("PATCH of the admission rate"))
    }

    /// `PATCH`es `room`'s settings with `body` (JSON) as the operator would, with the bench's
    /// admin token.
    ///
    /// # Errors
    /// As [`HttpClient::send`], or the answer is not a 2xx.
    pub async fn patch_room(&self, room: &str, body: &str) -> anyhow::Result<()> {
        let body: &'static str = Box::leak(body.to_owned().into_boxed_str());
        let bearer = format!("Bearer {}", crate::procs::ADMIN_TOKEN);
        let answer = self
            .send(
                Method::PATCH,
                &vestibule_shared::paths::admin_room(room),
                &[("authorization", &bearer)],
                Some(body),
            )
            .await?;
        anyhow::ensure!(
            answer.status.is_success(),
            "PATCH {body} answered {}: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        );
        Ok(())
    }

    /// `GET path`.
    ///
    /// # Errors
    /// As [`HttpClient::send`].
    pub async fn get(&self, path: &str) -> anyhow::Result<Answer> {
        self.send(Method::GET, path, &[], None).await
    }
}

/// A latency histogram in microseconds (1 µs to 100 s, 3 significant digits).
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000, 3).expect("valid histogram bounds")
}

/// A histogram shared by many tasks.
#[derive(Clone)]
pub struct SharedHistogram(Arc<Mutex<Histogram<u64>>>);

impl Default for SharedHistogram {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(latency_histogram())))
    }
}

impl SharedHistogram {
    /// Records the time since `since`.
    pub fn record_since(&self, since: Instant) {
        let micros = since.elapsed().as_micros().max(1) as u64;
        self.lock().saturating_record(micros);
    }

    /// Adds a whole histogram.
    pub fn merge(&self, other: &Histogram<u64>) {
        let _ = self.lock().add(other);
    }

    /// A copy of the histogram now.
    pub fn snapshot(&self) -> Histogram<u64> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Histogram<u64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// p50/p99/p99.9 of a latency histogram, in milliseconds.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Percentiles {
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// 99.9th percentile, ms.
    pub p999_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
    /// Samples.
    pub count: u64,
}

impl Percentiles {
    /// Reads them off a histogram in microseconds.
    pub fn of(histogram: &Histogram<u64>) -> Self {
        if histogram.is_empty() {
            return Self::default();
        }
        let ms = |q: f64| histogram.value_at_quantile(q) as f64 / 1000.0;
        Self {
            p50_ms: ms(0.5),
            p99_ms: ms(0.99),
            p999_ms: ms(0.999),
            max_ms: histogram.max() as f64 / 1000.0,
            count: histogram.len(),
        }
    }

    /// `p50 / p99 / p99.9 ms`, e.g. `0.42 / 1.9 / 4.1 ms`.
    pub fn triple(&self) -> String {
        format!(
            "{} / {} / {} ms",
            short(self.p50_ms),
            short(self.p99_ms),
            short(self.p999_ms)
        )
    }
}

/// A number with about three significant digits.
pub fn short(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}
