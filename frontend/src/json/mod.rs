//! The JSON the page reads and writes, without serde (serde's derived visitors and
//! serde_json's parser and error messages were about a tenth of the WASM).
//!
//! [`parse`] reads (this file) a JSON text into a [`Json`] tree; the [`FromJson`] decoders (`decode.rs`) take the API's
//! answers out of it with the same rules as the serde derives they replace (`camelCase` fields,
//! `SCREAMING_SNAKE_CASE` enums, a missing or `null` `Option` is `None`, a required field that is
//! missing or of the wrong type fails the whole answer). Numbers are whole and non-negative
//! everywhere the page reads one, so [`Json::Int`] holds those and any other number is
//! [`Json::Other`] (a wrong type for every field). [`Writer`] (`write.rs`) writes the two request
//! bodies and the stored order.

mod decode;
mod write;

pub use decode::{decode, FromJson};
pub use write::{order_request, receipt, Writer};

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

#[cfg(test)]
mod tests;
