//! The origin's health read from a URL the operator names (`autoRate.healthUrl`, docs/DESIGN.md
//! "Closed-loop admission"): while this process leads a room whose loop is on with a health URL,
//! the room's scheduler leader says so here ([`HealthPoll::want`], each tick), and the room's
//! poller ([`run`], a task on the main runtime: never the schedulers' thread, so a slow origin
//! cannot make a tick late) `GET`s the URL once a second. A 2xx answer whose body is an
//! [`OriginSignals`] within the `POST …/signals` bounds is taken as a report received then
//! ([`super::window::OriginState::report`]), so merging, staleness and the console treat it as a
//! pushed one. Anything else reports nothing: the signals go stale, and the loop holds, then
//! falls to `min`; never rises. Failures are logged at warn at most once per [`WARN_EVERY`].

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use vestibule_shared::auto_rate::OriginSignals;
use vestibule_store::now_ms;

use crate::RoomRuntime;

/// How often the URL is read.
pub const POLL_EVERY: Duration = Duration::from_secs(1);
/// How long one read may take, connecting and the whole body included (under [`POLL_EVERY`], so
/// reads never overlap).
pub const POLL_TIMEOUT: Duration = Duration::from_millis(800);
/// A room's failed reads are logged at most once per this.
pub const WARN_EVERY: Duration = Duration::from_secs(10);
/// The largest answer read, bytes: signals take a few hundred.
const BODY_MAX_BYTES: usize = 16 * 1024;

/// Which health URL, if any, this process polls for a room: the leader's wish, kept on the
/// room's runtime and followed by the room's poller.
#[derive(Debug)]
pub struct HealthPoll {
    wanted: watch::Sender<Option<String>>,
}

impl Default for HealthPoll {
    fn default() -> Self {
        Self {
            wanted: watch::Sender::new(None),
        }
    }
}

impl HealthPoll {
    /// Poll `url` from now on (`None`: stop). Only a change wakes the poller.
    pub fn want(&self, url: Option<&str>) {
        self.wanted.send_if_modified(|wanted| {
            let changed = wanted.as_deref() != url;
            if changed {
                *wanted = url.map(str::to_owned);
            }
            changed
        });
    }

    /// The URL polled now, if any.
    pub fn wanted(&self) -> Option<String> {
        self.wanted.borrow().clone()
    }
}

/// Why a read of the health URL gave no signals.
#[derive(Debug, thiserror::Error)]
pub enum PollError {
    /// The HTTP client could not be built (the TLS roots).
    #[error("no HTTP client: {0}")]
    Client(String),
    /// No answer within [`POLL_TIMEOUT`].
    #[error("no answer within {} ms", POLL_TIMEOUT.as_millis())]
    Timeout,
    /// No connection, or it broke.
    #[error("request failed: {0}")]
    Transport(String),
    /// An answer that is not 2xx (redirects are not followed).
    #[error("answered HTTP {0}")]
    Status(u16),
    /// A body that is not an `OriginSignals` within its bounds, or too large.
    #[error("bad body: {0}")]
    Body(String),
}

impl From<reqwest::Error> for PollError {
    fn from(error: reqwest::Error) -> Self {
        if error.is_timeout() {
            return Self::Timeout;
        }
        // The causes say what happened ("connection refused"); the URL is logged apart.
        let mut causes = String::new();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            causes.push_str(": ");
            causes.push_str(&cause.to_string());
            source = cause.source();
        }
        Self::Transport(format!("{}{causes}", error.without_url()))
    }
}

/// The client every read of a room's poller goes through (its pool keeps the connection).
///
/// # Errors
/// [`PollError::Client`] when the TLS backend cannot start.
pub fn client() -> Result<reqwest::Client, PollError> {
    reqwest::Client::builder()
        .timeout(POLL_TIMEOUT)
        .connect_timeout(POLL_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!(
            "vestibule/",
            env!("CARGO_PKG_VERSION"),
            " health-poll"
        ))
        .build()
        .map_err(|error| PollError::Client(error.to_string()))
}

/// One read of `url`: the signals of a 2xx answer whose body is an [`OriginSignals`] within
/// [`OriginSignals::check`]'s bounds.
///
/// # Errors
/// [`PollError`]: no answer in time, no connection, not 2xx, or a bad or too large body.
pub async fn poll(client: &reqwest::Client, url: &str) -> Result<OriginSignals, PollError> {
    let mut response = client.get(url).send().await?;
    let status = response.status();
    if !status.is_success() {
        return Err(PollError::Status(status.as_u16()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > BODY_MAX_BYTES {
            return Err(PollError::Body(format!("over {BODY_MAX_BYTES} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    let signals: OriginSignals =
        serde_json::from_slice(&body).map_err(|error| PollError::Body(error.to_string()))?;
    signals.check().map_err(PollError::Body)?;
    Ok(signals)
}

/// A room's failed reads, logged at most once per [`WARN_EVERY`].
#[derive(Debug, Default)]
pub struct Warnings {
    last: Option<Instant>,
    /// Failures since the last warning (that one included).
    failures: u64,
}

impl Warnings {
    /// Counts a failure at `now`; `Some(failures since the last warning)` when one is due now.
    pub fn failed(&mut self, now: Instant) -> Option<u64> {
        self.failures += 1;
        let due = self
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= WARN_EVERY);
        if !due {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.failures))
    }
}

/// The URL as logged: without its query and fragment (they may hold a key).
fn shown(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or(url)
}

/// Runs `room`'s poller until `shutdown` or the room retires: idle while nothing is wanted,
/// else one read a second of the wanted URL.
pub async fn run(room: Arc<RoomRuntime>, mut shutdown: watch::Receiver<bool>) {
    let mut wanted = room.health.wanted.subscribe();
    let mut client = None;
    let mut warnings = Warnings::default();
    loop {
        let url = wanted.borrow_and_update().clone();
        let next = Instant::now() + POLL_EVERY;
        if let Some(url) = &url {
            let read = match &mut client {
                Some(client) => poll(client, url).await,
                None => match self::client() {
                    Ok(built) => poll(client.insert(built), url).await,
                    Err(error) => Err(error),
                },
            };
            // A read that ends after this process stopped leading (or the URL changed) is
            // dropped: only the leader reports.
            let current = wanted.borrow().as_deref() == Some(url.as_str());
            match read {
                Ok(signals) if current => room.origin.report(now_ms(), signals),
                Ok(_) => {}
                Err(error) => {
                    if let Some(failures) = warnings.failed(Instant::now()) {
                        tracing::warn!(
                            room = %room.name,
                            url = shown(url),
                            %error,
                            failures,
                            "autoRate's health URL gave no signals"
                        );
                    }
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep_until(next), if url.is_some() => {}
            changed = wanted.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = shutdown.wait_for(|stopping| *stopping) => return,
            () = room.retired() => return,
        }
    }
}

#[cfg(test)]
mod tests;
