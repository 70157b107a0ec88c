//! The log of the queue's changes as the hub's refreshes read them, and a polled ticket caught
//! up from it when it is asked for: a refresh's time under the lock grows with the streams, not
//! with the polls.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A ticket followed for its polls only (no stream): its position as of a mark of the hub's
/// [`MoveLog`], caught up from the log when it is asked for ([`Polled::catch_up`]).
pub(super) struct Polled {
    /// Arrival sequence.
    pub(super) seq: u64,
    /// Position as of `mark`; `None` while an exact read is awaited (it is in `polled_due`).
    pub(super) position: Option<u64>,
    /// The log's mark `position` is as of (every change up to it applied).
    pub(super) mark: u64,
    /// The log's admitted count at `mark`.
    pub(super) popped_at: u64,
    /// Until when it is followed.
    pub(super) polled_until: Instant,
    /// When the store last wrote its holder heard, as sent.
    pub(super) heard_at: Instant,
    /// Answered here since the last batch of "heard from" (it is in `Watchers::to_hear`).
    pub(super) hear_pending: bool,
    /// Queued in `Watchers::polled_due` for an exact read.
    pub(super) queued: bool,
    /// The store said its place was kept (it came back after a skip).
    pub(super) place_kept: bool,
}

impl Polled {
    /// Moves the position to the log's newest mark. `false` when the ticket may no longer be
    /// waiting (it left, came back, or may have been admitted) or the log no longer reaches
    /// back to its mark: the caller forgets it and the store answers its next poll.
    ///
    /// Exact, as the per-refresh moves of a streamed ticket are: position + returns ahead −
    /// admitted − leavers ahead, summed over the changes since its mark. "May have been
    /// admitted" is position ≤ admitted + leavers ahead (returns left out): every position the
    /// ticket had in between is at least position − (admitted + leavers ahead), so when that is
    /// still ≥ 1 it was never at the head.
    pub(super) fn catch_up(&mut self, log: &MoveLog) -> bool {
        let Some(position) = self.position else {
            return true;
        };
        if self.mark == log.mark {
            return true;
        }
        if self.mark < log.valid_from {
            return false;
        }
        let seq = self.seq;
        let start = log.moves.partition_point(|moves| moves.mark <= self.mark);
        let mut down = log.popped - self.popped_at;
        let mut up = 0u64;
        for moves in log.moves.range(start..) {
            if moves.left_seqs.binary_search(&seq).is_ok()
                || moves.returned_seqs.binary_search(&seq).is_ok()
            {
                return false;
            }
            down += moves.left_seqs.partition_point(|left| *left < seq) as u64;
            up += moves.returned_seqs.partition_point(|back| *back < seq) as u64;
        }
        if position <= down {
            return false;
        }
        self.position = Some(position - down + up);
        self.mark = log.mark;
        self.popped_at = log.popped;
        true
    }
}

/// The queue's changes as the hub's refreshes read them, for catching up polled tickets.
#[derive(Default)]
pub(super) struct MoveLog {
    /// Changes read so far (one per refresh that followed the cursor).
    pub(super) mark: u64,
    /// Shoppers admitted over them.
    pub(super) popped: u64,
    /// Marks before this cannot be caught up (the log was cut there, or the cursor was lost).
    pub(super) valid_from: u64,
    /// The changes with leavers or returns, oldest first, kept for the longest poll lease.
    pub(super) moves: VecDeque<Moves>,
}

/// Leavers and returns of one refresh.
pub(super) struct Moves {
    /// The log's mark once this change is applied.
    mark: u64,
    /// When the refresh that read it was sent.
    at: Instant,
    left_seqs: Vec<u64>,
    returned_seqs: Vec<u64>,
}

impl MoveLog {
    /// Adds one refresh's change; forgets changes older than `keep`.
    pub(super) fn push(
        &mut self,
        delta: &vestibule_store::QueueDelta,
        now: Instant,
        keep: Duration,
    ) {
        self.mark += 1;
        self.popped += delta.popped;
        if !delta.left_seqs.is_empty() || !delta.returned_seqs.is_empty() {
            self.moves.push_back(Moves {
                mark: self.mark,
                at: now,
                left_seqs: delta.left_seqs.clone(),
                returned_seqs: delta.returned_seqs.clone(),
            });
        }
        while let Some(oldest) = self.moves.front() {
            if now.saturating_duration_since(oldest.at) <= keep {
                break;
            }
            // A ticket whose mark is before this change was last polled before it, more than a
            // lease ago: it is no longer followed anyway.
            self.valid_from = self.valid_from.max(oldest.mark);
            self.moves.pop_front();
        }
    }

    /// The cursor was lost: nothing before now can be caught up.
    pub(super) fn cut(&mut self) {
        self.mark += 1;
        self.valid_from = self.mark;
        self.moves.clear();
    }
}
