//! Fan-out of ticket updates to this process's SSE streams, one batched store read per refresh.
//!
//! Every open stream subscribes its ticket here. One task per room re-reads all subscribed
//! tickets in a single store call every `--sse-refresh-ms` (or at once when the scheduler admits),
//! and sends each stream its status only when it changed. Store load is one call per room per
//! refresh per process, however many shoppers hold a stream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, Notify};
use vestibule_shared::TicketStatus;

use crate::state::{AppState, RoomRuntime};
use crate::store::now_ms;

/// Ticket ids per store call, so one call never blocks Redis for long.
const BATCH: usize = 2000;

struct Subscriber {
    sender: mpsc::Sender<TicketStatus>,
    last: Option<TicketStatus>,
}

/// The subscribers of one room in this process.
#[derive(Default)]
pub struct SseHub {
    subscribers: Mutex<HashMap<String, Vec<Subscriber>>>,
    streams: AtomicU64,
    wake: Notify,
}

impl SseHub {
    /// Subscribes to updates of `ticket_id`, starting from `current` (already sent by the caller).
    pub fn subscribe(
        &self,
        ticket_id: &str,
        current: TicketStatus,
    ) -> mpsc::Receiver<TicketStatus> {
        let (sender, receiver) = mpsc::channel(4);
        let mut subscribers = self.lock();
        subscribers
            .entry(ticket_id.to_owned())
            .or_default()
            .push(Subscriber {
                sender,
                last: Some(current),
            });
        self.streams.fetch_add(1, Ordering::Relaxed);
        receiver
    }

    /// Open streams in this process for this room.
    pub fn stream_count(&self) -> u64 {
        self.streams.load(Ordering::Relaxed)
    }

    /// Asks for a refresh now (after an admission).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Subscriber>>> {
        self.subscribers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Drops closed streams and returns the ids still watched.
    fn live_ids(&self) -> Vec<String> {
        let mut subscribers = self.lock();
        subscribers.retain(|_, list| {
            list.retain(|subscriber| !subscriber.sender.is_closed());
            !list.is_empty()
        });
        let count = subscribers.values().map(Vec::len).sum::<usize>();
        self.streams.store(count as u64, Ordering::Relaxed);
        subscribers.keys().cloned().collect()
    }

    fn deliver(&self, ticket_id: &str, status: &TicketStatus) {
        let mut subscribers = self.lock();
        let Some(list) = subscribers.get_mut(ticket_id) else {
            return;
        };
        for subscriber in list.iter_mut() {
            if subscriber.last.as_ref() == Some(status) {
                continue;
            }
            // A full channel means the client is slow: skip, the next refresh sends the newest.
            if subscriber.sender.try_send(status.clone()).is_ok() {
                subscriber.last = Some(status.clone());
            }
        }
        if status.status.is_terminal() {
            subscribers.remove(ticket_id);
        }
    }
}

/// Runs one room's refresh loop until shutdown.
pub async fn run(state: AppState, room: Arc<RoomRuntime>) {
    let refresh = Duration::from_millis(state.config.sse_refresh_ms);
    let mut shutdown = state.shutdown.clone();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(refresh) => {}
            _ = room.hub.wake.notified() => {}
            _ = shutdown.changed() => return,
        }
        let ids = room.hub.live_ids();
        metrics::gauge!("vestibule_sse_streams", "room" => room.name.clone())
            .set(room.hub.stream_count() as f64);
        for batch in ids.chunks(BATCH) {
            match state.store.tickets(&room.name, batch, now_ms()).await {
                Ok(records) => {
                    for (id, record) in batch.iter().zip(records) {
                        if let Some(record) = record {
                            room.hub.deliver(id, &state.ticket_status(&room, &record));
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(room = %room.name, %error, "SSE refresh failed; streams keep their last status");
                    break;
                }
            }
        }
    }
}
