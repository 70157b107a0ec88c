//! Entry tokens in the embedded engine: a token's check and its use by an order, exactly once
//! (the same rules as Redis's `token.lua`).

use std::sync::Arc;

use vestibule_shared::TicketState;

use super::room::{Room, Settled};
use crate::ids::token_secret;
use crate::{OrderClaim, TokenCheck, TokenUse};

impl Room {
    /// Checks an entry token at `now_ms` without using it.
    pub fn check_token(&self, token: &str, now_ms: u64) -> TokenCheck {
        match self.token_ticket(token, now_ms) {
            Ok((id, _)) => TokenCheck::Valid {
                ticket_id: id.to_string(),
            },
            Err(refused) => refused,
        }
    }

    /// Uses an entry token for an order at `now_ms` (see `Store::consume_token`).
    pub fn consume_token(
        &mut self,
        token: &str,
        order: &OrderClaim<'_>,
        now_ms: u64,
        keep_ms: u64,
    ) -> TokenUse {
        let (id, ticket) = match self.token_ticket(token, now_ms) {
            Ok(live) => live,
            Err(TokenCheck::Used) => {
                return self
                    .replay(token, order)
                    .unwrap_or(TokenUse::Refused(TokenCheck::Used))
            }
            Err(refused) => return TokenUse::Refused(refused),
        };
        // The unit goes with the token, in the same step: none left → refused, token kept.
        if !self.config.sale.take_unit() {
            return TokenUse::SoldOut {
                ticket_id: id.to_string(),
            };
        }
        self.active.remove(&(ticket.expires_at_ms, id.clone()));
        let used = Settled {
            state: TicketState::Completed,
            forget_at_ms: now_ms + keep_ms,
            order: Some((
                order.idempotency_key.unwrap_or_default().to_owned(),
                order.receipt.to_owned(),
            )),
            ..ticket
        };
        self.settle(&id, used);
        TokenUse::Consumed {
            ticket_id: id.to_string(),
        }
    }

    /// The live ticket of an entry token, or why the token does not work.
    pub(super) fn token_ticket(
        &self,
        token: &str,
        now_ms: u64,
    ) -> Result<(Arc<str>, Settled), TokenCheck> {
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
            TicketState::Completed | TicketState::Left | TicketState::SoldOut => {
                Err(TokenCheck::Used)
            }
            TicketState::Expired => Err(TokenCheck::Expired),
            _ if ticket.expires_at_ms <= now_ms => Err(TokenCheck::Expired),
            TicketState::PreQueue | TicketState::Waiting | TicketState::TokenIssued => {
                Ok((id, ticket))
            }
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
}
