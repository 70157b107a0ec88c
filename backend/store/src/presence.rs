//! The presence role (docs/DESIGN.md "Presence"): hearing from shoppers, the reads of a poll, and
//! the SSE hub's refresh, which follows every waiting position by the queue's changes.

use async_trait::async_trait;

use super::{RoomId, StoreError, TicketRecord};

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
/// followed by), for [`Presence::mark_heard`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolledTicket {
    /// The ticket id.
    pub id: String,
    /// Its arrival sequence.
    pub seq: u64,
}

/// [`Presence::hear_polled`] without an anchor: [`Presence::hear`] of one ticket with its position.
///
/// # Errors
/// As [`Presence::hear`].
pub async fn hear_unanchored<S: Presence + ?Sized>(
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

/// The presence role of a store: atomic per room as [`crate::Queue`].
#[async_trait]
pub trait Presence: Send + Sync {
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

    /// Parks the tickets of joins whose answer never reached their shopper (docs/DESIGN.md
    /// "Joins nobody heard the answer of"), in one atomic step: each of `ids` that still waits
    /// in the line (not the pre-queue), joined at `joined_ms` (the same second: the Redis store
    /// keeps join times in seconds) and not heard from since, is taken out of the line as a
    /// ticket skipped for silence is (positions and SSE cursors move as for a leave), held until
    /// `now_ms + hold_place_ms`. Heard from within that (a poll, a keyed retry of its join) it
    /// goes back to its own arrival place; else it expires. Any other id is left as it is (an
    /// admitted ticket keeps its token). Returns the ids parked. Running it again changes nothing.
    ///
    /// # Errors
    /// As [`Presence::hear`].
    async fn park_unconfirmed(
        &self,
        room: RoomId<'_>,
        ids: &[String],
        joined_ms: u64,
        hold_place_ms: u64,
        now_ms: u64,
    ) -> Result<Vec<String>, StoreError>;

    /// The SSE hub's batch for the polls it answered from memory (docs/DESIGN.md "Polls
    /// answered from memory"): each ticket still waiting is heard from now, and nothing is read
    /// back. A ticket that has stopped waiting since its answer is left as it is (the skip rule
    /// cannot have passed it meanwhile: it was heard within half the abandon time). The default
    /// calls [`Presence::hear`] with the ids and drops its records; the Redis store writes the
    /// `seen:` slots of the seqs in one step per chunk.
    ///
    /// # Errors
    /// As [`Presence::hear`].
    async fn mark_heard(
        &self,
        room: RoomId<'_>,
        polled: &[PolledTicket],
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let ids: Vec<String> = polled.iter().map(|ticket| ticket.id.clone()).collect();
        self.hear(room, &ids, now_ms, false).await.map(|_| ())
    }

    /// A poll's read: [`Presence::hear`] of one ticket with its position, plus its
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
}
