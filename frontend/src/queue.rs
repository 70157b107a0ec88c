//! The ticket's life cycle in the browser: join or resume, then follow the ticket by SSE or by
//! polling until it is admitted, with back-off and jitter while the connection is lost.
//!
//! One [`Queue`] per page. It owns every timer and the event stream, so there is never more
//! than one poll scheduled or in flight, and it publishes what the view shows through the
//! signals in [`QueueView`]. Every wait on the network is bounded: each request has a deadline
//! ([`crate::api`]), a silent stream is dropped ([`crate::sse`]), and the browser's `offline`
//! event is acted on at once.

use std::{
    cell::{Cell, RefCell},
    rc::Rc,
    time::Duration,
};

use leptos::{prelude::*, task::spawn_local};
use vestibule_shared::{RoomState, TicketState, TicketStatus};
use wasm_bindgen::{closure::Closure, JsCast};

use crate::{
    announce::{status_announcement, PositionAnnouncer},
    api::{self, ApiError},
    backoff::Backoff,
    connection::{ActiveTransport, Connection, Phase, QueueView, RetryCountdown},
    early,
    embed::Embedder,
    handoff::Exit,
    i18n::{t, Lang, Text},
    opening,
    page_params::{checkout_href, PageParams, Transport},
    proof,
    sale_text::{sale_text, SaleText},
    sse::EventStream,
    storage::RoomMemory,
};

mod stream;
mod timing;

/// Shortest wait between two polls, whatever `nextPollAfterMs` says.
const MIN_POLL_MS: u64 = 500;
/// While the browser says it is offline, look again this often in case `online` never fires.
const OFFLINE_CHECK: Duration = Duration::from_secs(15);

/// Where a status came from: HTTP answers also check the ticket before (re)opening a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Http,
    Sse,
}

/// Follows one ticket in one room; see the module docs.
pub struct Queue {
    room: String,
    base: String,
    exit: Rc<Exit>,
    embed: Rc<Embedder>,
    lang: Lang,
    lang_from_url: bool,
    requested: Transport,
    memory: RoomMemory,
    view: QueueView,
    ticket_id: RefCell<Option<String>>,
    timer: Cell<Option<TimeoutHandle>>,
    in_flight: Cell<bool>,
    /// When the last HTTP attempt started (ms since the epoch): a hung attempt's wait counts
    /// towards the back-off, so the next one starts as soon as the back-off allows.
    attempt_started: Cell<f64>,
    stopped: Cell<bool>,
    offline: Cell<bool>,
    backoff: RefCell<Backoff>,
    lost_announced: Cell<bool>,
    countdown: RetryCountdown,
    sse: RefCell<Option<EventStream>>,
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
        let view = QueueView::new(transport);
        let embed = Embedder::start(params.host.clone(), &params.room);
        let queue = Rc::new(Self {
            room: params.room.clone(),
            base: params.base.clone(),
            exit: Exit::new(params, view.announcement, Rc::clone(&embed)),
            embed,
            lang: params.lang,
            lang_from_url: params.lang_from_url,
            requested: params.transport,
            ticket_id: RefCell::new(None),
            memory: RoomMemory::new(&params.room),
            view,
            timer: Cell::new(None),
            in_flight: Cell::new(false),
            attempt_started: Cell::new(0.0),
            stopped: Cell::new(false),
            offline: Cell::new(false),
            backoff: RefCell::new(Backoff::default()),
            lost_announced: Cell::new(false),
            countdown: RetryCountdown::new(view.connection),
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
        if !window().navigator().on_line() {
            queue.on_offline();
        }
        queue.refresh();
        queue
    }

    /// The signals the view renders.
    pub fn view(&self) -> QueueView {
        self.view
    }

    /// How the shopper leaves once admitted (gate mode's hand-off state and retry).
    pub fn exit(&self) -> Rc<Exit> {
        Rc::clone(&self.exit)
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
            let result = api::leave(&this.room, &ticket_id).await;
            this.stopped.set(false);
            match result {
                // Read the ticket back: the view shows LEFT from the server's own answer.
                Ok(()) => this.refresh(),
                Err(error) => this.on_failure(error),
            }
        });
    }

    fn listen_to_page(self: &Rc<Self>) {
        // The page lives as long as these listeners, so they are never removed.
        let this = Rc::clone(self);
        let on_visibility = Closure::<dyn FnMut()>::new(move || this.on_visibility_change());
        let _ = document().add_event_listener_with_callback(
            "visibilitychange",
            on_visibility.as_ref().unchecked_ref(),
        );
        on_visibility.forget();
        for (name, online) in [("online", true), ("offline", false)] {
            let this = Rc::clone(self);
            let listener = Closure::<dyn FnMut()>::new(move || {
                if online {
                    this.on_online();
                } else {
                    this.on_offline();
                }
            });
            let _ =
                window().add_event_listener_with_callback(name, listener.as_ref().unchecked_ref());
            listener.forget();
        }
    }

    /// Joins (no ticket yet) or fetches the ticket's status, unless a request is in flight.
    fn refresh(self: &Rc<Self>) {
        if self.stopped.get() || self.in_flight.get() {
            return;
        }
        self.cancel_timer();
        self.countdown.stop();
        self.in_flight.set(true);
        self.attempt_started.set(js_sys::Date::now());
        if !self.offline.get() && self.view.connection.get_untracked().is_lost() {
            self.view.connection.set(Connection::Reconnecting);
        }
        let this = Rc::clone(self);
        spawn_local(async move {
            let ticket_id = this.ticket_id.borrow().clone();
            // The first time, the request `index.html` started before the page ran may answer.
            let early = early::claim(&this.room, ticket_id.as_deref(), &this.memory);
            let joining = ticket_id.is_none();
            let key = this.memory.idempotency_key();
            let result = match (early, ticket_id) {
                (Some(answer), _) => answer.await,
                (None, Some(id)) => api::ticket(&this.room, &id).await,
                (None, None) => api::join(&this.room, &key, None).await,
            };
            // A room that asks for proof of work refuses the plain join: solve and join again.
            let result = match result {
                Err(error) if joining && proof::needed(&error) => {
                    proof::join(&this.room, &key, this.view.checking).await
                }
                answer => answer,
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
        // An answer proves the link works, whatever the browser last said.
        self.offline.set(false);
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
        self.show_name(
            status.display_name_en.as_deref(),
            status.display_name_ko.as_deref(),
        );
        if let (TicketState::Waiting, Some(position)) = (status.status, status.position) {
            let start = self.memory.starting_position(&status.ticket_id, position);
            self.view.starting_position.set(Some(start));
        }
        self.announce_change(&status, was_lost);
        self.embed.status(&status);

        let state = status.status;
        let checkout = matches!(state, TicketState::TokenIssued).then(|| {
            if let Some(token) = &status.entry_token {
                self.memory
                    .set_entry_token(token, status.token_expires_at.as_deref());
            }
            let lang_in_url = self.lang_from_url.then_some(self.lang);
            let url = status.checkout_url.as_deref();
            checkout_href(&self.base, &self.room, lang_in_url, url)
        });
        let token = status.entry_token.clone();
        // The server never asks for less than 1 s; the floor only guards against a bad hint.
        let next_poll = Duration::from_millis(status.next_poll_after_ms.max(MIN_POLL_MS));
        self.view.phase.set(Phase::Ticket(status));

        match state {
            // A pre-queue ticket follows its hint too: it wakes just after the opening.
            TicketState::Waiting | TicketState::PreQueue => {
                match (via, self.view.transport.get_untracked()) {
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
                }
            }
            TicketState::TokenIssued => {
                self.stop();
                if let Some(href) = checkout {
                    self.exit.admitted(token.as_deref(), href);
                }
            }
            TicketState::Completed
            | TicketState::Expired
            | TicketState::Left
            | TicketState::SoldOut => self.stop(),
        }
    }

    fn announce_change(&self, status: &TicketStatus, was_lost: bool) {
        let previous_room_state = self.view.phase.with_untracked(|phase| match phase {
            Phase::Ticket(s) if s.status == TicketState::Waiting => Some(s.room_state),
            _ => None,
        });
        let text = status_announcement(
            self.lang,
            status,
            previous_room_state,
            was_lost,
            &mut self.announcer.borrow_mut(),
            js_sys::Date::now(),
        );
        if let Some(text) = text {
            self.view.announcement.set(text);
        }
    }

    fn on_failure(self: &Rc<Self>, error: ApiError) {
        if self.stopped.get() {
            return;
        }
        if let Some(refusal) = error.refusal() {
            self.show_name(
                refusal.display_name_en.as_deref(),
                refusal.display_name_ko.as_deref(),
            );
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
                .next_delay(js_sys::Math::random(), None, true);
            self.view.connection.set(Connection::Connecting);
            self.schedule(delay);
        } else if error.is_room_not_open() {
            self.close_sse();
            self.wait_for_opening(&error);
        } else if let Some(room_state) = error.refused_join() {
            self.close_sse();
            let message = error.refusal().and_then(|r| r.sold_out_message.clone());
            self.view.phase.set(Phase::Refused(room_state, message));
            let text = match room_state {
                RoomState::SoldOut => SaleText::SoldOut,
                _ => SaleText::Closed,
            };
            self.view
                .announcement
                .set(sale_text(self.lang, text).to_owned());
            self.stop();
        } else if error.is_room_not_found() {
            self.view.phase.set(Phase::RoomNotFound);
            self.say(Text::RoomNotFound);
            self.stop();
        } else if error.is_transient() {
            self.close_sse();
            self.connection_lost();
            self.retry_later(error.retry_after(), error.server_answered());
        } else {
            self.view.phase.set(Phase::Failed);
            self.say(Text::Failed);
            self.stop();
        }
    }

    /// Shows the room's name for people in the page's language (`None`: the slug stays).
    fn show_name(&self, en: Option<&str>, ko: Option<&str>) {
        let name = match self.lang {
            Lang::En => en,
            Lang::Ko => ko,
        };
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            if self
                .view
                .display_name
                .with_untracked(|shown| shown.as_deref() != Some(name))
            {
                self.view.display_name.set(Some(name.to_owned()));
            }
        }
    }

    /// 409 `room_not_open`: counts down to the time joins start and joins by itself then
    /// ([`crate::opening::join_delay_ms`]); a long wait is a re-check that reads the times again.
    fn wait_for_opening(self: &Rc<Self>, error: &ApiError) {
        let now = js_sys::Date::now();
        let joins_at = error
            .refusal()
            .and_then(|r| r.prequeue_opens_at.as_deref().or(r.opens_at.as_deref()))
            .map(js_sys::Date::parse)
            .filter(|at| !at.is_nan());
        let retry_after = error.retry_after().map(|wait| wait.as_secs());
        let delay = opening::join_delay_ms(now, joins_at, retry_after, js_sys::Math::random());
        // Shown by the shopper's clock; without a time, by the server's wait.
        let shown_at = joins_at.unwrap_or(now + 1000.0 * retry_after.unwrap_or(0) as f64);
        let announce = !matches!(self.view.phase.get_untracked(), Phase::NotOpen { .. });
        self.view.phase.set(Phase::NotOpen {
            joins_at_ms: shown_at,
        });
        if announce {
            self.say(Text::NotOpen);
        }
        self.view.connection.set(Connection::Scheduled);
        // Not `schedule`: a hidden polling tab must join at the opening too.
        self.set_timer(Duration::from_millis(delay));
    }

    fn say(&self, text: Text) {
        self.view.announcement.set(t(self.lang, text).to_owned());
    }

    /// Says once per outage that the link is lost (the place is kept).
    fn connection_lost(&self) {
        if !self.lost_announced.replace(true) {
            self.say(Text::SayConnectionLost);
        }
    }

    fn stop(&self) {
        self.stopped.set(true);
        self.cancel_timer();
        self.countdown.stop();
        self.close_sse();
        self.view.connection.set(Connection::Stopped);
    }
}
