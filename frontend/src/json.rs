//! The JSON the page reads and writes, without serde (issue 47: serde's derived visitors and
//! serde_json's parser and error messages were about a tenth of the WASM).
//!
//! [`parse`] reads a JSON text into a [`Json`] tree; the [`FromJson`] decoders below take the API's
//! answers out of it with the same rules as the serde derives they replace (`camelCase` fields,
//! `SCREAMING_SNAKE_CASE` enums, a missing or `null` `Option` is `None`, a required field that is
//! missing or of the wrong type fails the whole answer). Numbers are whole and non-negative
//! everywhere the page reads one, so [`Json::Int`] holds those and any other number is
//! [`Json::Other`] (a wrong type for every field). [`Writer`] writes the two request bodies and the
//! stored order.

use vestibule_shared::{
    bots::Challenge, embed::EmbeddingInfo, ErrorBody, OrderReceipt, OrderRequest, QueueingMethod,
    RoomState, SoldOutMessage, TicketState, TicketStatus, WaitReason,
};

/// A parsed JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A whole number from 0 to `u64::MAX`.
    Int(u64),
    /// Any other number (negative, with a fraction or an exponent, or too large).
    Other,
    /// A string, unescaped.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object's members in order.
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// The member `key` of an object (the last one, as serde_json's maps keep).
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Self::Obj(members) => members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Self::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A required string member.
    fn string(&self, key: &str) -> Option<String> {
        self.get(key)?.as_str().map(str::to_owned)
    }

    /// A required whole number member.
    fn int(&self, key: &str) -> Option<u64> {
        match self.get(key)? {
            Self::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// An optional member: `Some(None)` when missing or `null`, `None` when of the wrong kind.
    fn opt<T>(&self, key: &str, read: impl FnOnce(&Json) -> Option<T>) -> Option<Option<T>> {
        match self.get(key) {
            None | Some(Self::Null) => Some(None),
            Some(value) => read(value).map(Some),
        }
    }

    fn opt_string(&self, key: &str) -> Option<Option<String>> {
        self.opt(key, |v| v.as_str().map(str::to_owned))
    }

    fn opt_int(&self, key: &str) -> Option<Option<u64>> {
        self.opt(key, |v| match v {
            Self::Int(n) => Some(*n),
            _ => None,
        })
    }

    /// A `bool` member with `#[serde(default)]`: missing is `false` (`null` is not a bool).
    fn flag(&self, key: &str) -> Option<bool> {
        match self.get(key) {
            None => Some(false),
            Some(Self::Bool(b)) => Some(*b),
            Some(_) => None,
        }
    }
}

/// Parses a whole JSON text; `None` when it is not JSON.
pub fn parse(text: &str) -> Option<Json> {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        at: 0,
        depth: 0,
    };
    let value = parser.value()?;
    parser.space();
    (parser.at == parser.bytes.len()).then_some(value)
}

/// Nesting deeper than this is refused (as serde_json's recursion limit).
const MAX_DEPTH: u32 = 128;

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
    depth: u32,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> bool {
        self.space();
        let found = self.peek() == Some(byte);
        if found {
            self.at += 1;
        }
        found
    }

    fn word(&mut self, word: &[u8], value: Json) -> Option<Json> {
        let found = self.bytes.get(self.at..self.at + word.len()) == Some(word);
        found.then(|| {
            self.at += word.len();
            value
        })
    }

    fn value(&mut self) -> Option<Json> {
        self.space();
        match self.peek()? {
            b'n' => self.word(b"null", Json::Null),
            b't' => self.word(b"true", Json::Bool(true)),
            b'f' => self.word(b"false", Json::Bool(false)),
            b'"' => self.string().map(Json::Str),
            b'[' | b'{' => self.nested(),
            _ => self.number(),
        }
    }

    fn nested(&mut self) -> Option<Json> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        let object = self.next()? == b'{';
        let close = if object { b'}' } else { b']' };
        let mut items = Vec::new();
        let mut members = Vec::new();
        if !self.eat(close) {
            loop {
                if object {
                    self.space();
                    let key = self.string()?;
                    if !self.eat(b':') {
                        return None;
                    }
                    members.push((key, self.value()?));
                } else {
                    items.push(self.value()?);
                }
                if self.eat(close) {
                    break;
                }
                if !self.eat(b',') {
                    return None;
                }
            }
        }
        self.depth -= 1;
        Some(if object {
            Json::Obj(members)
        } else {
            Json::Arr(items)
        })
    }

    fn number(&mut self) -> Option<Json> {
        let start = self.at;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        let digits_from = self.at;
        let mut value = Some(0u64);
        while let Some(digit @ b'0'..=b'9') = self.peek() {
            self.at += 1;
            value = value
                .and_then(|v| v.checked_mul(10))
                .and_then(|v| v.checked_add(u64::from(digit - b'0')));
        }
        let digits = self.at - digits_from;
        if digits == 0 || (digits > 1 && self.bytes[digits_from] == b'0') {
            return None;
        }
        let mut whole = !negative;
        if self.peek() == Some(b'.') {
            self.at += 1;
            whole = false;
            self.digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            whole = false;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.digits()?;
        }
        debug_assert!(self.at > start);
        Some(match value {
            Some(n) if whole => Json::Int(n),
            _ => Json::Other,
        })
    }

    fn digits(&mut self) -> Option<()> {
        let from = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        (self.at > from).then_some(())
    }

    fn hex4(&mut self) -> Option<u32> {
        let mut code = 0;
        for _ in 0..4 {
            code = code * 16 + char::from(self.next()?).to_digit(16)?;
        }
        Some(code)
    }

    fn string(&mut self) -> Option<String> {
        if self.next()? != b'"' {
            return None;
        }
        let mut out = Vec::new();
        loop {
            match self.next()? {
                b'"' => return String::from_utf8(out).ok(),
                b'\\' => {
                    let escaped = match self.next()? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let mut code = self.hex4()?;
                            if (0xD800..0xDC00).contains(&code) {
                                if self.next()? != b'\\' || self.next()? != b'u' {
                                    return None;
                                }
                                let low = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&low) {
                                    return None;
                                }
                                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                            }
                            char::from_u32(code)?
                        }
                        _ => return None,
                    };
                    let mut buffer = [0; 4];
                    out.extend_from_slice(escaped.encode_utf8(&mut buffer).as_bytes());
                }
                byte if byte < 0x20 => return None,
                byte => out.push(byte),
            }
        }
    }
}

/// A value the page reads from the API's JSON.
pub trait FromJson: Sized {
    /// `None` when the value does not have the expected shape.
    fn from_json(json: &Json) -> Option<Self>;
}

/// Parses `text` and decodes it as `T`.
pub fn decode<T: FromJson>(text: &str) -> Option<T> {
    T::from_json(&parse(text)?)
}

fn ticket_state(text: &str) -> Option<TicketState> {
    Some(match text {
        "PRE_QUEUE" => TicketState::PreQueue,
        "WAITING" => TicketState::Waiting,
        "TOKEN_ISSUED" => TicketState::TokenIssued,
        "COMPLETED" => TicketState::Completed,
        "EXPIRED" => TicketState::Expired,
        "LEFT" => TicketState::Left,
        "SOLD_OUT" => TicketState::SoldOut,
        _ => return None,
    })
}

fn room_state(text: &str) -> Option<RoomState> {
    Some(match text {
        "OPEN" => RoomState::Open,
        "PAUSED" => RoomState::Paused,
        "PRE_QUEUE" => RoomState::PreQueue,
        "SOLD_OUT" => RoomState::SoldOut,
        "CLOSED" => RoomState::Closed,
        _ => return None,
    })
}

fn wait_reason(text: &str) -> WaitReason {
    match text {
        "PAUSED" => WaitReason::Paused,
        "RATE_LOWERED" => WaitReason::RateLowered,
        "CAP_REACHED" => WaitReason::CapReached,
        "CHECKOUT_SLOW" => WaitReason::CheckoutSlow,
        _ => WaitReason::Other,
    }
}

impl FromJson for TicketStatus {
    fn from_json(json: &Json) -> Option<Self> {
        Some(Self {
            ticket_id: json.string("ticketId")?,
            room: json.string("room")?,
            status: ticket_state(json.get("status")?.as_str()?)?,
            position: json.opt_int("position")?,
            eta_seconds: json.opt_int("etaSeconds")?,
            eta_seconds_high: json.opt_int("etaSecondsHigh")?,
            reason: json.opt("reason", |v| v.as_str().map(wait_reason))?,
            next_poll_after_ms: json.int("nextPollAfterMs")?,
            entry_token: json.opt_string("entryToken")?,
            token_expires_at: json.opt_string("tokenExpiresAt")?,
            checkout_url: json.opt_string("checkoutUrl")?,
            room_state: room_state(json.get("roomState")?.as_str()?)?,
            place_kept: json.flag("placeKept")?,
            sold_out_message: json.opt("soldOutMessage", |m| {
                matches!(m, Json::Obj(_)).then_some(())?;
                Some(SoldOutMessage {
                    en: m.opt_string("en")?,
                    ko: m.opt_string("ko")?,
                })
            })?,
            heartbeat_after_ms: json.opt_int("heartbeatAfterMs")?,
            opens_at: json.opt_string("opensAt")?,
            ticket_tag: json.opt_string("ticketTag")?,
            message_en: json.opt_string("messageEn")?,
            message_ko: json.opt_string("messageKo")?,
            beyond_stock: json.flag("beyondStock")?,
            queueing_method: json.opt("queueingMethod", |v| QueueingMethod::parse(v.as_str()?))?,
        })
    }
}

impl FromJson for Challenge {
    fn from_json(json: &Json) -> Option<Self> {
        Some(Self {
            challenge: json.string("challenge")?,
            difficulty: u8::try_from(json.int("difficulty")?).ok()?,
            expires_at_ms: json.int("expiresAtMs")?,
            algorithm: json.string("algorithm")?,
        })
    }
}

impl FromJson for OrderReceipt {
    fn from_json(json: &Json) -> Option<Self> {
        Some(Self {
            order_id: json.string("orderId")?,
            room: json.string("room")?,
            sku: json.string("sku")?,
            quantity: u32::try_from(json.int("quantity")?).ok()?,
        })
    }
}

impl FromJson for ErrorBody {
    fn from_json(json: &Json) -> Option<Self> {
        Some(Self {
            error: json.string("error")?,
            message: json.string("message")?,
        })
    }
}

impl FromJson for EmbeddingInfo {
    fn from_json(json: &Json) -> Option<Self> {
        let Json::Arr(origins) = json.get("allowedOrigins")? else {
            return None;
        };
        Some(Self {
            room: json.string("room")?,
            allowed_origins: origins
                .iter()
                .map(|o| o.as_str().map(str::to_owned))
                .collect::<Option<_>>()?,
            share_token_with_embedder: match json.get("shareTokenWithEmbedder")? {
                Json::Bool(b) => *b,
                _ => return None,
            },
        })
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every answer the serde derives read, read the same here.
    fn same_as_serde<T>(text: &str)
    where
        T: FromJson + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        assert_eq!(
            decode::<T>(text),
            serde_json::from_str::<T>(text).ok(),
            "{text}"
        );
    }

    #[test]
    fn ticket_statuses_decode_as_serde_does() {
        let full = serde_json::json!({
            "ticketId": "Zb3n0W6m1q8VqL2pX9cT4A", "room": "main", "status": "WAITING",
            "position": 42, "etaSeconds": 3, "etaSecondsHigh": 5, "reason": "CAP_REACHED",
            "nextPollAfterMs": 3000, "entryToken": null, "tokenExpiresAt": null,
            "checkoutUrl": null, "roomState": "OPEN", "placeKept": true,
            "soldOutMessage": {"en": "Gone \"all\" \u{1F600}", "ko": null}, "heartbeatAfterMs": 60000,
            "opensAt": "2026-11-27T09:00:00Z", "ticketTag": "0123456789ab",
            "messageEn": "Sizes 42–44\nsold out", "messageKo": "품절", "beyondStock": true,
            "queueingMethod": "random", "unknownField": [1, {"x": -2.5e3}]
        });
        same_as_serde::<TicketStatus>(&full.to_string());
        same_as_serde::<TicketStatus>(&serde_json::to_string_pretty(&full).unwrap());
        let minimal = r#"{"ticketId":"t","room":"r","status":"TOKEN_ISSUED","nextPollAfterMs":1000,
            "roomState":"PAUSED","entryToken":"main.x","reason":"SOMETHING_NEW"}"#;
        same_as_serde::<TicketStatus>(minimal);
        assert!(decode::<TicketStatus>(minimal).is_some());
        for wrong in [
            r#"{"ticketId":"t","room":"r","status":"NEW_STATE","nextPollAfterMs":1,"roomState":"OPEN"}"#,
            r#"{"ticketId":"t","room":"r","status":"WAITING","nextPollAfterMs":1.5,"roomState":"OPEN"}"#,
            r#"{"ticketId":"t","room":"r","status":"WAITING","nextPollAfterMs":-1,"roomState":"OPEN"}"#,
            r#"{"ticketId":"t","room":"r","status":"WAITING","roomState":"OPEN"}"#,
            r#"{"ticketId":"t","room":"r","status":"WAITING","nextPollAfterMs":1,"roomState":"OPEN","position":"3"}"#,
            r#"{"ticketId":"t","room":"r","status":"WAITING","nextPollAfterMs":1,"roomState":"OPEN","placeKept":null}"#,
            "<html>captive portal</html>",
            "",
            "{\"ticketId\":\"t\"",
        ] {
            same_as_serde::<TicketStatus>(wrong);
            assert_eq!(decode::<TicketStatus>(wrong), None, "{wrong}");
        }
    }

    #[test]
    fn other_answers_decode_as_serde_does() {
        same_as_serde::<Challenge>(
            r#"{"challenge":"abc","difficulty":18,"expiresAtMs":1700000000000,"algorithm":"sha256-leading-zero-bits"}"#,
        );
        same_as_serde::<Challenge>(
            r#"{"challenge":"abc","difficulty":300,"expiresAtMs":1,"algorithm":"x"}"#,
        );
        same_as_serde::<OrderReceipt>(
            r#"{"orderId":"o-1","room":"main","sku":"DEMO","quantity":1}"#,
        );
        same_as_serde::<ErrorBody>(r#"{"error":"sold_out","message":"The room is sold out."}"#);
        same_as_serde::<ErrorBody>(r#"{"error":"x"}"#);
        same_as_serde::<EmbeddingInfo>(
            r#"{"room":"main","allowedOrigins":["https://shop.example"],"shareTokenWithEmbedder":false}"#,
        );
        same_as_serde::<EmbeddingInfo>(
            r#"{"room":"main","allowedOrigins":[1],"shareTokenWithEmbedder":false}"#,
        );
    }

    #[test]
    fn strings_round_trip_with_escapes() {
        for text in [
            "plain",
            "quote \" backslash \\ slash /",
            "line\nbreak\ttab\u{1}",
            "한국어 😀",
        ] {
            let written = Writer::object().string("k", Some(text)).end();
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(&written).unwrap()["k"],
                text
            );
            assert_eq!(
                parse(&written).unwrap().get("k"),
                Some(&Json::Str(text.to_owned()))
            );
        }
        assert_eq!(parse(r#""\ud83d\ude00""#), Some(Json::Str("😀".to_owned())));
        assert_eq!(parse(r#""\ud83d""#), None);
        assert_eq!(parse("01"), None);
        assert_eq!(parse("[1,]"), None);
        assert_eq!(parse("18446744073709551616"), Some(Json::Other));
    }

    #[test]
    fn request_bodies_are_what_serde_wrote() {
        let order = OrderRequest {
            sku: Some("DEMO-SKU".to_owned()),
            quantity: Some(1),
        };
        assert_eq!(
            order_request(&order),
            serde_json::to_string(&order).unwrap()
        );
        let none = OrderRequest::default();
        assert_eq!(order_request(&none), serde_json::to_string(&none).unwrap());
        let receipt_value = OrderReceipt {
            order_id: "o".to_owned(),
            room: "main".to_owned(),
            sku: "S".to_owned(),
            quantity: 2,
        };
        assert_eq!(
            receipt(&receipt_value),
            serde_json::to_string(&receipt_value).unwrap()
        );
    }
}
