//! The room's ticket watch: pushes ticket updates to this process's SSE streams and answers
//! polls from memory, with store load flat in their number.
//!
//! Every open stream subscribes its ticket here (one `watch` channel per ticket, shared by all
//! its streams, holding only the newest status). One task per room refreshes them every
//! `--sse-refresh-ms`, or at once when the scheduler admits, with ONE store call
//! ([`Store::sse_refresh`](vestibule_store::Store::sse_refresh)) that returns what changed in the queue since the last refresh — how
//! many were admitted, and the arrival sequences of those who left — plus exact reads of the few
//! tickets that need one (new streams, tickets whose position reached the head, tickets holding
//! a token). Waiting positions fall by admissions (always from the head) and by leaves (or skips
//! for silence) ahead, and rise by one for each skipped ticket that comes back ahead (presence), so
//! each stream's position moves exactly without reading it: position += returns with a smaller
//! sequence − admitted − leavers with a smaller sequence.
//!
//! Polled tickets are followed the same way (docs/DESIGN.md "Polls answered from memory"): a
//! poll read from the store brings the ticket's [`PollAnchor`](vestibule_store::PollAnchor); while the hub's cursor is the
//! anchor's, the ticket is followed from then on, and its next polls are answered from here
//! ([`SseHub::answer_poll`]) with no store call, their "heard from" written in one batch per
//! refresh. A ticket only polled is not moved by each refresh: the hub keeps a log of the
//! queue's changes (`MoveLog`) and a polled ticket's position is caught up from it when it is
//! asked for, so a refresh's time under the lock grows with the streams, not with the polls.
//!
//! - [`SseHub`] (here): one room's watched tickets, behind one lock, and the wake of its loop.
//! - `watchers`: what the hub knows of each ticket it follows, streamed or polled.
//! - `move_log`: the log of the queue's changes a polled ticket is caught up from.
//! - `streams`: subscribing a stream, and what is sent to it.
//! - `polls`: polls answered from memory, and the "heard from" they owe the store.
//! - `hearing`: store calls in flight that hear tickets, counted as possible returns.
//! - `refresh`: one refresh: one store call that moves every followed ticket.
//! - [`refresh_loop`]: the task that refreshes a room's hub, and its metrics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

mod hearing;
mod move_log;
mod polls;
mod refresh;
pub mod refresh_loop;
mod streams;
mod watchers;

pub use hearing::Hearing;
pub use polls::{PollRules, PolledPosition, FOLLOWED_MAX};
use watchers::Watchers;

/// The watched tickets of one room in this process.
#[derive(Default)]
pub struct SseHub {
    watchers: Mutex<Watchers>,
    streams: AtomicU64,
    wake: Notify,
}

impl SseHub {
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
}

#[cfg(test)]
mod tests;
