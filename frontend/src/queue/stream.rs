//! The [`Queue`]'s event stream: opened, closed, and what a failure of it does.

use std::rc::Rc;

use leptos::{prelude::*, task::spawn_local};

use super::{Queue, Via};
use crate::{
    api,
    connection::{ActiveTransport, Connection},
    page_params::Transport,
    sse::{EventStream, StreamHandlers},
};

impl Queue {
    pub(super) fn open_sse(self: &Rc<Self>) {
        let Some(ticket_id) = self.ticket_id.borrow().clone() else {
            return;
        };
        let (on_status, on_open, on_error, on_silent) = (
            Rc::clone(self),
            Rc::clone(self),
            Rc::clone(self),
            Rc::clone(self),
        );
        let handlers = StreamHandlers {
            on_status: Box::new(move |status| on_status.on_status(status, Via::Sse)),
            on_open: Box::new(move || {
                if !on_open.stopped.get() {
                    on_open.view.connection.set(Connection::Live);
                }
            }),
            on_error: Box::new(move || on_error.on_sse_error()),
            on_silent: Box::new(move || on_silent.on_sse_error()),
        };
        let Some(stream) = EventStream::open(&api::events_url(&self.room, &ticket_id), handlers)
        else {
            // No EventSource at all: polling is the only way left.
            self.view.transport.set(ActiveTransport::Poll);
            self.refresh();
            return;
        };
        self.view.connection.set(Connection::Connecting);
        self.sse.replace(Some(stream));
    }

    pub(super) fn close_sse(&self) {
        if let Some(mut stream) = self.sse.take() {
            stream.shut();
            // One of its callbacks may be running right now: drop them once it has returned.
            spawn_local(async move { drop(stream) });
        }
    }

    /// The browser would reconnect by itself, but without back-off, jitter or a limit (and
    /// never for a hung stream); the page closes the stream, checks the ticket over HTTP after
    /// a back-off, then reopens it. In `auto` mode a second failure switches to polling.
    pub(super) fn on_sse_error(self: &Rc<Self>) {
        if self.stopped.get() {
            return;
        }
        self.close_sse();
        let errors = self.sse_errors.get() + 1;
        self.sse_errors.set(errors);
        if self.requested == Transport::Auto && errors >= 2 {
            self.view.transport.set(ActiveTransport::Poll);
        }
        self.connection_lost();
        self.retry_later(None, false);
    }
}
