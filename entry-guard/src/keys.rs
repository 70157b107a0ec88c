//! Where the guard's verification keys come from: Vestibule's JWKS (cached; fetched again when a
//! token names an unknown `kid`, at most once per [`MIN_REFRESH`]) or one static public key.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::DecodingKey;
use tokio::sync::{Mutex, RwLock};

/// Default shortest time between two JWKS fetches caused by unknown `kid`s (a flood of forged
/// `kid`s must not become a flood of requests to Vestibule).
pub const MIN_REFRESH: Duration = Duration::from_secs(10);

/// A source of verification keys.
pub enum Keys {
    /// Vestibule's `/.well-known/jwks.json`, cached by `kid`.
    Jwks {
        /// The JWKS URL.
        url: String,
        /// HTTP client.
        client: reqwest::Client,
        /// Keys by `kid`.
        cache: RwLock<HashMap<String, DecodingKey>>,
        /// When the set was last fetched (serializes fetches).
        fetched: Mutex<Option<Instant>>,
        /// Shortest time between two fetches.
        min_refresh: Duration,
    },
    /// One Ed25519 public key, whatever the token's `kid`.
    Static(DecodingKey),
}

impl Keys {
    /// The key for `kid`: from the cache, else after fetching the set again (rate-limited).
    pub async fn key(&self, kid: Option<&str>) -> Result<Option<DecodingKey>, String> {
        let (url, client, cache, fetched) = match self {
            Self::Static(key) => return Ok(Some(key.clone())),
            Self::Jwks {
                url,
                client,
                cache,
                fetched,
                min_refresh,
            } => (url, client, cache, (fetched, *min_refresh)),
        };
        let Some(kid) = kid else { return Ok(None) };
        if let Some(key) = cache.read().await.get(kid) {
            return Ok(Some(key.clone()));
        }
        let (fetched, min_refresh) = fetched;
        let mut last = fetched.lock().await;
        // Another request may have fetched while this one waited.
        if let Some(key) = cache.read().await.get(kid) {
            return Ok(Some(key.clone()));
        }
        if last.is_some_and(|at| at.elapsed() < min_refresh) {
            return Ok(None);
        }
        *last = Some(Instant::now());
        let set: JwkSet = client
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
        let found = keys.get(kid).cloned();
        *cache.write().await = keys;
        Ok(found)
    }
}
