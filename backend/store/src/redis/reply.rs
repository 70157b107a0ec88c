//! Reading Redis replies into the store's types (every script's reply goes through here).

use redis::Value;
use vestibule_shared::TicketState;

use crate::{StoreError, TicketRecord};

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
