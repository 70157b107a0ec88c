//! Signing and verifying entry tokens: [`TokenService`].
//!
//! A token is `base64url(header).base64url(claims).base64url(signature)` with header
//! `{"alg":"EdDSA","typ":"JWT","kid":…}` and the claims of
//! [`vestibule_shared::entry::EntryClaims`]: `iss`, `aud`, `room`, `sub` (the ticket's log tag,
//! never the ticket id), `iat`, `exp` (Unix seconds) and `jti` (the store's token of this
//! admission).
//!
//! Verifying costs an Ed25519 signature check (tens of microseconds); a gated path sees the same
//! token on every request of a shopper's checkout, so tokens that verified are remembered by the
//! SHA-256 of their text until their `exp` ([`VERIFIED_CACHE_CAPACITY`] of them, least recently
//! used first out). Only tokens that verified are kept: garbage cannot fill the cache, and the key
//! ring never changes while the process runs, so a remembered verdict stays true until `exp`.

use std::sync::Arc;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Header, Validation};
use sha2::{Digest as _, Sha256};
use vestibule_shared::entry::EntryClaims;

use super::keys::KeyRing;
use vestibule_store::ids::log_tag;

/// Why a token does not verify offline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not a token of this waiting room: malformed, unknown `kid`, bad signature, another
    /// issuer or audience, or a wrong algorithm.
    NotIssued,
    /// Its `exp` has passed.
    Expired,
    /// Signed by this waiting room for another room (named).
    WrongRoom(String),
}

/// How many verified tokens [`TokenService::verify`] remembers (about 150 B each: a 32-byte
/// digest and the claims), so at most ~10 MB. Admission rate × token TTL beyond this only means
/// some repeat requests check the signature again.
pub const VERIFIED_CACHE_CAPACITY: usize = 65_536;

/// Signs and verifies entry tokens with a [`KeyRing`], for one issuer and audience.
pub struct TokenService {
    keys: KeyRing,
    issuer: String,
    audience: String,
    /// SHA-256 of a token's text → its claims, for tokens whose signature, issuer and audience
    /// held (the room and `exp` are checked again on every hit).
    verified: quick_cache::sync::Cache<[u8; 32], Arc<EntryClaims>>,
}

impl TokenService {
    /// A service signing with `keys`' current key as `issuer` for `audience`.
    pub fn new(keys: KeyRing, issuer: &str, audience: &str) -> Self {
        Self {
            keys,
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
            verified: quick_cache::sync::Cache::new(VERIFIED_CACHE_CAPACITY),
        }
    }

    /// The key ring (for the JWKS).
    pub fn keys(&self) -> &KeyRing {
        &self.keys
    }

    /// The entry token of an admission: `jti` = the store's token `store_token`, `exp` = its
    /// expiry `expires_at_ms` (Unix ms, rounded down to seconds), `iat` = `exp` − the room's
    /// token TTL `ttl_ms` (never later than `now_ms`), `sub` = the log tag of `ticket_id`.
    ///
    /// The same inputs give the same string (Ed25519 signatures are deterministic), so every poll
    /// and SSE event of a ticket carries the same token. `None` only if signing fails, which a
    /// key that loaded cannot do (logged).
    pub fn sign(
        &self,
        room: &str,
        ticket_id: &str,
        store_token: &str,
        expires_at_ms: u64,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Option<String> {
        let claims = EntryClaims {
            iss: self.issuer.clone(),
            aud: self.audience.clone(),
            room: room.to_owned(),
            sub: log_tag(ticket_id),
            iat: expires_at_ms.saturating_sub(ttl_ms).min(now_ms) / 1000,
            exp: expires_at_ms / 1000,
            jti: store_token.to_owned(),
        };
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(self.keys.current_kid().to_owned());
        match jsonwebtoken::encode(&header, &claims, self.keys.signer()) {
            Ok(token) => Some(token),
            Err(error) => {
                tracing::error!(%error, "signing an entry token failed");
                None
            }
        }
    }

    /// Verifies `token` offline for `room`: an `EdDSA` signature by a key of the ring (current or
    /// previous, by `kid`), `iss` and `aud` as configured, `exp` not passed (no leeway: a token
    /// works through the second `exp` names, as `jsonwebtoken` reads it), and the `room` claim.
    /// Whether the token was used or released is the store's to say (by `jti`).
    ///
    /// A token that verified before is answered from memory (see the module docs); the room and
    /// `exp` are checked on every call either way.
    ///
    /// # Errors
    /// The [`Refusal`]; a token of another room is told apart only once its signature holds.
    pub fn verify(&self, token: &str, room: &str) -> Result<EntryClaims, Refusal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let claims = match self.verified.get(&digest) {
            Some(claims) if claims.exp >= jsonwebtoken::get_current_timestamp() => claims,
            Some(_) => {
                self.verified.remove(&digest);
                return Err(Refusal::Expired);
            }
            None => {
                let claims = Arc::new(self.verify_signature(token)?);
                self.verified.insert(digest, Arc::clone(&claims));
                claims
            }
        };
        if claims.room != room {
            return Err(Refusal::WrongRoom(claims.room.clone()));
        }
        Ok(EntryClaims::clone(&claims))
    }

    /// The uncached check: header, signature, `iss`, `aud` and `exp`; not the room.
    fn verify_signature(&self, token: &str) -> Result<EntryClaims, Refusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| Refusal::NotIssued)?;
        if header.alg != Algorithm::EdDSA {
            return Err(Refusal::NotIssued);
        }
        let key = header
            .kid
            .as_deref()
            .and_then(|kid| self.keys.find(kid))
            .ok_or(Refusal::NotIssued)?;
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.leeway = 0;
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        jsonwebtoken::decode::<EntryClaims>(token, key.decoding_key(), &validation)
            .map(|data| data.claims)
            .map_err(|error| match error.kind() {
                ErrorKind::ExpiredSignature => Refusal::Expired,
                _ => Refusal::NotIssued,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine as _;

    fn service(pem: &str, previous: &[String]) -> TokenService {
        let previous: Vec<_> = previous.iter().map(|p| ("old".into(), p.clone())).collect();
        TokenService::new(
            KeyRing::new(("key", pem), &previous).unwrap(),
            "vestibule",
            "shop",
        )
    }

    fn now() -> u64 {
        vestibule_store::now_ms()
    }

    #[test]
    fn a_token_verifies_once_signed_and_is_the_same_string_every_time() {
        let tokens = service(&KeyRing::generate_pem(), &[]);
        let exp = now() + 60_000;
        let token = tokens
            .sign("main", "ticket-1", "main.jti", exp, 60_000, now())
            .unwrap();
        let again = tokens
            .sign("main", "ticket-1", "main.jti", exp, 60_000, now() + 5)
            .unwrap();
        assert_eq!(token, again);
        let claims = tokens.verify(&token, "main").unwrap();
        assert_eq!(claims.jti, "main.jti");
        assert_eq!(claims.sub, log_tag("ticket-1"));
        assert_eq!(claims.exp, exp / 1000);
        assert_eq!(
            (claims.iss.as_str(), claims.aud.as_str()),
            ("vestibule", "shop")
        );
        assert_eq!(
            tokens.verify(&token, "flash"),
            Err(Refusal::WrongRoom("main".into()))
        );
    }

    #[test]
    fn forged_tampered_expired_and_foreign_tokens_are_refused() {
        let pem = KeyRing::generate_pem();
        let tokens = service(&pem, &[]);
        let exp = now() + 60_000;
        let token = tokens
            .sign("main", "t", "main.jti", exp, 60_000, now())
            .unwrap();
        // Tampered claims: the signature no longer holds.
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        let mut claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&parts[1]).unwrap()).unwrap();
        claims["room"] = "flash".into();
        parts[1] = URL_SAFE_NO_PAD.encode(claims.to_string());
        assert_eq!(
            tokens.verify(&parts.join("."), "flash"),
            Err(Refusal::NotIssued)
        );
        // Another key (same kid claimed or not), another audience, garbage.
        let stranger = service(&KeyRing::generate_pem(), &[]);
        let foreign = stranger
            .sign("main", "t", "main.jti", exp, 60_000, now())
            .unwrap();
        assert_eq!(tokens.verify(&foreign, "main"), Err(Refusal::NotIssued));
        let other_audience = TokenService::new(
            KeyRing::new(("k", &pem), &[]).unwrap(),
            "vestibule",
            "elsewhere",
        );
        let elsewhere = other_audience
            .sign("main", "t", "main.jti", exp, 60_000, now())
            .unwrap();
        assert_eq!(tokens.verify(&elsewhere, "main"), Err(Refusal::NotIssued));
        assert_eq!(
            tokens.verify("main.AAAAAAAAAAAAAAAAAAAAAA", "main"),
            Err(Refusal::NotIssued)
        );
        // `alg: none` with the claims of a real token.
        let none = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#),
            token.split('.').nth(1).unwrap()
        );
        assert_eq!(tokens.verify(&none, "main"), Err(Refusal::NotIssued));
        // Expired: exp in the past.
        let past = now() - 2_000;
        let expired = tokens
            .sign("main", "t", "main.jti", past, 60_000, now())
            .unwrap();
        assert_eq!(tokens.verify(&expired, "main"), Err(Refusal::Expired));
    }

    #[test]
    fn a_remembered_token_still_checks_its_room_and_expiry() {
        let tokens = service(&KeyRing::generate_pem(), &[]);
        // `exp` is the next whole second, so the token expires within two seconds.
        let exp_ms = (now() / 1000 + 1) * 1000;
        let token = tokens
            .sign("main", "t", "main.jti", exp_ms, 60_000, now())
            .unwrap();
        assert!(tokens.verify(&token, "main").is_ok());
        assert_eq!(tokens.verified.len(), 1);
        // The second answer comes from memory and is the same; the room is still checked.
        assert_eq!(tokens.verify(&token, "main").unwrap().jti, "main.jti");
        assert_eq!(
            tokens.verify(&token, "flash"),
            Err(Refusal::WrongRoom("main".into()))
        );
        // A token with one character changed is not the remembered one.
        let mut altered = token.clone();
        altered.push('A');
        assert_eq!(tokens.verify(&altered, "main"), Err(Refusal::NotIssued));
        assert_eq!(tokens.verified.len(), 1);
        while now() / 1000 <= exp_ms / 1000 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert_eq!(tokens.verify(&token, "main"), Err(Refusal::Expired));
        assert_eq!(tokens.verified.len(), 0);
    }

    #[test]
    fn after_rotation_old_tokens_verify_and_new_ones_carry_the_new_kid() {
        let old_pem = KeyRing::generate_pem();
        let old = service(&old_pem, &[]);
        let exp = now() + 60_000;
        let old_token = old.sign("main", "t", "main.a", exp, 60_000, now()).unwrap();
        let rotated = service(&KeyRing::generate_pem(), &[old_pem]);
        assert!(rotated.verify(&old_token, "main").is_ok());
        let new_token = rotated
            .sign("main", "t", "main.b", exp, 60_000, now())
            .unwrap();
        let kid = jsonwebtoken::decode_header(&new_token)
            .unwrap()
            .kid
            .unwrap();
        assert_eq!(kid, rotated.keys().current_kid());
        assert_ne!(kid, old.keys().current_kid());
        // The old ring does not know the new key.
        assert_eq!(old.verify(&new_token, "main"), Err(Refusal::NotIssued));
    }
}
