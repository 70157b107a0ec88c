//! The scheduler's side of a [`Room`]: the lease (leader + fencing epoch) and admission.

use vestibule_shared::TicketState;

use super::room::{Lease, Room, Settled};
use super::MemoryStore;
use crate::ids::token_secret;
use crate::{
    Admission, AdmitOutcome, AdmitRequest, InstantAdmission, JoinLimit, JoinReply, LeaseOutcome,
    OrderClaim, RoomId, StoreError, StoreOptions, TokenCheck, TokenUse,
};

impl Room {
    /// Takes or renews the lease at the clock time `clock_ms` (see `Admission::lease`).
    pub fn lease(&mut self, holder: &str, lease_ms: u64, clock_ms: u64) -> LeaseOutcome {
        let epoch = match &mut self.lease {
            Some(lease) if lease.holder == holder && lease.until_ms > clock_ms => {
                lease.until_ms = clock_ms + lease_ms;
                Some(self.epoch)
            }
            Some(lease) if lease.until_ms > clock_ms => None,
            _ => {
                self.epoch += 1;
                self.lease = Some(Lease {
                    holder: holder.to_owned(),
                    until_ms: clock_ms + lease_ms,
                });
                Some(self.epoch)
            }
        };
        LeaseOutcome {
            epoch,
            settings: self.versioned(),
            active: self.active.len() as u64,
            pace: None,
        }
    }

    /// Gives up the lease if `holder` has it.
    pub fn release_lease(&mut self, holder: &str) {
        if self
            .lease
            .as_ref()
            .is_some_and(|lease| lease.holder == holder)
        {
            self.lease = None;
        }
    }

    /// One fenced leader tick (see `Admission::admit`): the lease is checked against the clock
    /// time `clock_ms`, the admission itself runs at `request.now_ms`.
    pub fn admit(
        &mut self,
        request: &AdmitRequest<'_>,
        clock_ms: u64,
        options: &StoreOptions,
    ) -> AdmitOutcome {
        self.admit_with_skips(request, clock_ms, options).0
    }

    /// [`Room::admit`], also returning the ids it skipped for silence (before admitting:
    /// docs/DESIGN.md "Presence"), which the durable store journals.
    pub fn admit_with_skips(
        &mut self,
        request: &AdmitRequest<'_>,
        clock_ms: u64,
        options: &StoreOptions,
    ) -> (AdmitOutcome, Vec<String>) {
        let holds_lease = self
            .lease
            .as_ref()
            .is_some_and(|lease| lease.holder == request.holder && lease.until_ms > clock_ms);
        if !holds_lease || self.epoch != request.epoch {
            let fenced = AdmitOutcome {
                fenced: true,
                ..AdmitOutcome::default()
            };
            return (fenced, Vec::new());
        }
        if let Some(lease) = self.lease.as_mut() {
            lease.until_ms = clock_ms + options.lease_ms;
        }
        // Until the draw places the pre-queue, nobody is skipped or admitted (docs/DESIGN.md
        // "Scheduled opening and the draw"); nobody is skipped once sold out either: every
        // waiting ticket reads SOLD_OUT already.
        let undrawn = !self.prequeue.is_empty();
        let silent = if undrawn || self.config.sale.sold_out {
            Vec::new()
        } else {
            self.silent(request.now_ms, request.abandon_after_ms)
        };
        let skipped = self.skip(&silent, request.now_ms, request.hold_place_ms);
        let (admitted, expired) = self.admit_unfenced(
            request.now_ms,
            request.token_ttl_ms,
            options.keep_ms,
            request.max_active_users,
            if undrawn { &[] } else { request.tokens },
        );
        // What the quota leaves unused with nobody waiting is banked for instant joins (one
        // accounting: every admission, tick or join, spends the quota of some tick once).
        self.instant_bank = if self.queue.is_empty() && !self.config.paused {
            let unused = request.tokens.len() as u64 - admitted;
            (self.instant_bank + unused).min(request.instant_bank_max)
        } else {
            0
        };
        let outcome = AdmitOutcome {
            fenced: false,
            admitted,
            expired,
            waiting: self.queue.len() as u64,
            active: self.active.len() as u64,
            skipped: skipped.len() as u64,
            settings: Some(self.versioned()),
            popped: self.popped,
        };
        (outcome, skipped)
    }

    /// A join (see `JoinKind::Admitting`) that admits its shopper at once when it creates the
    /// ticket, nobody else waits, the room is open, the cap allows and the bank holds one.
    /// Returns the reply and whether the shopper was admitted.
    pub fn join_admitting(
        &mut self,
        dedup_key: Option<&str>,
        new_id: &str,
        limit: Option<&JoinLimit>,
        instant: &InstantAdmission,
        keep_ms: u64,
    ) -> (JoinReply, bool) {
        if instant
            .settings_version
            .is_some_and(|version| version != self.version)
        {
            return (JoinReply::SettingsChanged, false);
        }
        let cap_allows = self
            .config
            .max_active_users
            .is_none_or(|cap| (self.active.len() as u64) < cap)
            && (self.config.sale.admission_cap())
                .is_none_or(|left| (self.active.len() as u64) < left);
        // A rate of 0 admits nobody, like a pause: what the bank holds from the old rate is
        // not spent (a room set to 0 must stop at once).
        let admitting = !self.config.paused && self.config.admission_rate_per_sec > 0.0;
        let may_admit = self.queue.is_empty() && admitting && cap_allows && self.instant_bank > 0;
        let reply = self.join(dedup_key, new_id, limit, instant.now_ms);
        match reply {
            JoinReply::Joined(mut outcome) if outcome.created && may_admit => {
                self.instant_bank -= 1;
                self.admit_joined(instant, keep_ms);
                if let Some(record) = self.record(new_id, instant.now_ms) {
                    outcome.ticket = record;
                }
                (JoinReply::Joined(outcome), true)
            }
            other => (other, false),
        }
    }

    /// Drops the join times of arrival seqs behind the queue's head.
    pub(super) fn forget_joined_behind_head(&mut self) {
        match self.queue.iter().next() {
            Some((head, _)) => self.joined = self.joined.split_off(&head),
            None => self.joined.clear(),
        }
    }

    /// Admits the one shopper waiting (just joined) with `instant.token`: what an instant join
    /// does after its join, and what the journal replays.
    pub fn admit_joined(&mut self, instant: &InstantAdmission, keep_ms: u64) {
        let Some((_, id)) = self.pop_next() else {
            return;
        };
        self.seq_of.remove(&id);
        self.issue(
            id,
            &instant.token,
            instant.now_ms + instant.token_ttl_ms,
            keep_ms,
        );
        self.popped += 1;
    }

    /// Gives the popped shopper `id` its entry token, expiring at `expires_at_ms`.
    fn issue(&mut self, id: std::sync::Arc<str>, token: &str, expires_at_ms: u64, keep_ms: u64) {
        self.presence.forget(&id);
        self.tokens
            .insert(token_secret(token).to_owned(), id.clone());
        self.active.insert((expires_at_ms, id.clone()));
        let issued = Settled {
            state: TicketState::TokenIssued,
            token: Some(token.to_owned()),
            expires_at_ms,
            forget_at_ms: expires_at_ms + keep_ms,
            order: None,
        };
        self.settle(&id, issued);
    }

    /// The admission part of a tick, with no lease check (also what the journal replays):
    /// expires overdue tokens, forgets finished tickets and admits up to `tokens.len()` shoppers.
    /// Returns (admitted, expired).
    pub fn admit_unfenced(
        &mut self,
        now_ms: u64,
        token_ttl_ms: u64,
        keep_ms: u64,
        max_active_users: Option<u64>,
        tokens: &[String],
    ) -> (u64, u64) {
        let expired = self.expire_tokens(now_ms);
        self.expire_holds(now_ms, keep_ms);
        self.forget_finished(now_ms);
        let active = self.active.len() as u64;
        let mut quota = tokens.len() as u64;
        if self.config.paused {
            quota = 0;
        }
        if let Some(cap) = max_active_users {
            quota = quota.min(cap.saturating_sub(active));
        }
        // Never more shoppers holding tokens than units left (docs/DESIGN.md "Stock and sold
        // out"); none once sold out.
        if let Some(left) = self.config.sale.admission_cap() {
            quota = quota.min(left.saturating_sub(active));
        }
        let expires_at_ms = now_ms + token_ttl_ms;
        let mut admitted = 0;
        for token in tokens.iter().take(quota as usize) {
            let Some((_, id)) = self.pop_next() else {
                break;
            };
            self.seq_of.remove(&id);
            self.issue(id, token, expires_at_ms, keep_ms);
            admitted += 1;
        }
        self.popped += admitted;
        self.forget_joined_behind_head();
        (admitted, expired)
    }
}

#[async_trait::async_trait]
impl Admission for MemoryStore {
    async fn lease(&self, room: RoomId<'_>, holder: &str) -> Result<LeaseOutcome, StoreError> {
        let (clock, lease_ms) = (crate::now_ms(), self.options().lease_ms);
        self.with_room(room, |state| state.lease(holder, lease_ms, clock))
    }

    async fn release_lease(&self, room: RoomId<'_>, holder: &str) -> Result<(), StoreError> {
        self.with_room(room, |state| state.release_lease(holder))
    }

    async fn admit(
        &self,
        room: RoomId<'_>,
        request: &AdmitRequest<'_>,
    ) -> Result<AdmitOutcome, StoreError> {
        let clock = crate::now_ms();
        let options = *self.options();
        self.with_room(room, |state| state.admit(request, clock, &options))
    }

    async fn check_token(
        &self,
        room: RoomId<'_>,
        token: &str,
        now_ms: u64,
    ) -> Result<TokenCheck, StoreError> {
        self.with_room(room, |state| state.check_token(token, now_ms))
    }

    async fn consume_token(
        &self,
        room: RoomId<'_>,
        token: &str,
        order: &OrderClaim<'_>,
        now_ms: u64,
    ) -> Result<TokenUse, StoreError> {
        let keep_ms = self.options().keep_ms;
        self.with_room(room, |state| {
            state.consume_token(token, order, now_ms, keep_ms)
        })
    }
}
