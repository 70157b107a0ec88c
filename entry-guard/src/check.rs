//! The check of a request's tokens: which tokens it carries, the offline verification (key,
//! signature, `exp`, `iss`, `aud`, `room`) and, when configured, the online consume.

use axum::http::{header, HeaderMap, StatusCode};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::Algorithm;

use crate::answers::Refusal;
use crate::keys::{Keys, Lookup};
use crate::{codes, EntryClaims, Guard, VestibuleApi, ENTRY_TOKEN_HEADER, MAX_TOKEN_CANDIDATES};

impl Guard {
    /// The tokens of a request, in the order they are tried: a non-empty `X-Entry-Token`, then
    /// every cookie of the guard's name (a browser sends all it holds: one planted by a
    /// sibling subdomain must not hide the good one); at most [`MAX_TOKEN_CANDIDATES`].
    pub(crate) fn tokens(&self, headers: &HeaderMap) -> Vec<String> {
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
    pub(crate) async fn check_any(&self, tokens: &[String]) -> Result<EntryClaims, Refusal> {
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
        if let Some(api) = &self.consume {
            self.consume(api, token).await?;
        }
        Ok(claims)
    }

    /// The offline check: signature by a known key, `exp`, `iss`, `aud`, `room`.
    pub(crate) async fn verify(&self, token: &str) -> Result<EntryClaims, Refusal> {
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
    async fn consume(&self, api: &VestibuleApi, token: &str) -> Result<(), Refusal> {
        let unavailable = |reason: String| {
            Refusal::unavailable(format!(
                "the waiting room could not confirm this entry: {reason}"
            ))
        };
        let response = api
            .post(&self.client, &self.room, "entries/consume")
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
}
