//! The queue role: joining (one entry point, [`JoinRequest`]), reading a ticket, leaving, the
//! room's counts, and the proof-of-work challenges checked at the door.

use async_trait::async_trait;
use vestibule_shared::TicketState;

use super::{InstantAdmission, JoinLimit, JoinRefusal, RoomId, StoreError, TicketRecord};

/// One join: who joins (`new_id`, `dedup_key`), under which limit, and how ([`JoinKind`]).
///
/// With `dedup_key`, a live ticket already joined under that key is returned unchanged (its
/// original place); otherwise a ticket is made: `new_id`, or (Redis, keyed join) an id derived
/// from the key with the room's secret, which needs no dedup entry. With `limit`, a join that
/// would make a ticket first passes the client's join limit in the same atomic step (a refused
/// join changes nothing).
#[derive(Debug, Clone, Copy)]
pub struct JoinRequest<'a> {
    /// The client's idempotency key (`Idempotency-Key`, or the verified user's subject).
    pub dedup_key: Option<&'a str>,
    /// The id of the ticket to make (a fresh [`crate::ids::random_id`]).
    pub new_id: &'a str,
    /// The client's join limit, checked in the same step.
    pub limit: Option<&'a JoinLimit>,
    /// Where the new ticket goes.
    pub kind: JoinKind<'a>,
    /// The room's presence times, for a join whose outcome the store cannot confirm
    /// ([`Unconfirmed`]).
    pub unconfirmed: Unconfirmed,
}

/// What becomes of a join whose answer its shopper never got (docs/DESIGN.md "Joins nobody
/// heard the answer of"): a store that cannot confirm a join (504 `store_timeout`) parks the
/// ticket it may have made once it answers again ([`crate::Presence::park_unconfirmed`]): out of
/// the line, held like a ticket skipped for silence, back at its place when its shopper is heard
/// from (a poll of its id, a keyed retry of the join).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unconfirmed {
    /// How long a parked ticket keeps its place (the room's `holdPlaceSecs`), ms.
    pub hold_place_ms: u64,
    /// How long the store keeps trying to park it (the room's abandon time, after which the skip
    /// rule takes it out of the line anyway), ms.
    pub retry_for_ms: u64,
}

impl Default for Unconfirmed {
    fn default() -> Self {
        Self {
            hold_place_ms: crate::default_hold_place_ms(),
            retry_for_ms: crate::default_abandon_after_ms(),
        }
    }
}

/// Where a join puts a new ticket.
#[derive(Debug, Clone, Copy)]
pub enum JoinKind<'a> {
    /// At the back of the line (`WAITING`).
    Line,
    /// At the back, or admitted in the same step (`TOKEN_ISSUED` with `instant.token`) when
    /// nobody else waits, the room is open, the cap allows and the scheduler's bank of unused
    /// quota holds one, which it takes (docs/DESIGN.md "No wait when there is no line").
    Admitting(&'a InstantAdmission),
    /// Into the pre-queue (`PRE_QUEUE`) until the draw (docs/DESIGN.md "Scheduled opening and
    /// the draw"); once the draw is made, at the back of the line behind every drawn ticket.
    PreQueue {
        /// The settings version the join was decided on: a store whose room settings have
        /// another version answers [`JoinReply::SettingsChanged`] and changes nothing; `None`
        /// checks nothing.
        settings_version: Option<u64>,
    },
}

impl<'a> JoinRequest<'a> {
    /// A join at the back of the line as `new_id`, without key or limit.
    pub fn new(new_id: &'a str) -> Self {
        Self {
            dedup_key: None,
            new_id,
            limit: None,
            kind: JoinKind::Line,
            unconfirmed: Unconfirmed::default(),
        }
    }

    /// The same join, its ticket parked for `unconfirmed` when its outcome is unknown.
    #[must_use]
    pub fn unconfirmed(self, unconfirmed: Unconfirmed) -> Self {
        Self {
            unconfirmed,
            ..self
        }
    }

    /// The same join under `dedup_key` (`None` = none).
    #[must_use]
    pub fn keyed(self, dedup_key: Option<&'a str>) -> Self {
        Self { dedup_key, ..self }
    }

    /// The same join under the client's `limit` (`None` = none).
    #[must_use]
    pub fn limited(self, limit: Option<&'a JoinLimit>) -> Self {
        Self { limit, ..self }
    }

    /// The same join, of `kind`.
    #[must_use]
    pub fn of_kind(self, kind: JoinKind<'a>) -> Self {
        Self { kind, ..self }
    }
}

/// The answer to a join.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinOutcome {
    /// The new or existing ticket.
    pub ticket: TicketRecord,
    /// True when this join created the ticket; false when the dedup key named a live one.
    pub created: bool,
}

/// The answer to a join with a limit.
#[derive(Debug, Clone, PartialEq)]
pub enum JoinReply {
    /// The new or existing ticket.
    Joined(JoinOutcome),
    /// The client is over its join limit and has no ticket under the dedup key: nothing changed.
    RateLimited {
        /// Milliseconds until the client may join again.
        retry_after_ms: u64,
    },
    /// The room is sold out or closed and the join would make a new ticket: nothing changed (a
    /// join that finds its live ticket is answered with it instead).
    Refused(JoinRefusal),
    /// The join was decided on settings older than the store's (the caller passed the version it
    /// read and another replica has changed them since): nothing changed. The caller reads the
    /// settings again and decides anew (proof of work, user assertion, opening phase).
    SettingsChanged,
}

impl JoinReply {
    /// The ticket of a join that was let in; any other reply as the error a caller that did not
    /// expect it reports ([`StoreError::Refused`] for a refusal, else [`StoreError::Corrupt`]).
    ///
    /// # Errors
    /// As above.
    pub fn joined(self) -> Result<JoinOutcome, StoreError> {
        match self {
            Self::Joined(outcome) => Ok(outcome),
            Self::Refused(refusal) => Err(StoreError::Refused(refusal)),
            Self::RateLimited { .. } => Err(StoreError::Corrupt(
                "a join without a limit was rate limited".into(),
            )),
            Self::SettingsChanged => Err(StoreError::Corrupt(
                "a join that named no settings version found them changed".into(),
            )),
        }
    }
}

/// The answer to a leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaveOutcome {
    /// The ticket was waiting or held a token, and is now `LEFT`.
    Left,
    /// The ticket had already ended in this state; nothing changed.
    AlreadyEnded(TicketState),
    /// No such ticket.
    NotFound,
}
/// Counts of a room at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RoomCounts {
    /// Shoppers waiting.
    pub waiting: u64,
    /// Active users: tokens issued and neither used nor expired.
    pub active: u64,
}

/// The queue role of a store: every method is atomic with respect to the others for the room it
/// names, and changes nothing when `room`'s generation is not the live one
/// ([`StoreError::RoomGone`]).
#[async_trait]
pub trait Queue: Send + Sync {
    /// Joins the queue (see [`JoinRequest`] and [`JoinKind`]).
    ///
    /// # Errors
    /// [`StoreError::RoomGone`] / [`StoreError::RoomLost`] as above; else the call's error.
    async fn join(
        &self,
        room: RoomId<'_>,
        request: &JoinRequest<'_>,
    ) -> Result<JoinReply, StoreError>;

    /// One ticket, with its exact position while waiting (`None` = unknown).
    async fn ticket(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError>;

    /// The live ticket a join with `dedup_key` would find again (`PRE_QUEUE`, `WAITING` — a held
    /// one too —, `TOKEN_ISSUED` or `COMPLETED`), read without joining: a keyed retry while
    /// the room takes no joins (`room_not_open`) still gets its ticket. `None` = a join would make
    /// a new one.
    async fn keyed_ticket(
        &self,
        room: RoomId<'_>,
        dedup_key: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError>;

    /// Leaves the queue (or gives back an unused token); the ended ticket stays readable for
    /// the store's `keep_ms` ([`crate::StoreOptions`]).
    async fn leave(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<LeaveOutcome, StoreError>;

    /// Waiting and active counts.
    async fn counts(&self, room: RoomId<'_>, now_ms: u64) -> Result<RoomCounts, StoreError>;

    /// Marks proof-of-work challenge `id` of `room` used, in one atomic step, until at least
    /// `expires_at_ms` (when the challenge stops verifying anyway): true the first time, false
    /// when some join (on any replica) already used it (docs/DESIGN.md "Bots at the door").
    async fn use_challenge(
        &self,
        room: RoomId<'_>,
        id: &str,
        expires_at_ms: u64,
        now_ms: u64,
    ) -> Result<bool, StoreError>;
}
