//! What the waiting view shows about the ticket and the link to the server: the signals
//! [`QueueView`] that [`crate::queue::Queue`] publishes.

use std::{cell::Cell, rc::Rc, time::Duration};

use leptos::prelude::*;
use vestibule_shared::{RoomState, SoldOutMessage, TicketState, TicketStatus};

/// What the page knows about its place in the room.
#[derive(Debug, Clone, PartialEq)]
// One `Phase` lives in one signal per page: boxing the status would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Phase {
    /// Joining or resuming; no answer yet.
    Joining,
    /// The latest status of the ticket (any state).
    Ticket(TicketStatus),
    /// The room does not exist or has closed (404 `room_not_found`, or an invalid room name).
    RoomNotFound,
    /// The server refused the request for a reason retrying cannot fix.
    Failed,
    /// A join got no place: the room is sold out (409 `sold_out`, `RoomState::SoldOut`, with the
    /// room's message) or closed to new joins (409 `room_closed`, `RoomState::Closed`).
    Refused(RoomState, Option<SoldOutMessage>),
    /// The room takes joins from `joins_at_ms` (Unix ms, the shopper's clock; 409
    /// `room_not_open`): the page counts down and joins by itself then ([`crate::opening`]).
    NotOpen {
        /// When the pre-queue (or the room) opens.
        joins_at_ms: f64,
    },
}

impl Phase {
    /// The ticket's state, once the server answered.
    pub fn ticket_state(&self) -> Option<TicketState> {
        match self {
            Self::Ticket(s) => Some(s.status),
            _ => None,
        }
    }

    /// The place in line while waiting; `None` before the first answer and after the wait.
    pub fn waiting_position(&self) -> Option<u64> {
        match self {
            Self::Ticket(s) if s.status == TicketState::Waiting => s.position,
            _ => None,
        }
    }

    /// Whether the shopper's turn came (TOKEN_ISSUED, or COMPLETED after it).
    pub fn is_admitted(&self) -> bool {
        matches!(
            self.ticket_state(),
            Some(TicketState::TokenIssued | TicketState::Completed)
        )
    }

    /// Whether the shopper waits in a room whose entry is paused.
    pub fn is_paused(&self) -> bool {
        matches!(self, Self::Ticket(s) if s.status == TicketState::Waiting && s.room_state == RoomState::Paused)
    }
}

/// The state of the link to the server, shown in `#connection[data-state]`.
///
/// It never claims more than the page knows: `Live` only after an answer or event arrived in
/// time; a request or stream that outlives its deadline turns it into `Retrying`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// First request or stream not answered yet.
    Connecting,
    /// Updates arrive (stream open and not silent, or polls succeed).
    Live,
    /// Polling is stopped while the tab is hidden.
    Hidden,
    /// The connection was lost; the next attempt is in `in_secs` seconds (counts down).
    Retrying {
        /// Whole seconds until the next attempt, rounded up.
        in_secs: u64,
    },
    /// The connection was lost and an attempt to reach the server is under way.
    Reconnecting,
    /// The browser reported it went offline; the page tries again when it is back online.
    Offline,
    /// Nothing more to follow (admitted, ended, unknown room).
    Stopped,
    /// The room is not open yet: the join is set for its opening.
    Scheduled,
}

impl Connection {
    /// The `data-state` value, e.g. `"retrying"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connecting => "connecting",
            Self::Live => "live",
            Self::Hidden => "hidden",
            Self::Retrying { .. } => "retrying",
            Self::Reconnecting => "reconnecting",
            Self::Offline => "offline",
            Self::Stopped => "stopped",
            Self::Scheduled => "scheduled",
        }
    }

    /// Whether the link is known to be broken, so the figures on screen may be out of date.
    pub fn is_lost(self) -> bool {
        matches!(
            self,
            Self::Retrying { .. } | Self::Reconnecting | Self::Offline
        )
    }
}

/// The transport in use right now, shown in `#connection[data-transport]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActiveTransport {
    /// One `EventSource` on the ticket's `events` stream.
    Sse,
    /// Single-timeout polling by `nextPollAfterMs`.
    Poll,
}

impl ActiveTransport {
    /// The `data-transport` value, `"sse"` or `"poll"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sse => "sse",
            Self::Poll => "poll",
        }
    }
}

/// The reactive state the waiting view renders; all handles are `Copy`.
#[derive(Debug, Clone, Copy)]
pub struct QueueView {
    /// Where the ticket stands.
    pub phase: RwSignal<Phase>,
    /// The link to the server.
    pub connection: RwSignal<Connection>,
    /// SSE or polling.
    pub transport: RwSignal<ActiveTransport>,
    /// The first position seen for this ticket (progress bar origin).
    pub starting_position: RwSignal<Option<u64>>,
    /// The text of the polite live region.
    pub announcement: RwSignal<String>,
    /// Solving the room's proof of work before the join ("Checking your browser…").
    pub checking: RwSignal<bool>,
    /// The room's name for people in the page's language, once an answer named one.
    pub display_name: RwSignal<Option<String>>,
}

impl QueueView {
    /// Fresh signals: joining, connecting, on `transport`.
    pub fn new(transport: ActiveTransport) -> Self {
        Self {
            phase: RwSignal::new(Phase::Joining),
            connection: RwSignal::new(Connection::Connecting),
            transport: RwSignal::new(transport),
            starting_position: RwSignal::new(None),
            announcement: RwSignal::new(String::new()),
            checking: RwSignal::new(false),
            display_name: RwSignal::new(None),
        }
    }
}

/// How often the "retrying in N s" countdown is refreshed.
const COUNTDOWN_PERIOD: Duration = Duration::from_millis(250);

/// Shows [`Connection::Retrying`] and counts its seconds down to the next attempt.
pub struct RetryCountdown {
    connection: RwSignal<Connection>,
    retry_at: Rc<Cell<Option<f64>>>,
    ticker: Cell<Option<IntervalHandle>>,
}

impl RetryCountdown {
    /// A stopped countdown that writes to `connection`.
    pub fn new(connection: RwSignal<Connection>) -> Self {
        Self {
            connection,
            retry_at: Rc::new(Cell::new(None)),
            ticker: Cell::new(None),
        }
    }

    /// Counts down `remaining` from now.
    pub fn start(&self, remaining: Duration) {
        self.retry_at
            .set(Some(js_sys::Date::now() + remaining.as_millis() as f64));
        let (connection, retry_at) = (self.connection, Rc::clone(&self.retry_at));
        let update = move || {
            if let Some(at) = retry_at.get() {
                let in_secs = ((at - js_sys::Date::now()) / 1_000.0).ceil().max(0.0) as u64;
                let shown = Connection::Retrying { in_secs };
                if connection.get_untracked() != shown {
                    connection.set(shown);
                }
            }
        };
        update();
        if self.ticker.get().is_none() {
            self.ticker
                .set(set_interval_with_handle(update, COUNTDOWN_PERIOD).ok());
        }
    }

    /// Stops counting (the attempt started, or the page stopped); the state is left as it is.
    pub fn stop(&self) {
        self.retry_at.set(None);
        if let Some(handle) = self.ticker.take() {
            handle.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(status: TicketState, room_state: RoomState) -> Phase {
        Phase::Ticket(TicketStatus {
            ticket_id: "t".into(),
            room: "main".into(),
            status,
            position: (status == TicketState::Waiting).then_some(7),
            eta_seconds: None,
            eta_seconds_high: None,
            reason: None,
            eta_basis: None,
            next_poll_after_ms: 1000,
            entry_token: None,
            token_expires_at: None,
            checkout_url: None,
            room_state,
            place_kept: false,
            heartbeat_after_ms: None,
            sold_out_message: None,
            opens_at: None,
            ticket_tag: None,
            message_en: None,
            message_ko: None,
            beyond_stock: false,
            queueing_method: None,
            display_name_en: None,
            display_name_ko: None,
        })
    }

    #[test]
    fn the_phase_tells_the_place_the_turn_and_a_pause() {
        let waiting = ticket(TicketState::Waiting, RoomState::Open);
        assert_eq!(waiting.waiting_position(), Some(7));
        assert!(!waiting.is_admitted() && !waiting.is_paused());
        assert!(ticket(TicketState::Waiting, RoomState::Paused).is_paused());
        for admitted in [TicketState::TokenIssued, TicketState::Completed] {
            let phase = ticket(admitted, RoomState::Open);
            assert!(phase.is_admitted(), "{admitted:?}");
            assert_eq!(phase.waiting_position(), None);
        }
        assert!(!ticket(TicketState::Expired, RoomState::Open).is_admitted());
        assert_eq!(Phase::Joining.ticket_state(), None);
        assert_eq!(Phase::Joining.waiting_position(), None);
    }

    #[test]
    fn only_a_broken_link_marks_the_figures_as_possibly_out_of_date() {
        assert!(Connection::Retrying { in_secs: 3 }.is_lost());
        assert!(Connection::Reconnecting.is_lost());
        assert!(Connection::Offline.is_lost());
        for fine in [
            Connection::Connecting,
            Connection::Live,
            Connection::Hidden,
            Connection::Stopped,
            Connection::Scheduled,
        ] {
            assert!(!fine.is_lost(), "{fine:?}");
        }
    }
}
