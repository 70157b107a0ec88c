//! The queue store: one trait, two real implementations with the same semantics.
//!
//! - [`redis`]: `RedisStore`, production; many replicas share it; every multi-step change is one
//!   Lua script.
//! - [`memory`]: `MemoryStore`, the embedded engine for a single process; no setup.
//! - [`durable`]: `DurableStore`, the embedded default: `MemoryStore` plus a journal and
//!   snapshots in `--data-dir`, so a restart keeps the queue.
//! - [`join_limit`]: the per-client join limit (GCRA) the stores check inside a join.
//! - [`error`]: [`StoreError`], why a store call failed.
//! - [`instant`]: what a join needs to admit at once; [`pace`]: the leader's measured pace.
//! - [`safety`]: how a Redis server is set up, where that can lose queue state.
//! - [`order_index`]: the order-statistics index that gives `MemoryStore` O(log N) positions.
//! - [`room_doc`]: the room model: one document per generation ([`RoomId`], [`RoomDoc`]).
//! - [`ids`]: ticket ids and entry tokens from the OS CSPRNG.
//! - [`draw`]: the draw's records and its published algorithm.
//!
//! Semantics both must keep (docs/DESIGN.md "Queue semantics"): idempotent join by dedup key, order by a
//! per-room arrival sequence, 1-based exact positions, admission that pops and issues tokens in one
//! atomic step fenced by the leader epoch, and tokens consumed exactly once. Every call names the
//! generation of the room it is for and changes nothing when that generation is not the live one
//! ([`StoreError::RoomGone`]).

pub mod catalog;
pub mod draw;
pub mod durable;
pub mod error;
pub mod ids;
pub mod instant;
pub mod join_limit;
pub mod labels;
pub mod lottery;
pub mod memory;
pub mod order_index;
pub mod pace;
pub mod redis;
mod room_doc;
pub mod safety;
pub mod sale;
mod settings;

use async_trait::async_trait;
pub use catalog::{AuditRecord, Catalog, RoomDeletion, WaiterPage, WaiterRecord};
pub use draw::{DrawOutcome, DrawRecord, DrawRequest, DRAW_PLACES_PER_STEP};
pub use error::StoreError;
pub use instant::InstantAdmission;
pub use join_limit::{gcra, JoinLimit};
pub use labels::{LabelsPatch, RoomLabels};
pub use pace::Pace;
pub use room_doc::{RoomDoc, RoomId};
pub use safety::StoreSafety;
pub use sale::{JoinRefusal, SalePatch, SaleSettings};
pub use settings::{
    default_abandon_after_ms, default_hold_place_ms, QueueingMethod, Settings, SettingsPatch,
    SettingsUpdate, VersionedSettings,
};
use vestibule_shared::TicketState;

/// What the store knows of one ticket.
#[derive(Debug, Clone, PartialEq)]
pub struct TicketRecord {
    /// The ticket id (bearer secret).
    pub id: String,
    /// Life-cycle state; `TOKEN_ISSUED` past its expiry is reported as `EXPIRED`.
    pub state: TicketState,
    /// 1-based position while `WAITING`.
    pub position: Option<u64>,
    /// The entry token while `TOKEN_ISSUED`.
    pub entry_token: Option<String>,
    /// Token expiry, Unix milliseconds, while `TOKEN_ISSUED`.
    pub token_expires_at_ms: Option<u64>,
    /// Skipped for silence, then heard from within the hold time: its place was kept (only
    /// reported by [`Store::hear`] reads).
    pub place_kept: bool,
}

impl TicketRecord {
    /// A waiting ticket at a 1-based `position`.
    pub fn waiting(id: &str, position: u64) -> Self {
        Self {
            id: id.to_owned(),
            state: TicketState::Waiting,
            position: Some(position),
            entry_token: None,
            token_expires_at_ms: None,
            place_kept: false,
        }
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

/// Counts of a room at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RoomCounts {
    /// Shoppers waiting.
    pub waiting: u64,
    /// Active users: tokens issued and neither used nor expired.
    pub active: u64,
}

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
    /// The lease is renewed for this long (milliseconds) when the epoch is current.
    pub lease_ms: u64,
    /// Now, Unix milliseconds.
    pub now_ms: u64,
    /// Token TTL in milliseconds.
    pub token_ttl_ms: u64,
    /// How long a finished ticket stays queryable, in milliseconds.
    pub keep_ms: u64,
    /// Cap on active users after this admission; `None` = no cap.
    pub max_active_users: Option<u64>,
    /// Fresh entry tokens; at most `tokens.len()` shoppers are admitted.
    pub tokens: &'a [String],
    /// Waiting tickets not heard from for this long (ms) are skipped first (held, not admitted);
    /// already raised to 3× the longest poll hint by the caller (`room::presence`).
    pub abandon_after_ms: u64,
    /// How long a skipped ticket keeps its place (ms).
    pub hold_place_ms: u64,
    /// Most admissions to bank for joins that find nobody waiting ([`InstantAdmission`]): what
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

/// Where an SSE hub has followed a room's queue to: counters that only grow (until the store is
/// emptied, which the store reports as a reset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueCursor {
    /// Shoppers ever admitted in the room.
    pub popped: u64,
    /// Waiting shoppers that ever left the room.
    pub left: u64,
}

/// What changed in a queue since a cursor: enough to move every waiting position exactly, since
/// positions only fall, by admissions (always from the head) and by leaves ahead.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueDelta {
    /// Shoppers admitted since the cursor (all of them were ahead of every waiting shopper).
    pub popped: u64,
    /// Arrival sequences of the waiting shoppers that left (or were skipped) since the cursor,
    /// ascending.
    pub left_seqs: Vec<u64>,
    /// Arrival sequences of skipped tickets that came back to their place since the cursor,
    /// ascending: everyone waiting behind one moves back by one.
    pub returned_seqs: Vec<u64>,
}

/// Where a waiting ticket stood in a followed (first-in, first-out) line at the instant a poll
/// read it: its arrival sequence and the room's queue cursor at that same instant. With it the
/// SSE hub can follow the ticket's position by the queue's changes from then on (docs/DESIGN.md
/// "Polls answered from memory"), without reading it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollAnchor {
    /// The ticket's arrival sequence.
    pub seq: u64,
    /// The room's cursor at the instant of the read.
    pub cursor: QueueCursor,
}

/// A ticket whose poll was answered from memory (docs/DESIGN.md "Polls answered from memory"):
/// its id and its arrival sequence (its score in the queue, from the [`PollAnchor`] it is
/// followed by), for [`Store::mark_heard`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolledTicket {
    /// The ticket id.
    pub id: String,
    /// Its arrival sequence.
    pub seq: u64,
}

/// [`Store::hear_polled`] without an anchor: [`Store::hear`] of one ticket with its position.
///
/// # Errors
/// As [`Store::hear`].
pub async fn hear_unanchored<S: Store + ?Sized>(
    store: &S,
    room: RoomId<'_>,
    id: &str,
    now_ms: u64,
) -> Result<Option<(TicketRecord, Option<PollAnchor>)>, StoreError> {
    let ids = [id.to_owned()];
    let mut records = store.hear(room, &ids, now_ms, true).await?;
    Ok(records.pop().flatten().map(|record| (record, None)))
}

/// The answer to one SSE refresh, all read at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct SseRefresh {
    /// The cursor to pass next time.
    pub cursor: QueueCursor,
    /// Changes since the caller's cursor; `None` when the cursor cannot be followed (first call,
    /// too many leaves to replay, store emptied): every stream must then be re-read.
    pub delta: Option<QueueDelta>,
    /// The tickets asked for, each with its arrival sequence while waiting.
    pub tickets: Vec<Option<(TicketRecord, Option<u64>)>>,
}

/// The queue store. Routes and the scheduler see only this trait.
///
/// Every method is atomic with respect to the others for the room it names.
#[async_trait]
pub trait Store: Catalog + Send + Sync + 'static {
    /// `"redis"`, `"memory"` (embedded, nothing kept) or `"durable"` (embedded, kept in
    /// `--data-dir`), for logs and `/readyz`.
    fn kind(&self) -> &'static str;

    /// Whether the store answers.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when it does not.
    async fn ping(&self) -> Result<(), StoreError>;

    /// Applies a settings change in one atomic step: `patch` applied to `base` (the caller's
    /// copy of the settings, e.g. its runtime's) as a compare-and-set on `room`'s generation and
    /// `base`'s version, so that a change is one store call. When the store holds another
    /// version it changes nothing and, without `expected_version`, applies the patch to the
    /// version it holds instead; with `expected_version` (`If-Match`), only at that version.
    ///
    /// # Errors
    /// [`StoreError::RoomGone`] when `room`'s generation is not the live one,
    /// [`StoreError::RoomLost`] when the store lost the room; else the call's error.
    async fn update_room(
        &self,
        room: RoomId<'_>,
        base: &VersionedSettings,
        patch: &SettingsPatch,
        expected_version: Option<u64>,
    ) -> Result<SettingsUpdate, StoreError>;

    /// Joins the queue. With `dedup_key`, a live ticket already joined under that key is returned
    /// unchanged (original place); otherwise a ticket is enqueued at the back: `new_id`, or (Redis,
    /// keyed join) an id derived from the key with the room's secret, which needs no dedup entry.
    /// With `limit`, a join that would create a ticket first passes the client's join limit
    /// (in the same atomic step; refused joins change nothing).
    async fn join_with_limit(
        &self,
        room: RoomId<'_>,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
    ) -> Result<JoinReply, StoreError>;

    /// [`Store::join_with_limit`] without a limit.
    async fn join(
        &self,
        room: RoomId<'_>,
        dedup_key: Option<&str>,
        new_id: &str,
    ) -> Result<JoinOutcome, StoreError> {
        match self.join_with_limit(room, dedup_key, new_id, None).await? {
            JoinReply::Joined(outcome) => Ok(outcome),
            JoinReply::RateLimited { .. } => Err(StoreError::Corrupt(
                "a join without a limit was rate limited".into(),
            )),
            JoinReply::Refused(refusal) => Err(StoreError::Refused(refusal)),
            JoinReply::SettingsChanged => Err(StoreError::Corrupt(
                "a join that named no settings version found them changed".into(),
            )),
        }
    }

    /// [`Store::join_with_limit`] that admits a new ticket's shopper in the same step
    /// (`TOKEN_ISSUED`, `instant.token`) when nobody else waits, the room is open, the cap allows
    /// and the scheduler's bank of unused quota holds one, which it takes.
    async fn join_admitting(
        &self,
        room: RoomId<'_>,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        instant: &InstantAdmission,
    ) -> Result<JoinReply, StoreError>;

    /// One ticket, with its exact position while waiting.
    async fn ticket(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError>;

    /// One SSE hub refresh in one atomic step: the queue's changes since `since` and exact reads
    /// of `ids` (see [`SseRefresh`]). One store call however many streams the hub follows.
    async fn sse_refresh(
        &self,
        room: RoomId<'_>,
        since: Option<QueueCursor>,
        ids: &[String],
        now_ms: u64,
    ) -> Result<SseRefresh, StoreError>;

    /// Records that the holders of `ids` were heard from at `now_ms` (a poll, an open SSE stream,
    /// a heartbeat; docs/DESIGN.md "Presence"), in one atomic step: a waiting ticket's last-heard
    /// time is set; a skipped ticket still within its hold time goes back to its place (arrival
    /// order: at the head if the line has passed it) with `place_kept`. Returns each ticket as it
    /// stands after (`None` = unknown); with `positions` false a waiting ticket's position may be
    /// `None` (cheaper: heartbeats and SSE presence batches).
    async fn hear(
        &self,
        room: RoomId<'_>,
        ids: &[String],
        now_ms: u64,
        positions: bool,
    ) -> Result<Vec<Option<TicketRecord>>, StoreError>;

    /// The SSE hub's batch for the polls it answered from memory (docs/DESIGN.md "Polls
    /// answered from memory"): each ticket still waiting is heard from now, and nothing is read
    /// back. A ticket that has stopped waiting since its answer is left as it is (the skip rule
    /// cannot have passed it meanwhile: it was heard within half the abandon time). The default
    /// calls [`Store::hear`] with the ids and drops its records; the Redis store writes the
    /// `seen:` slots of the seqs in one step per chunk.
    ///
    /// # Errors
    /// As [`Store::hear`].
    async fn mark_heard(
        &self,
        room: RoomId<'_>,
        polled: &[PolledTicket],
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let ids: Vec<String> = polled.iter().map(|ticket| ticket.id.clone()).collect();
        self.hear(room, &ids, now_ms, false).await.map(|_| ())
    }

    /// A poll's read: [`Store::hear`] of one ticket with its position, plus its
    /// [`PollAnchor`] when it waits in a line whose positions only move by the cursor (not in
    /// the pre-queue, not in a random room while the lottery runs). `None` = unknown ticket. The
    /// default gives no anchor (every poll is then read from the store).
    async fn hear_polled(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<(TicketRecord, Option<PollAnchor>)>, StoreError> {
        hear_unanchored(self, room, id, now_ms).await
    }

    /// Leaves the queue (or gives back an unused token).
    async fn leave(
        &self,
        room: RoomId<'_>,
        id: &str,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<LeaveOutcome, StoreError>;

    /// Waiting and active counts.
    async fn counts(&self, room: RoomId<'_>, now_ms: u64) -> Result<RoomCounts, StoreError>;

    /// Takes or renews the room's scheduler lease for `holder` (`lease_ms` long) and reads the
    /// room's settings in the same step. A new holder gets a new, larger fencing epoch.
    ///
    /// # Errors
    /// [`StoreError::RoomGone`] when `room`'s generation is not the live one;
    /// [`StoreError::RoomLost`] when the store lost the room (the caller writes back the document
    /// it holds, [`Catalog::write_back_room`]); else the call's error.
    async fn lease(
        &self,
        room: RoomId<'_>,
        holder: &str,
        lease_ms: u64,
    ) -> Result<LeaseOutcome, StoreError>;

    /// Gives up the lease if `holder` has it (on shutdown), so another replica takes over at once.
    async fn release_lease(&self, room: RoomId<'_>, holder: &str) -> Result<(), StoreError>;

    /// One leader tick in one atomic step: refused (fenced) unless `holder` holds the lease with
    /// `epoch`; else renews the lease, expires overdue tokens, pops up to `tokens.len()` shoppers
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
    /// used by an order with the same idempotency key answers that order's receipt again.
    async fn consume_token(
        &self,
        room: RoomId<'_>,
        token: &str,
        order: &OrderClaim<'_>,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<TokenUse, StoreError>;

    /// A join in the pre-queue window (docs/DESIGN.md "Scheduled opening and the draw"): as
    /// [`Store::join_with_limit`] (same idempotency and limit; it takes an arrival seq like any
    /// join), but the new ticket is `PRE_QUEUE` until the draw. Once the draw is made it is an
    /// ordinary join (FIFO behind the drawn tickets). With `settings_version`, a store whose room
    /// settings have another version answers [`JoinReply::SettingsChanged`] and changes nothing.
    async fn join_prequeue(
        &self,
        room: RoomId<'_>,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        settings_version: Option<u64>,
    ) -> Result<JoinReply, StoreError>;

    /// The room's draw seed: `fresh_seed` (64 hex digits) is written only if the room has none
    /// (atomically: the first caller's seed wins, later callers read it); returns the record in
    /// force.
    async fn draw_seed(&self, room: RoomId<'_>, fresh_seed: &str)
        -> Result<DrawRecord, StoreError>;

    /// The room's draw record (`None` = no seed yet).
    async fn draw_record(&self, room: RoomId<'_>) -> Result<Option<DrawRecord>, StoreError>;

    /// The drawn tags in place order from `offset`, at most `limit` (empty before the draw).
    async fn draw_tags(
        &self,
        room: RoomId<'_>,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<String>, StoreError>;

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

    /// The ids of every `PRE_QUEUE` ticket (any order).
    async fn prequeue_ids(&self, room: RoomId<'_>) -> Result<Vec<String>, StoreError>;

    /// One step of the draw, exactly once over all steps: fenced like [`Store::admit`]; refused
    /// if made already. Places the next pre-queue tickets in drawn order (HMAC-SHA256(seed, tag),
    /// ties by tag), at most `request.places_per_step` (Redis; the embedded stores place all at
    /// once): `Placed` = call again, `Drawn` = done. Until the last step every pre-queue ticket
    /// reads `PRE_QUEUE` and nobody is admitted; a leader that dies between steps leaves the
    /// next one to go on. The pre-queue tickets' arrival seqs are handed out again in place
    /// order (place k gets the k-th smallest), so every ticket that joined after the opening
    /// stays behind all of them; drawn tickets count as heard from; the tags are kept for
    /// `GET …/draw`.
    async fn draw(
        &self,
        room: RoomId<'_>,
        request: &DrawRequest<'_>,
    ) -> Result<DrawOutcome, StoreError>;
    /// Marks proof-of-work challenge `id` of `room` used, in one atomic step, until at least
    /// `expires_at_ms` (when the challenge stops verifying anyway): true the first time, false
    /// when some join (on any replica) already used it (README "Bots at the door").
    async fn use_challenge(
        &self,
        room: RoomId<'_>,
        id: &str,
        expires_at_ms: u64,
        now_ms: u64,
    ) -> Result<bool, StoreError>;

    /// How the store is set up where that can lose queue state (Redis: eviction policy and
    /// persistence); `None` for the embedded store.
    async fn safety(&self) -> Result<Option<StoreSafety>, StoreError> {
        Ok(None)
    }
}

/// Now as Unix milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}
