//! [`GuardBuilder`]: the guard's options, and the build that reads the keys and starts the
//! background tasks (the key refresh; with [`GuardBuilder::report_signals`], the signals report).

use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::{Algorithm, DecodingKey, Validation};

use crate::keys::{self, Jwks, Keys};
use crate::signals::{self, Meter};
use crate::{EntryGuard, Guard, GuardError, VestibuleApi};

/// Builds an [`EntryGuard`]; start with [`EntryGuard::builder`].
pub struct GuardBuilder {
    room: String,
    issuer: String,
    audience: String,
    jwks_url: Option<String>,
    static_key: Option<String>,
    waiting_room: String,
    cookie: Option<String>,
    secure_cookie: bool,
    consume: Option<VestibuleApi>,
    report: Option<VestibuleApi>,
    timeout: Duration,
    min_refresh: Duration,
    refresh_every: Duration,
    startup_wait: Duration,
}

impl GuardBuilder {
    /// The defaults for `room` and `audience` ([`EntryGuard::builder`]).
    pub(crate) fn new(room: String, audience: String) -> Self {
        Self {
            room,
            issuer: "vestibule".into(),
            audience,
            jwks_url: None,
            static_key: None,
            waiting_room: "/_vestibule/".into(),
            cookie: None,
            secure_cookie: true,
            consume: None,
            report: None,
            timeout: Duration::from_secs(3),
            min_refresh: keys::MIN_REFRESH,
            refresh_every: keys::REFRESH_EVERY,
            startup_wait: keys::STARTUP_WAIT,
        }
    }

    /// Vestibule's key set, e.g. `https://queue.shop.example/.well-known/jwks.json`.
    pub fn jwks_url(mut self, url: impl Into<String>) -> Self {
        self.jwks_url = Some(url.into());
        self
    }

    /// One static Ed25519 public key (SPKI PEM) instead of the JWKS (no rotation then).
    pub fn static_key_pem(mut self, pem: impl Into<String>) -> Self {
        self.static_key = Some(pem.into());
        self
    }

    /// The expected `iss` (Vestibule's `--token-issuer`; default `vestibule`).
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = issuer.into();
        self
    }

    /// The waiting room's page; refused navigations are sent there with `room` and `return`
    /// added to its query (default `/_vestibule/`, gate mode on the same origin).
    pub fn waiting_room(mut self, url: impl Into<String>) -> Self {
        self.waiting_room = url.into();
        self
    }

    /// The cookie the token is read from and the hand-off sets (default
    /// `vestibule_entry_{room}`, the name gate mode uses).
    pub fn cookie(mut self, name: impl Into<String>) -> Self {
        self.cookie = Some(name.into());
        self
    }

    /// Whether the hand-off's cookie is `Secure` (default `true`; `false` only for a storefront
    /// served over plain HTTP in development, as browsers drop `Secure` cookies there).
    pub fn secure_cookie(mut self, secure: bool) -> Self {
        self.secure_cookie = secure;
        self
    }

    /// Use each token once at Vestibule (`base_url`, e.g. `https://queue.shop.example`) with its
    /// `--origin-api-key`: a replayed token is refused even within its TTL.
    pub fn consume_online(
        mut self,
        base_url: impl Into<String>,
        origin_key: impl Into<String>,
    ) -> Self {
        self.consume = Some(VestibuleApi::new(base_url.into(), origin_key.into()));
        self
    }

    /// Report the origin's health to Vestibule (`base_url`, e.g. `https://queue.shop.example`,
    /// with its `--origin-api-key`) for the room's closed loop (`autoRate`): the guard measures
    /// every request it lets through to the routes it guards (sent, answered, latency to the
    /// response headers, 5xx as errors, in flight) and once a second posts the signals of the
    /// newest complete seconds to `POST {base_url}/api/v1/rooms/{room}/signals`
    /// ([`signals`](crate::signals)). A failed post is logged and never touches a shopper's
    /// request; the reporting stops when the last clone of the guard is dropped.
    pub fn report_signals(
        mut self,
        base_url: impl Into<String>,
        origin_key: impl Into<String>,
    ) -> Self {
        self.report = Some(VestibuleApi::new(base_url.into(), origin_key.into()));
        self
    }

    /// Shortest time between two JWKS fetches caused by an unknown `kid` (default
    /// [`keys::MIN_REFRESH`], 10 s).
    pub fn jwks_min_refresh(mut self, interval: Duration) -> Self {
        self.min_refresh = interval;
        self
    }

    /// Period of the background JWKS refresh (default [`keys::REFRESH_EVERY`], 60 s).
    pub fn jwks_refresh_every(mut self, every: Duration) -> Self {
        self.refresh_every = every;
        self
    }

    /// How long [`GuardBuilder::build`] waits for the first key set (default
    /// [`keys::STARTUP_WAIT`], 10 s); past it the guard starts without keys and keeps trying.
    pub fn startup_wait(mut self, wait: Duration) -> Self {
        self.startup_wait = wait;
        self
    }

    /// Bound on each call to Vestibule (JWKS fetch, consume, and a signals report, which is
    /// also bounded by its 1 s period); default 3 s.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The layer, with the key set read (or the bounded wait for it over), its background
    /// refresh started and, with [`GuardBuilder::report_signals`], the report. Needs a tokio
    /// runtime.
    ///
    /// # Errors
    /// [`GuardError`] when no key source is given, the room or audience is empty, the static
    /// key does not parse, or the HTTP client cannot be built. An unreachable Vestibule is no
    /// error: the guard starts and keeps fetching.
    pub async fn build(self) -> Result<EntryGuard, GuardError> {
        if self.room.trim().is_empty() || self.audience.trim().is_empty() {
            return Err(GuardError::Unnamed);
        }
        let client = reqwest::Client::builder()
            .timeout(self.timeout)
            .build()
            .map_err(|error| GuardError::Client(error.to_string()))?;
        let keys = match (self.static_key, self.jwks_url) {
            (Some(pem), _) => Keys::Static(
                DecodingKey::from_ed_pem(pem.as_bytes())
                    .map_err(|error| GuardError::BadKey(error.to_string()))?,
            ),
            (None, Some(url)) => {
                let jwks = Arc::new(Jwks::new(url, client.clone(), self.min_refresh));
                // Unreachable now is no reason not to start: the refresh goes on.
                let _ = keys::first_fetch(&jwks, self.startup_wait).await;
                tokio::spawn(keys::refresh_in_background(
                    Arc::downgrade(&jwks),
                    self.refresh_every,
                ));
                Keys::Jwks(jwks)
            }
            (None, None) => return Err(GuardError::NoKeys),
        };
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.leeway = 0;
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let cookie = self
            .cookie
            .unwrap_or_else(|| format!("vestibule_entry_{}", self.room));
        let meter = self.report.map(|api| {
            let meter = Arc::new(Meter::default());
            tokio::spawn(signals::report_every_second(
                Arc::downgrade(&meter),
                signals::Reporter::new(api, client.clone(), &self.room, self.timeout),
            ));
            meter
        });
        Ok(EntryGuard {
            inner: Arc::new(Guard {
                keys,
                validation,
                waiting_room: self.waiting_room,
                cookie,
                secure_cookie: self.secure_cookie,
                consume: self.consume,
                meter,
                client,
                retry_after_secs: 2,
                room: self.room,
            }),
        })
    }
}
