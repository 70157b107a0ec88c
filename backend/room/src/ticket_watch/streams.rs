//! SSE streams: a ticket's streams share one `watch` channel holding only its newest status,
//! sent when it changes.

use std::time::{Duration, Instant};

use tokio::sync::watch;
use vestibule_shared::TicketStatus;

use super::watchers::Watched;
use super::SseHub;

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
}

/// How often a waiting stream is sent its falling position: the front every refresh, the back
/// seldom (its ETA barely moves), so an admission tick does not turn into an event for every
/// stream. Admission and every other state change are sent at once.
pub(super) fn publish_every(position: u64) -> Duration {
    match position {
        0..=100 => Duration::ZERO,
        101..=1000 => Duration::from_secs(2),
        _ => Duration::from_secs(5),
    }
}

/// Sends `status` to a ticket's streams if it changed (nothing without a stream).
pub(super) fn publish(watched: &Watched, status: impl FnOnce() -> TicketStatus) {
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
