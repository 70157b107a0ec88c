//! The origin's health for the room's closed loop (`autoRate`), measured by the guard and
//! reported to Vestibule ([`GuardBuilder::report_signals`](crate::GuardBuilder::report_signals)).
//!
//! **What is measured.** Every request the guard lets through to the inner service: sent when
//! it is passed in; answered when the inner service returns its response (the headers; the body
//! may still stream), with the latency from passing it in; an error when the answer is 5xx or
//! the inner service fails or panics; in flight in between. A request whose shopper goes away
//! before the answer (the future is dropped) leaves the in-flight count and is no answer.
//! Requests the guard refuses itself (no token, 303, 403, 503) never reach the origin and are
//! not counted. The counts sit in per-second buckets of the last [`WINDOW_SECS`] seconds with a
//! fixed latency histogram, so the memory is the same (about 1.4 kB) at any traffic.
//!
//! **What is sent.** Once a second ([`REPORT_EVERY`]), just after a second ends, the guard posts
//! the newest complete seconds that hold [`ENOUGH_ANSWERS`] answers (at most [`WINDOW_SECS`]),
//! as gate mode reads its own, to `POST {base}/api/v1/rooms/{room}/signals` with the origin API
//! key: an [`OriginSignals`] body. It posts with no traffic too (`requests: 0`), so the loop
//! tells a quiet origin from lost signals. A post is bounded by the guard's timeout and the
//! period; a failed one is logged (`tracing`, once per failing stretch) and the next second
//! tries again: shoppers' requests never wait on it. The reporting task holds the guard's
//! meter weakly and ends within a period once the last clone of the guard is dropped.

mod window;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use axum::http::Response;
use serde::{Deserialize, Serialize};

use window::Window;
pub use window::{ENOUGH_ANSWERS, WINDOW_SECS};

use crate::VestibuleApi;

/// How often the signals are posted.
pub const REPORT_EVERY: Duration = Duration::from_secs(1);

/// How long after a second ends its report is read: past the second's last answers.
const AFTER_THE_SECOND: Duration = Duration::from_millis(20);

/// The body of `POST /api/v1/rooms/{room}/signals`: the origin's health over the newest
/// complete seconds (Vestibule's `OriginSignals`, in camelCase JSON, e.g.
/// `{"requests":820,"p50Ms":120,"p95Ms":310,"errorRate":0.002,"inFlight":35,"sent":900,
/// "windowSecs":1}`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OriginSignals {
    /// Answers (and failures) of the inner service in the window's seconds.
    pub requests: u64,
    /// Median latency, milliseconds (a histogram bucket's upper bound; 0 with no answer).
    pub p50_ms: f64,
    /// 95th-percentile latency, milliseconds (as `p50Ms`).
    pub p95_ms: f64,
    /// Share of the answers that were 5xx or failures, 0–1 (0 with no answer).
    pub error_rate: f64,
    /// Requests passed in and not answered yet, now.
    pub in_flight: u64,
    /// Requests passed in during the same seconds.
    pub sent: u64,
    /// Seconds the window spans, 1–5: the counts are over that many seconds (at a trickle the
    /// window takes several to hold enough answers).
    pub window_secs: u64,
}

/// What the guard measures of the inner service: the window, on a monotonic clock of its own
/// (ms since the meter was made; second boundaries fall on whole seconds of it).
#[derive(Debug)]
pub(crate) struct Meter {
    started: Instant,
    window: Mutex<Window>,
}

impl Default for Meter {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            window: Mutex::new(Window::default()),
        }
    }
}

impl Meter {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn window(&self) -> MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The signals a report would send now.
    pub(crate) fn read(&self) -> OriginSignals {
        let now_ms = self.now_ms();
        self.window().read(now_ms)
    }

    /// Runs `call` (the inner service's answer to one request) and counts it: sent now,
    /// answered when it returns (5xx or `Err` as an error), or given up if it is dropped first.
    pub(crate) async fn measure<B, E>(
        self: &Arc<Self>,
        call: impl Future<Output = Result<Response<B>, E>>,
    ) -> Result<Response<B>, E> {
        let passage = Passage::start(self.clone());
        let result = call.await;
        let error = result
            .as_ref()
            .map_or(true, |response| response.status().is_server_error());
        passage.answered(error);
        result
    }
}

/// One request between being passed in and its answer. Dropped unanswered, it is a request
/// given up; dropped while a panic unwinds (the handler panicked), a failed answer.
struct Passage {
    meter: Arc<Meter>,
    sent: Instant,
    answered: bool,
}

impl Passage {
    fn start(meter: Arc<Meter>) -> Self {
        let now_ms = meter.now_ms();
        meter.window().sent(now_ms);
        Self {
            meter,
            sent: Instant::now(),
            answered: false,
        }
    }

    fn answered(mut self, error: bool) {
        self.record(error);
    }

    fn record(&mut self, error: bool) {
        let latency_ms = self.sent.elapsed().as_secs_f64() * 1000.0;
        let now_ms = self.meter.now_ms();
        self.meter.window().answered(now_ms, latency_ms, error);
        self.answered = true;
    }
}

impl Drop for Passage {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        if std::thread::panicking() {
            self.record(true);
        } else {
            self.meter.window().abandoned();
        }
    }
}

/// Posts a room's signals to Vestibule.
pub(crate) struct Reporter {
    api: VestibuleApi,
    client: reqwest::Client,
    room: String,
    /// Bound on one post: the guard's timeout, at most the period.
    timeout: Duration,
}

impl Reporter {
    pub(crate) fn new(
        api: VestibuleApi,
        client: reqwest::Client,
        room: &str,
        timeout: Duration,
    ) -> Self {
        Self {
            api,
            client,
            room: room.to_owned(),
            timeout: timeout.min(REPORT_EVERY),
        }
    }

    /// One post: `Ok` on a 2xx answer, else why not.
    async fn post(&self, signals: &OriginSignals) -> Result<(), String> {
        let response = self
            .api
            .post(&self.client, &self.room, "signals")
            .timeout(self.timeout)
            .json(signals)
            .send()
            .await
            .map_err(|error| error.to_string())?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = response.text().await.unwrap_or_default();
        Err(format!("answer {status}: {body}"))
    }
}

/// Posts `meter`'s signals once a second, just after each second of its clock ends, until the
/// meter is gone (the guard was dropped).
pub(crate) async fn report_every_second(meter: Weak<Meter>, reporter: Reporter) {
    let Some(started) = meter.upgrade().map(|meter| meter.started) else {
        return;
    };
    let first = tokio::time::Instant::from_std(started) + REPORT_EVERY + AFTER_THE_SECOND;
    let mut ticks = tokio::time::interval_at(first, REPORT_EVERY);
    // A slow post skips the seconds it overran rather than posting twice at once.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut failing = false;
    loop {
        ticks.tick().await;
        // Held only to read: the post below must not keep the guard alive.
        let Some(signals) = meter.upgrade().map(|meter| meter.read()) else {
            return;
        };
        match reporter.post(&signals).await {
            Ok(()) if failing => {
                failing = false;
                tracing::info!(room = %reporter.room, "origin signals reported again");
            }
            Ok(()) => {}
            Err(reason) if !failing => {
                failing = true;
                tracing::warn!(room = %reporter.room, %reason, "origin signals not reported");
            }
            Err(_) => {}
        }
    }
}
