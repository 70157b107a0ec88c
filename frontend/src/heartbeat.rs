//! While the tab is hidden the page does not poll (`queue.rs`); it tells the server it is still
//! here every `heartbeatAfterMs` instead (`POST …/heartbeat`, cheaper than a poll), so its place
//! is not skipped for silence (docs/DESIGN.md "Presence"). A refusal that retrying cannot change
//! (409: admitted or ended; 404) stops the heartbeat and asks for the ticket's status at once.
//! With an event stream open the server already knows the page is here.

use std::{cell::RefCell, rc::Rc, time::Duration};

use leptos::{prelude::*, task::spawn_local};
use wasm_bindgen::{closure::Closure, JsCast};

use crate::{
    api,
    connection::{ActiveTransport, Phase},
    queue::Queue,
};

type Timer = Rc<RefCell<Option<IntervalHandle>>>;

fn stop(timer: &Timer) {
    if let Some(handle) = timer.borrow_mut().take() {
        handle.clear();
    }
}

/// Installs the heartbeat of the page whose `queue` follows `room`: it beats while the tab is
/// hidden, the page polls and the ticket waits; when the server says the ticket no longer
/// waits, the queue asks for its status.
pub fn install(queue: &Rc<Queue>, room: &str) {
    let (room, view, weak) = (room.to_owned(), queue.view(), Rc::downgrade(queue));
    let on_change = Rc::new(move || weak.upgrade().into_iter().for_each(|q| q.retry_now()));
    let timer: Timer = Rc::default();
    let listener = Closure::<dyn FnMut()>::new(move || {
        stop(&timer);
        if !document().hidden() || view.transport.get_untracked() != ActiveTransport::Poll {
            return;
        }
        let Phase::Ticket(status) = view.phase.get_untracked() else {
            return;
        };
        // Only a waiting ticket is given a heartbeat hint.
        let Some(every_ms) = status.heartbeat_after_ms else {
            return;
        };
        let (room, id, on_change, beating) = (
            room.clone(),
            status.ticket_id,
            Rc::clone(&on_change),
            Rc::clone(&timer),
        );
        let beat = move || {
            let (room, id, on_change, beating) = (
                room.clone(),
                id.clone(),
                Rc::clone(&on_change),
                Rc::clone(&beating),
            );
            spawn_local(async move {
                match api::heartbeat(&room, &id).await {
                    Err(error) if error.server_answered() && !error.is_transient() => {
                        stop(&beating);
                        on_change();
                    }
                    _ => {}
                }
            });
        };
        let handle = set_interval_with_handle(beat, Duration::from_millis(every_ms));
        *timer.borrow_mut() = handle.ok();
    });
    let _ = document()
        .add_event_listener_with_callback("visibilitychange", listener.as_ref().unchecked_ref());
    // The page lives as long as this listener.
    listener.forget();
}
