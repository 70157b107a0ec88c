//! The JSON the page writes: the join and order request bodies and the stored receipt.

use vestibule_shared::{OrderReceipt, OrderRequest};

/// Writes a JSON object member by member: `{"a":"x","b":1}`.
pub struct Writer(String);

impl Writer {
    /// An object with no member yet.
    pub fn object() -> Self {
        Self(String::from("{"))
    }

    fn key(&mut self, key: &str) {
        if self.0.len() > 1 {
            self.0.push(',');
        }
        push_string(&mut self.0, key);
        self.0.push(':');
    }

    /// A string member, or `null`.
    pub fn string(mut self, key: &str, value: Option<&str>) -> Self {
        self.key(key);
        match value {
            Some(value) => push_string(&mut self.0, value),
            None => self.0.push_str("null"),
        }
        self
    }

    /// A whole number member, or `null`.
    pub fn int(mut self, key: &str, value: Option<u64>) -> Self {
        self.key(key);
        match value {
            Some(value) => self.0.push_str(&value.to_string()),
            None => self.0.push_str("null"),
        }
        self
    }

    /// A member whose value is JSON already written.
    pub fn raw(mut self, key: &str, json: &str) -> Self {
        self.key(key);
        self.0.push_str(json);
        self
    }

    /// The text of the object.
    pub fn end(mut self) -> String {
        self.0.push('}');
        self.0
    }
}

/// `text` as a JSON string, quoted and escaped.
fn push_string(out: &mut String, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                out.push_str("\\u00");
                out.push(char::from(HEX[(u32::from(c) >> 4) as usize]));
                out.push(char::from(HEX[(u32::from(c) & 15) as usize]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The body of an order: `{"sku": …, "quantity": …}` (`null` for a missing one).
pub fn order_request(order: &OrderRequest) -> String {
    Writer::object()
        .string("sku", order.sku.as_deref())
        .int("quantity", order.quantity.map(u64::from))
        .end()
}

/// An order receipt as the API writes it.
pub fn receipt(receipt: &OrderReceipt) -> String {
    Writer::object()
        .string("orderId", Some(&receipt.order_id))
        .string("room", Some(&receipt.room))
        .string("sku", Some(&receipt.sku))
        .int("quantity", Some(u64::from(receipt.quantity)))
        .end()
}
