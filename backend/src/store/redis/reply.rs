//! Reading Redis replies into the store's types (every script's reply goes through here).

use redis::Value;
use vestibule_shared::TicketState;

use crate::store::{
    QueueingMethod, RoomLabels, SaleSettings, Settings, StoreError, TicketRecord, VersionedSettings,
};

/// The sale's fields of the settings hash, then the room's labels (issue 14), in the order every
/// script appends them to its reply (after everything else): `stock, sold, soldout, closed,
/// msg_en, msg_ko, name_en, name_ko, wait_en, wait_ko`.
/// Then `qmethod`: the queueing method (`random`; absent or anything else = FIFO).
pub(super) const SALE_FIELDS: [&str; 11] = [
    "stock", "sold", "soldout", "closed", "msg_en", "msg_ko", "name_en", "name_ko", "wait_en",
    "wait_ko", "qmethod",
];

/// A reply that ends with the sale's fields and the labels → the rest of the reply, the sale
/// (absent or empty fields = unlimited stock, nothing sold, open, the page's own message) and
/// the labels (absent or empty = none), and the queueing method.
pub(super) fn split_sale(
    reply: &[Value],
) -> Result<(&[Value], SaleSettings, RoomLabels, QueueingMethod), StoreError> {
    let Some(split) = reply.len().checked_sub(SALE_FIELDS.len()) else {
        return Err(StoreError::Corrupt(
            "a reply without the sale's fields".into(),
        ));
    };
    let (rest, sale) = reply.split_at(split);
    let text: Vec<String> = sale.iter().map(as_string).collect::<Result<_, _>>()?;
    let [stock, sold, sold_out, closed, message_en, message_ko, name_en, name_ko, wait_en, wait_ko, method] =
        text.as_slice()
    else {
        unreachable!("eleven fields");
    };
    let number = |text: &str| -> Result<Option<u64>, StoreError> {
        if text.is_empty() {
            return Ok(None);
        }
        // A stock taken below 0 by hand (HINCRBY) reads as none left.
        text.parse::<i64>()
            .map(|n| Some(n.max(0) as u64))
            .map_err(|_| StoreError::Corrupt(format!("sale number {text:?}")))
    };
    let message = |text: &String| (!text.is_empty()).then(|| text.clone());
    Ok((
        rest,
        SaleSettings {
            stock: number(stock)?,
            sold: number(sold)?.unwrap_or(0),
            sold_out: sold_out == "1",
            closed: closed == "1",
            message_en: message(message_en),
            message_ko: message(message_ko),
        },
        RoomLabels {
            display_name_en: message(name_en),
            display_name_ko: message(name_ko),
            message_en: message(wait_en),
            message_ko: message(wait_ko),
        },
        QueueingMethod::parse(method).unwrap_or_default(),
    ))
}

/// A stored settings version (absent = never changed).
pub(super) fn version_of(value: &Value) -> Result<u64, StoreError> {
    match value {
        Value::Nil => Ok(0),
        other => as_u64(other),
    }
}

pub(super) fn as_u64(value: &Value) -> Result<u64, StoreError> {
    match value {
        Value::Int(n) => u64::try_from(*n).map_err(|_| corrupt("negative count", value)),
        Value::BulkString(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| corrupt("number", value)),
        _ => Err(corrupt("number", value)),
    }
}

pub(super) fn as_i64(value: &Value) -> Result<i64, StoreError> {
    match value {
        Value::Int(n) => Ok(*n),
        Value::BulkString(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| corrupt("number", value)),
        _ => as_u64(value).map(|n| n as i64),
    }
}

pub(super) fn as_string(value: &Value) -> Result<String, StoreError> {
    match value {
        Value::BulkString(bytes) => {
            String::from_utf8(bytes.clone()).map_err(|_| corrupt("text", value))
        }
        Value::SimpleString(text) => Ok(text.clone()),
        Value::Nil => Ok(String::new()),
        Value::Int(n) => Ok(n.to_string()),
        _ => Err(corrupt("text", value)),
    }
}

/// The first two entries of a reply as text (missing = empty).
pub(super) fn two_strings(reply: &[Value]) -> Result<(String, String), StoreError> {
    let text = |index: usize| {
        reply
            .get(index)
            .map(as_string)
            .transpose()
            .map(Option::unwrap_or_default)
    };
    Ok((text(0)?, text(1)?))
}

pub(super) fn as_array(value: Value) -> Result<Vec<Value>, StoreError> {
    match value {
        Value::Array(items) => Ok(items),
        other => Err(corrupt("array", &other)),
    }
}

pub(super) fn corrupt(expected: &str, value: &Value) -> StoreError {
    StoreError::Corrupt(format!("expected {expected}, got {value:?}"))
}

pub(super) fn parse_state(text: &str) -> Result<TicketState, StoreError> {
    Ok(match text {
        "PRE_QUEUE" => TicketState::PreQueue,
        "WAITING" => TicketState::Waiting,
        "TOKEN_ISSUED" => TicketState::TokenIssued,
        "COMPLETED" => TicketState::Completed,
        "EXPIRED" => TicketState::Expired,
        "LEFT" => TicketState::Left,
        // A sold-out room's waiting ticket, once admit.lua took it out of the line.
        "SOLD_OUT" => TicketState::SoldOut,
        other => {
            return Err(StoreError::Corrupt(format!(
                "unknown ticket state {other:?}"
            )))
        }
    })
}

/// Settings fields `rate, paused, ttl_ms, cap, checkout, share, abandon_ms, hold_ms, ver` as stored → versioned
/// settings.
pub(super) fn parse_versioned(fields: &[Value]) -> Result<VersionedSettings, StoreError> {
    let [settings @ .., version] = fields else {
        return Err(StoreError::Corrupt("room settings need 12 fields".into()));
    };
    Ok(VersionedSettings {
        settings: parse_config(settings)?,
        version: version_of(version)?,
    })
}

/// Settings fields `rate, paused, ttl_ms, cap, checkout, share, abandon_ms, hold_ms, pow,
/// pow_auto, req_user` as stored
/// (empty = absent; the presence times of a room stored before they existed read as their
/// defaults) → a config.
pub(super) fn parse_config(fields: &[Value]) -> Result<Settings, StoreError> {
    let text: Vec<String> = fields.iter().map(as_string).collect::<Result<_, _>>()?;
    let [rate, paused, ttl_ms, cap, checkout, share, abandon_ms, hold_ms, pow, pow_auto, req_user] =
        text.as_slice()
    else {
        return Err(StoreError::Corrupt("room settings need 11 fields".into()));
    };
    let millis = |text: &str, default: fn() -> u64| {
        if text.is_empty() {
            return Ok(default());
        }
        text.parse()
            .map_err(|_| StoreError::Corrupt(format!("presence time {text:?}")))
    };
    if rate.is_empty() {
        return Err(StoreError::Corrupt("room settings are missing".into()));
    }
    Ok(Settings {
        admission_rate_per_sec: rate
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("rate {rate:?}")))?,
        paused: paused == "1",
        token_ttl_ms: ttl_ms
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("ttl {ttl_ms:?}")))?,
        max_active_users: if cap.is_empty() {
            None
        } else {
            Some(
                cap.parse()
                    .map_err(|_| StoreError::Corrupt(format!("cap {cap:?}")))?,
            )
        },
        checkout_url: (!checkout.is_empty()).then(|| checkout.clone()),
        share_token_with_embedder: share == "1",
        abandon_after_ms: millis(abandon_ms, crate::store::default_abandon_after_ms)?,
        hold_place_ms: millis(hold_ms, crate::store::default_hold_place_ms)?,
        sale: SaleSettings::default(),
        opens_at_ms: None,
        prequeue_opens_at_ms: None,
        // Absent (a room stored before issue 16) = off.
        pow_difficulty: if pow.is_empty() {
            0
        } else {
            pow.parse()
                .map_err(|_| StoreError::Corrupt(format!("pow {pow:?}")))?
        },
        pow_auto_joins_per_sec: if pow_auto.is_empty() {
            None
        } else {
            Some(
                pow_auto
                    .parse()
                    .map_err(|_| StoreError::Corrupt(format!("pow_auto {pow_auto:?}")))?,
            )
        },
        require_user_assertion: req_user == "1",
        labels: crate::store::RoomLabels::default(),
        queueing_method: QueueingMethod::Fifo,
    })
}

/// Versioned settings with the scheduled opening's fields `opens_ms, preopens_ms` (empty =
/// none), which every settings reply carries at its very end.
pub(super) fn with_schedule(
    mut versioned: VersionedSettings,
    schedule: &[Value],
) -> Result<VersionedSettings, StoreError> {
    let [opens, preopens] = schedule else {
        return Err(StoreError::Corrupt(
            "settings reply needs opens_ms and preopens_ms".into(),
        ));
    };
    let time = |value: &Value| -> Result<Option<u64>, StoreError> {
        let text = as_string(value)?;
        if text.is_empty() {
            return Ok(None);
        }
        text.parse()
            .map(Some)
            .map_err(|_| StoreError::Corrupt(format!("opening time {text:?}")))
    };
    versioned.settings.opens_at_ms = time(opens)?;
    versioned.settings.prequeue_opens_at_ms = time(preopens)?;
    Ok(versioned)
}

/// A ticket off the queue from its stored hash fields `state, tok, exp`. A skipped ticket (`HELD`,
/// `exp` = end of its hold) is `WAITING` without a position until then, `EXPIRED` after.
pub(super) fn settled_record(
    id: &str,
    state: &str,
    token: String,
    expires: &str,
    now_ms: u64,
) -> Result<Option<TicketRecord>, StoreError> {
    if state.is_empty() {
        return Ok(None);
    }
    let expires_at_ms = expires.parse::<u64>().ok();
    if state == "HELD" {
        let mut record = TicketRecord::waiting(id, 0);
        record.position = None;
        if expires_at_ms.is_none_or(|until| until <= now_ms) {
            record.state = TicketState::Expired;
        }
        return Ok(Some(record));
    }
    let mut state = parse_state(state)?;
    if state == TicketState::TokenIssued && expires_at_ms.is_none_or(|exp| exp <= now_ms) {
        state = TicketState::Expired;
    }
    let issued = state == TicketState::TokenIssued;
    Ok(Some(TicketRecord {
        id: id.to_owned(),
        state,
        position: None,
        entry_token: issued.then_some(token),
        token_expires_at_ms: expires_at_ms.filter(|_| issued),
        place_kept: false,
    }))
}
