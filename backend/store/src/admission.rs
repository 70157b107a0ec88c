//! The admission role: the room's scheduler lease, the leader's admission tick, and the entry
//! tokens it issues (checked, then used by exactly one order).

use async_trait::async_trait;

use super::{Pace, RoomId, StoreError, VersionedSettings};

/// The answer to a lease call: who leads, and the room's settings in force.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseOutcome {
    /// The fencing epoch when the caller holds the lease; `None` when another holder does.
    pub epoch: Option<u64>,
    /// The room's settings as stored.
    pub settings: VersionedSettings,
    /// Active users (tokens out) now.
    pub active: u64,
    /// The pace the leader last published (`None` when unknown or stale).
    pub pace: Option<Pace>,
}

/// One scheduler tick's admission request.
#[derive(Debug, Clone)]
pub struct AdmitRequest<'a> {
    /// The lease holder asking.
    pub holder: &'a str,
    /// The fencing epoch the holder got with the lease; a stale epoch is refused.
    pub epoch: u64,
    /// Now, Unix milliseconds.
    pub now_ms: u64,
    /// Token TTL in milliseconds.
    pub token_ttl_ms: u64,
    /// Cap on active users after this admission; `None` = no cap.
    pub max_active_users: Option<u64>,
    /// Fresh entry tokens; at most `tokens.len()` shoppers are admitted.
    pub tokens: &'a [String],
    /// Waiting tickets not heard from for this long (ms) are skipped first (held, not admitted);
    /// already raised to 3× the longest poll hint by the caller (`room::presence`).
    pub abandon_after_ms: u64,
    /// How long a skipped ticket keeps its place (ms).
    pub hold_place_ms: u64,
    /// Most admissions to bank for joins that find nobody waiting ([`crate::InstantAdmission`]): what
    /// the quota leaves unused when the queue runs dry is banked, up to this many.
    pub instant_bank_max: u64,
    /// The leader's measured pace, published for every replica (`None` = leave as is).
    pub pace: Option<Pace>,
}

/// What one admission did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AdmitOutcome {
    /// The epoch was stale or the lease lost: nothing was done.
    pub fenced: bool,
    /// Shoppers admitted (popped and given a token).
    pub admitted: u64,
    /// Tokens found expired unused (their tickets are now `EXPIRED`).
    pub expired: u64,
    /// Shoppers still waiting after this admission.
    pub waiting: u64,
    /// Active users after this admission.
    pub active: u64,
    /// Waiting tickets skipped (held) by this tick for silence.
    pub skipped: u64,
    /// The room's settings in force now (`None` when fenced), for the next tick.
    pub settings: Option<VersionedSettings>,
    /// Shoppers ever admitted in the room after this tick (ticks and instant joins).
    pub popped: u64,
}
/// An order's claim on an entry token: recorded with the token when it is consumed, so that a
/// retry of the same order (same key) gets the same receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderClaim<'a> {
    /// The order's `Idempotency-Key`, if the client sent one.
    pub idempotency_key: Option<&'a str>,
    /// The receipt to keep (JSON text), answered again to a retry with the same key.
    pub receipt: &'a str,
}

/// What consuming an entry token for an order did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenUse {
    /// The token was live and is now used by this order.
    Consumed {
        /// The ticket the token was issued to.
        ticket_id: String,
    },
    /// The token was already used by an order with the same idempotency key: nothing changed;
    /// the receipt kept then.
    Replayed {
        /// The ticket the token was issued to.
        ticket_id: String,
        /// The receipt recorded by the first order (JSON text).
        receipt: String,
    },
    /// Not consumed: the token is unknown, expired or used (never [`TokenCheck::Valid`]).
    Refused(TokenCheck),
    /// Not consumed: the token is live but no unit of stock is left (409 `sold_out`); the token
    /// still works until it expires (for a release, say).
    SoldOut {
        /// The ticket the token was issued to.
        ticket_id: String,
    },
}
/// What a token look-up found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenCheck {
    /// Valid (and, for a consuming look-up, now used); names its ticket.
    Valid {
        /// The ticket the token was issued to.
        ticket_id: String,
    },
    /// Never issued in this room (or forgotten).
    Unknown,
    /// Its TTL passed.
    Expired,
    /// Already used by an order, or its ticket left.
    Used,
}

/// The admission role of a store: atomic per room as [`crate::Queue`].
#[async_trait]
pub trait Admission: Send + Sync {
    /// Takes or renews the room's scheduler lease for `holder` (the store's `lease_ms` long,
    /// [`crate::StoreOptions`]) and reads the
    /// room's settings in the same step. A new holder gets a new, larger fencing epoch.
    ///
    /// # Errors
    /// [`StoreError::RoomGone`] when `room`'s generation is not the live one;
    /// [`StoreError::RoomLost`] when the store lost the room (the caller writes back the document
    /// it holds, [`crate::Catalog::write_back_room`]); else the call's error.
    async fn lease(&self, room: RoomId<'_>, holder: &str) -> Result<LeaseOutcome, StoreError>;

    /// Gives up the lease if `holder` has it (on shutdown), so another replica takes over at once.
    async fn release_lease(&self, room: RoomId<'_>, holder: &str) -> Result<(), StoreError>;

    /// One leader tick in one atomic step: refused (fenced) unless `holder` holds the lease with
    /// `epoch`; else renews the lease (for the store's `lease_ms`), expires overdue tokens, pops up to `tokens.len()` shoppers
    /// in arrival order and issues their tokens, and reads the settings for the next tick.
    async fn admit(
        &self,
        room: RoomId<'_>,
        request: &AdmitRequest<'_>,
    ) -> Result<AdmitOutcome, StoreError>;

    /// Checks an entry token without using it.
    async fn check_token(
        &self,
        room: RoomId<'_>,
        token: &str,
        now_ms: u64,
    ) -> Result<TokenCheck, StoreError>;

    /// Uses an entry token for an order in one atomic step, so that it works exactly once: a live
    /// token is marked used with the order's claim (key and receipt) recorded; a token already
    /// used by an order with the same idempotency key answers that order's receipt again. The
    /// used token's record is kept for the store's `keep_ms` ([`crate::StoreOptions`]).
    async fn consume_token(
        &self,
        room: RoomId<'_>,
        token: &str,
        order: &OrderClaim<'_>,
        now_ms: u64,
    ) -> Result<TokenUse, StoreError>;
}
