//! One refresh of a room's hub: ONE store call ([`Store::sse_refresh`]) returns what changed in
//! the queue since the last refresh, plus exact reads of the few tickets that need one; every
//! streamed ticket's position moves by it, and polled ones are caught up from the log later.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use vestibule_shared::{TicketState, TicketStatus};
use vestibule_store::{now_ms, QueueCursor, RoomId, Settings, Store, StoreError, TicketRecord};

use super::streams::{publish, publish_every};
use super::watchers::Watchers;
use super::SseHub;

/// Most exact reads in one refresh, so one store call never blocks Redis for long.
const EXACT_BATCH: usize = 2000;
/// How often a ticket that holds a token is re-read (it ends by an order, expiry or leave, none
/// of which moves the queue).
const ISSUED_RECHECK: Duration = Duration::from_secs(5);
/// How often tickets nobody polls any more are forgotten from the polled map (one pass over it,
/// under the lock: rarely, so that polls seldom wait for it).
const POLLED_SWEEP: Duration = Duration::from_secs(5);

impl SseHub {
    /// Forgets tickets nobody streams or polls any more; returns the cursor and the ids due an
    /// exact read.
    pub(super) fn prepare(&self, now: Instant) -> (Option<QueueCursor>, Vec<String>) {
        let mut watchers = self.lock();
        // One pass over the streamed tickets: this runs under the lock every refresh, and polls
        // answered from memory wait for it. Tickets
        // only polled are not passed over here.
        let mut streams = 0u64;
        // The longest due first, at most EXACT_BATCH (a max-heap of the earliest due times
        // seen): when every stream is due at each refresh (a random room's cursor is never
        // followed), each is read in turn, none starved.
        let mut due: std::collections::BinaryHeap<(Instant, String)> =
            std::collections::BinaryHeap::new();
        watchers.by_ticket.retain(|id, watched| {
            let watching = watched.streams();
            if watching == 0 && watched.polled_until.is_none_or(|until| until <= now) {
                return false;
            }
            streams += watching as u64;
            if let Some(at) = watched.read_at.filter(|at| *at <= now) {
                if due.len() < EXACT_BATCH {
                    due.push((at, id.clone()));
                } else if due.peek().is_some_and(|(latest, _)| at < *latest) {
                    due.pop();
                    due.push((at, id.clone()));
                }
            }
            true
        });
        self.streams.store(streams, Ordering::Relaxed);
        let mut due: Vec<String> = due.into_iter().map(|(_, id)| id).collect();
        // Polled tickets awaiting an exact read, oldest first, in what is left of the batch.
        let Watchers {
            polled,
            polled_due,
            swept_at,
            ..
        } = &mut *watchers;
        while due.len() < EXACT_BATCH {
            let Some(id) = polled_due.pop_front() else {
                break;
            };
            if let Some(entry) = polled.get_mut(&id).filter(|entry| entry.queued) {
                entry.queued = false;
                if entry.position.is_none() {
                    due.push(id);
                }
            }
        }
        // Tickets nobody polls any more, forgotten now and then (a pass over them all).
        if swept_at.is_none_or(|at| now.saturating_duration_since(at) >= POLLED_SWEEP) {
            polled.retain(|_, entry| entry.polled_until > now);
            *swept_at = Some(now);
        }
        (watchers.cursor, due)
    }

    /// Puts polled tickets `prepare` took off the due queue back on it when their read failed
    /// (streamed ones keep their due time and are picked again by themselves): otherwise they
    /// would be answered from the store until their next poll re-queued them.
    pub(super) fn requeue(&self, due: &[String]) {
        let mut watchers = self.lock();
        let Watchers {
            polled, polled_due, ..
        } = &mut *watchers;
        for id in due.iter().rev() {
            if let Some(entry) = polled.get_mut(id) {
                if entry.position.is_none() && !entry.queued {
                    entry.queued = true;
                    polled_due.push_front(id.clone());
                }
            }
        }
    }

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
        room: RoomId<'_>,
        settings: Settings,
        status: &(dyn Fn(&TicketRecord) -> TicketStatus + Sync),
    ) -> Result<bool, StoreError> {
        let now = Instant::now();
        let (cursor, due) = self.prepare(now);
        let idle = due.is_empty() && {
            let watchers = self.lock();
            watchers.by_ticket.is_empty() && watchers.polled.is_empty()
        };
        if idle {
            return Ok(false);
        }
        let answer = match store.sse_refresh(room, cursor, &due, now_ms()).await {
            Ok(answer) => answer,
            Err(error) => {
                self.requeue(&due);
                return Err(error);
            }
        };
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
        let first_read = watchers.cursor.is_none();
        // Polled tickets are caught up from the log when asked for; a lost cursor cuts it.
        match &answer.delta {
            Some(delta) => {
                let keep = watchers.lease + POLLED_SWEEP;
                watchers.log.push(delta, now, keep);
            }
            None => watchers.log.cut(),
        }
        let Watchers {
            by_ticket,
            polled,
            polled_due,
            ..
        } = &mut *watchers;
        match &answer.delta {
            // Nobody moved and the ETAs stand: no followed ticket changes (a pass over them all
            // would only hold the lock).
            Some(delta)
                if delta.popped == 0
                    && delta.left_seqs.is_empty()
                    && delta.returned_seqs.is_empty()
                    && !settings_changed => {}
            Some(delta) => {
                for (id, watched) in by_ticket.iter_mut() {
                    // Only a ticket due by `now` can be in this round's exact reads: the hash
                    // lookup is skipped for the others (this pass holds the lock).
                    if watched.read_at.is_some_and(|at| at <= now) && exact.contains(id.as_str()) {
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
                        publish(watched, || status(&TicketRecord::waiting(id, position)));
                    } else if this_left || moved >= position {
                        // Admitted or left: read it exactly (in the next round, right away). A
                        // call hearing it now may bring it back (counted below: no longer
                        // followed).
                        watched.read_at = Some(now);
                        watched.position = None;
                        more_due = true;
                    } else if moved > 0 || settings_changed {
                        let position = position - moved;
                        watched.position = Some(position);
                        if settings_changed || now >= watched.published_at + publish_every(position)
                        {
                            watched.published_at = now;
                            publish(watched, || status(&TicketRecord::waiting(id, position)));
                        }
                    }
                }
            }
            None => {
                // The cursor could not be followed: every streamed ticket is read again, a batch
                // a refresh (one due already keeps its time, so the longest due go first); polled
                // ones go back to the store, whose reads anchor them again (on the hub's first
                // read they are read in turn too: they were polled before it had a cursor).
                by_ticket.retain(|id, watched| {
                    first_read || watched.streams() > 0 || exact.contains(id.as_str())
                });
                for (id, watched) in by_ticket.iter_mut() {
                    if !exact.contains(id.as_str()) {
                        watched.read_at = Some(watched.read_at.map_or(now, |at| at.min(now)));
                        watched.position = None;
                    }
                }
                if first_read {
                    for (id, entry) in polled.iter_mut() {
                        entry.position = None;
                        if !entry.queued && !exact.contains(id.as_str()) {
                            entry.queued = true;
                            polled_due.push_back(id.clone());
                        }
                    }
                } else {
                    polled.retain(|id, _| exact.contains(id.as_str()));
                }
            }
        }
        for (id, read) in due.iter().zip(answer.tickets) {
            let Some(watched) = watchers.by_ticket.get_mut(id) else {
                // A ticket only polled: followed from this read on while it waits.
                let Watchers { polled, log, .. } = &mut *watchers;
                let Some(entry) = polled.get_mut(id) else {
                    continue;
                };
                match read {
                    Some((record, Some(seq)))
                        if record.state == TicketState::Waiting && record.position.is_some() =>
                    {
                        entry.seq = seq;
                        entry.position = record.position;
                        entry.mark = log.mark;
                        entry.popped_at = log.popped;
                    }
                    _ => {
                        polled.remove(id);
                    }
                }
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
            // One only polled is followed while it waits; its other states come from the store.
            let done = record.state.is_terminal()
                || (watched.streams() == 0 && record.state != TicketState::Waiting);
            watched.published_at = now;
            publish(watched, || status(&record));
            if done {
                watchers.by_ticket.remove(id);
            }
        }
        watchers.cursor = Some(answer.cursor);
        if answer.cursor.left > 0 {
            // Somebody left or was skipped: a call in flight for a ticket not followed may be
            // one coming back (see `hearing`), among them one this refresh saw leave (a polled
            // one is caught up to see it).
            let pending: Vec<(u64, String)> = watchers
                .hearing
                .iter()
                .filter(|(_, (_, possible))| !*possible)
                .map(|(token, (id, _))| (*token, id.clone()))
                .collect();
            for (token, id) in pending {
                if !watchers.follows(&id) {
                    if let Some((_, possible)) = watchers.hearing.get_mut(&token) {
                        *possible = true;
                        watchers.possible_returns += 1;
                    }
                }
            }
        }
        // A return heard before this refresh was sent is in what it read.
        watchers.returns.retain(|(heard, _)| *heard >= now);
        watchers.refreshed_at = Some(now);
        Ok(more_due)
    }
}
