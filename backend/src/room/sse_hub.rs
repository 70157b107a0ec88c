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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};
use vestibule_shared::{TicketState, TicketStatus};

use crate::store::{now_ms, QueueCursor, Settings, Store, StoreError, TicketRecord};

/// Most exact reads in one refresh, so one store call never blocks Redis for long.
const EXACT_BATCH: usize = 2000;
/// How often a ticket that holds a token is re-read (it ends by an order, expiry or leave, none
/// of which moves the queue).
const ISSUED_RECHECK: Duration = Duration::from_secs(5);

/// What the hub knows of one watched ticket.
struct Watched {
    sender: watch::Sender<TicketStatus>,
    /// Arrival sequence while waiting (known after the first exact read).
    seq: Option<u64>,
    /// Position while waiting, as moved by the deltas.
    position: Option<u64>,
    /// When to read the ticket exactly; `None` = never (a waiting ticket followed by deltas).
    read_at: Option<Instant>,
    /// When its streams were last sent a position change (far-back positions are sent less often).
    published_at: Instant,
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
    by_ticket: HashMap<String, Watched>,
    cursor: Option<QueueCursor>,
    /// The room settings the published statuses were computed with (ETA, paused).
    settings_seen: Option<Settings>,
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
        if let Some(watched) = watchers.by_ticket.get(ticket_id) {
            return watched.sender.subscribe();
        }
        let (sender, receiver) = watch::channel(current);
        watchers.by_ticket.insert(
            ticket_id.to_owned(),
            Watched {
                sender,
                seq: None,
                position: None,
                read_at: Some(Instant::now()),
                published_at: Instant::now(),
            },
        );
        receiver
    }

    /// The tickets streamed in this process for this room (their holders are present).
    pub fn watched_ids(&self) -> Vec<String> {
        self.lock().by_ticket.keys().cloned().collect()
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

    /// Forgets tickets nobody streams any more; returns the cursor and the ids due an exact read.
    fn prepare(&self, now: Instant) -> (Option<QueueCursor>, Vec<String>) {
        let mut watchers = self.lock();
        watchers
            .by_ticket
            .retain(|_, watched| watched.sender.receiver_count() > 0);
        let streams = watchers
            .by_ticket
            .values()
            .map(|watched| watched.sender.receiver_count() as u64)
            .sum();
        self.streams.store(streams, Ordering::Relaxed);
        let mut due: Vec<(Instant, &String)> = watchers
            .by_ticket
            .iter()
            .filter_map(|(id, watched)| watched.read_at.filter(|at| *at <= now).map(|at| (at, id)))
            .collect();
        // The longest due first: when every stream is due at each refresh (a random room's
        // cursor is never followed), each is read in turn, none starved.
        if due.len() > EXACT_BATCH {
            due.select_nth_unstable_by_key(EXACT_BATCH, |(at, _)| *at);
            due.truncate(EXACT_BATCH);
        }
        let due = due.into_iter().map(|(_, id)| id.clone()).collect();
        (watchers.cursor, due)
    }
}

/// Sends `status` to a ticket's streams if it changed; drops the ticket after a terminal status.
fn publish(watched: &Watched, status: TicketStatus) {
    watched.sender.send_if_modified(|current| {
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
        room: &str,
        settings: Settings,
        status: &(dyn Fn(&TicketRecord) -> TicketStatus + Sync),
    ) -> Result<bool, StoreError> {
        let now = Instant::now();
        let (cursor, due) = self.prepare(now);
        let idle = due.is_empty() && self.lock().by_ticket.is_empty();
        if idle {
            return Ok(false);
        }
        let answer = store.sse_refresh(room, cursor, &due, now_ms()).await?;
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
        match &answer.delta {
            Some(delta) => {
                for (id, watched) in watchers.by_ticket.iter_mut() {
                    if exact.contains(id.as_str()) {
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
                        publish(watched, status(&TicketRecord::waiting(id, position)));
                    } else if this_left || moved >= position {
                        // Admitted or left: read it exactly (in the next round, right away).
                        watched.read_at = Some(now);
                        watched.position = None;
                        more_due = true;
                    } else if moved > 0 || settings_changed {
                        let position = position - moved;
                        watched.position = Some(position);
                        if settings_changed || now >= watched.published_at + publish_every(position)
                        {
                            watched.published_at = now;
                            let record = TicketRecord::waiting(id, position);
                            publish(watched, status(&record));
                        }
                    }
                }
            }
            None => {
                // The cursor could not be followed: every ticket is read again, a batch a refresh
                // (one due already keeps its time, so the longest due go first).
                for (id, watched) in watchers.by_ticket.iter_mut() {
                    if !exact.contains(id.as_str()) {
                        watched.read_at = Some(watched.read_at.map_or(now, |at| at.min(now)));
                        watched.position = None;
                    }
                }
            }
        }
        for (id, read) in due.iter().zip(answer.tickets) {
            let Some(watched) = watchers.by_ticket.get_mut(id) else {
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
            let terminal = record.state.is_terminal();
            watched.published_at = now;
            publish(watched, status(&record));
            if terminal {
                watchers.by_ticket.remove(id);
            }
        }
        watchers.cursor = Some(answer.cursor);
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
        publish(watched, status(5));
        assert!(!a.has_changed().unwrap(), "an unchanged status is not sent");
        publish(watched, status(4));
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
        use crate::store::memory::MemoryStore;
        use crate::store::{QueueingMethod, Settings, SettingsPatch, Store};
        let store = MemoryStore::new();
        let settings: Settings = serde_json::from_value(serde_json::json!({
            "admissionRatePerSec": 0.0, "paused": true, "tokenTtlMs": 60000
        }))
        .unwrap();
        store.init_room("main", &settings).await.unwrap();
        store.draw_seed("main", &"07".repeat(32)).await.unwrap();
        let patch = SettingsPatch {
            queueing_method: Some(QueueingMethod::Random),
            ..SettingsPatch::default()
        };
        store.update_room("main", &patch, None).await.unwrap();
        let hub = SseHub::default();
        let mut receivers = Vec::new();
        for i in 0..5_000 {
            let id = format!("ticket-{i}");
            store.join("main", None, &id).await.unwrap();
            receivers.push(hub.subscribe(&id, status(0)));
        }
        let settings = store.room_settings("main").await.unwrap().settings;
        let status_of = |record: &TicketRecord| status(record.position.unwrap_or(0));
        for _ in 0..3 {
            hub.refresh(&store, "main", settings.clone(), &status_of)
                .await
                .unwrap();
        }
        let unread = receivers
            .iter()
            .filter(|receiver| receiver.borrow().position == Some(0))
            .count();
        assert_eq!(unread, 0, "every stream was read within three refreshes");
    }
}
