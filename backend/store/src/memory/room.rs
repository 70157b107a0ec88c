//! One room of the embedded engine: its queue, tickets, tokens and settings, and every operation
//! on them.
//!
//! Every operation takes the time it runs at as an argument (Unix milliseconds) instead of
//! reading the clock, so that replaying the same calls with the same times rebuilds the same
//! room: the durable store (`store::durable`) relies on this to recover from its journal. Only
//! the scheduler lease reads a clock, and leases are never replayed. The lease and admission
//! are in `admission.rs`, entry tokens in `tokens.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use vestibule_shared::TicketState;

use super::presence::Presence;
use crate::ids::token_secret;
use crate::order_index::OrderIndex;
use crate::{
    gcra, JoinLimit, JoinOutcome, JoinReply, LeaveOutcome, PollAnchor, QueueCursor, QueueDelta,
    RoomCounts, Settings, SettingsPatch, SettingsUpdate, SseRefresh, TicketRecord,
    VersionedSettings,
};

/// A ticket that has left the queue (admitted or ended).
#[derive(Debug, Clone)]
pub(super) struct Settled {
    pub(super) state: TicketState,
    pub(super) token: Option<String>,
    pub(super) expires_at_ms: u64,
    /// When to forget the ticket, Unix milliseconds.
    pub(super) forget_at_ms: u64,
    /// The order that used the token: its idempotency key ("" = none) and receipt.
    pub(super) order: Option<(String, String)>,
}

impl Settled {
    /// A ticket that left while waiting (or held), forgotten at `forget_at_ms`.
    pub(super) fn left(forget_at_ms: u64) -> Self {
        Self {
            state: TicketState::Left,
            token: None,
            expires_at_ms: 0,
            forget_at_ms,
            order: None,
        }
    }
}

/// The scheduler lease of a room (see `admission.rs`).
#[derive(Debug, Clone, Default)]
pub(super) struct Lease {
    pub(super) holder: String,
    pub(super) until_ms: u64,
}

/// One room's whole state. Fields are visible to the snapshot image (`image.rs`). A clone is
/// how a snapshot takes the state quickly, to write it out without holding up changes.
#[derive(Debug, Clone)]
pub struct Room {
    pub(super) config: Settings,
    /// Which creation of the slug this is (`store::room_doc`).
    pub(super) generation: u64,
    /// The slug's counter at the last settings change (`If-Match` versions).
    pub(super) version: u64,
    /// Join-limit state per client: the GCRA theoretical arrival time, Unix ms.
    pub(super) join_limits: HashMap<String, u64>,
    /// Size of `join_limits` at which stale entries are next swept (amortised O(1) per join).
    join_limits_sweep_at: usize,
    pub(super) seq: u64,
    pub(super) queue: OrderIndex<Arc<str>>,
    pub(super) seq_of: HashMap<Arc<str>, u64>,
    pub(super) settled: HashMap<Arc<str>, Settled>,
    /// Forget order of settled tickets, roughly by time; checked against `forget_at_ms`.
    forget_queue: VecDeque<(u64, Arc<str>)>,
    pub(super) tokens: HashMap<String, Arc<str>>,
    /// Issued, unused tokens by expiry: the active users.
    pub(super) active: BTreeSet<(u64, Arc<str>)>,
    pub(super) dedup: HashMap<String, Arc<str>>,
    pub(super) lease: Option<Lease>,
    pub(super) epoch: u64,
    /// Shoppers ever admitted (for SSE hubs' cursors).
    pub(super) popped: u64,
    /// Waiting shoppers that ever left (or were skipped, or came back), and the arrival seqs of
    /// the last [`LEFT_KEPT`] of them (negative: came back to its place).
    pub(super) left_count: u64,
    pub(super) left_seqs: VecDeque<i64>,
    /// Last-heard times, skipped and returned tickets (`presence.rs`).
    pub(super) presence: Presence,
    /// Instant admissions the scheduler's unused quota left for joins that find nobody waiting
    /// (not kept across restarts: the next tick refills it).
    pub(super) instant_bank: u64,
    /// Waiting tickets that joined in the pre-queue and are not drawn yet (`draw.rs`).
    pub(super) prequeue: HashSet<Arc<str>>,
    /// The room's draw seed and result, once the pre-queue opened (`draw.rs`).
    pub(super) draw: Option<super::draw::MemoryDraw>,
    /// When each waiting arrival seq joined, Unix ms (the admin API's waiters list); entries
    /// behind the head are dropped as it advances.
    pub(super) joined: BTreeMap<u64, u64>,
    /// The random order while the room admits by lottery (`lottery.rs`; derived, not imaged).
    pub(super) lottery: Option<super::lottery::MemoryLottery>,
}

/// Leaves remembered for SSE hubs to replay (as the Redis store's `left` list).
pub(super) const LEFT_KEPT: usize = 10_000;

impl Room {
    /// An empty room, generation `generation` of its slug, with `config` as its settings (its
    /// first version is its generation).
    pub fn new(config: Settings, generation: u64) -> Self {
        Self {
            config,
            generation,
            version: generation,
            join_limits: HashMap::new(),
            join_limits_sweep_at: 1024,
            seq: 0,
            queue: OrderIndex::default(),
            seq_of: HashMap::new(),
            settled: HashMap::new(),
            forget_queue: VecDeque::new(),
            tokens: HashMap::new(),
            active: BTreeSet::new(),
            dedup: HashMap::new(),
            lease: None,
            epoch: 0,
            popped: 0,
            left_count: 0,
            left_seqs: VecDeque::new(),
            presence: Presence::default(),
            instant_bank: 0,
            prequeue: HashSet::new(),
            draw: None,
            joined: BTreeMap::new(),
            lottery: None,
        }
    }

    /// Counts a leave (`seq`) or a return (`-seq`) for SSE hubs' cursors.
    pub(super) fn record_queue_event(&mut self, signed_seq: i64) {
        self.left_count += 1;
        self.left_seqs.push_back(signed_seq);
        if self.left_seqs.len() > LEFT_KEPT {
            self.left_seqs.pop_front();
        }
    }

    /// Where a waiting ticket stands for the SSE hub's poll answers (see `Store::hear_polled`):
    /// `None` in the pre-queue, under a running lottery, or when it does not wait.
    pub fn poll_anchor(&self, id: &str) -> Option<PollAnchor> {
        if self.lottery_running() || self.prequeue.contains(id) {
            return None;
        }
        let seq = *self.seq_of.get(id)?;
        Some(PollAnchor {
            seq,
            cursor: QueueCursor {
                popped: self.popped,
                left: self.left_count,
            },
        })
    }

    /// One ticket as it stands at `now_ms`.
    pub fn record(&self, id: &str, now_ms: u64) -> Option<TicketRecord> {
        if let Some(seq) = self.seq_of.get(id) {
            if self.prequeue.contains(id) {
                return Some(TicketRecord {
                    state: TicketState::PreQueue,
                    position: None,
                    ..TicketRecord::waiting(id, 0)
                });
            }
            let position = if self.lottery_running() {
                self.lottery_position(id)
            } else {
                self.queue.position(*seq)
            };
            return Some(TicketRecord {
                position,
                ..TicketRecord::waiting(id, 0)
            });
        }
        let Some(settled) = self.settled.get(id) else {
            return self.held_record(id, now_ms);
        };
        if settled.forget_at_ms <= now_ms {
            return None;
        }
        let mut state = settled.state;
        if state == TicketState::TokenIssued && settled.expires_at_ms <= now_ms {
            state = TicketState::Expired;
        }
        let issued = state == TicketState::TokenIssued;
        Some(TicketRecord {
            id: id.to_owned(),
            state,
            position: None,
            entry_token: settled.token.clone().filter(|_| issued),
            token_expires_at_ms: issued.then_some(settled.expires_at_ms),
            place_kept: false,
        })
    }

    pub(super) fn settle(&mut self, id: &Arc<str>, settled: Settled) {
        self.forget_queue
            .push_back((settled.forget_at_ms, id.clone()));
        self.settled.insert(id.clone(), settled);
    }

    pub(super) fn expire_tokens(&mut self, now_ms: u64) -> u64 {
        let mut expired = 0;
        while let Some((exp, id)) = self.active.first().cloned() {
            if exp > now_ms {
                break;
            }
            self.active.pop_first();
            if let Some(ticket) = self.settled.get_mut(&id) {
                if ticket.state == TicketState::TokenIssued {
                    ticket.state = TicketState::Expired;
                    expired += 1;
                }
            }
        }
        expired
    }

    pub(super) fn forget_finished(&mut self, now_ms: u64) {
        while let Some((at, _)) = self.forget_queue.front() {
            if *at > now_ms {
                break;
            }
            let Some((_, id)) = self.forget_queue.pop_front() else {
                break;
            };
            let due = self
                .settled
                .get(&id)
                .is_some_and(|ticket| ticket.forget_at_ms <= now_ms);
            if due {
                if let Some(ticket) = self.settled.remove(&id) {
                    if let Some(token) = ticket.token {
                        self.tokens.remove(token_secret(&token));
                    }
                }
            }
        }
    }

    /// The settings with their version.
    pub fn versioned(&self) -> VersionedSettings {
        VersionedSettings {
            settings: self.config.clone(),
            generation: self.generation,
            version: self.version,
        }
    }

    /// Applies the client's join limit (GCRA); `Err` with the milliseconds to wait.
    fn pass_join_limit(&mut self, limit: &JoinLimit, now_ms: u64) -> Result<(), u64> {
        // Past its TAT a client's entry says nothing: drop such entries now and then, so the map
        // holds about the clients seen within the last minute.
        if self.join_limits.len() >= self.join_limits_sweep_at {
            self.join_limits.retain(|_, tat| *tat > now_ms);
            self.join_limits_sweep_at = (self.join_limits.len() * 2).max(1024);
        }
        let tat = self.join_limits.get(&limit.client).copied().unwrap_or(0);
        let next = gcra(tat, now_ms, limit)?;
        self.join_limits.insert(limit.client.clone(), next);
        Ok(())
    }

    /// The live ticket (waiting, issued or completed) a dedup key names.
    pub fn live_for_dedup(&self, key: &str, now_ms: u64) -> Option<TicketRecord> {
        let id = self.dedup.get(key)?;
        self.record(id, now_ms).filter(|ticket| {
            matches!(
                ticket.state,
                TicketState::PreQueue
                    | TicketState::Waiting
                    | TicketState::TokenIssued
                    | TicketState::Completed
            )
        })
    }

    /// Applies a settings change (see `Store::update_room`); `next_version` gives the slug
    /// counter's next value, the new version.
    pub fn update(
        &mut self,
        patch: &SettingsPatch,
        expected_version: Option<u64>,
        next_version: impl FnOnce() -> u64,
    ) -> SettingsUpdate {
        if expected_version.is_some_and(|expected| expected != self.version) {
            return SettingsUpdate::VersionMismatch(self.versioned());
        }
        self.config = self.config.patched(patch);
        self.version = next_version().max(self.version + 1);
        self.sync_lottery();
        SettingsUpdate::Applied(self.versioned())
    }

    /// Joins at `now_ms` (see `Store::join_with_limit`).
    pub fn join(
        &mut self,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        now_ms: u64,
    ) -> JoinReply {
        if let Some(ticket) = dedup_key.and_then(|key| self.live_for_dedup(key, now_ms)) {
            return JoinReply::Joined(JoinOutcome {
                ticket,
                created: false,
            });
        }
        if let Some(refusal) = self.config.sale.join_refusal() {
            return JoinReply::Refused(refusal);
        }
        if let Some(limit) = limit {
            if let Err(retry_after_ms) = self.pass_join_limit(limit, now_ms) {
                return JoinReply::RateLimited { retry_after_ms };
            }
        }
        self.seq += 1;
        let seq = self.seq;
        let id: Arc<str> = Arc::from(new_id);
        self.queue.push(seq, id.clone());
        self.seq_of.insert(id.clone(), seq);
        self.joined.insert(seq, now_ms);
        self.presence.touch(&id, now_ms);
        if let Some(key) = dedup_key {
            self.dedup.insert(key.to_owned(), id.clone());
        }
        self.lottery_add(new_id);
        let position = self
            .record(new_id, now_ms)
            .and_then(|record| record.position);
        JoinReply::Joined(JoinOutcome {
            ticket: TicketRecord {
                position,
                ..TicketRecord::waiting(new_id, 0)
            },
            created: true,
        })
    }

    /// One SSE hub refresh (see `Store::sse_refresh`).
    pub fn sse_refresh(
        &self,
        since: Option<QueueCursor>,
        ids: &[String],
        now_ms: u64,
    ) -> SseRefresh {
        let cursor = QueueCursor {
            popped: self.popped,
            left: self.left_count,
        };
        // Under the lottery a join can move anyone back: only exact reads are right.
        let since = since.filter(|_| !self.lottery_running());
        let delta = since.and_then(|since| {
            let new_leavers = usize::try_from(cursor.left.checked_sub(since.left)?).ok()?;
            let popped = cursor.popped.checked_sub(since.popped)?;
            (new_leavers <= self.left_seqs.len()).then(|| {
                let skip = self.left_seqs.len() - new_leavers;
                let events = self.left_seqs.iter().skip(skip).copied();
                let (returned, left): (Vec<i64>, Vec<i64>) = events.partition(|seq| *seq < 0);
                let mut left_seqs: Vec<u64> = left.into_iter().map(|seq| seq as u64).collect();
                let mut returned_seqs: Vec<u64> =
                    returned.into_iter().map(i64::unsigned_abs).collect();
                left_seqs.sort_unstable();
                returned_seqs.sort_unstable();
                QueueDelta {
                    popped,
                    left_seqs,
                    returned_seqs,
                }
            })
        });
        let tickets = ids
            .iter()
            .map(|id| {
                let seq = self.seq_of.get(id.as_str()).copied();
                self.record(id, now_ms).map(|record| (record, seq))
            })
            .collect();
        SseRefresh {
            cursor,
            delta,
            tickets,
        }
    }

    /// Leaves the queue or gives back an unused token at `now_ms` (see `Store::leave`).
    pub fn leave(&mut self, id: &str, now_ms: u64, keep_ms: u64) -> LeaveOutcome {
        let held = self
            .presence
            .held
            .get(id)
            .is_some_and(|h| h.until_ms > now_ms);
        if held {
            if let Some((key, _)) = self.presence.unhold(id) {
                self.settle(&key, Settled::left(now_ms + keep_ms));
                return LeaveOutcome::Left;
            }
        }
        if let Some((key, seq)) = self.seq_of.remove_entry(id) {
            self.queue.remove(seq);
            self.prequeue.remove(&key);
            self.lottery_remove(&key);
            self.presence.forget(&key);
            self.record_queue_event(seq as i64);
            // The dedup entry stays: a later join under that key sees a LEFT ticket and enqueues anew.
            self.settle(&key, Settled::left(now_ms + keep_ms));
            return LeaveOutcome::Left;
        }
        let Some(current) = self.record(id, now_ms) else {
            return LeaveOutcome::NotFound;
        };
        if current.state != TicketState::TokenIssued {
            return LeaveOutcome::AlreadyEnded(current.state);
        }
        let Some((key, mut ticket)) = self.settled.remove_entry(id) else {
            return LeaveOutcome::NotFound;
        };
        self.active.remove(&(ticket.expires_at_ms, key.clone()));
        if let Some(token) = ticket.token.take() {
            self.tokens.remove(token_secret(&token));
        }
        ticket.state = TicketState::Left;
        ticket.forget_at_ms = now_ms + keep_ms;
        self.settle(&key, ticket);
        LeaveOutcome::Left
    }

    /// Waiting and active counts at `now_ms`.
    pub fn counts(&self, now_ms: u64) -> RoomCounts {
        let active = self.active.iter().filter(|(exp, _)| *exp > now_ms).count();
        // A sold-out room's line reads SOLD_OUT, ticket by ticket: nobody waits in it any more
        // (Redis takes them out of the line; the admin count must not stay at the old line).
        let waiting = if self.config.sale.sold_out {
            0
        } else {
            self.queue.len() as u64
        };
        RoomCounts {
            waiting,
            active: active as u64,
        }
    }
}
