//! The ticket's life cycle in the browser: join or resume, then follow the ticket by SSE or by
//! polling until it is admitted, with back-off and jitter while the connection is lost.
//!
//! One [`Queue`] per page. It owns every timer and the event stream, so there is never more
//! than one poll scheduled or in flight, and it publishes what the view shows through the
//! signals in [`QueueView`].

use std::{
    cell::{Cell, RefCell},
    rc::Rc,
    time::Duration,
};

use leptos::{prelude::*, task::spawn_local};
use vestibule_shared::{RoomState, TicketState, TicketStatus};
use wasm_bindgen::{closure::Closure, JsCast};
use web_sys::{Event, EventSource, MessageEvent};

use crate::{
    announce::PositionAnnouncer,
    api::{self, ApiError},
    backoff::Backoff,
    i18n::{say_position, t, Lang, Text},
    page_params::{PageParams, Transport},
    storage::RoomMemory,
};

/// Shortest wait between two polls, whatever `nextPollAfterMs` says.
const MIN_POLL_MS: u64 = 500;

/// What the page knows about its place in the room.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    /// Joining or resuming; no answer yet.
    Joining,
    /// The latest status of the ticket (any state).
    Ticket(TicketStatus),
    /// The room does not exist or has closed (404 `room_not_found`, or an invalid room name).
    RoomNotFound,
    /// The server refused the request for a reason retrying cannot fix.
    Failed,
}

/// The state of the link to the server, shown in `#connection[data-state]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// First request or stream not answered yet.
    Connecting,
    /// Updates arrive (stream open, or polls succeed).
    Live,
    /// Polling is stopped while the tab is hidden.
    Hidden,
    /// The connection was lost; the next attempt is in about `in_secs` seconds.
    Retrying { in_secs: u64 },
    /// Nothing more to follow (admitted, ended, unknown room).
    Stopped,
}

impl Connection {
    /// The `data-state` value, e.g. `"retrying"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connecting => "connecting",
            Self::Live => "live",
            Self::Hidden => "hidden",
            Self::Retrying { .. } => "retrying",
            Self::Stopped => "stopped",
        }
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
}

/// Where a status came from: HTTP answers also check the ticket before (re)opening a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Http,
    Sse,
}

/// An open event stream and the callbacks it calls; closing drops them.
struct SseStream {
    source: EventSource,
    _on_status: Closure<dyn FnMut(MessageEvent)>,
    _on_open: Closure<dyn FnMut(Event)>,
    _on_error: Closure<dyn FnMut(Event)>,
}

/// Follows one ticket in one room; see the module docs.
pub struct Queue {
    room: String,
    lang: Lang,
    lang_from_url: bool,
    requested: Transport,
    memory: RoomMemory,
    view: QueueView,
    ticket_id: RefCell<Option<String>>,
    timer: Cell<Option<TimeoutHandle>>,
    in_flight: Cell<bool>,
    stopped: Cell<bool>,
    backoff: RefCell<Backoff>,
    lost_announced: Cell<bool>,
    sse: RefCell<Option<SseStream>>,
    sse_errors: Cell<u32>,
    announcer: RefCell<PositionAnnouncer>,
}

impl Queue {
    /// Starts following the room named by `params`: resumes the stored ticket or joins.
    ///
    /// Must run inside a reactive owner (a component), which owns the signals.
    pub fn start(params: &PageParams) -> Rc<Self> {
        let transport = match params.transport {
            Transport::Poll => ActiveTransport::Poll,
            Transport::Auto | Transport::Sse => ActiveTransport::Sse,
        };
        let view = QueueView {
            phase: RwSignal::new(Phase::Joining),
            connection: RwSignal::new(Connection::Connecting),
            transport: RwSignal::new(transport),
            starting_position: RwSignal::new(None),
            announcement: RwSignal::new(String::new()),
        };
        let memory = RoomMemory::new(&params.room);
        let queue = Rc::new(Self {
            room: params.room.clone(),
            lang: params.lang,
            lang_from_url: params.lang_from_url,
            requested: params.transport,
            ticket_id: RefCell::new(None),
            memory,
            view,
            timer: Cell::new(None),
            in_flight: Cell::new(false),
            stopped: Cell::new(false),
            backoff: RefCell::new(Backoff::default()),
            lost_announced: Cell::new(false),
            sse: RefCell::new(None),
            sse_errors: Cell::new(0),
            announcer: RefCell::new(PositionAnnouncer::default()),
        });
        if !params.room_is_valid() {
            queue.view.phase.set(Phase::RoomNotFound);
            queue.stop();
            return queue;
        }
        queue.ticket_id.replace(queue.memory.ticket_id());
        queue.listen_to_page();
        queue.refresh();
        queue
    }

    /// The signals the view renders.
    pub fn view(&self) -> QueueView {
        self.view
    }

    /// Asks the server at once (the "Retry now" button).
    pub fn retry_now(self: &Rc<Self>) {
        self.refresh();
    }

    /// Forgets an ended ticket and takes a new place at the end of the line.
    pub fn join_again(self: &Rc<Self>) {
        self.stop();
        self.memory.forget_ticket();
        self.ticket_id.replace(None);
        self.backoff.borrow_mut().reset();
        self.sse_errors.set(0);
        *self.announcer.borrow_mut() = PositionAnnouncer::default();
        self.view.starting_position.set(None);
        self.view.phase.set(Phase::Joining);
        self.view.connection.set(Connection::Connecting);
        self.stopped.set(false);
        self.refresh();
    }

    /// Gives up the place: the server marks the ticket LEFT and everyone behind moves up; the
    /// page then shows the ended ticket with "Join the line again".
    pub fn leave(self: &Rc<Self>) {
        let Some(ticket_id) = self.ticket_id.borrow().clone() else {
            return;
        };
        self.stop();
        let this = Rc::clone(self);
        spawn_local(async move {
            match api::leave(&this.room, &ticket_id).await {
                // Read the ticket back: the view shows LEFT from the server's own answer.
                Ok(()) => {
                    this.stopped.set(false);
                    this.refresh();
                }
                Err(error) => {
                    this.stopped.set(false);
                    this.on_failure(error);
                }
            }
        });
    }

    fn listen_to_page(self: &Rc<Self>) {
        let this = Rc::clone(self);
        let on_visibility = Closure::<dyn FnMut()>::new(move || this.on_visibility_change());
        let this = Rc::clone(self);
        let on_online = Closure::<dyn FnMut()>::new(move || this.on_online());
        // The page lives as long as these listeners, so they are never removed.
        let _ = document().add_event_listener_with_callback(
            "visibilitychange",
            on_visibility.as_ref().unchecked_ref(),
        );
        let _ =
            window().add_event_listener_with_callback("online", on_online.as_ref().unchecked_ref());
        on_visibility.forget();
        on_online.forget();
    }

    /// Joins (no ticket yet) or fetches the ticket's status, unless a request is in flight.
    fn refresh(self: &Rc<Self>) {
        if self.stopped.get() || self.in_flight.get() {
            return;
        }
        self.cancel_timer();
        self.in_flight.set(true);
        if matches!(
            self.view.connection.get_untracked(),
            Connection::Retrying { .. }
        ) {
            self.view.connection.set(Connection::Connecting);
        }
        let this = Rc::clone(self);
        spawn_local(async move {
            let ticket_id = this.ticket_id.borrow().clone();
            let result = match ticket_id {
                Some(id) => api::ticket(&this.room, &id).await,
                None => api::join(&this.room, &this.memory.idempotency_key()).await,
            };
            this.in_flight.set(false);
            match result {
                Ok(status) => this.on_status(status, Via::Http),
                Err(error) => this.on_failure(error),
            }
        });
    }

    fn on_status(self: &Rc<Self>, status: TicketStatus, via: Via) {
        if self.stopped.get() {
            return;
        }
        // Over SSE only a delivered event proves the stream works; a successful HTTP check
        // before reopening it must not undo the back-off of a stream that keeps failing.
        if via == Via::Sse || self.view.transport.get_untracked() == ActiveTransport::Poll {
            self.backoff.borrow_mut().reset();
        }
        let was_lost = self.lost_announced.replace(false);
        if self.ticket_id.borrow().as_deref() != Some(status.ticket_id.as_str()) {
            self.memory.set_ticket_id(&status.ticket_id);
            self.ticket_id.replace(Some(status.ticket_id.clone()));
        }
        if let (TicketState::Waiting, Some(position)) = (status.status, status.position) {
            let start = self.memory.starting_position(&status.ticket_id, position);
            self.view.starting_position.set(Some(start));
        }
        self.announce_change(&status, was_lost);

        let state = status.status;
        let checkout = matches!(state, TicketState::TokenIssued).then(|| {
            if let Some(token) = &status.entry_token {
                self.memory
                    .set_entry_token(token, status.token_expires_at.as_deref());
            }
            self.checkout_href(status.checkout_url.as_deref())
        });
        // The server never asks for less than 1 s; the floor only guards against a bad hint.
        let next_poll = Duration::from_millis(status.next_poll_after_ms.max(MIN_POLL_MS));
        self.view.phase.set(Phase::Ticket(status));

        match state {
            TicketState::Waiting => match (via, self.view.transport.get_untracked()) {
                (Via::Sse, _) => self.view.connection.set(Connection::Live),
                (Via::Http, ActiveTransport::Sse) => {
                    if self.sse.borrow().is_none() {
                        self.open_sse();
                    }
                }
                (Via::Http, ActiveTransport::Poll) => {
                    self.view.connection.set(Connection::Live);
                    self.schedule(next_poll);
                }
            },
            TicketState::TokenIssued => {
                self.stop();
                if let Some(href) = checkout {
                    // `replace`, so Back from checkout returns to the shop, not to this redirect.
                    let _ = window().location().replace(&href);
                }
            }
            TicketState::Completed | TicketState::Expired | TicketState::Left => self.stop(),
        }
    }

    fn announce_change(&self, status: &TicketStatus, was_lost: bool) {
        let lang = self.lang;
        let previous_room_state = self.view.phase.with_untracked(|phase| match phase {
            Phase::Ticket(s) if s.status == TicketState::Waiting => Some(s.room_state),
            _ => None,
        });
        let now = js_sys::Date::now();
        let mut parts: Vec<String> = Vec::new();
        match status.status {
            TicketState::Waiting => {
                let paused = status.room_state == RoomState::Paused;
                if paused && previous_room_state != Some(RoomState::Paused) {
                    parts.push(t(lang, Text::SayPaused).to_owned());
                } else if !paused && previous_room_state == Some(RoomState::Paused) {
                    parts.push(t(lang, Text::SayResumed).to_owned());
                } else if was_lost {
                    parts.push(t(lang, Text::SayReconnected).to_owned());
                }
                if let Some(position) = status.position {
                    let mut announcer = self.announcer.borrow_mut();
                    if !parts.is_empty() {
                        announcer.record(position, now);
                        parts.push(say_position(lang, position, status.eta_seconds));
                    } else if announcer.should_announce(position, now) {
                        parts.push(say_position(lang, position, status.eta_seconds));
                    }
                }
            }
            TicketState::TokenIssued => parts.push(t(lang, Text::SayYourTurn).to_owned()),
            TicketState::Completed => parts.push(t(lang, Text::Completed).to_owned()),
            TicketState::Expired => parts.push(t(lang, Text::Expired).to_owned()),
            TicketState::Left => parts.push(t(lang, Text::Left).to_owned()),
        }
        if !parts.is_empty() {
            self.view.announcement.set(parts.join(" "));
        }
    }

    fn on_failure(self: &Rc<Self>, error: ApiError) {
        if self.stopped.get() {
            return;
        }
        if error.is_ticket_not_found() {
            // The server forgot the ticket (ended over an hour ago, or a store reset):
            // take a new place rather than show a ticket that no longer exists.
            self.close_sse();
            self.memory.forget_ticket();
            self.ticket_id.replace(None);
            self.view.starting_position.set(None);
            self.view.phase.set(Phase::Joining);
            // Backed off all the same, so a server that keeps forgetting cannot cause a storm.
            let delay = self
                .backoff
                .borrow_mut()
                .next_delay(js_sys::Math::random(), None);
            self.view.connection.set(Connection::Connecting);
            self.schedule(delay);
        } else if error.is_room_not_found() {
            self.view.phase.set(Phase::RoomNotFound);
            self.view
                .announcement
                .set(t(self.lang, Text::RoomNotFound).to_owned());
            self.stop();
        } else if error.is_transient() {
            self.close_sse();
            if !self.lost_announced.replace(true) {
                self.view
                    .announcement
                    .set(t(self.lang, Text::SayConnectionLost).to_owned());
            }
            self.retry_later(error.retry_after());
        } else {
            self.view.phase.set(Phase::Failed);
            self.view
                .announcement
                .set(t(self.lang, Text::Failed).to_owned());
            self.stop();
        }
    }

    fn retry_later(self: &Rc<Self>, retry_after: Option<Duration>) {
        let delay = self
            .backoff
            .borrow_mut()
            .next_delay(js_sys::Math::random(), retry_after);
        self.view.connection.set(Connection::Retrying {
            in_secs: delay.as_millis().div_ceil(1_000) as u64,
        });
        self.schedule(delay);
    }

    /// Sets the one timer for the next request, replacing any other. While polling, nothing
    /// is scheduled in a hidden tab: becoming visible asks at once instead.
    fn schedule(self: &Rc<Self>, delay: Duration) {
        self.cancel_timer();
        if self.view.transport.get_untracked() == ActiveTransport::Poll && document().hidden() {
            self.view.connection.set(Connection::Hidden);
            return;
        }
        let this = Rc::clone(self);
        let handle = set_timeout_with_handle(
            move || {
                this.timer.set(None);
                this.refresh();
            },
            delay,
        );
        self.timer.set(handle.ok());
    }

    fn cancel_timer(&self) {
        if let Some(handle) = self.timer.take() {
            handle.clear();
        }
    }

    fn on_visibility_change(self: &Rc<Self>) {
        if self.stopped.get() || self.view.transport.get_untracked() != ActiveTransport::Poll {
            return;
        }
        if document().hidden() {
            self.cancel_timer();
            if !self.in_flight.get() {
                self.view.connection.set(Connection::Hidden);
            }
        } else {
            self.refresh();
        }
    }

    fn on_online(self: &Rc<Self>) {
        if matches!(
            self.view.connection.get_untracked(),
            Connection::Retrying { .. }
        ) {
            self.refresh();
        }
    }

    fn open_sse(self: &Rc<Self>) {
        let Some(ticket_id) = self.ticket_id.borrow().clone() else {
            return;
        };
        let Ok(source) = EventSource::new(&api::events_url(&self.room, &ticket_id)) else {
            // No EventSource at all: polling is the only way left.
            self.view.transport.set(ActiveTransport::Poll);
            self.refresh();
            return;
        };
        self.view.connection.set(Connection::Connecting);

        let this = Rc::clone(self);
        let on_status = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            let Some(data) = event.data().as_string() else {
                return;
            };
            if let Ok(status) = serde_json::from_str::<TicketStatus>(&data) {
                this.on_status(status, Via::Sse);
            }
        });
        let this = Rc::clone(self);
        let on_open = Closure::<dyn FnMut(Event)>::new(move |_: Event| {
            if !this.stopped.get() {
                this.view.connection.set(Connection::Live);
            }
        });
        let this = Rc::clone(self);
        let on_error = Closure::<dyn FnMut(Event)>::new(move |_: Event| this.on_sse_error());

        let _ =
            source.add_event_listener_with_callback("status", on_status.as_ref().unchecked_ref());
        source.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        self.sse.replace(Some(SseStream {
            source,
            _on_status: on_status,
            _on_open: on_open,
            _on_error: on_error,
        }));
    }

    fn close_sse(&self) {
        if let Some(stream) = self.sse.take() {
            stream.source.close();
            // One of its callbacks may be running right now: drop them once it has returned.
            spawn_local(async move { drop(stream) });
        }
    }

    /// The browser would reconnect by itself, but without back-off, jitter or a limit; the
    /// page closes the stream, checks the ticket over HTTP after a back-off, then reopens it.
    fn on_sse_error(self: &Rc<Self>) {
        if self.stopped.get() {
            return;
        }
        self.close_sse();
        let errors = self.sse_errors.get() + 1;
        self.sse_errors.set(errors);
        if self.requested == Transport::Auto && errors >= 2 {
            self.view.transport.set(ActiveTransport::Poll);
            self.refresh();
        } else {
            self.retry_later(None);
        }
    }

    fn stop(&self) {
        self.stopped.set(true);
        self.cancel_timer();
        self.close_sse();
        self.view.connection.set(Connection::Stopped);
    }

    fn checkout_href(&self, checkout_url: Option<&str>) -> String {
        checkout_href(
            &self.room,
            self.lang_from_url.then_some(self.lang),
            checkout_url,
        )
    }
}

/// Where to send an admitted shopper: the server's `checkoutUrl` when it is a same-origin path,
/// else `/checkout?room=…`; carries `lang` when the URL chose one.
pub fn checkout_href(room: &str, lang: Option<Lang>, checkout_url: Option<&str>) -> String {
    let same_origin_path =
        |url: &&str| url.starts_with('/') && !url.starts_with("//") && !url.contains('\\');
    let mut href = checkout_url
        .filter(same_origin_path)
        .map(str::to_owned)
        .unwrap_or_else(|| format!("/checkout?room={room}"));
    if let Some(lang) = lang {
        if !href.contains("lang=") {
            href.push(if href.contains('?') { '&' } else { '?' });
            href.push_str("lang=");
            href.push_str(lang.code());
        }
    }
    href
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkout_goes_to_the_servers_same_origin_path() {
        assert_eq!(
            checkout_href("main", None, Some("/checkout?room=main")),
            "/checkout?room=main"
        );
    }

    #[test]
    fn checkout_never_leaves_the_origin() {
        for url in [
            "https://evil.example/",
            "//evil.example/x",
            "/\\evil.example",
            "javascript:x",
        ] {
            assert_eq!(
                checkout_href("main", None, Some(url)),
                "/checkout?room=main"
            );
        }
        assert_eq!(checkout_href("drop-1", None, None), "/checkout?room=drop-1");
    }

    #[test]
    fn checkout_keeps_a_language_chosen_in_the_url() {
        assert_eq!(
            checkout_href("main", Some(Lang::Ko), Some("/checkout?room=main")),
            "/checkout?room=main&lang=ko"
        );
        assert_eq!(
            checkout_href("main", Some(Lang::En), Some("/checkout")),
            "/checkout?lang=en"
        );
    }
}
