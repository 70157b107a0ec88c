//! Where the guard's verification keys come from: Vestibule's JWKS or one static public key.
//!
//! The key set is fetched when the guard is built (retried for a bounded wait), then again in
//! the background every refresh period, and when a token names a `kid` not in the set (at most
//! once per cooldown, so a flood of made-up `kid`s is not a flood of requests to Vestibule). A
//! failed fetch keeps the keys held: while Vestibule is unreachable or hangs, a token whose key
//! is known is checked offline as before, never waiting on the network.

use std::collections::HashMap;
use std::sync::{RwLock, Weak};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::DecodingKey;
use tokio::sync::Mutex;

/// Default shortest time between two key-set fetches caused by unknown `kid`s.
pub const MIN_REFRESH: Duration = Duration::from_secs(10);

/// Default period of the background refresh (Vestibule's JWKS may be cached 5 minutes).
pub const REFRESH_EVERY: Duration = Duration::from_secs(60);

/// Default bound on the wait for the first key set when the guard is built.
pub const STARTUP_WAIT: Duration = Duration::from_secs(10);

/// What the key source says about a `kid`.
pub enum Lookup {
    /// The key that checks the token.
    Known(DecodingKey),
    /// The key set was read and has no such key: the token was not issued by this waiting room.
    Unknown,
    /// The key set could not be read lately, and the key is not held: cannot tell.
    Unavailable(String),
}

/// A source of verification keys.
pub enum Keys {
    /// Vestibule's `/.well-known/jwks.json`.
    Jwks(std::sync::Arc<Jwks>),
    /// One Ed25519 public key, whatever the token's `kid`.
    Static(DecodingKey),
}

/// Vestibule's key set, held by `kid`.
pub struct Jwks {
    url: String,
    client: reqwest::Client,
    held: RwLock<HashMap<String, DecodingKey>>,
    /// The last fetch for an unknown `kid` and whether it failed (also serializes such fetches).
    last_demand: Mutex<Option<(Instant, Option<String>)>>,
    min_refresh: Duration,
}

impl Jwks {
    /// A source reading `url` with `client`; nothing is held until [`Jwks::fetch`] succeeds.
    pub fn new(url: String, client: reqwest::Client, min_refresh: Duration) -> Self {
        Self {
            url,
            client,
            held: RwLock::new(HashMap::new()),
            last_demand: Mutex::new(None),
            min_refresh,
        }
    }

    /// Whether any key is held.
    pub fn has_keys(&self) -> bool {
        !self
            .held
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty()
    }

    fn held(&self, kid: &str) -> Option<DecodingKey> {
        self.held
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(kid)
            .cloned()
    }

    /// Reads the key set and holds it (in place of the one held). A failure leaves the held
    /// keys as they are.
    ///
    /// # Errors
    /// Why the set could not be read (unreachable, a non-2xx answer, a body that is no set).
    pub async fn fetch(&self) -> Result<(), String> {
        let url = &self.url;
        let set: JwkSet = self
            .client
            .get(url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|error| format!("fetching {url}: {error}"))?
            .json()
            .await
            .map_err(|error| format!("reading {url}: {error}"))?;
        let keys: HashMap<String, DecodingKey> = set
            .keys
            .iter()
            .filter_map(|jwk| {
                let kid = jwk.common.key_id.clone()?;
                Some((kid, DecodingKey::from_jwk(jwk).ok()?))
            })
            .collect();
        if keys.is_empty() {
            return Err(format!("{url} holds no usable key"));
        }
        *self
            .held
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = keys;
        Ok(())
    }

    /// The key for `kid`: held, else after one fetch (at most one per cooldown).
    pub async fn key(&self, kid: &str) -> Lookup {
        if let Some(key) = self.held(kid) {
            return Lookup::Known(key);
        }
        let mut last = self.last_demand.lock().await;
        // Another request may have fetched while this one waited.
        if let Some(key) = self.held(kid) {
            return Lookup::Known(key);
        }
        if let Some((at, failure)) = last.as_ref() {
            if at.elapsed() < self.min_refresh {
                return match failure {
                    Some(reason) => Lookup::Unavailable(reason.clone()),
                    None => Lookup::Unknown,
                };
            }
        }
        let outcome = self.fetch().await.err();
        *last = Some((Instant::now(), outcome.clone()));
        match (self.held(kid), outcome) {
            (Some(key), _) => Lookup::Known(key),
            (None, None) => Lookup::Unknown,
            (None, Some(reason)) => Lookup::Unavailable(reason),
        }
    }
}

/// Fetches the set again every `every` while the guard lives (`keys` can still be upgraded).
pub async fn refresh_in_background(keys: Weak<Jwks>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let Some(keys) = keys.upgrade() else { return };
        // A failure keeps the held keys; the next period tries again.
        let _ = keys.fetch().await;
    }
}

/// Fetches the set until it is read or `wait` has passed (retrying with a growing pause).
///
/// # Errors
/// The last failure when `wait` passed with no set read.
pub async fn first_fetch(keys: &Jwks, wait: Duration) -> Result<(), String> {
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(100);
    loop {
        let reason = match tokio::time::timeout_at(deadline.into(), keys.fetch()).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(reason)) => reason,
            Err(_) => format!("no key set from {} within {wait:?}", keys.url),
        };
        if Instant::now() + pause >= deadline {
            return Err(reason);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}
