//! `vestibule-guard`: a tower [`Layer`] that lets only shoppers admitted by Vestibule reach a
//! storefront's routes (checkout, cart, drop pages), and the hand-off route that gives an
//! admitted shopper the storefront's own cookie.
//!
//! Each request must carry an entry token — the signed JWT Vestibule gives a shopper at
//! `TOKEN_ISSUED` — in `X-Entry-Token` (apps) or the guard's cookie (browsers; every cookie of
//! that name is tried). The guard verifies it offline: the `EdDSA` signature with a key from
//! Vestibule's JWKS or a static public key, `exp` (no leeway), `iss`, `aud` and the `room`
//! claim. On success the verified [`EntryClaims`] are put in the request's extensions. On
//! failure a browser navigation (GET/HEAD accepting `text/html`) gets `303 See Other` to the
//! waiting room with `room` and `return` (the path and query asked for); anything else gets
//! `403` JSON `{"error": "entry_token_…", "message": …, "joinUrl": …}`.
//!
//! **Keys.** The JWKS is read when the guard is built (retried up to a bounded wait), again in
//! the background, and when a token names an unknown `kid` (at most once per cooldown). Keys
//! held stay while Vestibule is unreachable, so a token whose key is known never waits on the
//! network and is never answered 503. Only a token whose key cannot be known (Vestibule
//! unreachable since before its key was published), or with online consume one Vestibule cannot
//! be asked about, gets 503: a small HTML page for a browser, JSON for anything else, with
//! `Retry-After`.
//!
//! **Hand-off.** [`EntryGuard::handoff`] is the route Vestibule's waiting room posts an admitted
//! shopper's token to, by a top-level form navigation from another origin:
//! `POST /_vestibule/api/v1/rooms/{room}/handoff` with `entryToken` and `return`. It verifies
//! the token, sets the cookie (HttpOnly, `SameSite=Lax`, `Path=/`, the token's remaining TTL)
//! and answers `303 See Other` to `return` (a same-origin path, else `/`). The token never
//! appears in a URL.
//!
//! With [`GuardBuilder::consume_online`] the guard also uses each token once at Vestibule
//! (`POST /api/v1/rooms/{room}/entries/consume` with the origin API key): a second request with
//! the same token is refused `entry_token_used`.
//!
//! **Signals.** With [`GuardBuilder::report_signals`] the guard reports the origin's health for
//! the room's closed loop (`autoRate`: Vestibule moves the admission rate by the origin's p95
//! latency and error rate). It measures every request it lets through to the inner service —
//! sent, answered, the latency to the response headers, a 5xx answer (or a panic) as an error,
//! in flight — in per-second buckets of the last 5 s, and once a second posts the newest
//! complete seconds holding 30 answers (at most 5 s) to
//! `POST /api/v1/rooms/{room}/signals` with the origin API key, as an [`OriginSignals`]
//! (`requests: 0` when there was no traffic, so the loop can tell quiet from lost). Requests it
//! refuses are not the origin's answers and are not counted. See [`signals`].
//!
//! ```no_run
//! use axum::{routing::get, Extension, Router};
//! use vestibule_guard::{EntryClaims, EntryGuard};
//!
//! # async fn app() -> Result<Router, vestibule_guard::GuardError> {
//! let guard = EntryGuard::builder("main", "storefront")
//!     .jwks_url("https://queue.shop.example/.well-known/jwks.json")
//!     .waiting_room("https://queue.shop.example/")
//!     // Optional: the origin's health for the room's `autoRate` (origin API key).
//!     .report_signals("https://queue.shop.example", "the-origin-api-key")
//!     .build()
//!     .await?;
//! Ok(Router::new()
//!     .route("/checkout", get(|Extension(entry): Extension<EntryClaims>| async move {
//!         format!("welcome, shopper {}", entry.sub)
//!     }))
//!     .layer(guard.clone())
//!     .merge(guard.handoff()))
//! # }

mod answers;
mod builder;
mod check;
pub mod keys;
pub mod signals;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Request, Response};
use jsonwebtoken::Validation;
use serde::{Deserialize, Serialize};
use tower::{Layer, Service};

use answers::is_navigation;
pub use answers::safe_return;
pub use builder::GuardBuilder;
use keys::Keys;
use signals::Meter;
pub use signals::OriginSignals;

/// The header apps send the entry token in.
pub const ENTRY_TOKEN_HEADER: &str = "x-entry-token";

/// Where the hand-off route is mounted, `{room}` being the guard's room: the path Vestibule's
/// gate mode serves it at under its default mount prefix, so the waiting room posts to the same
/// path on either.
pub const HANDOFF_PATH: &str = "/_vestibule/api/v1/rooms/{room}/handoff";

/// At most this many tokens of a request are tried (the header, then cookies of the name).
pub const MAX_TOKEN_CANDIDATES: usize = 4;

/// The refusal codes, as Vestibule names them.
pub mod codes {
    /// No token.
    pub const TOKEN_MISSING: &str = "entry_token_missing";
    /// Not issued by this waiting room (malformed, unknown key, bad signature, wrong issuer or
    /// audience).
    pub const TOKEN_UNKNOWN: &str = "entry_token_unknown";
    /// Past its `exp`.
    pub const TOKEN_EXPIRED: &str = "entry_token_expired";
    /// Issued for another room.
    pub const TOKEN_WRONG_ROOM: &str = "entry_token_wrong_room";
    /// Used already (online consume).
    pub const TOKEN_USED: &str = "entry_token_used";
    /// The token could not be checked now (keys or Vestibule unreachable): 503.
    pub const CHECK_UNAVAILABLE: &str = "entry_check_unavailable";
}

/// The claims of an entry token (the JWT payload), as verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryClaims {
    /// Issuer (Vestibule's `--token-issuer`).
    pub iss: String,
    /// Audience (Vestibule's `--token-audience`).
    pub aud: String,
    /// The room that admitted the shopper.
    pub room: String,
    /// A non-secret tag of the shopper's ticket, never the ticket id.
    pub sub: String,
    /// Issued at, Unix seconds.
    pub iat: u64,
    /// Expiry, Unix seconds.
    pub exp: u64,
    /// Token id (what an online consume uses once).
    pub jti: String,
}

/// Why a guard could not be built.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// Neither a JWKS URL nor a static key was given.
    #[error("give the guard a JWKS URL or a static public key")]
    NoKeys,
    /// The room or audience is empty.
    #[error("the guard needs a room and an audience (Vestibule's --token-audience)")]
    Unnamed,
    /// The static key is not an Ed25519 public key in PEM.
    #[error("the static key is not an Ed25519 public key (SPKI PEM): {0}")]
    BadKey(String),
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Client(String),
}

/// The layer: wraps a service so that only requests with a valid entry token reach it.
#[derive(Clone)]
pub struct EntryGuard {
    inner: Arc<Guard>,
}

struct Guard {
    room: String,
    keys: Keys,
    validation: Validation,
    waiting_room: String,
    cookie: String,
    secure_cookie: bool,
    consume: Option<VestibuleApi>,
    /// What the guard measures of the inner service, when it reports signals.
    meter: Option<Arc<Meter>>,
    client: reqwest::Client,
    retry_after_secs: u64,
}

/// Vestibule's API as a storefront calls it: the base URL and the origin API key (online
/// consume, signals).
#[derive(Clone)]
struct VestibuleApi {
    base: String,
    key: String,
}

impl VestibuleApi {
    fn new(base: String, key: String) -> Self {
        Self { base, key }
    }

    /// `POST {base}/api/v1/rooms/{room}/{route}` with the key as `Authorization: Bearer`.
    fn post(&self, client: &reqwest::Client, room: &str, route: &str) -> reqwest::RequestBuilder {
        let url = format!(
            "{}/api/v1/rooms/{room}/{route}",
            self.base.trim_end_matches('/')
        );
        client.post(url).bearer_auth(&self.key)
    }
}

impl EntryGuard {
    /// A builder for the room `room` (the `room` claim every token must carry) and the audience
    /// `audience` (the `aud` claim: Vestibule's `--token-audience`, `storefront` unless set).
    pub fn builder(room: impl Into<String>, audience: impl Into<String>) -> GuardBuilder {
        GuardBuilder::new(room.into(), audience.into())
    }

    /// The signals the guard would report now (the newest complete seconds, as posted); `None`
    /// unless it was built with [`GuardBuilder::report_signals`]. A health page can show it.
    pub fn signals(&self) -> Option<OriginSignals> {
        self.inner.meter.as_ref().map(|meter| meter.read())
    }

    /// Whether the guard holds verification keys (a static key, or a key set read at least
    /// once). A readiness check can report it.
    pub fn has_keys(&self) -> bool {
        match &self.inner.keys {
            Keys::Static(_) => true,
            Keys::Jwks(jwks) => jwks.has_keys(),
        }
    }

    /// The hand-off route, [`HANDOFF_PATH`] for this guard's room, to merge into the
    /// storefront's router (outside the guarded routes): verifies a posted `entryToken`, sets
    /// the cookie and answers `303 See Other` to `return`; a token that does not work goes to
    /// the waiting room (303), a token that cannot be checked now gets a 503 page.
    pub fn handoff<S: Clone + Send + Sync + 'static>(&self) -> axum::Router<S> {
        let guard = self.inner.clone();
        let path = HANDOFF_PATH.replace("{room}", &self.inner.room);
        axum::Router::new().route(
            &path,
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let guard = guard.clone();
                async move { guard.hand_off(&headers, &body).await }
            }),
        )
    }
}

impl<S> Layer<S> for EntryGuard {
    type Service = EntryGuardService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        EntryGuardService {
            guard: self.inner.clone(),
            inner,
        }
    }
}

/// The service made by [`EntryGuard`].
#[derive(Clone)]
pub struct EntryGuardService<S> {
    guard: Arc<Guard>,
    inner: S,
}

impl<S> Service<Request<Body>> for EntryGuardService<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let guard = self.guard.clone();
        // The clone that was polled ready serves this request (tower's usual swap).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        // Read what the check needs first: a request body is not `Sync`, so the request
        // itself is not borrowed across the awaits below.
        let tokens = guard.tokens(request.headers());
        let navigation = is_navigation(request.method(), request.headers());
        let back = request
            .uri()
            .path_and_query()
            .map_or("/", |path| path.as_str())
            .to_owned();
        Box::pin(async move {
            match guard.check_any(&tokens).await {
                Ok(claims) => {
                    request.extensions_mut().insert(claims);
                    match &guard.meter {
                        Some(meter) => meter.measure(inner.call(request)).await,
                        None => inner.call(request).await,
                    }
                }
                Err(refusal) => Ok(guard.refuse(navigation, &back, refusal)),
            }
        })
    }
}
