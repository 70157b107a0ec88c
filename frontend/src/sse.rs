//! One `EventSource` on a ticket's event stream, with a watchdog for a silent stream.
//!
//! A hung connection (a proxy or mobile link that accepts bytes and never delivers them) gives
//! an `EventSource` no error at all: it waits forever. The server sends `event: keepalive`
//! every [`SERVER_KEEP_ALIVE`] while nothing else happens (a named event, because comments never
//! reach the page), so a stream silent for two of those periods is reported as dead.

use std::{cell::Cell, rc::Rc, time::Duration};

use leptos::prelude::{set_interval_with_handle, IntervalHandle};
use vestibule_shared::TicketStatus;
use wasm_bindgen::{closure::Closure, JsCast};
use web_sys::{Event, EventSource, MessageEvent};

/// The server's keep-alive period on ticket streams (`KEEP_ALIVE_SECS` in the server's
/// `http/events.rs`).
pub const SERVER_KEEP_ALIVE: Duration = Duration::from_secs(10);

/// Silence after which a stream counts as dead: two keep-alive periods and some slack.
const SILENCE_LIMIT_MS: f64 = 2.0 * SERVER_KEEP_ALIVE.as_millis() as f64 + 2_000.0;

/// How often the watchdog looks at the stream.
const WATCHDOG_PERIOD: Duration = Duration::from_secs(2);

/// What the page does with the stream's news; each is called from a browser callback.
pub struct StreamHandlers {
    /// A `status` event with its ticket status.
    pub on_status: Box<dyn Fn(TicketStatus)>,
    /// The stream is open (the server answered).
    pub on_open: Box<dyn Fn()>,
    /// The browser reported an error (it would reconnect by itself; the page does instead).
    pub on_error: Box<dyn Fn()>,
    /// Nothing arrived for two keep-alive periods: the link is hung.
    pub on_silent: Box<dyn Fn()>,
}

/// An open event stream; [`EventStream::shut`] closes it and stops its watchdog.
pub struct EventStream {
    source: EventSource,
    watchdog: Option<IntervalHandle>,
    _on_status: Closure<dyn FnMut(MessageEvent)>,
    _on_keepalive: Closure<dyn FnMut(Event)>,
    _on_open: Closure<dyn FnMut(Event)>,
    _on_error: Closure<dyn FnMut(Event)>,
}

impl EventStream {
    /// Opens `url`; `None` when this browser has no `EventSource`.
    pub fn open(url: &str, handlers: StreamHandlers) -> Option<Self> {
        let source = EventSource::new(url).ok()?;
        let last_heard = Rc::new(Cell::new(js_sys::Date::now()));
        let heard = move |last: &Rc<Cell<f64>>| last.set(js_sys::Date::now());

        let StreamHandlers {
            on_status,
            on_open,
            on_error,
            on_silent,
        } = handlers;
        let last = Rc::clone(&last_heard);
        let on_status = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            heard(&last);
            let status = event
                .data()
                .as_string()
                .and_then(|data| crate::json::decode::<TicketStatus>(&data));
            if let Some(status) = status {
                on_status(status);
            }
        });
        let last = Rc::clone(&last_heard);
        let on_keepalive = Closure::<dyn FnMut(Event)>::new(move |_: Event| heard(&last));
        let last = Rc::clone(&last_heard);
        let on_open = Closure::<dyn FnMut(Event)>::new(move |_: Event| {
            heard(&last);
            on_open();
        });
        let on_error = Closure::<dyn FnMut(Event)>::new(move |_: Event| on_error());

        let _ =
            source.add_event_listener_with_callback("status", on_status.as_ref().unchecked_ref());
        let _ = source
            .add_event_listener_with_callback("keepalive", on_keepalive.as_ref().unchecked_ref());
        source.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        source.set_onerror(Some(on_error.as_ref().unchecked_ref()));

        let fired = Cell::new(false);
        let watchdog = set_interval_with_handle(
            move || {
                if !fired.get() && js_sys::Date::now() - last_heard.get() > SILENCE_LIMIT_MS {
                    fired.set(true);
                    on_silent();
                }
            },
            WATCHDOG_PERIOD,
        )
        .ok();
        Some(Self {
            source,
            watchdog,
            _on_status: on_status,
            _on_keepalive: on_keepalive,
            _on_open: on_open,
            _on_error: on_error,
        })
    }

    /// Closes the connection and stops the watchdog; no handler is called afterwards.
    pub fn shut(&mut self) {
        self.source.close();
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.clear();
        }
    }
}
