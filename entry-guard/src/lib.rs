//! `vestibule-guard`: a tower [`Layer`] that lets only shoppers admitted by Vestibule reach a
//! storefront's routes (checkout, cart, drop pages).
//!
//! Each request must carry an entry token — the signed JWT Vestibule gives a shopper at
//! `TOKEN_ISSUED` — in `X-Entry-Token` (apps) or, if configured, a cookie. The guard verifies it
//! offline: the `EdDSA` signature with a key from Vestibule's JWKS (cached, fetched again on an
//! unknown `kid`) or a static public key, `exp`, `iss`, `aud`, and the `room` claim. On success
//! the verified [`EntryClaims`] are put in the request's extensions. On failure a browser
//! navigation (GET/HEAD accepting `text/html`) gets `303 See Other` to the waiting room with
//! `room` and `return` (the path and query asked for); anything else gets `403` JSON
//! `{"error": "entry_token_…", "message": …, "joinUrl": …}`.
//!
//! With [`GuardBuilder::consume_online`] the guard also uses each token once at Vestibule
//! (`POST /api/v1/rooms/{room}/entries/consume` with the origin API key): a second request with
//! the same token is refused `entry_token_used`; if Vestibule cannot be reached the answer is 503.
//!
//! ```no_run
//! use axum::{routing::get, Extension, Router};
//! use vestibule_guard::{EntryClaims, EntryGuard};
//!
//! # fn app() -> Result<Router, vestibule_guard::GuardError> {
//! let guard = EntryGuard::builder("main")
//!     .jwks_url("https://queue.shop.example/.well-known/jwks.json")
//!     .waiting_room("https://queue.shop.example/")
//!     .build()?;
//! Ok(Router::new()
//!     .route("/checkout", get(|Extension(entry): Extension<EntryClaims>| async move {
//!         format!("welcome, shopper {}", entry.sub)
//!     }))
//!     .layer(guard))
//! # }
//! ```

pub mod keys;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Method, Request, Response, StatusCode};
use axum::response::IntoResponse;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use tower::{Layer, Service};
pub use vestibule_shared::entry::EntryClaims;
use vestibule_shared::{error_code, ENTRY_TOKEN_HEADER};

use keys::Keys;

/// Why a guard could not be built.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// Neither a JWKS URL nor a static key was given.
    #[error("give the guard a JWKS URL or a static public key")]
    NoKeys,
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
    consume: Option<(String, String)>,
    timeout: Duration,
    min_refresh: Duration,
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

    /// The expected `aud` (Vestibule's `--token-audience`; default `storefront`).
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = audience.into();
        self
    }

    /// The waiting room's page; refused navigations are sent there with `room` and `return`
    /// added to its query (default `/_vestibule/`, gate mode on the same origin).
    pub fn waiting_room(mut self, url: impl Into<String>) -> Self {
        self.waiting_room = url.into();
        self
    }

    /// Also read the token from this cookie (e.g. the one gate mode sets).
    pub fn cookie(mut self, name: impl Into<String>) -> Self {
        self.cookie = Some(name.into());
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

    /// Bound on each call to Vestibule (JWKS fetch, consume); default 3 s.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The layer.
    ///
    /// # Errors
    /// [`GuardError`] when no key source is given, the static key does not parse, or the HTTP
    /// client cannot be built.
    pub fn build(self) -> Result<EntryGuard, GuardError> {
        let client = reqwest::Client::builder()
            .timeout(self.timeout)
            .build()
            .map_err(|error| GuardError::Client(error.to_string()))?;
        let keys = match (self.static_key, self.jwks_url) {
            (Some(pem), _) => Keys::Static(
                DecodingKey::from_ed_pem(pem.as_bytes())
                    .map_err(|error| GuardError::BadKey(error.to_string()))?,
            ),
            (None, Some(url)) => Keys::Jwks {
                url,
                client: client.clone(),
                cache: Default::default(),
                fetched: Default::default(),
                min_refresh: self.min_refresh,
            },
            (None, None) => return Err(GuardError::NoKeys),
        };
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.leeway = 0;
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        Ok(EntryGuard {
            inner: Arc::new(Guard {
                room: self.room,
                keys,
                validation,
                waiting_room: self.waiting_room,
                cookie: self.cookie,
                consume: self.consume,
                client,
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
    cookie: Option<String>,
    consume: Option<(String, String)>,
    client: reqwest::Client,
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
}

impl EntryGuard {
    /// A builder for the room `room` (the `room` claim every token must carry).
    pub fn builder(room: impl Into<String>) -> GuardBuilder {
        GuardBuilder {
            room: room.into(),
            issuer: "vestibule".into(),
            audience: "storefront".into(),
            jwks_url: None,
            static_key: None,
            waiting_room: "/_vestibule/".into(),
            cookie: None,
            consume: None,
            timeout: Duration::from_secs(3),
            min_refresh: keys::MIN_REFRESH,
        }
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
        let token = guard.token(&request).map(str::to_owned);
        let navigation = is_navigation(&request);
        let join = guard.join_url(&request);
        Box::pin(async move {
            match guard.check(token.as_deref()).await {
                Ok(claims) => {
                    request.extensions_mut().insert(claims);
                    inner.call(request).await
                }
                Err(refusal) => Ok(refuse(navigation, join, refusal)),
            }
        })
    }
}

impl Guard {
    /// The token of a request: `X-Entry-Token`, else the configured cookie.
    fn token<'r>(&self, request: &'r Request<Body>) -> Option<&'r str> {
        if let Some(value) = request.headers().get(ENTRY_TOKEN_HEADER) {
            return value.to_str().ok().map(str::trim);
        }
        let name = self.cookie.as_deref()?;
        request
            .headers()
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value)
    }

    /// Verifies the request's token (and uses it online if configured).
    async fn check(&self, token: Option<&str>) -> Result<EntryClaims, Refusal> {
        let token = token.ok_or_else(|| {
            Refusal::token(
                error_code::TOKEN_MISSING,
                "this page needs admission: join the waiting room",
            )
        })?;
        let not_issued = || {
            Refusal::token(
                error_code::TOKEN_UNKNOWN,
                "this entry token was not issued by the waiting room",
            )
        };
        let header = jsonwebtoken::decode_header(token).map_err(|_| not_issued())?;
        if header.alg != Algorithm::EdDSA {
            return Err(not_issued());
        }
        let key = self
            .keys
            .key(header.kid.as_deref())
            .await
            .map_err(|reason| Refusal {
                status: StatusCode::SERVICE_UNAVAILABLE,
                code: "entry_check_unavailable",
                message: format!("the waiting room's keys could not be read: {reason}"),
            })?
            .ok_or_else(not_issued)?;
        let claims = jsonwebtoken::decode::<EntryClaims>(token, &key, &self.validation)
            .map_err(|error| match error.kind() {
                ErrorKind::ExpiredSignature => Refusal::token(
                    error_code::TOKEN_EXPIRED,
                    "this entry token has expired; join the queue again",
                ),
                _ => not_issued(),
            })?
            .claims;
        if claims.room != self.room {
            return Err(Refusal::token(
                error_code::TOKEN_WRONG_ROOM,
                "this entry token is for another room",
            ));
        }
        if let Some((base, key)) = &self.consume {
            self.consume(base, key, token).await?;
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
        let unavailable = |reason: String| Refusal {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: "entry_check_unavailable",
            message: format!("the waiting room could not confirm this entry: {reason}"),
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
                error_code::TOKEN_USED,
                "this entry token was already used",
            )),
            StatusCode::FORBIDDEN => {
                let body: serde_json::Value = response.json().await.unwrap_or_default();
                match body["error"].as_str() {
                    Some(error_code::TOKEN_EXPIRED) => Err(Refusal::token(
                        error_code::TOKEN_EXPIRED,
                        "this entry token has expired; join the queue again",
                    )),
                    Some(code) if code.starts_with("entry_token_") => Err(Refusal::token(
                        error_code::TOKEN_UNKNOWN,
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

    /// Where a refused shopper joins: the waiting room with `room` and `return`.
    fn join_url(&self, request: &Request<Body>) -> String {
        let back = request
            .uri()
            .path_and_query()
            .map_or("/", |path| path.as_str());
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("room", &self.room)
            .append_pair("return", back)
            .finish();
        let separator = if self.waiting_room.contains('?') {
            '&'
        } else {
            '?'
        };
        format!("{}{separator}{query}", self.waiting_room)
    }
}

/// Whether a request is a browser navigation: GET/HEAD accepting `text/html`.
fn is_navigation(request: &Request<Body>) -> bool {
    matches!(*request.method(), Method::GET | Method::HEAD)
        && request
            .headers()
            .get(header::ACCEPT)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|accept| accept.contains("text/html"))
}

/// 303 to the waiting room (`join`) for a navigation refused a token, else JSON.
fn refuse(navigation: bool, join: String, refusal: Refusal) -> Response<Body> {
    if navigation && refusal.status == StatusCode::FORBIDDEN {
        return (StatusCode::SEE_OTHER, [(header::LOCATION, join)]).into_response();
    }
    let body = serde_json::json!({
        "error": refusal.code,
        "message": refusal.message,
        "joinUrl": join,
    });
    (refusal.status, axum::Json(body)).into_response()
}
