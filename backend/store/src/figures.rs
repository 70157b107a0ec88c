//! The figures role: what each replica counted over its last second, shared through the store so
//! that every replica shows the room's figures (not its own share), and the sale's totals behind
//! the admin summary (docs/DESIGN.md "Figures across replicas").
//!
//! Each replica calls [`Figures::share_figures`] once a second per room: it writes its own record
//! (an opaque string the room crate encodes, kept `ttl_ms`) and reads every live record back in
//! the same step, so a replica that stops is forgotten within the TTL. The same call raises the
//! room's peaks (the longest line, the longest wait at the front) from the store's own view,
//! marks when the room sold out, and adds the tokens the leader saw expire: totals that do not
//! depend on which replica asks or leads.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::{RoomId, StoreError};

/// One replica's share of a room's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FigureShare<'a> {
    /// The replica writing (its record replaces its previous one).
    pub replica: &'a str,
    /// Its record; `None` reads only (the summary), and then `expired` must be 0.
    pub record: Option<&'a str>,
    /// Entry tokens that expired unused since this replica's last successful share (only the
    /// leader's ticks count them; 0 elsewhere). Added to [`SaleTotals::expired`].
    pub expired: u64,
    /// Now, Unix ms: records expire at `now_ms + ttl_ms`, and the wait at the front is measured
    /// against it.
    pub now_ms: u64,
    /// How long the record is kept.
    pub ttl_ms: u64,
}

/// A room's sale so far, the same through every replica.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SaleTotals {
    /// Tickets ever created in the room (the arrival counter: every new ticket, not re-joins).
    pub joined: u64,
    /// Shoppers ever admitted (by ticks and instant joins).
    pub admitted: u64,
    /// Entry tokens that expired unused (added by the leader's shares).
    pub expired: u64,
    /// The longest line seen by any share (waiting shoppers).
    pub peak_waiting: u64,
    /// The longest any shopper at the front of the line had waited when a share looked, whole
    /// seconds.
    pub longest_wait_secs: u64,
    /// When a share first saw the room sold out, Unix ms.
    pub sold_out_at_ms: Option<u64>,
}

/// What [`Figures::share_figures`] answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedFigures {
    /// Every live replica's record (this one's included), ordered by replica.
    pub records: Vec<String>,
    /// The sale's totals after this share.
    pub totals: SaleTotals,
}

/// The figures role of a store. One call per room per second per replica.
#[async_trait]
pub trait Figures: Send + Sync {
    /// Writes `share`'s record, raises the peaks, adds the expired tokens, and reads every live
    /// record and the totals, in one atomic step.
    ///
    /// # Errors
    /// [`StoreError::RoomGone`] / [`StoreError::RoomLost`] when `room`'s generation is not the
    /// live one (nothing changed); else the call's error.
    async fn share_figures(
        &self,
        room: RoomId<'_>,
        share: &FigureShare<'_>,
    ) -> Result<SharedFigures, StoreError>;
}

/// The embedded stores' figures of one room generation (records and the totals the room itself
/// does not count). In memory only: a restart of the embedded store forgets the peaks, the
/// sold-out time and the expired count, and records come back within a second.
#[derive(Debug, Default)]
pub struct FigureTable {
    /// Replica → (expiry ms, record).
    records: BTreeMap<String, (u64, String)>,
    expired: u64,
    peak_waiting: u64,
    longest_wait_secs: u64,
    sold_out_at_ms: Option<u64>,
}

/// What the room's own state says at a share: its counters, its line and its front.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoomView {
    /// Tickets ever created.
    pub joined: u64,
    /// Shoppers ever admitted.
    pub admitted: u64,
    /// Waiting now.
    pub waiting: u64,
    /// When the shopper at the front joined, Unix ms.
    pub front_joined_ms: Option<u64>,
    /// Whether the room is sold out.
    pub sold_out: bool,
}

impl FigureTable {
    /// Applies `share` given what the room says now (see [`Figures::share_figures`]).
    pub fn share(&mut self, share: &FigureShare<'_>, view: RoomView) -> SharedFigures {
        let now = share.now_ms;
        self.records.retain(|_, (expires, _)| *expires > now);
        if let Some(record) = share.record {
            self.records.insert(
                share.replica.to_owned(),
                (now.saturating_add(share.ttl_ms), record.to_owned()),
            );
        }
        self.expired += share.expired;
        self.peak_waiting = self.peak_waiting.max(view.waiting);
        if let Some(joined) = view.front_joined_ms {
            let waited = (now / 1000).saturating_sub(joined / 1000);
            self.longest_wait_secs = self.longest_wait_secs.max(waited);
        }
        if view.sold_out && self.sold_out_at_ms.is_none() {
            self.sold_out_at_ms = Some(now);
        }
        SharedFigures {
            records: self
                .records
                .values()
                .map(|(_, record)| record.clone())
                .collect(),
            totals: SaleTotals {
                joined: view.joined,
                admitted: view.admitted,
                expired: self.expired,
                peak_waiting: self.peak_waiting,
                longest_wait_secs: self.longest_wait_secs,
                sold_out_at_ms: self.sold_out_at_ms,
            },
        }
    }
}
