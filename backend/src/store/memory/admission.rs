//! The scheduler's side of a [`Room`]: the lease (leader + fencing epoch) and admission.

use vestibule_shared::TicketState;

use super::room::{Lease, Room, Settled};
use crate::ids::token_secret;
use crate::store::{AdmitOutcome, AdmitRequest, LeaseOutcome};

impl Room {
    /// Takes or renews the lease at the clock time `clock_ms` (see `Store::lease`).
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

    /// One fenced leader tick (see `Store::admit`): the lease is checked against the clock time
    /// `clock_ms`, the admission itself runs at `request.now_ms`.
    pub fn admit(&mut self, request: &AdmitRequest<'_>, clock_ms: u64) -> AdmitOutcome {
        self.admit_with_skips(request, clock_ms).0
    }

    /// [`Room::admit`], also returning the ids it skipped for silence (before admitting:
    /// docs/DESIGN.md "Presence"), which the durable store journals.
    pub fn admit_with_skips(
        &mut self,
        request: &AdmitRequest<'_>,
        clock_ms: u64,
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
            lease.until_ms = clock_ms + request.lease_ms;
        }
        let silent = self.silent(request.now_ms, request.abandon_after_ms);
        let skipped = self.skip(&silent, request.now_ms, request.hold_place_ms);
        let (admitted, expired) = self.admit_unfenced(
            request.now_ms,
            request.token_ttl_ms,
            request.keep_ms,
            request.max_active_users,
            request.tokens,
        );
        let outcome = AdmitOutcome {
            fenced: false,
            admitted,
            expired,
            waiting: self.queue.len() as u64,
            active: self.active.len() as u64,
            skipped: skipped.len() as u64,
            settings: Some(self.versioned()),
        };
        (outcome, skipped)
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
        let expires_at_ms = now_ms + token_ttl_ms;
        let mut admitted = 0;
        for token in tokens.iter().take(quota as usize) {
            let Some((_, id)) = self.queue.pop_front() else {
                break;
            };
            self.seq_of.remove(&id);
            self.presence.forget(&id);
            self.tokens
                .insert(token_secret(token).to_owned(), id.clone());
            self.active.insert((expires_at_ms, id.clone()));
            let issued = Settled {
                state: TicketState::TokenIssued,
                token: Some(token.clone()),
                expires_at_ms,
                forget_at_ms: expires_at_ms + keep_ms,
                order: None,
            };
            self.settle(&id, issued);
            admitted += 1;
        }
        self.popped += admitted;
        (admitted, expired)
    }
}
