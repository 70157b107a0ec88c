//! What the page remembers per room: ticket id, idempotency key, starting position, entry token,
//! and the order placed with that token (its idempotency key and receipt).
//!
//! The ticket id lives in `localStorage` so a refresh or a second tab resumes the same place;
//! so does the order, so a reload shows the receipt and a retry reuses the order's key.
//! The entry token lives in `sessionStorage`: it is a short-lived bearer secret for this tab.
//! Where storage is unavailable (a sandboxed or storage-partitioned iframe, private modes) the
//! page keeps the values in memory for as long as it is open instead of failing.

use std::cell::RefCell;

use leptos::prelude::window;
use vestibule_shared::OrderReceipt;

thread_local! {
    /// Values kept in memory where storage is unavailable: a handful of keys, so a list (a
    /// `HashMap` costs its hasher in the WASM).
    static IN_MEMORY: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
}

#[derive(Clone, Copy)]
enum Area {
    Local,
    Session,
}

fn web_storage(area: Area) -> Option<web_sys::Storage> {
    // Both getters throw (SecurityError) when storage is blocked, e.g. in a sandboxed frame.
    match area {
        Area::Local => window().local_storage().ok().flatten(),
        Area::Session => window().session_storage().ok().flatten(),
    }
}

fn memory_key(area: Area, key: &str) -> String {
    let area = match area {
        Area::Local => "Local",
        Area::Session => "Session",
    };
    format!("{area}/{key}")
}

fn get(area: Area, key: &str) -> Option<String> {
    if let Some(value) = web_storage(area).and_then(|s| s.get_item(key).ok().flatten()) {
        return Some(value);
    }
    let key = memory_key(area, key);
    IN_MEMORY.with(|m| {
        m.borrow()
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
    })
}

fn set(area: Area, key: &str, value: &str) {
    let stored = web_storage(area).is_some_and(|s| s.set_item(key, value).is_ok());
    let key = memory_key(area, key);
    IN_MEMORY.with(|m| {
        let mut m = m.borrow_mut();
        m.retain(|(k, _)| *k != key);
        if !stored {
            m.push((key, value.to_owned()));
        }
    });
}

fn remove(area: Area, key: &str) {
    if let Some(s) = web_storage(area) {
        let _ = s.remove_item(key);
    }
    let key = memory_key(area, key);
    IN_MEMORY.with(|m| m.borrow_mut().retain(|(k, _)| *k != key));
}

/// 128 random bits from `crypto.getRandomValues`, as 32 lowercase hex digits.
pub fn random_hex_128() -> String {
    let mut bytes = [0u8; 16];
    let filled = window()
        .crypto()
        .and_then(|c| c.get_random_values_with_u8_array(&mut bytes))
        .is_ok();
    if !filled {
        // No Web Crypto (very old browser): an idempotency key only has to be unlikely to
        // collide within one room, it is not a secret.
        for b in &mut bytes {
            *b = (js_sys::Math::random() * 256.0) as u8;
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A short fingerprint of an entry token (64-bit FNV-1a, hex): enough to tell one admission's
/// order from the next without writing the token itself to `localStorage`.
fn token_tag(token: &str) -> String {
    let hash = token.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// The order made with one entry token: its `Idempotency-Key` and, once placed, the receipt.
/// Stored as `{"token_tag": …, "key": …, "receipt": {…} | null}` ([`crate::json`]).
#[derive(Debug, Clone, PartialEq)]
struct StoredOrder {
    token_tag: String,
    key: String,
    receipt: Option<OrderReceipt>,
}

impl StoredOrder {
    fn to_json(&self) -> String {
        let receipt = self.receipt.as_ref().map(crate::json::receipt);
        crate::json::Writer::object()
            .string("token_tag", Some(&self.token_tag))
            .string("key", Some(&self.key))
            .raw("receipt", receipt.as_deref().unwrap_or("null"))
            .end()
    }

    fn from_json(text: &str) -> Option<Self> {
        use crate::json::{FromJson, Json};
        let json = crate::json::parse(text)?;
        let text_of = |key: &str| match json.get(key)? {
            Json::Str(s) => Some(s.clone()),
            _ => None,
        };
        Some(Self {
            token_tag: text_of("token_tag")?,
            key: text_of("key")?,
            receipt: match json.get("receipt") {
                None | Some(Json::Null) => None,
                Some(receipt) => Some(OrderReceipt::from_json(receipt)?),
            },
        })
    }
}

/// The stored state of one room, under keys `vestibule:{room}:…`.
#[derive(Debug, Clone)]
pub struct RoomMemory {
    room: String,
}

impl RoomMemory {
    /// The memory of `room` (a valid room slug).
    pub fn new(room: &str) -> Self {
        Self {
            room: room.to_owned(),
        }
    }

    fn key(&self, what: &str) -> String {
        format!("vestibule:{}:{what}", self.room)
    }

    /// The ticket id held in this room, if any.
    pub fn ticket_id(&self) -> Option<String> {
        get(Area::Local, &self.key("ticket")).filter(|id| !id.is_empty())
    }

    /// Remembers the ticket id held in this room.
    pub fn set_ticket_id(&self, ticket_id: &str) {
        set(Area::Local, &self.key("ticket"), ticket_id);
    }

    /// The `Idempotency-Key` for joining this room, created on first use.
    ///
    /// It is kept with the ticket, so a join retried after a lost answer gets the same place.
    pub fn idempotency_key(&self) -> String {
        let key = self.key("idempotency-key");
        if let Some(existing) = get(Area::Local, &key).filter(|k| !k.is_empty()) {
            return existing;
        }
        let fresh = random_hex_128();
        set(Area::Local, &key, &fresh);
        fresh
    }

    /// The position this ticket was first seen at, recording `position` if none is stored yet.
    ///
    /// Stored as `"{ticketId} {position}"`, so a new ticket starts a new progress bar.
    pub fn starting_position(&self, ticket_id: &str, position: u64) -> u64 {
        let key = self.key("start");
        let stored = get(Area::Local, &key).and_then(|v| {
            let (id, pos) = v.split_once(' ')?;
            (id == ticket_id).then(|| pos.parse::<u64>().ok()).flatten()
        });
        match stored {
            Some(start) if start >= position => start,
            _ => {
                set(Area::Local, &key, &format!("{ticket_id} {position}"));
                position
            }
        }
    }

    /// Forgets the ticket and everything kept with it; the next join starts a new place.
    pub fn forget_ticket(&self) {
        for what in ["ticket", "idempotency-key", "start", "order"] {
            remove(Area::Local, &self.key(what));
        }
        self.forget_entry_token();
    }

    /// Keeps the entry token (and its expiry, RFC 3339) for the checkout page of this tab.
    pub fn set_entry_token(&self, token: &str, expires_at: Option<&str>) {
        set(Area::Session, &self.key("entry-token"), token);
        match expires_at {
            Some(at) => set(Area::Session, &self.key("entry-token-expires"), at),
            None => remove(Area::Session, &self.key("entry-token-expires")),
        }
    }

    /// The entry token kept by this tab and its expiry, if any.
    pub fn entry_token(&self) -> Option<(String, Option<String>)> {
        let token = get(Area::Session, &self.key("entry-token")).filter(|t| !t.is_empty())?;
        Some((token, get(Area::Session, &self.key("entry-token-expires"))))
    }

    fn forget_entry_token(&self) {
        remove(Area::Session, &self.key("entry-token"));
        remove(Area::Session, &self.key("entry-token-expires"));
    }

    fn stored_order(&self) -> Option<StoredOrder> {
        get(Area::Local, &self.key("order")).and_then(|json| StoredOrder::from_json(&json))
    }

    fn store_order(&self, order: &StoredOrder) {
        set(Area::Local, &self.key("order"), &order.to_json());
    }

    /// The `Idempotency-Key` of the order made with `entry_token`, created on first use: every
    /// retry of that order, also after a reload, sends the same key and gets the same receipt.
    pub fn order_key(&self, entry_token: &str) -> String {
        let tag = token_tag(entry_token);
        if let Some(order) = self.stored_order().filter(|o| o.token_tag == tag) {
            return order.key;
        }
        let key = random_hex_128();
        self.store_order(&StoredOrder {
            token_tag: tag,
            key: key.clone(),
            receipt: None,
        });
        key
    }

    /// Keeps the receipt of the order made with `entry_token`.
    pub fn set_receipt(&self, entry_token: &str, receipt: &OrderReceipt) {
        let tag = token_tag(entry_token);
        let key = self
            .stored_order()
            .filter(|o| o.token_tag == tag)
            .map_or_else(random_hex_128, |o| o.key);
        self.store_order(&StoredOrder {
            token_tag: tag,
            key,
            receipt: Some(receipt.clone()),
        });
    }

    /// The receipt kept for this room: of the order made with `entry_token`, or with any token
    /// when this tab has none (the order was placed, so the ticket no longer hands it out).
    pub fn receipt(&self, entry_token: Option<&str>) -> Option<OrderReceipt> {
        let order = self.stored_order()?;
        match entry_token {
            Some(token) if token_tag(token) != order.token_tag => None,
            _ => order.receipt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_tags_tell_tokens_apart_and_are_stable() {
        assert_eq!(token_tag("main.abc"), token_tag("main.abc"));
        assert_ne!(token_tag("main.abc"), token_tag("main.abd"));
        assert_eq!(token_tag("").len(), 16);
    }

    #[test]
    fn a_stored_order_reads_back_and_reads_what_serde_wrote() {
        let order = StoredOrder {
            token_tag: "0123456789abcdef".to_owned(),
            key: "k\"ey".to_owned(),
            receipt: Some(OrderReceipt {
                order_id: "o-1".to_owned(),
                room: "main".to_owned(),
                sku: "DEMO".to_owned(),
                quantity: 1,
            }),
        };
        assert_eq!(
            StoredOrder::from_json(&order.to_json()),
            Some(order.clone())
        );
        let pending = StoredOrder {
            receipt: None,
            ..order
        };
        assert_eq!(StoredOrder::from_json(&pending.to_json()), Some(pending));
        // As earlier pages wrote it with serde.
        let earlier = r#"{"token_tag":"t","key":"k","receipt":{"orderId":"o","room":"r","sku":"s","quantity":2}}"#;
        let read = StoredOrder::from_json(earlier).unwrap();
        assert_eq!(read.receipt.unwrap().quantity, 2);
        assert_eq!(StoredOrder::from_json("{\"token_tag\":\"t\"}"), None);
    }
}
