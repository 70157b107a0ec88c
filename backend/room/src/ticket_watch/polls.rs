//! Polls answered from memory (docs/DESIGN.md "Polls answered from memory"): a poll read from
//! the store anchors its ticket at the hub's cursor, the next ones are answered here, and the
//! "heard from" they owe is written in one batch per refresh.

use std::time::{Duration, Instant};

use vestibule_shared::TicketState;
use vestibule_store::{PollAnchor, PolledTicket, TicketRecord};

use super::move_log::Polled;
use super::watchers::Watchers;
use super::SseHub;

/// Most tickets one room's hub follows in this process (streamed and polled; ~300 bytes each).
/// A poll of a ticket beyond it is read from the store.
pub const FOLLOWED_MAX: usize = 500_000;

/// What a poll answered from memory needs to know of its room: the rules that keep the answer
/// exact or larger, and the hints that keep the ticket heard (see [`SseHub::answer_poll`]).
#[derive(Debug, Clone, Copy)]
pub struct PollRules {
    /// `--sse-refresh-ms`: how often the hub follows the queue.
    pub refresh: Duration,
    /// The abandon time in force (docs/DESIGN.md "Presence").
    pub abandon: Duration,
    /// The room's admission rate, shoppers per second: how many may have been admitted since the
    /// hub's last read.
    pub rate_per_sec: f64,
    /// How long a poll keeps the ticket followed: twice the longest poll hint, plus a second.
    pub lease: Duration,
}

/// A poll answered from memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolledPosition {
    /// 1-based position: exact as of the hub's last read of the queue, plus every return heard
    /// here since that could be ahead (never smaller than the position now).
    pub position: u64,
    /// The ticket came back to its place after a skip.
    pub place_kept: bool,
}

impl SseHub {
    /// Answers a poll of `ticket_id` from memory, or `None`: the caller reads the store.
    ///
    /// Answered only when all of these hold (docs/DESIGN.md "Polls answered from memory"):
    /// - the ticket waits and is followed by the cursor (its position known, no exact read due);
    /// - the hub's last refresh was sent within 3 × `refresh` (a store outage stops the answers);
    /// - its position is beyond how many can have been admitted since, ⌈rate × (age + 1 s)⌉ + 1
    ///   (nearer the head the state may have changed: the store answers);
    /// - the store wrote it heard within half the abandon time, so the batch that writes this
    ///   poll lands long before it could be skipped.
    ///
    /// The position is the followed one plus every return heard in this process since the last
    /// refresh that may be ahead of it: never smaller than the true position now. The ticket is
    /// queued for the next batch of "heard from" and kept followed for `lease`.
    pub fn answer_poll(&self, ticket_id: &str, rules: &PollRules) -> Option<PolledPosition> {
        let now = Instant::now();
        let mut watchers = self.lock();
        let age = now.saturating_duration_since(watchers.refreshed_at?);
        if age > rules.refresh * 3 || rules.abandon / 2 < rules.refresh * 3 + Duration::from_secs(1)
        {
            return None;
        }
        let Watchers {
            by_ticket,
            polled,
            log,
            returns,
            possible_returns,
            to_hear,
            ..
        } = &mut *watchers;
        let admissible = (rules.rate_per_sec.max(0.0) * (age.as_secs_f64() + 1.0)).ceil();
        // Far enough from the head, and heard recently enough for the batch to land in time.
        let allowed = |position: u64, heard_at: Instant| {
            now.saturating_duration_since(heard_at) <= rules.abandon / 2
                && position as f64 > admissible + 1.0
        };
        let returns_ahead = |seq: u64| {
            returns
                .iter()
                .filter(|(_, back)| back.is_none_or(|back| back < seq))
                .count() as u64
                + *possible_returns
        };
        // Most polls: a ticket only polled (one lookup in a map of up to FOLLOWED_MAX).
        if let Some(entry) = polled.get_mut(ticket_id) {
            if !entry.catch_up(log) {
                polled.remove(ticket_id);
                return None;
            }
            let position = entry.position?;
            if !allowed(position, entry.heard_at) {
                return None;
            }
            entry.polled_until = now + rules.lease;
            if !entry.hear_pending {
                entry.hear_pending = true;
                to_hear.push(PolledTicket {
                    id: ticket_id.to_owned(),
                    seq: entry.seq,
                });
            }
            return Some(PolledPosition {
                position: position + returns_ahead(entry.seq),
                place_kept: entry.place_kept,
            });
        }
        let watched = by_ticket.get_mut(ticket_id)?;
        let (Some(seq), Some(position), None) = (watched.seq, watched.position, watched.read_at)
        else {
            return None;
        };
        if !allowed(position, watched.heard_at?) {
            return None;
        }
        watched.polled_until = Some(now + rules.lease);
        let answer = PolledPosition {
            position: position + returns_ahead(seq),
            place_kept: watched.place_kept,
        };
        if !watched.hear_pending {
            watched.hear_pending = true;
            to_hear.push(PolledTicket {
                id: ticket_id.to_owned(),
                seq,
            });
        }
        Some(answer)
    }

    /// Takes in what a poll read from the store (`sent` = when the read was sent): a waiting
    /// ticket with an anchor at the hub's cursor is followed from now on (with another anchor
    /// it is read exactly at the next refresh); one no longer waiting is no longer followed for
    /// polls.
    pub fn note_poll(
        &self,
        ticket_id: &str,
        record: &TicketRecord,
        anchor: Option<PollAnchor>,
        sent: Instant,
        rules: &PollRules,
    ) {
        let now = Instant::now();
        let mut watchers = self.lock();
        if watchers.cursor.is_none() {
            // The first ticket followed: a first refresh at once gives the cursor to anchor at.
            self.wake.notify_one();
        }
        watchers.lease = watchers.lease.max(rules.lease);
        let at_cursor = anchor.filter(|anchor| Some(anchor.cursor) == watchers.cursor);
        let full = watchers.by_ticket.len() + watchers.polled.len() >= FOLLOWED_MAX;
        let waiting = record.state == TicketState::Waiting && record.position.is_some();
        let Watchers {
            by_ticket,
            polled,
            polled_due,
            log,
            ..
        } = &mut *watchers;
        if let Some(watched) = by_ticket.get_mut(ticket_id) {
            // Streamed (too): moved by every refresh.
            if !waiting {
                if watched.streams() == 0 {
                    by_ticket.remove(ticket_id);
                }
                return;
            }
            watched.polled_until = Some(now + rules.lease);
            watched.heard_at = Some(sent);
            watched.place_kept = record.place_kept;
            let followed = watched.read_at.is_none() && watched.position.is_some();
            if let (false, Some(anchor)) = (followed, at_cursor) {
                watched.seq = Some(anchor.seq);
                watched.position = record.position;
                watched.read_at = None;
            }
            return;
        }
        if !waiting {
            polled.remove(ticket_id);
            return;
        }
        if let Some(entry) = polled.get_mut(ticket_id) {
            entry.polled_until = now + rules.lease;
            entry.heard_at = sent;
            entry.place_kept = record.place_kept;
            if entry.catch_up(log) && entry.position.is_some() {
                // Followed: the hub's position already counts what this read saw.
                return;
            }
            if let Some(anchor) = at_cursor {
                entry.seq = anchor.seq;
                entry.position = record.position;
                entry.mark = log.mark;
                entry.popped_at = log.popped;
            } else {
                entry.position = None;
                if !entry.queued {
                    entry.queued = true;
                    polled_due.push_back(ticket_id.to_owned());
                }
            }
            return;
        }
        let (false, Some(anchor)) = (full, anchor) else {
            return;
        };
        let followed = at_cursor.is_some();
        polled.insert(
            ticket_id.to_owned(),
            Polled {
                seq: anchor.seq,
                position: record.position.filter(|_| followed),
                mark: log.mark,
                popped_at: log.popped,
                polled_until: now + rules.lease,
                heard_at: sent,
                hear_pending: false,
                queued: !followed,
                place_kept: record.place_kept,
            },
        );
        if !followed {
            polled_due.push_back(ticket_id.to_owned());
        }
    }
    /// The ticket left through this process: its polls go to the store again (its streams learn
    /// it at the next refresh, as for a leave anywhere).
    pub fn forget(&self, ticket_id: &str) {
        let mut watchers = self.lock();
        watchers.polled.remove(ticket_id);
        if let Some(watched) = watchers.by_ticket.get_mut(ticket_id) {
            if watched.streams() == 0 {
                watchers.by_ticket.remove(ticket_id);
            } else {
                watched.polled_until = None;
                watched.position = None;
                watched.read_at = Some(Instant::now());
            }
        }
    }

    /// The tickets answered here since the last call: the caller writes them heard in one store
    /// call, then calls [`SseHub::heard`].
    pub fn take_heard(&self) -> Vec<PolledTicket> {
        let mut watchers = self.lock();
        let tickets = std::mem::take(&mut watchers.to_hear);
        for PolledTicket { id, .. } in &tickets {
            if let Some(polled) = watchers.polled.get_mut(id) {
                polled.hear_pending = false;
            } else if let Some(watched) = watchers.by_ticket.get_mut(id) {
                watched.hear_pending = false;
            }
        }
        tickets
    }

    /// The store wrote `ids` heard, in a call sent at `sent`.
    pub fn heard<'a>(&self, ids: impl IntoIterator<Item = &'a str>, sent: Instant) {
        let mut watchers = self.lock();
        for id in ids {
            if let Some(polled) = watchers.polled.get_mut(id) {
                polled.heard_at = polled.heard_at.max(sent);
            } else if let Some(watched) = watchers.by_ticket.get_mut(id) {
                watched.heard_at = Some(sent);
            }
        }
    }
}
