//! Whether an entry token admits its holder now: the one check that the HTTP token layer, the
//! gate and the storefront's calls each turn into their own answers.
//!
//! First offline ([`TokenService::verify`]: signature, issuer, audience, expiry, room), then one
//! store read by `jti` ([`vestibule_store::Admission::check_token`]): a token that was used,
//! released or whose ticket left stops working at once, on every replica.

use vestibule_shared::entry::EntryClaims;
use vestibule_store::{now_ms, Store, StoreError, TokenCheck};

use super::{Refusal, TokenService};
use crate::runtime::RoomRuntime;

/// Why an entry token does not admit its holder.
#[derive(Debug)]
pub enum EntryRefusal {
    /// Not signed by this waiting room (malformed, unknown key, other issuer or audience).
    NotIssued,
    /// Its expiry has passed.
    Expired,
    /// Signed by this waiting room for another room (named).
    WrongRoom(String),
    /// Used by an order or a consume, or given back (released, or its ticket left): the store
    /// no longer holds it as live.
    Used,
    /// The store could not say (the offline check passed); the caller's outage policy decides.
    Store(StoreError),
}

impl From<Refusal> for EntryRefusal {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::NotIssued => Self::NotIssued,
            Refusal::Expired => Self::Expired,
            Refusal::WrongRoom(room) => Self::WrongRoom(room),
        }
    }
}

impl From<TokenCheck> for EntryRefusal {
    /// The store's verdict on a token whose signature holds: `Unknown` there means its session
    /// ended (the store forgot a released token), so it reads as used.
    fn from(check: TokenCheck) -> Self {
        match check {
            TokenCheck::Expired => Self::Expired,
            TokenCheck::Unknown | TokenCheck::Used | TokenCheck::Valid { .. } => Self::Used,
        }
    }
}

/// Checks `token` for `runtime`'s room without using it: offline, then the store by `jti`.
/// Returns the claims and the ticket id the token was issued to.
///
/// # Errors
/// The [`EntryRefusal`]; [`EntryRefusal::Store`] only after the offline check passed.
pub async fn check_entry(
    store: &dyn Store,
    tokens: &TokenService,
    runtime: &RoomRuntime,
    token: &str,
) -> Result<(EntryClaims, String), EntryRefusal> {
    let claims = tokens.verify(token, &runtime.name)?;
    match store.check_token(runtime.id(), &claims.jti, now_ms()).await {
        Ok(TokenCheck::Valid { ticket_id }) => Ok((claims, ticket_id)),
        Ok(refused) => Err(refused.into()),
        Err(error) => Err(EntryRefusal::Store(error)),
    }
}
