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
//! ```no_run
//! use axum::{routing::get, Extension, Router};
//! use vestibule_guard::{EntryClaims, EntryGuard};
//!
//! # async fn app() -> Result<Router, vestibule_guard::GuardError> {
//! let guard = EntryGuard::builder("main", "storefront")
//!     .jwks_url("https://queue.shop.example/.well-known/jwks.json")
//!     .waiting_room("https://queue.shop.example/")
//!     .build()
//!     .await?;
//! Ok(Router::new()
//!     .route("/checkout", get(|Extension(entry): Extension<EntryClaims>| async move {
//!         format!("welcome, shopper {}", entry.sub)
//!     }))
//!     .layer(guard.clone())
//!     .merge(guard.handoff()))
//! # }
//! ```

pub mod keys;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use axum::response::IntoResponse;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};
use tower::{Layer, Service};

use keys::{Jwks, Keys, Lookup};

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
    consume: Option<(String, String)>,
    timeout: Duration,
    min_refresh: Duration,
    refresh_every: Duration,
    startup_wait: Duration,
}

impl GuardBuilder {
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
        self.consume = Some((base_url.into(), origin_key.into()));
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

    /// Bound on each call to Vestibule (JWKS fetch, consume); default 3 s.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The layer, with the key set read (or the bounded wait for it over) and its background
    /// refresh started. Needs a tokio runtime.
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
        Ok(EntryGuard {
            inner: Arc::new(Guard {
                keys,
                validation,
                waiting_room: self.waiting_room,
                cookie,
                secure_cookie: self.secure_cookie,
                consume: self.consume,
                client,
                retry_after_secs: 2,
                room: self.room,
            }),
        })
    }
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
    consume: Option<(String, String)>,
    client: reqwest::Client,
    retry_after_secs: u64,
}

/// Why a request was refused: an `entry_token_*` code and a message.
struct Refusal {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl Refusal {
    fn token(code: &'static str, message: &str) -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            code,
            message: message.to_owned(),
        }
    }

    fn unavailable(message: String) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: codes::CHECK_UNAVAILABLE,
            message,
        }
    }
}

impl EntryGuard {
    /// A builder for the room `room` (the `room` claim every token must carry) and the audience
    /// `audience` (the `aud` claim: Vestibule's `--token-audience`, `storefront` unless set).
    pub fn builder(room: impl Into<String>, audience: impl Into<String>) -> GuardBuilder {
        GuardBuilder {
            room: room.into(),
            issuer: "vestibule".into(),
            audience: audience.into(),
            jwks_url: None,
            static_key: None,
            waiting_room: "/_vestibule/".into(),
            cookie: None,
            secure_cookie: true,
            consume: None,
            timeout: Duration::from_secs(3),
            min_refresh: keys::MIN_REFRESH,
            refresh_every: keys::REFRESH_EVERY,
            startup_wait: keys::STARTUP_WAIT,
        }
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
                    inner.call(request).await
                }
                Err(refusal) => Ok(guard.refuse(navigation, &back, refusal)),
            }
        })
    }
}

impl Guard {
    /// The tokens of a request, in the order they are tried: a non-empty `X-Entry-Token`, then
    /// every cookie of the guard's name (a browser sends all it holds: one planted by a
    /// sibling subdomain must not hide the good one); at most [`MAX_TOKEN_CANDIDATES`].
    fn tokens(&self, headers: &HeaderMap) -> Vec<String> {
        let mut found: Vec<String> = headers
            .get(ENTRY_TOKEN_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
            .filter(|token| !token.is_empty())
            .map(str::to_owned)
            .into_iter()
            .collect();
        found.extend(
            headers
                .get_all(header::COOKIE)
                .iter()
                .filter_map(|value| value.to_str().ok())
                .flat_map(|value| value.split(';'))
                .filter_map(|pair| pair.trim().split_once('='))
                .filter(|(name, _)| *name == self.cookie)
                // A quoted value is the same value (RFC 6265 §4.1.1).
                .map(|(_, value)| value.trim().trim_matches('"').to_owned())
                .filter(|value| !value.is_empty()),
        );
        found.truncate(MAX_TOKEN_CANDIDATES);
        found
    }

    /// The first of `tokens` that passes; else why not: 503 when a token could not be checked
    /// now (it may be good: the shopper should retry, not queue again), else the last refusal.
    async fn check_any(&self, tokens: &[String]) -> Result<EntryClaims, Refusal> {
        let (mut unavailable, mut refused) = (None, None);
        for token in tokens {
            match self.check(token).await {
                Ok(claims) => return Ok(claims),
                Err(refusal) if refusal.status == StatusCode::SERVICE_UNAVAILABLE => {
                    unavailable = Some(refusal);
                }
                Err(refusal) => refused = Some(refusal),
            }
        }
        Err(unavailable.or(refused).unwrap_or_else(|| {
            Refusal::token(
                codes::TOKEN_MISSING,
                "this page needs admission: join the waiting room",
            )
        }))
    }

    /// Verifies one token offline (and uses it online if configured).
    async fn check(&self, token: &str) -> Result<EntryClaims, Refusal> {
        let claims = self.verify(token).await?;
        if let Some((base, key)) = &self.consume {
            self.consume(base, key, token).await?;
        }
        Ok(claims)
    }

    /// The offline check: signature by a known key, `exp`, `iss`, `aud`, `room`.
    async fn verify(&self, token: &str) -> Result<EntryClaims, Refusal> {
        let not_issued = || {
            Refusal::token(
                codes::TOKEN_UNKNOWN,
                "this entry token was not issued by the waiting room",
            )
        };
        let header = jsonwebtoken::decode_header(token).map_err(|_| not_issued())?;
        if header.alg != Algorithm::EdDSA {
            return Err(not_issued());
        }
        let key = match &self.keys {
            Keys::Static(key) => key.clone(),
            Keys::Jwks(jwks) => {
                let kid = header.kid.as_deref().ok_or_else(not_issued)?;
                match jwks.key(kid).await {
                    Lookup::Known(key) => key,
                    Lookup::Unknown => return Err(not_issued()),
                    Lookup::Unavailable(reason) => {
                        return Err(Refusal::unavailable(format!(
                            "the waiting room's keys could not be read: {reason}"
                        )))
                    }
                }
            }
        };
        let claims = jsonwebtoken::decode::<EntryClaims>(token, &key, &self.validation)
            .map_err(|error| match error.kind() {
                ErrorKind::ExpiredSignature => Refusal::token(
                    codes::TOKEN_EXPIRED,
                    "this entry token has expired; join the queue again",
                ),
                _ => not_issued(),
            })?
            .claims;
        if claims.room != self.room {
            return Err(Refusal::token(
                codes::TOKEN_WRONG_ROOM,
                "this entry token is for another room",
            ));
        }
        Ok(claims)
    }

    /// Uses the token once at Vestibule.
    async fn consume(&self, base: &str, key: &str, token: &str) -> Result<(), Refusal> {
        let url = format!(
            "{}/api/v1/rooms/{}/entries/consume",
            base.trim_end_matches('/'),
            self.room
        );
        let unavailable = |reason: String| {
            Refusal::unavailable(format!(
                "the waiting room could not confirm this entry: {reason}"
            ))
        };
        let response = self
            .client
            .post(&url)
            .bearer_auth(key)
            .json(&serde_json::json!({ "entryToken": token }))
            .send()
            .await
            .map_err(|error| unavailable(error.to_string()))?;
        match response.status() {
            StatusCode::OK => Ok(()),
            StatusCode::CONFLICT => Err(Refusal::token(
                codes::TOKEN_USED,
                "this entry token was already used",
            )),
            StatusCode::FORBIDDEN => {
                let body: serde_json::Value = response.json().await.unwrap_or_default();
                match body["error"].as_str() {
                    Some(codes::TOKEN_EXPIRED) => Err(Refusal::token(
                        codes::TOKEN_EXPIRED,
                        "this entry token has expired; join the queue again",
                    )),
                    Some(code) if code.starts_with("entry_token_") => Err(Refusal::token(
                        codes::TOKEN_UNKNOWN,
                        "this entry token was not issued by the waiting room",
                    )),
                    _ => Err(unavailable(format!(
                        "the origin API key was refused: {body}"
                    ))),
                }
            }
            other => Err(unavailable(format!("answer {other}"))),
        }
    }

    /// Where a refused shopper joins: the waiting room with `room` and `return` (`back`).
    fn join_url(&self, back: &str) -> String {
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("room", &self.room)
            .append_pair("return", safe_return(back))
            .finish();
        let separator = if self.waiting_room.contains('?') {
            '&'
        } else {
            '?'
        };
        format!("{}{separator}{query}", self.waiting_room)
    }

    /// The answer to a refused request: a navigation refused a token goes to the waiting room
    /// (303); one whose token cannot be checked now gets an HTML page (503); anything else JSON.
    fn refuse(&self, navigation: bool, back: &str, refusal: Refusal) -> Response<Body> {
        let join = self.join_url(back);
        let unavailable = refusal.status == StatusCode::SERVICE_UNAVAILABLE;
        let mut response = match (navigation, unavailable) {
            (true, false) => (StatusCode::SEE_OTHER, [(header::LOCATION, join)]).into_response(),
            (true, true) => (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::response::Html(RETRY_PAGE),
            )
                .into_response(),
            (false, _) => {
                let body = serde_json::json!({
                    "error": refusal.code,
                    "message": refusal.message,
                    "joinUrl": join,
                });
                (refusal.status, axum::Json(body)).into_response()
            }
        };
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if unavailable {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(self.retry_after_secs),
            );
        }
        response
    }

    /// The hand-off: a posted token for the cookie, then `return`.
    async fn hand_off(&self, headers: &HeaderMap, body: &[u8]) -> Response<Body> {
        let is_form = headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(';').next())
            .is_some_and(|kind| {
                kind.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            });
        if !is_form {
            let body = serde_json::json!({
                "error": "unsupported_media_type",
                "message": "send the body as Content-Type: application/x-www-form-urlencoded",
            });
            return (StatusCode::UNSUPPORTED_MEDIA_TYPE, axum::Json(body)).into_response();
        }
        let (mut token, mut back) = (String::new(), "/".to_owned());
        for (name, value) in form_urlencoded::parse(body) {
            match name.as_ref() {
                "entryToken" => token = value.trim().to_owned(),
                "return" => back = value.into_owned(),
                _ => {}
            }
        }
        let back = safe_return(&back).to_owned();
        // Verified offline only: an online consume uses the token on the page it opens.
        let claims = match self.verify(&token).await {
            Ok(claims) => claims,
            Err(refusal) => return self.refuse(true, &back, refusal),
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let max_age = claims.exp.saturating_sub(now).max(1);
        let cookie = format!(
            "{}={token}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Lax{}",
            self.cookie,
            if self.secure_cookie { "; Secure" } else { "" }
        );
        let mut response = StatusCode::SEE_OTHER.into_response();
        let out = response.headers_mut();
        if let (Ok(location), Ok(cookie)) =
            (HeaderValue::from_str(&back), HeaderValue::from_str(&cookie))
        {
            out.insert(header::LOCATION, location);
            out.insert(header::SET_COOKIE, cookie);
        }
        out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        // The page after it need not learn the waiting room's URL.
        out.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
        response
    }
}

/// What a browser is shown when its token cannot be checked now (503, `Retry-After`).
const RETRY_PAGE: &str = "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\">\
    <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
    <title>One moment</title><main><h1>One moment</h1>\
    <p>The waiting room cannot confirm your entry right now. Your place is kept.</p>\
    <p><a href=\"\">Try again</a></p></main></html>";

/// Whether a request is a browser navigation: GET/HEAD accepting `text/html`.
fn is_navigation(method: &Method, headers: &HeaderMap) -> bool {
    matches!(*method, Method::GET | Method::HEAD)
        && headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .any(|accept| accept.to_ascii_lowercase().contains("text/html"))
}

/// `candidate` when it is a clean same-origin path, else `/`: one leading `/` (not `//`), no
/// `\`, no control character, at most 2048 bytes, and a path part (before `?`/`#`) with no
/// escaped `/`, `\` or control character and no dot segment — the rule Vestibule's gate applies
/// to `return`.
pub fn safe_return(candidate: &str) -> &str {
    let path = candidate.split(['?', '#']).next().unwrap_or_default();
    let decoded: Vec<u8> = percent_decode(path.as_bytes());
    let decoded_ok = std::str::from_utf8(&decoded).is_ok_and(|text| {
        !text.chars().any(char::is_control)
            && !text.contains('\\')
            && text
                .split('/')
                .all(|segment| segment != "." && segment != "..")
    });
    let lower = path.to_ascii_lowercase();
    let safe = candidate.starts_with('/')
        && !candidate.starts_with("//")
        && !candidate.contains('\\')
        && !candidate.chars().any(char::is_control)
        && candidate.len() <= 2048
        && !lower.contains("%2f")
        && !lower.contains("%5c")
        && decoded_ok;
    if safe {
        candidate
    } else {
        "/"
    }
}

/// `bytes` with each `%XX` escape decoded once (a malformed escape stays as it is).
fn percent_decode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(u8::try_from(high * 16 + low).unwrap_or(b'%'));
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_clean_same_origin_paths_are_returned_to() {
        for kept in ["/", "/checkout?size=42", "/checkout?x=%2F", "/a/b#top"] {
            assert_eq!(safe_return(kept), kept);
        }
        for evil in [
            "",
            "//evil.example",
            "/\\evil.example",
            "https://evil.example/",
            "/%2F%2Fevil.example",
            "/%5Cevil.example",
            "/%09/evil.example",
            "/%0a/x",
            "/%0B/x",
            "/%0d/x",
            "/checkout/../admin",
            "/\t/evil.example",
        ] {
            assert_eq!(safe_return(evil), "/", "{evil:?}");
        }
    }
}
