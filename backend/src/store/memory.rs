//! `MemoryStore`: the embedded store for a single process, with no setup.
//!
//! Same semantics as the Redis store (see the module docs of [`crate::store`]); each room is one
//! mutex-guarded state, never held across an `.await`. Positions come from an [`OrderIndex`] in
//! O(log N). Nothing survives a restart: use Redis for a sale that must.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use vestibule_shared::TicketState;

use super::order_index::OrderIndex;
use super::{
    gcra, AdmitOutcome, AdmitRequest, JoinLimit, JoinOutcome, JoinReply, LeaseOutcome,
    LeaveOutcome, OrderClaim, QueueCursor, QueueDelta, RoomConfig, RoomConfigPatch, RoomCounts,
    SettingsUpdate, SseRefresh, Store, StoreError, TicketRecord, TokenCheck, TokenUse,
    VersionedConfig,
};
use crate::ids::token_secret;

/// A ticket that has left the queue (admitted or ended).
#[derive(Debug, Clone)]
struct Settled {
    state: TicketState,
    token: Option<String>,
    expires_at_ms: u64,
    /// When to forget the ticket, Unix milliseconds.
    forget_at_ms: u64,
    /// The order that used the token: its idempotency key ("" = none) and receipt.
    order: Option<(String, String)>,
}

#[derive(Debug, Default)]
struct Lease {
    holder: String,
    until_ms: u64,
}

#[derive(Debug)]
struct Room {
    config: RoomConfig,
    /// Settings changes so far (`If-Match` versions).
    version: u64,
    /// Join-limit state per client: the GCRA theoretical arrival time, Unix ms.
    join_limits: HashMap<String, u64>,
    /// Size of `join_limits` at which stale entries are next swept (amortised O(1) per join).
    join_limits_sweep_at: usize,
    seq: u64,
    queue: OrderIndex<Arc<str>>,
    seq_of: HashMap<Arc<str>, u64>,
    settled: HashMap<Arc<str>, Settled>,
    /// Forget order of settled tickets, roughly by time; checked against `forget_at_ms`.
    forget_queue: VecDeque<(u64, Arc<str>)>,
    tokens: HashMap<String, Arc<str>>,
    /// Issued, unused tokens by expiry: the active users.
    active: BTreeSet<(u64, Arc<str>)>,
    dedup: HashMap<String, Arc<str>>,
    lease: Option<Lease>,
    epoch: u64,
    /// Shoppers ever admitted (for SSE hubs' cursors).
    popped: u64,
    /// Waiting shoppers that ever left, and the arrival seqs of the last [`LEFT_KEPT`] of them.
    left_count: u64,
    left_seqs: VecDeque<u64>,
}

/// Leaves remembered for SSE hubs to replay (as the Redis store's `left` list).
const LEFT_KEPT: usize = 10_000;

impl Room {
    fn new(config: RoomConfig) -> Self {
        Self {
            config,
            version: 0,
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
        }
    }

    fn record(&self, id: &str, now_ms: u64) -> Option<TicketRecord> {
        if let Some(seq) = self.seq_of.get(id) {
            return Some(TicketRecord {
                id: id.to_owned(),
                state: TicketState::Waiting,
                position: self.queue.position(*seq),
                entry_token: None,
                token_expires_at_ms: None,
            });
        }
        let settled = self.settled.get(id)?;
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
        })
    }

    fn settle(&mut self, id: &Arc<str>, settled: Settled) {
        self.forget_queue
            .push_back((settled.forget_at_ms, id.clone()));
        self.settled.insert(id.clone(), settled);
    }

    fn expire_tokens(&mut self, now_ms: u64) -> u64 {
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

    fn forget_finished(&mut self, now_ms: u64) {
        while let Some((at, _)) = self.forget_queue.front() {
            if *at > now_ms {
                break;
            }
            let (_, id) = self.forget_queue.pop_front().expect("front exists");
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
    fn versioned(&self) -> VersionedConfig {
        VersionedConfig {
            config: self.config.clone(),
            version: self.version,
        }
    }

    /// The live ticket of an entry token, or why the token does not work.
    fn token_ticket(&self, token: &str, now_ms: u64) -> Result<(Arc<str>, Settled), TokenCheck> {
        let id = self
            .tokens
            .get(token_secret(token))
            .cloned()
            .ok_or(TokenCheck::Unknown)?;
        let ticket = self.settled.get(&id).cloned().ok_or(TokenCheck::Unknown)?;
        if ticket.forget_at_ms <= now_ms || ticket.token.as_deref() != Some(token) {
            return Err(TokenCheck::Unknown);
        }
        match ticket.state {
            TicketState::Completed | TicketState::Left => Err(TokenCheck::Used),
            TicketState::Expired => Err(TokenCheck::Expired),
            _ if ticket.expires_at_ms <= now_ms => Err(TokenCheck::Expired),
            TicketState::Waiting | TicketState::TokenIssued => Ok((id, ticket)),
        }
    }

    /// The receipt of the order that used `token`, when `order` retries it (same key).
    fn replay(&self, token: &str, order: &OrderClaim<'_>) -> Option<TokenUse> {
        let key = order.idempotency_key?;
        let id = self.tokens.get(token_secret(token))?;
        let ticket = self.settled.get(id)?;
        let (used_key, receipt) = ticket.order.as_ref()?;
        (ticket.state == TicketState::Completed && used_key == key).then(|| TokenUse::Replayed {
            ticket_id: id.to_string(),
            receipt: receipt.clone(),
        })
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

    fn is_live_for_dedup(&self, id: &str, now_ms: u64) -> bool {
        self.record(id, now_ms).is_some_and(|ticket| {
            matches!(
                ticket.state,
                TicketState::Waiting | TicketState::TokenIssued | TicketState::Completed
            )
        })
    }
}

/// The embedded store: all rooms in this process's memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    rooms: Mutex<HashMap<String, Arc<Mutex<Room>>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn room(&self, room: &str) -> Result<Arc<Mutex<Room>>, StoreError> {
        lock(&self.rooms)
            .get(room)
            .cloned()
            .ok_or_else(|| StoreError::Corrupt(format!("room {room} was never initialised")))
    }
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it: every change below is
/// made in an order that leaves the room consistent at each step.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[async_trait]
impl Store for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn init_room(
        &self,
        room: &str,
        defaults: &RoomConfig,
    ) -> Result<VersionedConfig, StoreError> {
        let mut rooms = lock(&self.rooms);
        let state = rooms
            .entry(room.to_owned())
            .or_insert_with(|| Arc::new(Mutex::new(Room::new(defaults.clone()))));
        let config = lock(state).versioned();
        Ok(config)
    }

    async fn room_settings(&self, room: &str) -> Result<VersionedConfig, StoreError> {
        let room = self.room(room)?;
        let state = lock(&room);
        Ok(state.versioned())
    }

    async fn update_room(
        &self,
        room: &str,
        patch: &RoomConfigPatch,
        expected_version: Option<u64>,
    ) -> Result<SettingsUpdate, StoreError> {
        let room = self.room(room)?;
        let mut state = lock(&room);
        let applies = expected_version.is_none_or(|expected| expected == state.version);
        if applies {
            state.config = state.config.patched(patch);
            state.version += 1;
        }
        let in_force = state.versioned();
        Ok(if applies {
            SettingsUpdate::Applied(in_force)
        } else {
            SettingsUpdate::VersionMismatch(in_force)
        })
    }

    async fn join_with_limit(
        &self,
        room: &str,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
    ) -> Result<JoinReply, StoreError> {
        let room = self.room(room)?;
        let mut state = lock(&room);
        let now = super::now_ms();
        if let Some(key) = dedup_key {
            if let Some(existing) = state.dedup.get(key).cloned() {
                if state.is_live_for_dedup(&existing, now) {
                    let ticket = state
                        .record(&existing, now)
                        .expect("live ticket has a record");
                    return Ok(JoinReply::Joined(JoinOutcome {
                        ticket,
                        created: false,
                    }));
                }
            }
        }
        if let Some(limit) = limit {
            if let Err(retry_after_ms) = state.pass_join_limit(limit, now) {
                return Ok(JoinReply::RateLimited { retry_after_ms });
            }
        }
        state.seq += 1;
        let seq = state.seq;
        let id: Arc<str> = Arc::from(new_id);
        state.queue.push(seq, id.clone());
        state.seq_of.insert(id.clone(), seq);
        if let Some(key) = dedup_key {
            state.dedup.insert(key.to_owned(), id.clone());
        }
        let position = state.queue.position(seq);
        Ok(JoinReply::Joined(JoinOutcome {
            ticket: TicketRecord {
                id: new_id.to_owned(),
                state: TicketState::Waiting,
                position,
                entry_token: None,
                token_expires_at_ms: None,
            },
            created: true,
        }))
    }

    async fn ticket(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
    ) -> Result<Option<TicketRecord>, StoreError> {
        let room = self.room(room)?;
        let state = lock(&room);
        Ok(state.record(id, now_ms))
    }

    async fn sse_refresh(
        &self,
        room: &str,
        since: Option<QueueCursor>,
        ids: &[String],
        now_ms: u64,
    ) -> Result<SseRefresh, StoreError> {
        let room = self.room(room)?;
        let state = lock(&room);
        let cursor = QueueCursor {
            popped: state.popped,
            left: state.left_count,
        };
        let delta = since.and_then(|since| {
            let new_leavers = usize::try_from(cursor.left.checked_sub(since.left)?).ok()?;
            let popped = cursor.popped.checked_sub(since.popped)?;
            (new_leavers <= state.left_seqs.len()).then(|| {
                let skip = state.left_seqs.len() - new_leavers;
                let mut left_seqs: Vec<u64> = state.left_seqs.iter().skip(skip).copied().collect();
                left_seqs.sort_unstable();
                QueueDelta { popped, left_seqs }
            })
        });
        let tickets = ids
            .iter()
            .map(|id| {
                let seq = state.seq_of.get(id.as_str()).copied();
                state.record(id, now_ms).map(|record| (record, seq))
            })
            .collect();
        Ok(SseRefresh {
            cursor,
            delta,
            tickets,
        })
    }

    async fn leave(
        &self,
        room: &str,
        id: &str,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<LeaveOutcome, StoreError> {
        let room = self.room(room)?;
        let mut state = lock(&room);
        if let Some((key, seq)) = state.seq_of.remove_entry(id) {
            state.queue.remove(seq);
            state.left_count += 1;
            state.left_seqs.push_back(seq);
            if state.left_seqs.len() > LEFT_KEPT {
                state.left_seqs.pop_front();
            }
            // The dedup entry stays: a later join under that key sees a LEFT ticket and enqueues anew.
            let left = Settled {
                state: TicketState::Left,
                token: None,
                expires_at_ms: 0,
                forget_at_ms: now_ms + keep_ms,
                order: None,
            };
            state.settle(&key, left);
            return Ok(LeaveOutcome::Left);
        }
        let Some(current) = state.record(id, now_ms) else {
            return Ok(LeaveOutcome::NotFound);
        };
        if current.state != TicketState::TokenIssued {
            return Ok(LeaveOutcome::AlreadyEnded(current.state));
        }
        let (key, mut ticket) = state
            .settled
            .remove_entry(id)
            .expect("issued ticket is settled");
        state.active.remove(&(ticket.expires_at_ms, key.clone()));
        if let Some(token) = ticket.token.take() {
            state.tokens.remove(token_secret(&token));
        }
        ticket.state = TicketState::Left;
        ticket.forget_at_ms = now_ms + keep_ms;
        state.settle(&key, ticket);
        Ok(LeaveOutcome::Left)
    }

    async fn counts(&self, room: &str, now_ms: u64) -> Result<RoomCounts, StoreError> {
        let room = self.room(room)?;
        let state = lock(&room);
        let active = state.active.iter().filter(|(exp, _)| *exp > now_ms).count();
        Ok(RoomCounts {
            waiting: state.queue.len() as u64,
            active: active as u64,
        })
    }

    async fn lease(
        &self,
        room: &str,
        holder: &str,
        lease_ms: u64,
        _defaults: &RoomConfig,
    ) -> Result<LeaseOutcome, StoreError> {
        let room = self.room(room)?;
        let mut state = lock(&room);
        let now = super::now_ms();
        let epoch = match &mut state.lease {
            Some(lease) if lease.holder == holder && lease.until_ms > now => {
                lease.until_ms = now + lease_ms;
                Some(state.epoch)
            }
            Some(lease) if lease.until_ms > now => None,
            _ => {
                state.epoch += 1;
                state.lease = Some(Lease {
                    holder: holder.to_owned(),
                    until_ms: now + lease_ms,
                });
                Some(state.epoch)
            }
        };
        Ok(LeaseOutcome {
            epoch,
            config: state.versioned(),
            active: state.active.len() as u64,
        })
    }

    async fn release_lease(&self, room: &str, holder: &str) -> Result<(), StoreError> {
        let room = self.room(room)?;
        let mut state = lock(&room);
        if state
            .lease
            .as_ref()
            .is_some_and(|lease| lease.holder == holder)
        {
            state.lease = None;
        }
        Ok(())
    }

    async fn admit(
        &self,
        room: &str,
        request: &AdmitRequest<'_>,
    ) -> Result<AdmitOutcome, StoreError> {
        let room = self.room(room)?;
        let mut state = lock(&room);
        let now = request.now_ms;
        let clock = super::now_ms();
        let holds_lease = state
            .lease
            .as_ref()
            .is_some_and(|lease| lease.holder == request.holder && lease.until_ms > clock);
        if !holds_lease || state.epoch != request.epoch {
            return Ok(AdmitOutcome {
                fenced: true,
                ..AdmitOutcome::default()
            });
        }
        if let Some(lease) = state.lease.as_mut() {
            lease.until_ms = clock + request.lease_ms;
        }
        let expired = state.expire_tokens(now);
        state.forget_finished(now);
        let active = state.active.len() as u64;
        let mut quota = request.tokens.len() as u64;
        if state.config.paused {
            quota = 0;
        }
        if let Some(cap) = request.max_active_users {
            quota = quota.min(cap.saturating_sub(active));
        }
        let expires_at_ms = now + request.token_ttl_ms;
        let mut admitted = 0;
        for token in request.tokens.iter().take(quota as usize) {
            let Some((_, id)) = state.queue.pop_front() else {
                break;
            };
            state.seq_of.remove(&id);
            state
                .tokens
                .insert(token_secret(token).to_owned(), id.clone());
            state.active.insert((expires_at_ms, id.clone()));
            let issued = Settled {
                state: TicketState::TokenIssued,
                token: Some(token.clone()),
                expires_at_ms,
                forget_at_ms: expires_at_ms + request.keep_ms,
                order: None,
            };
            state.settle(&id, issued);
            admitted += 1;
        }
        state.popped += admitted;
        Ok(AdmitOutcome {
            fenced: false,
            admitted,
            expired,
            waiting: state.queue.len() as u64,
            active: state.active.len() as u64,
            config: Some(state.versioned()),
        })
    }

    async fn check_token(
        &self,
        room: &str,
        token: &str,
        now_ms: u64,
    ) -> Result<TokenCheck, StoreError> {
        let room = self.room(room)?;
        let state = lock(&room);
        Ok(match state.token_ticket(token, now_ms) {
            Ok((id, _)) => TokenCheck::Valid {
                ticket_id: id.to_string(),
            },
            Err(refused) => refused,
        })
    }

    async fn consume_token(
        &self,
        room: &str,
        token: &str,
        order: &OrderClaim<'_>,
        now_ms: u64,
        keep_ms: u64,
    ) -> Result<TokenUse, StoreError> {
        let room = self.room(room)?;
        let mut state = lock(&room);
        let (id, ticket) = match state.token_ticket(token, now_ms) {
            Ok(live) => live,
            Err(TokenCheck::Used) => {
                return Ok(state
                    .replay(token, order)
                    .unwrap_or(TokenUse::Refused(TokenCheck::Used)))
            }
            Err(refused) => return Ok(TokenUse::Refused(refused)),
        };
        state.active.remove(&(ticket.expires_at_ms, id.clone()));
        let used = Settled {
            state: TicketState::Completed,
            forget_at_ms: now_ms + keep_ms,
            order: Some((
                order.idempotency_key.unwrap_or_default().to_owned(),
                order.receipt.to_owned(),
            )),
            ..ticket
        };
        state.settle(&id, used);
        Ok(TokenUse::Consumed {
            ticket_id: id.to_string(),
        })
    }
}
