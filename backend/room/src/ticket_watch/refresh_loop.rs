//! Each room's SSE refresh loop: wakes every `--sse-refresh-ms` (or at once when the scheduler
//! admits) and lets the room's [`super::SseHub`] move every open stream with one store
//! call. It gets exactly what it uses (like mini-redis's `Handler`): the store, the settings
//! that shape a status, and the shutdown signal.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::options::RoomOptions;
use crate::presence::{effective_abandon_ms, stream_presence_every};
use crate::status::ticket_status;
use crate::RoomRuntime;
use vestibule_store::{now_ms, Store};

/// What the refresh loop needs.
#[derive(Clone)]
pub struct HubContext {
    /// The queue store.
    pub store: Arc<dyn Store>,
    /// ETA margin and poll tiers (for statuses) and the refresh period.
    pub options: Arc<RoomOptions>,
    /// Flips to `true` on shutdown.
    pub shutdown: watch::Receiver<bool>,
}

/// Runs one room's refresh loop until shutdown (or the room is deleted).
pub async fn run(context: HubContext, room: Arc<RoomRuntime>) {
    let period = Duration::from_millis(context.options.sse_refresh_ms);
    let mut shutdown = context.shutdown.clone();
    let status = |record: &_| ticket_status(&context.options, &room, record);
    let mut heard_at = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = room.hub.woken() => {}
            _ = shutdown.changed() => return,
            () = room.retired() => {
                // A deleted room's streams are ended: none left.
                metrics::gauge!("vestibule_sse_streams", "room" => room.name.clone()).set(0.0);
                return;
            }
        }
        // A second round at once when the first found tickets that reached the head.
        for _ in 0..2 {
            let refreshed = room
                .hub
                .refresh(context.store.as_ref(), room.id(), room.settings(), &status)
                .await;
            match refreshed {
                Ok(more_due) if more_due => continue,
                Ok(_) => break,
                Err(error) => {
                    tracing::warn!(room = %room.name, %error, "SSE refresh failed; streams keep their last status");
                    break;
                }
            }
        }
        // Polls answered from memory since the last period: heard, in one batched store call.
        let polled = room.hub.take_heard();
        if !polled.is_empty() {
            let sent = std::time::Instant::now();
            match context.store.mark_heard(room.id(), &polled, now_ms()).await {
                Ok(()) => room
                    .hub
                    .heard(polled.iter().map(|ticket| ticket.id.as_str()), sent),
                Err(error) => {
                    tracing::warn!(room = %room.name, %error, "presence of polls answered from memory not recorded");
                }
            }
        }
        // An open stream is its holder's presence: one batched store call per period.
        let abandon_ms = effective_abandon_ms(&room.settings(), &context.options.poll_tiers);
        if heard_at.elapsed() >= stream_presence_every(abandon_ms) {
            heard_at = tokio::time::Instant::now();
            let ids = room.hub.watched_ids();
            if !ids.is_empty() {
                let sent = std::time::Instant::now();
                let hearing = room.hub.hearing(&ids);
                match context.store.hear(room.id(), &ids, now_ms(), false).await {
                    Ok(records) => {
                        let kept = records.iter().flatten().filter(|record| record.place_kept);
                        hearing.answered(kept.map(|_| None));
                        room.hub.heard(ids.iter().map(String::as_str), sent);
                    }
                    Err(error) => {
                        tracing::warn!(room = %room.name, %error, "SSE presence not recorded");
                    }
                }
            }
        }
        metrics::gauge!("vestibule_sse_streams", "room" => room.name.clone())
            .set(room.hub.stream_count() as f64);
    }
}
