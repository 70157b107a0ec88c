//! The durable store's admission role: the engine's, with every admission that changed something
//! and every used token journaled (leases are not kept: a restarted process leads anew).

use async_trait::async_trait;

use super::change::Change;
use super::DurableStore;
use crate::{
    now_ms, Admission, AdmitOutcome, AdmitRequest, LeaseOutcome, OrderClaim, RoomId, StoreError,
    TokenCheck, TokenUse,
};

#[async_trait]
impl Admission for DurableStore {
    async fn lease(&self, room: RoomId<'_>, holder: &str) -> Result<LeaseOutcome, StoreError> {
        self.engine.lease(room, holder).await
    }

    async fn release_lease(&self, room: RoomId<'_>, holder: &str) -> Result<(), StoreError> {
        self.engine.release_lease(room, holder).await
    }

    async fn admit(
        &self,
        room: RoomId<'_>,
        request: &AdmitRequest<'_>,
    ) -> Result<AdmitOutcome, StoreError> {
        self.change(|engine| {
            let (clock, options) = (now_ms(), *engine.options());
            let (outcome, skipped) = engine.with_room(room, |state| {
                state.admit_with_skips(request, clock, &options)
            })?;
            // Expiring and forgetting depend only on the time, so a tick that admitted and
            // skipped nobody changed nothing the next recorded tick would not redo.
            let recorded = outcome.admitted > 0 || !skipped.is_empty();
            let change = recorded.then(|| Change::Admit {
                room: room.slug.to_owned(),
                now_ms: request.now_ms,
                token_ttl_ms: request.token_ttl_ms,
                keep_ms: options.keep_ms,
                max_active_users: request.max_active_users,
                tokens: request
                    .tokens
                    .iter()
                    .take(outcome.admitted as usize)
                    .cloned()
                    .collect(),
                skipped,
                hold_place_ms: request.hold_place_ms,
            });
            Ok((outcome, change))
        })
    }

    async fn check_token(
        &self,
        room: RoomId<'_>,
        token: &str,
        now_ms: u64,
    ) -> Result<TokenCheck, StoreError> {
        self.engine.check_token(room, token, now_ms).await
    }

    async fn consume_token(
        &self,
        room: RoomId<'_>,
        token: &str,
        order: &OrderClaim<'_>,
        now_ms: u64,
    ) -> Result<TokenUse, StoreError> {
        let keep_ms = self.options().keep_ms;
        self.change(|engine| {
            let used = engine.with_room(room, |state| {
                state.consume_token(token, order, now_ms, keep_ms)
            })?;
            let change = matches!(used, TokenUse::Consumed { .. }).then(|| Change::ConsumeToken {
                room: room.slug.to_owned(),
                token: token.to_owned(),
                key: order.idempotency_key.map(str::to_owned),
                receipt: order.receipt.to_owned(),
                now_ms,
                keep_ms,
            });
            Ok((used, change))
        })
    }
}
