//! Fan-out of ticket updates to this process's SSE streams, with store load flat in their number.
//!
//! Every open stream subscribes its ticket here (one `watch` channel per ticket, shared by all
//! its streams, holding only the newest status). One task per room refreshes them every
//! `--sse-refresh-ms`, or at once when the scheduler admits, with ONE store call
//! ([`Store::sse_refresh`]) that returns what changed in the queue since the last refresh — how
//! many were admitted, and the arrival sequences of those who left — plus exact reads of the few
//! tickets that need one (new streams, tickets whose position reached the head, tickets holding
//! a token). Waiting positions fall by admissions (always from the head) and by leaves (or skips
//! for silence) ahead, and rise by one for each skipped ticket that comes back ahead (presence), so
//! each stream's position moves exactly without reading it: position += returns with a smaller
//! sequence − admitted − leavers with a smaller sequence.
//!
//! Polled tickets are followed the same way (docs/DESIGN.md "Polls answered from memory"): a
//! poll read from the store brings the ticket's [`PollAnchor`]; while the hub's cursor is the
//! anchor's, the ticket is followed from then on, and its next polls are answered from here
//! ([`SseHub::answer_poll`]) with no store call, their "heard from" written in one batch per
//! refresh. A ticket only polled is not moved by each refresh: the hub keeps a log of the
//! queue's changes ([`MoveLog`]) and a polled ticket's position is caught up from it when it is
//! asked for, so a refresh's time under the lock grows with the streams, not with the polls.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};
use vestibule_shared::{TicketState, TicketStatus};

use vestibule_store::{
    now_ms, PollAnchor, PolledTicket, QueueCursor, RoomId, Settings, Store, StoreError,
    TicketRecord,
};

/// Most exact reads in one refresh, so one store call never blocks Redis for long.
const EXACT_BATCH: usize = 2000;
/// How often a ticket that holds a token is re-read (it ends by an order, expiry or leave, none
/// of which moves the queue).
const ISSUED_RECHECK: Duration = Duration::from_secs(5);
/// Most tickets one room's hub follows in this process (streamed and polled; ~300 bytes each).
/// A poll of a ticket beyond it is read from the store.
pub const FOLLOWED_MAX: usize = 500_000;
/// How often tickets nobody polls any more are forgotten from the polled map (one pass over it,
/// under the lock: rarely, so that polls seldom wait for it).
const POLLED_SWEEP: Duration = Duration::from_secs(5);

/// A ticket followed for its polls only (no stream): its position as of a mark of the hub's
/// [`MoveLog`], caught up from the log when it is asked for ([`Polled::catch_up`]).
struct Polled {
    /// Arrival sequence.
    seq: u64,
    /// Position as of `mark`; `None` while an exact read is awaited (it is in `polled_due`).
    position: Option<u64>,
    /// The log's mark `position` is as of (every change up to it applied).
    mark: u64,
    /// The log's admitted count at `mark`.
    popped_at: u64,
    /// Until when it is followed.
    polled_until: Instant,
    /// When the store last wrote its holder heard, as sent.
    heard_at: Instant,
    /// Answered here since the last batch of "heard from" (it is in `Watchers::to_hear`).
    hear_pending: bool,
    /// Queued in `Watchers::polled_due` for an exact read.
    queued: bool,
    /// The store said its place was kept (it came back after a skip).
    place_kept: bool,
}

impl Polled {
    /// Moves the position to the log's newest mark. `false` when the ticket may no longer be
    /// waiting (it left, came back, or may have been admitted) or the log no longer reaches
    /// back to its mark: the caller forgets it and the store answers its next poll.
    ///
    /// Exact, as the per-refresh moves of a streamed ticket are: position + returns ahead −
    /// admitted − leavers ahead, summed over the changes since its mark. "May have been
    /// admitted" is position ≤ admitted + leavers ahead (returns left out): every position the
    /// ticket had in between is at least position − (admitted + leavers ahead), so when that is
    /// still ≥ 1 it was never at the head.
    fn catch_up(&mut self, log: &MoveLog) -> bool {
        let Some(position) = self.position else {
            return true;
        };
        if self.mark == log.mark {
            return true;
        }
        if self.mark < log.valid_from {
            return false;
        }
        let seq = self.seq;
        let start = log.moves.partition_point(|moves| moves.mark <= self.mark);
        let mut down = log.popped - self.popped_at;
        let mut up = 0u64;
        for moves in log.moves.range(start..) {
            if moves.left_seqs.binary_search(&seq).is_ok()
                || moves.returned_seqs.binary_search(&seq).is_ok()
            {
                return false;
            }
            down += moves.left_seqs.partition_point(|left| *left < seq) as u64;
            up += moves.returned_seqs.partition_point(|back| *back < seq) as u64;
        }
        if position <= down {
            return false;
        }
        self.position = Some(position - down + up);
        self.mark = log.mark;
        self.popped_at = log.popped;
        true
    }
}

/// The queue's changes as the hub's refreshes read them, for catching up polled tickets.
#[derive(Default)]
struct MoveLog {
    /// Changes read so far (one per refresh that followed the cursor).
    mark: u64,
    /// Shoppers admitted over them.
    popped: u64,
    /// Marks before this cannot be caught up (the log was cut there, or the cursor was lost).
    valid_from: u64,
    /// The changes with leavers or returns, oldest first, kept for the longest poll lease.
    moves: VecDeque<Moves>,
}

/// Leavers and returns of one refresh.
struct Moves {
    /// The log's mark once this change is applied.
    mark: u64,
    /// When the refresh that read it was sent.
    at: Instant,
    left_seqs: Vec<u64>,
    returned_seqs: Vec<u64>,
}

impl MoveLog {
    /// Adds one refresh's change; forgets changes older than `keep`.
    fn push(&mut self, delta: &vestibule_store::QueueDelta, now: Instant, keep: Duration) {
        self.mark += 1;
        self.popped += delta.popped;
        if !delta.left_seqs.is_empty() || !delta.returned_seqs.is_empty() {
            self.moves.push_back(Moves {
                mark: self.mark,
                at: now,
                left_seqs: delta.left_seqs.clone(),
                returned_seqs: delta.returned_seqs.clone(),
            });
        }
        while let Some(oldest) = self.moves.front() {
            if now.saturating_duration_since(oldest.at) <= keep {
                break;
            }
            // A ticket whose mark is before this change was last polled before it, more than a
            // lease ago: it is no longer followed anyway.
            self.valid_from = self.valid_from.max(oldest.mark);
            self.moves.pop_front();
        }
    }

    /// The cursor was lost: nothing before now can be caught up.
    fn cut(&mut self) {
        self.mark += 1;
        self.valid_from = self.mark;
        self.moves.clear();
    }
}

/// What the hub knows of one watched ticket.
struct Watched {
    /// Its SSE streams' channel (`None` while it is only polled).
    sender: Option<watch::Sender<TicketStatus>>,
    /// Arrival sequence while waiting (known after the first exact read).
    seq: Option<u64>,
    /// Position while waiting, as moved by the deltas.
    position: Option<u64>,
    /// When to read the ticket exactly; `None` = never (a waiting ticket followed by deltas).
    read_at: Option<Instant>,
    /// When its streams were last sent a position change (far-back positions are sent less often).
    published_at: Instant,
    /// Until when it is followed for its polls (`None` = for its streams only).
    polled_until: Option<Instant>,
    /// When the store last wrote its holder heard, as sent: a poll read from the store, a batch
    /// of polls answered here, a batch of its streams.
    heard_at: Option<Instant>,
    /// Answered here since the last batch of "heard from" (it is in `Watchers::to_hear`).
    hear_pending: bool,
    /// The store said its place was kept (it came back after a skip).
    place_kept: bool,
}

impl Watched {
    fn streams(&self) -> usize {
        self.sender
            .as_ref()
            .map_or(0, watch::Sender::receiver_count)
    }

    /// Waiting, and its position moved by the cursor.
    fn follows(&self) -> bool {
        self.seq.is_some() && self.position.is_some() && self.read_at.is_none()
    }
}

/// A store call hearing tickets, in flight (from [`SseHub::hearing`]). Say what it answered
/// with [`Hearing::answered`]; dropped unanswered (an error, a cancelled request), each ticket
/// that may have come back counts as a return until the next refresh.
#[must_use]
pub struct Hearing<'a> {
    hub: &'a SseHub,
    tokens: Vec<u64>,
    answered: bool,
}

impl Hearing<'_> {
    /// The call answered: `kept` holds, for each ticket it reported with a kept place, that
    /// ticket's arrival sequence when known. Each may have come back in this call.
    pub fn answered(mut self, kept: impl IntoIterator<Item = Option<u64>>) {
        self.answered = true;
        let now = Instant::now();
        let mut watchers = self.hub.lock();
        for token in &self.tokens {
            if let Some((_, possible)) = watchers.hearing.remove(token) {
                watchers.possible_returns -= u64::from(possible);
            }
        }
        watchers
            .returns
            .extend(kept.into_iter().map(|seq| (now, seq)));
    }
}

impl Drop for Hearing<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let now = Instant::now();
        let mut watchers = self.hub.lock();
        for token in &self.tokens {
            if let Some((_, true)) = watchers.hearing.remove(token) {
                watchers.possible_returns -= 1;
                watchers.returns.push((now, None));
            }
        }
    }
}

/// What a poll answered from memory needs to know of its room: the rules that keep the answer
/// exact or larger, and the hints that keep the ticket heard (see [`SseHub::answer_poll`]).
#[derive(Debug, Clone, Copy)]
pub struct PollRules {
    /// `--sse-refresh-ms`: how often the hub follows the queue.
    pub refresh: Duration,
    /// The abandon time in force (docs/DESIGN.md "Presence").
    pub abandon: Duration,
    /// The room's admission rate, shoppers per second: how many may have been admitted since the
    /// hub's last read.
    pub rate_per_sec: f64,
    /// How long a poll keeps the ticket followed: twice the longest poll hint, plus a second.
    pub lease: Duration,
}

/// A poll answered from memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolledPosition {
    /// 1-based position: exact as of the hub's last read of the queue, plus every return heard
    /// here since that could be ahead (never smaller than the position now).
    pub position: u64,
    /// The ticket came back to its place after a skip.
    pub place_kept: bool,
}

/// How often a waiting stream is sent its falling position: the front every refresh, the back
/// seldom (its ETA barely moves), so an admission tick does not turn into an event for every
/// stream. Admission and every other state change are sent at once.
fn publish_every(position: u64) -> Duration {
    match position {
        0..=100 => Duration::ZERO,
        101..=1000 => Duration::from_secs(2),
        _ => Duration::from_secs(5),
    }
}

#[derive(Default)]
struct Watchers {
    /// Tickets with SSE streams (and those followed for polls too), moved by every refresh.
    by_ticket: HashMap<String, Watched>,
    /// Tickets followed for their polls only, caught up from `log` when asked for.
    polled: HashMap<String, Polled>,
    /// Polled tickets awaiting an exact read, oldest first.
    polled_due: VecDeque<String>,
    log: MoveLog,
    /// The longest poll lease seen: how long `log` keeps a change.
    lease: Duration,
    /// When the polled map was last swept of tickets nobody polls any more.
    swept_at: Option<Instant>,
    cursor: Option<QueueCursor>,
    /// The room settings the published statuses were computed with (ETA, paused).
    settings_seen: Option<Settings>,
    /// When the last refresh that succeeded was sent (its read of the queue came after).
    refreshed_at: Option<Instant>,
    /// Tickets answered here since the last batch of "heard from".
    to_hear: Vec<PolledTicket>,
    /// Returns to the line heard in this process (when the store answered, and the returning
    /// ticket's arrival sequence when known) that the last refresh may not have seen: each may
    /// be ahead of a followed ticket, whose answer then counts it.
    returns: Vec<(Instant, Option<u64>)>,
    /// Store calls in flight that hear tickets ([`Hearing`]), by token: the ticket, and whether
    /// the call may bring it back ahead of followed tickets (it is not followed as waiting, or
    /// a refresh saw it leave meanwhile).
    hearing: HashMap<u64, (String, bool)>,
    /// How many of `hearing` may bring a ticket back.
    possible_returns: u64,
    next_hearing: u64,
}

impl Watchers {
    /// Whether `id` is followed as waiting. A polled ticket is caught up first, and forgotten
    /// when it may no longer wait.
    fn follows(&mut self, id: &str) -> bool {
        if let Some(watched) = self.by_ticket.get(id) {
            return watched.follows();
        }
        let Some(polled) = self.polled.get_mut(id) else {
            return false;
        };
        if polled.catch_up(&self.log) {
            return polled.position.is_some();
        }
        self.polled.remove(id);
        false
    }
}

/// The watched tickets of one room in this process.
#[derive(Default)]
pub struct SseHub {
    watchers: Mutex<Watchers>,
    streams: AtomicU64,
    wake: Notify,
}

impl SseHub {
    /// Subscribes to updates of `ticket_id`, which the caller has just read as `current`.
    pub fn subscribe(
        &self,
        ticket_id: &str,
        current: TicketStatus,
    ) -> watch::Receiver<TicketStatus> {
        let mut watchers = self.lock();
        if let Some(watched) = watchers.by_ticket.get_mut(ticket_id) {
            return match &watched.sender {
                Some(sender) => {
                    if sender.receiver_count() == 0 {
                        // Followed for polls only until now: nothing was sent to it.
                        sender.send_replace(current);
                    }
                    sender.subscribe()
                }
                None => {
                    let (sender, receiver) = watch::channel(current);
                    watched.sender = Some(sender);
                    receiver
                }
            };
        }
        let (sender, receiver) = watch::channel(current);
        // Followed for polls until now: from here on it is moved by every refresh.
        let polled = watchers.polled.remove(ticket_id);
        watchers.by_ticket.insert(
            ticket_id.to_owned(),
            Watched {
                sender: Some(sender),
                read_at: Some(Instant::now()),
                polled_until: polled.as_ref().map(|polled| polled.polled_until),
                heard_at: polled.as_ref().map(|polled| polled.heard_at),
                hear_pending: polled.as_ref().is_some_and(|polled| polled.hear_pending),
                place_kept: polled.as_ref().is_some_and(|polled| polled.place_kept),
                ..Watched::new()
            },
        );
        receiver
    }

    /// The tickets streamed in this process for this room (their holders are present).
    pub fn watched_ids(&self) -> Vec<String> {
        self.lock()
            .by_ticket
            .iter()
            .filter(|(_, watched)| watched.streams() > 0)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Answers a poll of `ticket_id` from memory, or `None`: the caller reads the store.
    ///
    /// Answered only when all of these hold (docs/DESIGN.md "Polls answered from memory"):
    /// - the ticket waits and is followed by the cursor (its position known, no exact read due);
    /// - the hub's last refresh was sent within 3 × `refresh` (a store outage stops the answers);
    /// - its position is beyond how many can have been admitted since, ⌈rate × (age + 1 s)⌉ + 1
    ///   (nearer the head the state may have changed: the store answers);
    /// - the store wrote it heard within half the abandon time, so the batch that writes this
    ///   poll lands long before it could be skipped.
    ///
    /// The position is the followed one plus every return heard in this process since the last
    /// refresh that may be ahead of it: never smaller than the true position now. The ticket is
    /// queued for the next batch of "heard from" and kept followed for `lease`.
    pub fn answer_poll(&self, ticket_id: &str, rules: &PollRules) -> Option<PolledPosition> {
        let now = Instant::now();
        let mut watchers = self.lock();
        let age = now.saturating_duration_since(watchers.refreshed_at?);
        if age > rules.refresh * 3 || rules.abandon / 2 < rules.refresh * 3 + Duration::from_secs(1)
        {
            return None;
        }
        let Watchers {
            by_ticket,
            polled,
            log,
            returns,
            possible_returns,
            to_hear,
            ..
        } = &mut *watchers;
        let admissible = (rules.rate_per_sec.max(0.0) * (age.as_secs_f64() + 1.0)).ceil();
        // Far enough from the head, and heard recently enough for the batch to land in time.
        let allowed = |position: u64, heard_at: Instant| {
            now.saturating_duration_since(heard_at) <= rules.abandon / 2
                && position as f64 > admissible + 1.0
        };
        let returns_ahead = |seq: u64| {
            returns
                .iter()
                .filter(|(_, back)| back.is_none_or(|back| back < seq))
                .count() as u64
                + *possible_returns
        };
        // Most polls: a ticket only polled (one lookup in a map of up to FOLLOWED_MAX).
        if let Some(entry) = polled.get_mut(ticket_id) {
            if !entry.catch_up(log) {
                polled.remove(ticket_id);
                return None;
            }
            let position = entry.position?;
            if !allowed(position, entry.heard_at) {
                return None;
            }
            entry.polled_until = now + rules.lease;
            if !entry.hear_pending {
                entry.hear_pending = true;
                to_hear.push(PolledTicket {
                    id: ticket_id.to_owned(),
                    seq: entry.seq,
                });
            }
            return Some(PolledPosition {
                position: position + returns_ahead(entry.seq),
                place_kept: entry.place_kept,
            });
        }
        let watched = by_ticket.get_mut(ticket_id)?;
        let (Some(seq), Some(position), None) = (watched.seq, watched.position, watched.read_at)
        else {
            return None;
        };
        if !allowed(position, watched.heard_at?) {
            return None;
        }
        watched.polled_until = Some(now + rules.lease);
        let answer = PolledPosition {
            position: position + returns_ahead(seq),
            place_kept: watched.place_kept,
        };
        if !watched.hear_pending {
            watched.hear_pending = true;
            to_hear.push(PolledTicket {
                id: ticket_id.to_owned(),
                seq,
            });
        }
        Some(answer)
    }

    /// Takes in what a poll read from the store (`sent` = when the read was sent): a waiting
    /// ticket with an anchor at the hub's cursor is followed from now on (with another anchor
    /// it is read exactly at the next refresh); one no longer waiting is no longer followed for
    /// polls.
    pub fn note_poll(
        &self,
        ticket_id: &str,
        record: &TicketRecord,
        anchor: Option<PollAnchor>,
        sent: Instant,
        rules: &PollRules,
    ) {
        let now = Instant::now();
        let mut watchers = self.lock();
        if watchers.cursor.is_none() {
            // The first ticket followed: a first refresh at once gives the cursor to anchor at.
            self.wake.notify_one();
        }
        watchers.lease = watchers.lease.max(rules.lease);
        let at_cursor = anchor.filter(|anchor| Some(anchor.cursor) == watchers.cursor);
        let full = watchers.by_ticket.len() + watchers.polled.len() >= FOLLOWED_MAX;
        let waiting = record.state == TicketState::Waiting && record.position.is_some();
        let Watchers {
            by_ticket,
            polled,
            polled_due,
            log,
            ..
        } = &mut *watchers;
        if let Some(watched) = by_ticket.get_mut(ticket_id) {
            // Streamed (too): moved by every refresh.
            if !waiting {
                if watched.streams() == 0 {
                    by_ticket.remove(ticket_id);
                }
                return;
            }
            watched.polled_until = Some(now + rules.lease);
            watched.heard_at = Some(sent);
            watched.place_kept = record.place_kept;
            let followed = watched.read_at.is_none() && watched.position.is_some();
            if let (false, Some(anchor)) = (followed, at_cursor) {
                watched.seq = Some(anchor.seq);
                watched.position = record.position;
                watched.read_at = None;
            }
            return;
        }
        if !waiting {
            polled.remove(ticket_id);
            return;
        }
        if let Some(entry) = polled.get_mut(ticket_id) {
            entry.polled_until = now + rules.lease;
            entry.heard_at = sent;
            entry.place_kept = record.place_kept;
            if entry.catch_up(log) && entry.position.is_some() {
                // Followed: the hub's position already counts what this read saw.
                return;
            }
            if let Some(anchor) = at_cursor {
                entry.seq = anchor.seq;
                entry.position = record.position;
                entry.mark = log.mark;
                entry.popped_at = log.popped;
            } else {
                entry.position = None;
                if !entry.queued {
                    entry.queued = true;
                    polled_due.push_back(ticket_id.to_owned());
                }
            }
            return;
        }
        let (false, Some(anchor)) = (full, anchor) else {
            return;
        };
        let followed = at_cursor.is_some();
        polled.insert(
            ticket_id.to_owned(),
            Polled {
                seq: anchor.seq,
                position: record.position.filter(|_| followed),
                mark: log.mark,
                popped_at: log.popped,
                polled_until: now + rules.lease,
                heard_at: sent,
                hear_pending: false,
                queued: !followed,
                place_kept: record.place_kept,
            },
        );
        if !followed {
            polled_due.push_back(ticket_id.to_owned());
        }
    }

    /// Starts a store call that hears `ids` (a poll read from the store, a heartbeat, an SSE
    /// stream's first read or presence batch, a join that finds its ticket): any of them that
    /// is not followed as waiting may be a skipped ticket coming back, ahead of followed ones.
    /// Until the call answers, each such ticket is counted in every answer from memory; after,
    /// each kept place it reports is, until a refresh sent after it (see
    /// [`SseHub::answer_poll`]). A ticket followed as waiting needs no count: if it was skipped
    /// since the last refresh, that refresh's position still counts it, and a refresh that sees
    /// it leave while the call is in flight counts it from then on. Nor does any ticket while
    /// nobody has ever left the line (the cursor's leavers are 0): nobody can be held.
    pub fn hearing(&self, ids: &[String]) -> Hearing<'_> {
        let mut watchers = self.lock();
        // Nobody ever left the line (nor was skipped) as of the hub's last read: nobody was held
        // then, and one skipped since is still in the positions that read gave.
        let nobody_held = watchers.cursor.is_some_and(|cursor| cursor.left == 0);
        let mut tokens = Vec::with_capacity(ids.len());
        for id in ids {
            let possible = !nobody_held && !watchers.follows(id);
            let token = watchers.next_hearing;
            watchers.next_hearing += 1;
            watchers.hearing.insert(token, (id.clone(), possible));
            watchers.possible_returns += u64::from(possible);
            tokens.push(token);
        }
        Hearing {
            hub: self,
            tokens,
            answered: false,
        }
    }

    /// The ticket left through this process: its polls go to the store again (its streams learn
    /// it at the next refresh, as for a leave anywhere).
    pub fn forget(&self, ticket_id: &str) {
        let mut watchers = self.lock();
        watchers.polled.remove(ticket_id);
        if let Some(watched) = watchers.by_ticket.get_mut(ticket_id) {
            if watched.streams() == 0 {
                watchers.by_ticket.remove(ticket_id);
            } else {
                watched.polled_until = None;
                watched.position = None;
                watched.read_at = Some(Instant::now());
            }
        }
    }

    /// The tickets answered here since the last call: the caller writes them heard in one store
    /// call, then calls [`SseHub::heard`].
    pub fn take_heard(&self) -> Vec<PolledTicket> {
        let mut watchers = self.lock();
        let tickets = std::mem::take(&mut watchers.to_hear);
        for PolledTicket { id, .. } in &tickets {
            if let Some(polled) = watchers.polled.get_mut(id) {
                polled.hear_pending = false;
            } else if let Some(watched) = watchers.by_ticket.get_mut(id) {
                watched.hear_pending = false;
            }
        }
        tickets
    }

    /// The store wrote `ids` heard, in a call sent at `sent`.
    pub fn heard<'a>(&self, ids: impl IntoIterator<Item = &'a str>, sent: Instant) {
        let mut watchers = self.lock();
        for id in ids {
            if let Some(polled) = watchers.polled.get_mut(id) {
                polled.heard_at = polled.heard_at.max(sent);
            } else if let Some(watched) = watchers.by_ticket.get_mut(id) {
                watched.heard_at = Some(sent);
            }
        }
    }

    /// Open streams in this process for this room (as of the last refresh).
    pub fn stream_count(&self) -> u64 {
        self.streams.load(Ordering::Relaxed)
    }

    /// Resolves when [`SseHub::wake`] is called (or at once if it was since the last wait).
    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    /// Wakes the refresh loop now (the scheduler just admitted).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    fn lock(&self) -> MutexGuard<'_, Watchers> {
        self.watchers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Forgets tickets nobody streams or polls any more; returns the cursor and the ids due an
    /// exact read.
    fn prepare(&self, now: Instant) -> (Option<QueueCursor>, Vec<String>) {
        let mut watchers = self.lock();
        // One pass over the streamed tickets: this runs under the lock every refresh, and polls
        // answered from memory wait for it (issue 15: poll p99 with 280,000 followed). Tickets
        // only polled are not passed over here.
        let mut streams = 0u64;
        // The longest due first, at most EXACT_BATCH (a max-heap of the earliest due times
        // seen): when every stream is due at each refresh (a random room's cursor is never
        // followed), each is read in turn, none starved.
        let mut due: std::collections::BinaryHeap<(Instant, String)> =
            std::collections::BinaryHeap::new();
        watchers.by_ticket.retain(|id, watched| {
            let watching = watched.streams();
            if watching == 0 && watched.polled_until.is_none_or(|until| until <= now) {
                return false;
            }
            streams += watching as u64;
            if let Some(at) = watched.read_at.filter(|at| *at <= now) {
                if due.len() < EXACT_BATCH {
                    due.push((at, id.clone()));
                } else if due.peek().is_some_and(|(latest, _)| at < *latest) {
                    due.pop();
                    due.push((at, id.clone()));
                }
            }
            true
        });
        self.streams.store(streams, Ordering::Relaxed);
        let mut due: Vec<String> = due.into_iter().map(|(_, id)| id).collect();
        // Polled tickets awaiting an exact read, oldest first, in what is left of the batch.
        let Watchers {
            polled,
            polled_due,
            swept_at,
            ..
        } = &mut *watchers;
        while due.len() < EXACT_BATCH {
            let Some(id) = polled_due.pop_front() else {
                break;
            };
            if let Some(entry) = polled.get_mut(&id).filter(|entry| entry.queued) {
                entry.queued = false;
                if entry.position.is_none() {
                    due.push(id);
                }
            }
        }
        // Tickets nobody polls any more, forgotten now and then (a pass over them all).
        if swept_at.is_none_or(|at| now.saturating_duration_since(at) >= POLLED_SWEEP) {
            polled.retain(|_, entry| entry.polled_until > now);
            *swept_at = Some(now);
        }
        (watchers.cursor, due)
    }
}

impl SseHub {
    /// Puts polled tickets `prepare` took off the due queue back on it when their read failed
    /// (streamed ones keep their due time and are picked again by themselves): otherwise they
    /// would be answered from the store until their next poll re-queued them.
    fn requeue(&self, due: &[String]) {
        let mut watchers = self.lock();
        let Watchers {
            polled, polled_due, ..
        } = &mut *watchers;
        for id in due.iter().rev() {
            if let Some(entry) = polled.get_mut(id) {
                if entry.position.is_none() && !entry.queued {
                    entry.queued = true;
                    polled_due.push_front(id.clone());
                }
            }
        }
    }
}

impl Watched {
    fn new() -> Self {
        Self {
            sender: None,
            seq: None,
            position: None,
            read_at: None,
            published_at: Instant::now(),
            polled_until: None,
            heard_at: None,
            hear_pending: false,
            place_kept: false,
        }
    }
}

/// Sends `status` to a ticket's streams if it changed (nothing without a stream).
fn publish(watched: &Watched, status: impl FnOnce() -> TicketStatus) {
    let Some(sender) = watched.sender.as_ref().filter(|_| watched.streams() > 0) else {
        return;
    };
    let status = status();
    sender.send_if_modified(|current| {
        if *current == status {
            false
        } else {
            *current = status;
            true
        }
    });
}

impl SseHub {
    /// One refresh of room `room`'s streams: one store call, then every stream that moved gets
    /// its new status (`status` builds it from a record; `settings` are the room's settings now,
    /// whose change republishes every ETA). Returns whether tickets became due an exact read
    /// (admitted since), so the caller runs a second round at once.
    ///
    /// # Errors
    /// The store call failed: streams keep their last status.
    pub async fn refresh(
        &self,
        store: &dyn Store,
        room: RoomId<'_>,
        settings: Settings,
        status: &(dyn Fn(&TicketRecord) -> TicketStatus + Sync),
    ) -> Result<bool, StoreError> {
        let now = Instant::now();
        let (cursor, due) = self.prepare(now);
        let idle = due.is_empty() && {
            let watchers = self.lock();
            watchers.by_ticket.is_empty() && watchers.polled.is_empty()
        };
        if idle {
            return Ok(false);
        }
        let answer = match store.sse_refresh(room, cursor, &due, now_ms()).await {
            Ok(answer) => answer,
            Err(error) => {
                self.requeue(&due);
                return Err(error);
            }
        };
        let mut watchers = self.lock();
        let mut more_due = false;
        let exact: std::collections::HashSet<&str> = due.iter().map(String::as_str).collect();
        // A pause, resume or rate change moves every ETA (not the positions), selling out ends
        // every wait: republish them all. Units sold change no status: an order republishes
        // nothing.
        let mut settings = settings;
        (settings.sale.stock, settings.sale.sold) = (None, 0);
        let settings_changed = watchers.settings_seen.as_ref() != Some(&settings);
        watchers.settings_seen = Some(settings);
        let first_read = watchers.cursor.is_none();
        // Polled tickets are caught up from the log when asked for; a lost cursor cuts it.
        match &answer.delta {
            Some(delta) => {
                let keep = watchers.lease + POLLED_SWEEP;
                watchers.log.push(delta, now, keep);
            }
            None => watchers.log.cut(),
        }
        let Watchers {
            by_ticket,
            polled,
            polled_due,
            ..
        } = &mut *watchers;
        match &answer.delta {
            // Nobody moved and the ETAs stand: no followed ticket changes (a pass over them all
            // would only hold the lock).
            Some(delta)
                if delta.popped == 0
                    && delta.left_seqs.is_empty()
                    && delta.returned_seqs.is_empty()
                    && !settings_changed => {}
            Some(delta) => {
                for (id, watched) in by_ticket.iter_mut() {
                    // Only a ticket due by `now` can be in this round's exact reads: the hash
                    // lookup is skipped for the others (this pass holds the lock).
                    if watched.read_at.is_some_and(|at| at <= now) && exact.contains(id.as_str()) {
                        continue;
                    }
                    let (Some(seq), Some(position)) = (watched.seq, watched.position) else {
                        continue;
                    };
                    let ahead_left = delta.left_seqs.partition_point(|left| *left < seq) as u64;
                    let ahead_back = delta.returned_seqs.partition_point(|back| *back < seq) as u64;
                    let this_left = delta.left_seqs.binary_search(&seq).is_ok()
                        || delta.returned_seqs.binary_search(&seq).is_ok();
                    let moved = (delta.popped + ahead_left).saturating_sub(ahead_back);
                    if ahead_back > delta.popped + ahead_left {
                        // More came back ahead than left: the position rose.
                        let rise = ahead_back - delta.popped - ahead_left;
                        let position = position + rise;
                        watched.position = Some(position);
                        watched.published_at = now;
                        publish(watched, || status(&TicketRecord::waiting(id, position)));
                    } else if this_left || moved >= position {
                        // Admitted or left: read it exactly (in the next round, right away). A
                        // call hearing it now may bring it back (counted below: no longer
                        // followed).
                        watched.read_at = Some(now);
                        watched.position = None;
                        more_due = true;
                    } else if moved > 0 || settings_changed {
                        let position = position - moved;
                        watched.position = Some(position);
                        if settings_changed || now >= watched.published_at + publish_every(position)
                        {
                            watched.published_at = now;
                            publish(watched, || status(&TicketRecord::waiting(id, position)));
                        }
                    }
                }
            }
            None => {
                // The cursor could not be followed: every streamed ticket is read again, a batch
                // a refresh (one due already keeps its time, so the longest due go first); polled
                // ones go back to the store, whose reads anchor them again (on the hub's first
                // read they are read in turn too: they were polled before it had a cursor).
                by_ticket.retain(|id, watched| {
                    first_read || watched.streams() > 0 || exact.contains(id.as_str())
                });
                for (id, watched) in by_ticket.iter_mut() {
                    if !exact.contains(id.as_str()) {
                        watched.read_at = Some(watched.read_at.map_or(now, |at| at.min(now)));
                        watched.position = None;
                    }
                }
                if first_read {
                    for (id, entry) in polled.iter_mut() {
                        entry.position = None;
                        if !entry.queued && !exact.contains(id.as_str()) {
                            entry.queued = true;
                            polled_due.push_back(id.clone());
                        }
                    }
                } else {
                    polled.retain(|id, _| exact.contains(id.as_str()));
                }
            }
        }
        for (id, read) in due.iter().zip(answer.tickets) {
            let Some(watched) = watchers.by_ticket.get_mut(id) else {
                // A ticket only polled: followed from this read on while it waits.
                let Watchers { polled, log, .. } = &mut *watchers;
                let Some(entry) = polled.get_mut(id) else {
                    continue;
                };
                match read {
                    Some((record, Some(seq)))
                        if record.state == TicketState::Waiting && record.position.is_some() =>
                    {
                        entry.seq = seq;
                        entry.position = record.position;
                        entry.mark = log.mark;
                        entry.popped_at = log.popped;
                    }
                    _ => {
                        polled.remove(id);
                    }
                }
                continue;
            };
            let Some((record, seq)) = read else {
                // Forgotten (an hour after it ended): nothing more will happen to it.
                watchers.by_ticket.remove(id);
                continue;
            };
            watched.seq = seq;
            watched.position = record.position.filter(|_| seq.is_some());
            watched.read_at = match record.state {
                TicketState::Waiting if seq.is_some() => None,
                // A pre-queue ticket gets its place at the draw, which moves no cursor: re-read.
                TicketState::TokenIssued | TicketState::PreQueue => Some(now + ISSUED_RECHECK),
                TicketState::Waiting => Some(now),
                _ => None,
            };
            // One only polled is followed while it waits; its other states come from the store.
            let done = record.state.is_terminal()
                || (watched.streams() == 0 && record.state != TicketState::Waiting);
            watched.published_at = now;
            publish(watched, || status(&record));
            if done {
                watchers.by_ticket.remove(id);
            }
        }
        watchers.cursor = Some(answer.cursor);
        if answer.cursor.left > 0 {
            // Somebody left or was skipped: a call in flight for a ticket not followed may be
            // one coming back (see `hearing`), among them one this refresh saw leave (a polled
            // one is caught up to see it).
            let pending: Vec<(u64, String)> = watchers
                .hearing
                .iter()
                .filter(|(_, (_, possible))| !*possible)
                .map(|(token, (id, _))| (*token, id.clone()))
                .collect();
            for (token, id) in pending {
                if !watchers.follows(&id) {
                    if let Some((_, possible)) = watchers.hearing.get_mut(&token) {
                        *possible = true;
                        watchers.possible_returns += 1;
                    }
                }
            }
        }
        // A return heard before this refresh was sent is in what it read.
        watchers.returns.retain(|(heard, _)| *heard >= now);
        watchers.refreshed_at = Some(now);
        Ok(more_due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vestibule_shared::RoomState;

    fn status(position: u64) -> TicketStatus {
        TicketStatus {
            ticket_id: "t".into(),
            room: "main".into(),
            status: TicketState::Waiting,
            position: Some(position),
            eta_seconds: None,
            eta_seconds_high: None,
            reason: None,
            next_poll_after_ms: 1000,
            entry_token: None,
            token_expires_at: None,
            checkout_url: None,
            room_state: RoomState::Open,
            place_kept: false,
            heartbeat_after_ms: None,
            sold_out_message: None,
            opens_at: None,
            ticket_tag: None,
            message_en: None,
            message_ko: None,
            beyond_stock: false,
            queueing_method: None,
        }
    }

    #[test]
    fn streams_of_one_ticket_share_one_channel_and_only_changes_are_sent() {
        let hub = SseHub::default();
        let mut a = hub.subscribe("t", status(5));
        let b = hub.subscribe("t", status(5));
        assert_eq!(hub.lock().by_ticket.len(), 1);
        let watchers = hub.lock();
        let watched = &watchers.by_ticket["t"];
        publish(watched, || status(5));
        assert!(!a.has_changed().unwrap(), "an unchanged status is not sent");
        publish(watched, || status(4));
        assert!(a.has_changed().unwrap());
        assert_eq!(a.borrow_and_update().position, Some(4));
        assert_eq!(b.borrow().position, Some(4));
    }

    #[test]
    fn closed_streams_are_forgotten_and_new_ones_are_due_a_read() {
        let hub = SseHub::default();
        let receiver = hub.subscribe("t", status(5));
        let (_, due) = hub.prepare(Instant::now());
        assert_eq!(due, ["t"]);
        assert_eq!(hub.stream_count(), 1);
        drop(receiver);
        let (_, due) = hub.prepare(Instant::now());
        assert!(due.is_empty());
        assert_eq!(hub.stream_count(), 0);
    }

    /// A random room's cursor is never followed, so every stream is due at every refresh: the
    /// longest due are read first, and 5,000 streams are all read within three refreshes of
    /// 2,000 (none starved by the map's order).
    #[tokio::test]
    async fn in_a_random_room_every_stream_is_read_in_turn() {
        use vestibule_store::memory::MemoryStore;
        use vestibule_store::{
            Catalog, Draw, JoinRequest, Queue, QueueingMethod, Settings, SettingsPatch,
        };
        let store = MemoryStore::new();
        let settings: Settings = serde_json::from_value(serde_json::json!({
            "admissionRatePerSec": 0.0, "paused": true, "tokenTtlMs": 60000
        }))
        .unwrap();
        let room = RoomId::new(
            "main",
            store.seed_room("main", &settings).await.unwrap().generation,
        );
        store.draw_seed(room, &"07".repeat(32)).await.unwrap();
        let patch = SettingsPatch {
            queueing_method: Some(QueueingMethod::Random),
            ..SettingsPatch::default()
        };
        let base = store.room_settings("main").await.unwrap();
        store.update_room(room, &base, &patch, None).await.unwrap();
        let hub = SseHub::default();
        let mut receivers = Vec::new();
        for i in 0..5_000 {
            let id = format!("ticket-{i}");
            store.join(room, &JoinRequest::new(&id)).await.unwrap();
            receivers.push(hub.subscribe(&id, status(0)));
        }
        let settings = store.room_settings("main").await.unwrap().settings;
        let status_of = |record: &TicketRecord| status(record.position.unwrap_or(0));
        for _ in 0..3 {
            hub.refresh(&store, room, settings.clone(), &status_of)
                .await
                .unwrap();
        }
        let unread = receivers
            .iter()
            .filter(|receiver| receiver.borrow().position == Some(0))
            .count();
        assert_eq!(unread, 0, "every stream was read within three refreshes");
    }

    fn delta(popped: u64, left: &[u64], back: &[u64]) -> vestibule_store::QueueDelta {
        vestibule_store::QueueDelta {
            popped,
            left_seqs: left.to_vec(),
            returned_seqs: back.to_vec(),
        }
    }

    fn polled_at(seq: u64, position: u64, log: &MoveLog) -> Polled {
        Polled {
            seq,
            position: Some(position),
            mark: log.mark,
            popped_at: log.popped,
            polled_until: Instant::now() + Duration::from_secs(60),
            heard_at: Instant::now(),
            hear_pending: false,
            queued: false,
            place_kept: false,
        }
    }

    /// A polled ticket caught up from the log moves as a streamed one moved by each refresh:
    /// − admitted − leavers ahead + returns ahead, summed; one that left, came back or may have
    /// been admitted on the way (even if returns since would put it behind the head again), or
    /// whose mark the log no longer reaches, is not followed any more.
    #[test]
    fn polled_tickets_are_caught_up_from_the_log_of_changes() {
        let keep = Duration::from_secs(60);
        let now = Instant::now();
        let mut log = MoveLog::default();
        log.push(&delta(1, &[], &[]), now, keep);
        // seq 50 at position 20, seq 10 at 2, seq 30 at 8 (all as of this mark).
        let mut far = polled_at(50, 20, &log);
        let mut near = polled_at(10, 2, &log);
        let mut leaver = polled_at(30, 8, &log);
        log.push(&delta(2, &[20, 30, 60], &[]), now, keep);
        log.push(&delta(0, &[], &[5, 7, 8, 40]), now, keep);
        log.push(&delta(1, &[], &[]), now, keep);
        // far: 20 − 3 (admitted) − 2 (leavers 20, 30 ahead) + 4 (returns ahead) = 19.
        assert!(far.catch_up(&log));
        assert_eq!(far.position, Some(19));
        assert_eq!((far.mark, far.popped_at), (log.mark, log.popped));
        // near: 2 admitted after its mark reached it; the 3 returns ahead do not bring it back.
        assert!(!near.catch_up(&log));
        // leaver: seq 30 left.
        assert!(!leaver.catch_up(&log));
        // Caught up again: nothing new, nothing moves; then one more admission.
        assert!(far.catch_up(&log));
        assert_eq!(far.position, Some(19));
        log.push(&delta(3, &[], &[]), now, keep);
        assert!(far.catch_up(&log));
        assert_eq!(far.position, Some(16));
        // The log forgets changes older than `keep`: a mark before them is not caught up.
        let mut old = polled_at(90, 50, &log);
        log.push(&delta(0, &[70], &[]), now, keep);
        log.push(&delta(0, &[71], &[]), now + keep * 2, keep);
        assert_eq!(log.moves.len(), 1);
        assert!(!old.catch_up(&log));
        // A lost cursor cuts the log: no mark before it is caught up.
        let mut cut = polled_at(90, 50, &log);
        log.cut();
        assert!(!cut.catch_up(&log));
        // One awaiting an exact read has nothing to catch up.
        let mut awaiting = polled_at(90, 50, &log);
        awaiting.position = None;
        awaiting.mark = 0;
        assert!(awaiting.catch_up(&log));
    }

    /// Polled tickets a failed refresh was to read go back on the due queue, first and once;
    /// one answered or queued since is left alone.
    #[test]
    fn a_failed_read_puts_polled_tickets_back_on_the_due_queue() {
        let hub = SseHub::default();
        let log = MoveLog::default();
        {
            let mut watchers = hub.lock();
            for id in ["a", "b", "c"] {
                let mut entry = polled_at(10, 5, &log);
                entry.position = None;
                watchers.polled.insert(id.to_owned(), entry);
            }
            watchers.polled.get_mut("c").unwrap().position = Some(5);
            watchers.polled.get_mut("b").unwrap().queued = true;
            watchers.polled_due.push_back("b".to_owned());
        }
        let due = ["a".to_owned(), "c".to_owned(), "gone".to_owned()];
        hub.requeue(&due);
        hub.requeue(&due);
        let watchers = hub.lock();
        assert_eq!(watchers.polled_due, ["a", "b"]);
        assert!(watchers.polled["a"].queued);
        assert!(!watchers.polled["c"].queued);
    }

    fn rules(refresh_ms: u64) -> PollRules {
        PollRules {
            refresh: Duration::from_millis(refresh_ms),
            abandon: Duration::from_secs(300),
            rate_per_sec: 1.0,
            lease: Duration::from_secs(60),
        }
    }

    /// A poll read from the store anchors its ticket at the hub's cursor; the next polls are
    /// answered from memory (followed by the cursor), except near the head, when the hub's last
    /// refresh is too old, and with a return heard since counted for those behind it.
    #[tokio::test]
    async fn polled_tickets_are_answered_from_memory_by_the_rules() {
        use vestibule_store::memory::MemoryStore;
        use vestibule_store::{Catalog, JoinRequest, Presence, Queue};
        let store = MemoryStore::new();
        let settings: Settings = serde_json::from_value(serde_json::json!({
            "admissionRatePerSec": 1.0, "paused": true, "tokenTtlMs": 60000
        }))
        .unwrap();
        let room = RoomId::new(
            "main",
            store.seed_room("main", &settings).await.unwrap().generation,
        );
        let hub = SseHub::default();
        let status_of = |record: &TicketRecord| status(record.position.unwrap_or(0));
        let ids: Vec<String> = (0..10).map(|i| format!("ticket-{i}")).collect();
        for id in &ids {
            store.join(room, &JoinRequest::new(id)).await.unwrap();
        }
        let poll = |id: String| {
            let (hub, store) = (&hub, &store);
            async move {
                let sent = Instant::now();
                let (record, anchor) = store
                    .hear_polled(room, &id, now_ms())
                    .await
                    .unwrap()
                    .unwrap();
                hub.note_poll(&id, &record, anchor, sent, &rules(100));
                record.position
            }
        };
        assert_eq!(
            hub.answer_poll(&ids[5], &rules(100)),
            None,
            "never refreshed"
        );
        assert_eq!(poll(ids[5].clone()).await, Some(6));
        // No cursor yet: read exactly at the first refresh.
        hub.refresh(&store, room, settings.clone(), &status_of)
            .await
            .unwrap();
        let answer = hub.answer_poll(&ids[5], &rules(100)).expect("followed");
        assert_eq!(answer.position, 6);
        // At the hub's cursor now: anchored by the poll itself.
        assert_eq!(poll(ids[8].clone()).await, Some(9));
        assert_eq!(hub.answer_poll(&ids[8], &rules(100)).unwrap().position, 9);
        // Near the head (within ⌈rate × (age + 1 s)⌉ + 1 = 3): the store answers.
        assert_eq!(poll(ids[1].clone()).await, Some(2));
        assert_eq!(hub.answer_poll(&ids[1], &rules(100)), None);
        // A return heard here ahead of ticket 8 (seq 5) and one unknown: 8 sees both, 5 one.
        let seq_of = |id: &str| {
            store
                .with_room(room, |room| room.poll_anchor(id))
                .unwrap()
                .unwrap()
                .seq
        };
        hub.lock()
            .returns
            .push((Instant::now(), Some(seq_of(&ids[6]))));
        // A call hearing a ticket the hub does not follow, dropped unanswered, while nobody
        // ever left: nobody can be held, so no return; a return of unknown place is counted.
        drop(hub.hearing(&["unknown".to_owned()]));
        assert_eq!(hub.answer_poll(&ids[8], &rules(100)).unwrap().position, 10);
        hub.lock().returns.push((Instant::now(), None));
        assert_eq!(hub.answer_poll(&ids[8], &rules(100)).unwrap().position, 11);
        assert_eq!(hub.answer_poll(&ids[5], &rules(100)).unwrap().position, 7);
        // A refresh sent after them has read them (none happened): they no longer count.
        hub.refresh(&store, room, settings.clone(), &status_of)
            .await
            .unwrap();
        assert_eq!(hub.answer_poll(&ids[8], &rules(100)).unwrap().position, 9);
        // Answers were queued once each for the batch of "heard from".
        let heard = hub.take_heard();
        assert_eq!(heard.len(), 2, "{heard:?}");
        assert!(hub.take_heard().is_empty());
        // A leave moves the answers at the next refresh, and the one that left is forgotten.
        store.leave(room, &ids[2], now_ms()).await.unwrap();
        hub.forget(&ids[2]);
        hub.refresh(&store, room, settings.clone(), &status_of)
            .await
            .unwrap();
        assert_eq!(hub.answer_poll(&ids[8], &rules(100)).unwrap().position, 8);
        assert_eq!(hub.answer_poll(&ids[5], &rules(100)).unwrap().position, 5);
        // A call hearing a ticket the hub does not follow (it may be a skipped one coming back),
        // in flight: counted in every answer until it answers; not kept, it no longer counts.
        let answer = |id: &str| hub.answer_poll(id, &rules(100)).unwrap().position;
        let hearing = hub.hearing(&["a-skipped-one".to_owned()]);
        assert_eq!(answer(&ids[8]), 9);
        hearing.answered([]);
        assert_eq!(answer(&ids[8]), 8);
        // One the hub follows is not counted, until a refresh sees it leave (skipped) while the
        // call is in flight; unanswered (a dropped request), it counts until the next refresh.
        let hearing = hub.hearing(&[ids[5].clone()]);
        assert_eq!(answer(&ids[8]), 8);
        store.leave(room, &ids[5], now_ms()).await.unwrap();
        hub.refresh(&store, room, settings.clone(), &status_of)
            .await
            .unwrap();
        assert_eq!(
            answer(&ids[8]),
            8,
            "7 behind the leaver, + 1 for the call in flight"
        );
        drop(hearing);
        assert_eq!(answer(&ids[8]), 8);
        hub.refresh(&store, room, settings.clone(), &status_of)
            .await
            .unwrap();
        assert_eq!(answer(&ids[8]), 7);
        // The hub's last refresh older than 3 refresh periods: the store answers.
        std::thread::sleep(Duration::from_millis(10));
        assert_eq!(hub.answer_poll(&ids[8], &rules(1)), None);
        // Nobody streams these: the watched ids for stream presence are none.
        assert!(hub.watched_ids().is_empty());
    }
}
