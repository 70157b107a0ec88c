//! What the hub knows of the tickets it follows: streamed ones (moved by every refresh) and
//! those only polled (caught up from the log when asked for).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use vestibule_shared::TicketStatus;
use vestibule_store::{PolledTicket, QueueCursor, Settings};

use super::move_log::{MoveLog, Polled};

/// What the hub knows of one watched ticket.
pub(super) struct Watched {
    /// Its SSE streams' channel (`None` while it is only polled).
    pub(super) sender: Option<watch::Sender<TicketStatus>>,
    /// Arrival sequence while waiting (known after the first exact read).
    pub(super) seq: Option<u64>,
    /// Position while waiting, as moved by the deltas.
    pub(super) position: Option<u64>,
    /// When to read the ticket exactly; `None` = never (a waiting ticket followed by deltas).
    pub(super) read_at: Option<Instant>,
    /// When its streams were last sent a position change (far-back positions are sent less often).
    pub(super) published_at: Instant,
    /// Until when it is followed for its polls (`None` = for its streams only).
    pub(super) polled_until: Option<Instant>,
    /// When the store last wrote its holder heard, as sent: a poll read from the store, a batch
    /// of polls answered here, a batch of its streams.
    pub(super) heard_at: Option<Instant>,
    /// Answered here since the last batch of "heard from" (it is in `Watchers::to_hear`).
    pub(super) hear_pending: bool,
    /// The store said its place was kept (it came back after a skip).
    pub(super) place_kept: bool,
}

impl Watched {
    pub(super) fn streams(&self) -> usize {
        self.sender
            .as_ref()
            .map_or(0, watch::Sender::receiver_count)
    }

    /// Waiting, and its position moved by the cursor.
    pub(super) fn follows(&self) -> bool {
        self.seq.is_some() && self.position.is_some() && self.read_at.is_none()
    }

    pub(super) fn new() -> Self {
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

/// The hub's state: every ticket it follows, the queue's changes and cursor, and the calls in
/// flight that hear tickets.
#[derive(Default)]
pub(super) struct Watchers {
    /// Tickets with SSE streams (and those followed for polls too), moved by every refresh.
    pub(super) by_ticket: HashMap<String, Watched>,
    /// Tickets followed for their polls only, caught up from `log` when asked for.
    pub(super) polled: HashMap<String, Polled>,
    /// Polled tickets awaiting an exact read, oldest first.
    pub(super) polled_due: VecDeque<String>,
    pub(super) log: MoveLog,
    /// The longest poll lease seen: how long `log` keeps a change.
    pub(super) lease: Duration,
    /// When the polled map was last swept of tickets nobody polls any more.
    pub(super) swept_at: Option<Instant>,
    pub(super) cursor: Option<QueueCursor>,
    /// The room settings the published statuses were computed with (ETA, paused).
    pub(super) settings_seen: Option<Settings>,
    /// When the last refresh that succeeded was sent (its read of the queue came after).
    pub(super) refreshed_at: Option<Instant>,
    /// Tickets answered here since the last batch of "heard from".
    pub(super) to_hear: Vec<PolledTicket>,
    /// Returns to the line heard in this process (when the store answered, and the returning
    /// ticket's arrival sequence when known) that the last refresh may not have seen: each may
    /// be ahead of a followed ticket, whose answer then counts it.
    pub(super) returns: Vec<(Instant, Option<u64>)>,
    /// Store calls in flight that hear tickets ([`Hearing`](super::Hearing)), by token: the ticket, and whether
    /// the call may bring it back ahead of followed tickets (it is not followed as waiting, or
    /// a refresh saw it leave meanwhile).
    pub(super) hearing: HashMap<u64, (String, bool)>,
    /// How many of `hearing` may bring a ticket back.
    pub(super) possible_returns: u64,
    pub(super) next_hearing: u64,
}

impl Watchers {
    /// Whether `id` is followed as waiting. A polled ticket is caught up first, and forgotten
    /// when it may no longer wait.
    pub(super) fn follows(&mut self, id: &str) -> bool {
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
