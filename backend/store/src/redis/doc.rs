//! A room document as a Redis hash (docs/DESIGN.md "Rooms at run time").
//!
//! Fields: `gen` (the generation), `ver` (the version), `state` (`live` | `deleted`), `cfg` (the
//! settings no script reads, as the JSON of [`Settings`]) and one field per setting a script
//! reads or writes ([`SCRIPT_FIELDS`]), so that Lua never parses JSON. One encoding of "none" in
//! every field: the field is absent (a flag that is off, an unset cap, unlimited stock, FIFO).
//! A new setting that no script reads needs nothing here: it travels in `cfg`.

use redis::Value;
use serde_json::{Map, Value as Json};

use super::reply::as_string;
use crate::{RoomDoc, Settings, StoreError, VersionedSettings};

/// How a script field is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `1` when on, absent when off.
    Flag,
    /// A decimal number, absent for none.
    Number,
    /// A text, absent for none.
    Text,
}

/// A setting that scripts read or write, kept in a field of its own.
#[derive(Debug, Clone, Copy)]
pub(super) struct ScriptField {
    /// The hash field.
    pub field: &'static str,
    /// Where the setting is in the JSON of [`Settings`].
    path: &'static [&'static str],
    kind: Kind,
}

/// The settings scripts read or write (`join.lua`: sold out, closed, queueing method, and for an
/// instant admission paused, rate, cap and stock; `admit.lua` and `token.lua`: stock and sold).
pub(super) const SCRIPT_FIELDS: [ScriptField; 8] = [
    ScriptField {
        field: "paused",
        path: &["paused"],
        kind: Kind::Flag,
    },
    ScriptField {
        field: "rate",
        path: &["admissionRatePerSec"],
        kind: Kind::Number,
    },
    ScriptField {
        field: "cap",
        path: &["maxActiveUsers"],
        kind: Kind::Number,
    },
    ScriptField {
        field: "stock",
        path: &["sale", "stock"],
        kind: Kind::Number,
    },
    ScriptField {
        field: "sold",
        path: &["sale", "sold"],
        kind: Kind::Number,
    },
    ScriptField {
        field: "soldout",
        path: &["sale", "soldOut"],
        kind: Kind::Flag,
    },
    ScriptField {
        field: "closed",
        path: &["sale", "closed"],
        kind: Kind::Flag,
    },
    ScriptField {
        field: "qmethod",
        path: &["queueingMethod"],
        kind: Kind::Text,
    },
];

/// `settings` as document fields: `cfg` and every script field that is set, as (field, value)
/// pairs, plus the names of the script fields that are not set (to remove on a change).
///
/// # Errors
/// [`StoreError::Corrupt`] when the settings do not serialise (they always do).
pub(super) fn encode(settings: &Settings) -> Result<Encoded, StoreError> {
    let mut json = serde_json::to_value(settings)
        .map_err(|error| StoreError::Corrupt(format!("settings as JSON: {error}")))?;
    let mut set = Vec::new();
    let mut unset = Vec::new();
    for script in &SCRIPT_FIELDS {
        let value = take(&mut json, script.path);
        match (script.kind, value) {
            (_, None | Some(Json::Null) | Some(Json::Bool(false))) => unset.push(script.field),
            (Kind::Flag, Some(Json::Bool(true))) => set.push((script.field, "1".to_owned())),
            (Kind::Number, Some(Json::Number(number))) => {
                set.push((script.field, number.to_string()));
            }
            (Kind::Text, Some(Json::String(text))) => set.push((script.field, text)),
            (_, Some(other)) => {
                return Err(StoreError::Corrupt(format!(
                    "setting {} is {other}",
                    script.field
                )))
            }
        }
    }
    Ok(Encoded {
        cfg: json.to_string(),
        set,
        unset,
    })
}

/// [`encode`]'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Encoded {
    /// The JSON of the settings without the script fields.
    pub cfg: String,
    /// The script fields that are set, with their values.
    pub set: Vec<(&'static str, String)>,
    /// The script fields that are not set.
    pub unset: Vec<&'static str>,
}

impl Encoded {
    /// (field, value, `1` = set | `0` = remove) for every script field, the triples a change or a
    /// write-back takes.
    pub(super) fn triples(&self) -> Vec<[String; 3]> {
        let set = self
            .set
            .iter()
            .map(|(field, value)| [(*field).to_owned(), value.clone(), "1".to_owned()]);
        let unset = self
            .unset
            .iter()
            .map(|field| [(*field).to_owned(), String::new(), "0".to_owned()]);
        set.chain(unset).collect()
    }
}

/// A document read with `HGETALL` (name, value, …): `None` when there is none.
///
/// # Errors
/// [`StoreError::Corrupt`] when a field does not parse.
pub(super) fn decode(fields: &[Value]) -> Result<Option<RoomDoc>, StoreError> {
    if fields.is_empty() {
        return Ok(None);
    }
    let mut generation = None;
    let mut version = None;
    let mut live = false;
    let mut cfg = None;
    let mut scripted: Vec<(&ScriptField, String)> = Vec::new();
    for pair in fields.chunks_exact(2) {
        let name = as_string(&pair[0])?;
        let value = as_string(&pair[1])?;
        match name.as_str() {
            "gen" => generation = Some(number(&name, &value)?),
            "ver" => version = Some(number(&name, &value)?),
            "state" => live = value == "live",
            "cfg" => cfg = Some(value),
            other => {
                if let Some(script) = SCRIPT_FIELDS.iter().find(|s| s.field == other) {
                    scripted.push((script, value));
                }
            }
        }
    }
    let generation =
        generation.ok_or_else(|| StoreError::Corrupt("a room document has no gen".into()))?;
    if !live {
        return Ok(Some(RoomDoc::Deleted { generation }));
    }
    let mut json: Json = match cfg {
        Some(cfg) => serde_json::from_str(&cfg)
            .map_err(|error| StoreError::Corrupt(format!("room cfg: {error}")))?,
        None => Json::Object(Map::new()),
    };
    // A flag that is off has no field: it reads as off.
    for script in SCRIPT_FIELDS.iter().filter(|s| s.kind == Kind::Flag) {
        put(&mut json, script.path, Json::Bool(false));
    }
    for (script, value) in scripted {
        let value = match script.kind {
            Kind::Flag => Json::Bool(value == "1"),
            // A number taken below 0 by hand (HINCRBY) reads as 0: none left.
            Kind::Number if value.starts_with('-') => Json::from(0),
            Kind::Number => serde_json::from_str::<serde_json::Number>(&value)
                .map(Json::Number)
                .map_err(|_| StoreError::Corrupt(format!("{} {value:?}", script.field)))?,
            Kind::Text => Json::String(value),
        };
        put(&mut json, script.path, value);
    }
    let settings: Settings = serde_json::from_value(json)
        .map_err(|error| StoreError::Corrupt(format!("room settings: {error}")))?;
    Ok(Some(RoomDoc::Live(VersionedSettings {
        settings,
        generation,
        version: version.unwrap_or(generation),
    })))
}

/// A live document read with `HGETALL`, for a call on a room its caller knows to be live.
///
/// # Errors
/// [`StoreError::RoomLost`] when there is none, [`StoreError::RoomGone`] when it is deleted,
/// [`StoreError::Corrupt`] when it does not parse.
pub(super) fn decode_live(slug: &str, fields: &[Value]) -> Result<VersionedSettings, StoreError> {
    match decode(fields)? {
        Some(RoomDoc::Live(settings)) => Ok(settings),
        Some(RoomDoc::Deleted { .. }) => Err(StoreError::RoomGone(slug.to_owned())),
        None => Err(StoreError::RoomLost(slug.to_owned())),
    }
}

fn number(name: &str, value: &str) -> Result<u64, StoreError> {
    value
        .parse()
        .map_err(|_| StoreError::Corrupt(format!("room document {name} {value:?}")))
}

/// Removes the value at `path` from `json`.
fn take(json: &mut Json, path: &[&str]) -> Option<Json> {
    let (last, parents) = path.split_last()?;
    let mut at = json;
    for part in parents {
        at = at.get_mut(*part)?;
    }
    at.as_object_mut()?.remove(*last)
}

/// Puts `value` at `path` in `json`, making the objects on the way.
fn put(json: &mut Json, path: &[&str], value: Json) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = json;
    for part in parents {
        let Some(object) = at.as_object_mut() else {
            return;
        };
        at = object
            .entry((*part).to_owned())
            .or_insert_with(|| Json::Object(Map::new()));
    }
    if let Some(object) = at.as_object_mut() {
        object.insert((*last).to_owned(), value);
    }
}

/// The script fields whose value differs between two encodings, as `change.lua` takes them:
/// (field, value, `1` set | `0` removed).
pub(super) fn changed_fields(before: &Encoded, after: &Encoded) -> Vec<[String; 3]> {
    let value = |encoded: &Encoded, field: &str| {
        encoded
            .set
            .iter()
            .find(|(name, _)| *name == field)
            .map(|(_, value)| value.clone())
    };
    after
        .triples()
        .into_iter()
        .filter(|[field, ..]| value(before, field) != value(after, field))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{QueueingMethod, SaleSettings};

    fn settings() -> Settings {
        Settings {
            admission_rate_per_sec: 12.5,
            paused: true,
            token_ttl_ms: 60_000,
            max_active_users: Some(40),
            checkout_url: Some("https://shop.example/checkout".into()),
            share_token_with_embedder: false,
            abandon_after_ms: 30_000,
            hold_place_ms: 120_000,
            expected_checkout_ms: None,
            sale: SaleSettings {
                stock: Some(9),
                sold: 3,
                sold_out: false,
                closed: true,
                message_en: Some("gone".into()),
                message_ko: None,
            },
            opens_at_ms: Some(1_764_530_000_000),
            prequeue_opens_at_ms: None,
            pow_difficulty: 3,
            pow_auto_joins_per_sec: None,
            require_user_assertion: false,
            labels: Default::default(),
            queueing_method: QueueingMethod::Random,
            auto_rate: None,
        }
    }

    /// The hash `encoded` makes, as `HGETALL` answers it.
    fn as_hash(encoded: &Encoded, generation: u64, version: u64) -> Vec<Value> {
        let mut fields = vec![
            ("gen".to_owned(), generation.to_string()),
            ("ver".to_owned(), version.to_string()),
            ("state".to_owned(), "live".to_owned()),
            ("cfg".to_owned(), encoded.cfg.clone()),
        ];
        for (field, value) in &encoded.set {
            fields.push(((*field).to_owned(), value.clone()));
        }
        fields
            .into_iter()
            .flat_map(|(name, value)| {
                [
                    Value::BulkString(name.into_bytes()),
                    Value::BulkString(value.into_bytes()),
                ]
            })
            .collect()
    }

    #[test]
    fn settings_go_through_a_document_unchanged() {
        let settings = settings();
        let encoded = encode(&settings).unwrap();
        assert!(encoded.set.contains(&("qmethod", "random".to_owned())));
        assert!(encoded.set.contains(&("stock", "9".to_owned())));
        assert!(encoded.unset.contains(&"soldout"));
        assert!(!encoded.cfg.contains("stock"), "{}", encoded.cfg);
        let Some(RoomDoc::Live(read)) = decode(&as_hash(&encoded, 4, 9)).unwrap() else {
            panic!("not live");
        };
        assert_eq!((read.generation, read.version), (4, 9));
        assert_eq!(read.settings, settings);
    }

    #[test]
    fn a_fifo_room_without_cap_or_stock_writes_none_of_those_fields() {
        let mut settings = settings();
        settings.queueing_method = QueueingMethod::Fifo;
        settings.max_active_users = None;
        settings.sale.stock = None;
        settings.paused = false;
        let encoded = encode(&settings).unwrap();
        for field in ["qmethod", "cap", "stock", "paused"] {
            assert!(encoded.unset.contains(&field), "{field}: {encoded:?}");
        }
        let Some(RoomDoc::Live(read)) = decode(&as_hash(&encoded, 1, 1)).unwrap() else {
            panic!("not live");
        };
        assert_eq!(read.settings, settings);
    }

    #[test]
    fn a_deleted_document_and_no_document_read_as_such() {
        let deleted = [
            Value::BulkString(b"gen".to_vec()),
            Value::BulkString(b"7".to_vec()),
            Value::BulkString(b"state".to_vec()),
            Value::BulkString(b"deleted".to_vec()),
        ];
        assert_eq!(
            decode(&deleted).unwrap(),
            Some(RoomDoc::Deleted { generation: 7 })
        );
        assert_eq!(decode(&[]).unwrap(), None);
    }
}
