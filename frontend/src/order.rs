//! Placing the demo order exactly once.
//!
//! One `Idempotency-Key` per (room, entry token), kept in `localStorage` with the receipt. An
//! answer that never arrives (network error, timeout, `504 store_timeout`) leaves the outcome
//! unknown, so the page asks again with the same key: the server answers the first order's
//! receipt, never `entry_token_used`. A click while an order is in flight or placed does nothing.

use std::rc::Rc;

use leptos::{prelude::*, task::spawn_local};
use vestibule_shared::{error_code, OrderReceipt, OrderRequest};

use crate::{
    api::{self, ApiError},
    backoff::Backoff,
    focus::focus_in_document_after_render,
    storage::{random_hex_128, RoomMemory},
};

/// The product the demo checkout orders.
const DEMO_SKU: &str = "demo-sneaker";
/// Attempts per click before the page hands the decision back to the shopper.
const MAX_ATTEMPTS: u32 = 4;

/// The answer to the order, shown in `#checkout-result[data-outcome]`.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// No order sent yet (or the last one surely failed and may be sent again).
    Idle,
    /// An order is in flight.
    Sending,
    /// No answer to the last attempt; the same order is being sent again.
    Retrying,
    /// 201: the order was placed (now, or before a reload).
    Ordered(OrderReceipt),
    /// 403 `entry_token_expired`.
    Expired,
    /// 403 `entry_token_used` (by another order than this page's).
    Used,
    /// Anything else; the error code when the server sent one.
    Error {
        /// The error code of the answer, e.g. `"store_unavailable"`.
        code: Option<String>,
        /// Whether no answer came at all.
        network: bool,
    },
}

impl Outcome {
    fn from_error(error: &ApiError) -> Self {
        match error.code() {
            Some(error_code::TOKEN_EXPIRED) => Self::Expired,
            Some(error_code::TOKEN_USED) => Self::Used,
            code => Self::Error {
                code: code.map(str::to_owned),
                network: matches!(error, ApiError::Network | ApiError::Timeout),
            },
        }
    }

    /// Whether an order is under way or done, so the button must not send another.
    pub fn blocks_ordering(&self) -> bool {
        matches!(self, Self::Sending | Self::Retrying | Self::Ordered(_))
    }

    /// The `data-outcome` value, e.g. `"ordered"`; none while nothing is decided.
    pub fn data_outcome(&self) -> Option<&'static str> {
        match self {
            Self::Idle | Self::Sending => None,
            Self::Retrying => Some("retrying"),
            Self::Ordered(_) => Some("ordered"),
            Self::Expired => Some("expired"),
            Self::Used => Some("used"),
            Self::Error { .. } => Some("error"),
        }
    }
}

/// One order of one room with one entry token (or none: the server then says why not).
pub struct Order {
    room: String,
    entry_token: Option<String>,
    idempotency_key: String,
    memory: RoomMemory,
    outcome: RwSignal<Outcome>,
}

impl Order {
    /// Sends the order unless one is in flight or placed; `outcome` follows it to the end.
    pub fn place(
        room: &str,
        entry_token: Option<String>,
        memory: RoomMemory,
        outcome: RwSignal<Outcome>,
    ) {
        if outcome.with_untracked(Outcome::blocks_ordering) {
            return;
        }
        outcome.set(Outcome::Sending);
        let idempotency_key = entry_token
            .as_deref()
            .map_or_else(random_hex_128, |token| memory.order_key(token));
        let order = Rc::new(Self {
            room: room.to_owned(),
            entry_token,
            idempotency_key,
            memory,
            outcome,
        });
        order.attempt(1, Backoff::default());
    }

    fn attempt(self: Rc<Self>, number: u32, mut backoff: Backoff) {
        spawn_local(async move {
            let request = OrderRequest {
                sku: Some(DEMO_SKU.to_owned()),
                quantity: Some(1),
            };
            let result = api::place_order(
                &self.room,
                self.entry_token.as_deref(),
                &self.idempotency_key,
                &request,
            )
            .await;
            match result {
                Ok(receipt) => {
                    if let Some(token) = &self.entry_token {
                        self.memory.set_receipt(token, &receipt);
                    }
                    self.finish(Outcome::Ordered(receipt));
                }
                Err(error) if error.is_transient() && number < MAX_ATTEMPTS => {
                    self.outcome.set(Outcome::Retrying);
                    let delay = backoff.next_delay(
                        js_sys::Math::random(),
                        error.retry_after(),
                        error.server_answered(),
                    );
                    set_timeout(move || self.attempt(number + 1, backoff), delay);
                }
                Err(error) => self.finish(Outcome::from_error(&error)),
            }
        });
    }

    fn finish(&self, outcome: Outcome) {
        self.outcome.set(outcome);
        // The button is disabled or the answer is new: focus goes to the answer.
        focus_in_document_after_render("checkout-result");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_in_flight_or_placed_blocks_a_second_one() {
        let receipt = OrderReceipt {
            order_id: "ord_1".into(),
            room: "main".into(),
            sku: DEMO_SKU.into(),
            quantity: 1,
        };
        assert!(Outcome::Sending.blocks_ordering());
        assert!(Outcome::Retrying.blocks_ordering());
        assert!(Outcome::Ordered(receipt).blocks_ordering());
        assert!(!Outcome::Idle.blocks_ordering());
        assert!(!Outcome::Error {
            code: None,
            network: true
        }
        .blocks_ordering());
    }

    #[test]
    fn a_used_or_expired_token_is_named_and_a_timeout_counts_as_no_answer() {
        let used = ApiError::Status {
            status: 403,
            code: error_code::TOKEN_USED.into(),
            retry_after: None,
            refusal: None,
        };
        assert_eq!(Outcome::from_error(&used), Outcome::Used);
        assert_eq!(
            Outcome::from_error(&ApiError::Timeout),
            Outcome::Error {
                code: None,
                network: true
            }
        );
    }
}
