//! A room's settings as a form: which fields, how each is typed and checked (with the bounds of
//! `vestibule_shared::settings`, the one place a bound is written), the patch a form makes
//! against the settings in force, and each change's "before → after" line for its confirmation.
//! `autoRate`, one object of four numbers and an optional health URL or null, has its fields in
//! [`auto`].

use serde_json::{json, Map, Value};
use vestibule_shared::settings as bounds;

use crate::i18n::{t, Lang, Text};
use crate::local_time::{parse_rfc3339, rfc3339, LocalTime, Zone};

/// How a field is typed, checked and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Shoppers per second (a decimal), required.
    Rate,
    /// Whole seconds in a range, required.
    Secs(u64, u64),
    /// A whole number in a range; empty = null.
    Count(u64, u64),
    /// Text up to so many characters; empty = null.
    Text(usize),
    /// A checkout URL (a path here or an http(s) URL); empty = null.
    Url,
    /// A local date and time, sent as RFC 3339; empty = null.
    Time,
    /// `fifo` or `random`.
    Method,
    /// A percentage typed, a fraction sent (`autoRate.maxErrorRate`: 1 → 0.01).
    Percent,
    /// `autoRate.healthUrl`, an absolute http(s) URL; empty = none (no polling).
    HealthUrl,
}

/// One field of the form: its admin API name, its element id, label and kind.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub api: &'static str,
    pub id: &'static str,
    pub label: Text,
    pub kind: Kind,
}

const fn field(api: &'static str, id: &'static str, label: Text, kind: Kind) -> Field {
    Field {
        api,
        id,
        label,
        kind,
    }
}

/// Every field, in the form's order.
pub const FIELDS: &[Field] = &[
    field(
        "displayNameEn",
        "display-name-en",
        Text::DisplayNameEn,
        Kind::Text(bounds::DISPLAY_NAME_MAX_CHARS),
    ),
    field(
        "displayNameKo",
        "display-name-ko",
        Text::DisplayNameKo,
        Kind::Text(bounds::DISPLAY_NAME_MAX_CHARS),
    ),
    field(
        "prequeueOpensAt",
        "prequeue-opens-at",
        Text::PrequeueOpensAt,
        Kind::Time,
    ),
    field("opensAt", "opens-at", Text::OpensAt, Kind::Time),
    field(
        "stock",
        "stock",
        Text::Stock,
        Kind::Count(0, bounds::STOCK_MAX),
    ),
    field(
        "queueingMethod",
        "queueing-method",
        Text::QueueingMethod,
        Kind::Method,
    ),
    field("admissionRatePerSec", "rate", Text::RatePerSec, Kind::Rate),
    field(
        "maxActiveUsers",
        "cap",
        Text::Cap,
        Kind::Count(bounds::MAX_ACTIVE_USERS_MIN, bounds::MAX_ACTIVE_USERS_MAX),
    ),
    field(
        "tokenTtlSecs",
        "ttl",
        Text::TokenTtl,
        Kind::Secs(bounds::TOKEN_TTL_SECS_MIN, bounds::TOKEN_TTL_SECS_MAX),
    ),
    field(
        "expectedCheckoutSecs",
        "expected-checkout",
        Text::ExpectedCheckout,
        Kind::Count(
            bounds::EXPECTED_CHECKOUT_SECS_MIN,
            bounds::EXPECTED_CHECKOUT_SECS_MAX,
        ),
    ),
    field("checkoutUrl", "checkout-url", Text::CheckoutUrl, Kind::Url),
    field(
        "messageEn",
        "message-en",
        Text::MessageEn,
        Kind::Text(bounds::WAITER_MESSAGE_MAX_CHARS),
    ),
    field(
        "messageKo",
        "message-ko",
        Text::MessageKo,
        Kind::Text(bounds::WAITER_MESSAGE_MAX_CHARS),
    ),
    field(
        "soldOutMessageEn",
        "sold-out-message-en",
        Text::SoldOutMessageEn,
        Kind::Text(bounds::SOLD_OUT_MESSAGE_MAX_CHARS),
    ),
    field(
        "soldOutMessageKo",
        "sold-out-message-ko",
        Text::SoldOutMessageKo,
        Kind::Text(bounds::SOLD_OUT_MESSAGE_MAX_CHARS),
    ),
];

/// The field named `api` in the admin API.
pub fn by_api(api: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|field| field.api == api)
}

/// A field's bounds in words, as a refusal names them.
pub fn bounds_of(field: &Field) -> String {
    match field.kind {
        Kind::Rate => bounds::SettingOutOfRange::AdmissionRate.to_string(),
        Kind::Secs(min, max) | Kind::Count(min, max) => format!("{min}–{max}"),
        Kind::Text(max) => format!("1–{max}"),
        Kind::Url => bounds::SettingOutOfRange::CheckoutUrl.to_string(),
        Kind::HealthUrl => bounds::SettingOutOfRange::AutoRateHealthUrl.to_string(),
        Kind::Time => "YYYY-MM-DD HH:MM".into(),
        Kind::Method => "fifo, random".into(),
        Kind::Percent => format!(
            "0–{}%",
            vestibule_shared::auto_rate::MAX_ERROR_RATE_MAX * 100.0
        ),
    }
}

/// A number with at most two decimals and no trailing zeros: 1.0 → "1", 0.25 → "0.25".
pub fn short_number(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The form's text of a setting as the API gives it (times in local time).
pub fn shown(field: &Field, value: &Value, zone: &dyn Zone) -> String {
    match (field.kind, value) {
        (_, Value::Null) => String::new(),
        (Kind::Time, Value::String(text)) => parse_rfc3339(text)
            .map(|ms| zone.to_local(ms).input_value())
            .unwrap_or_default(),
        (Kind::Percent, Value::Number(n)) => short_number(n.as_f64().unwrap_or(0.0) * 100.0),
        (_, Value::String(text)) => text.clone(),
        (_, Value::Number(n)) => n
            .as_u64()
            .map_or_else(|| n.as_f64().unwrap_or(0.0).to_string(), |n| n.to_string()),
        (_, other) => other.to_string(),
    }
}

/// The value a field's text sends; `Err` with the bounds when it is not one.
pub fn parse(field: &Field, text: &str, zone: &dyn Zone) -> Result<Value, String> {
    let text = text.trim();
    let bad = || Err(bounds_of(field));
    if text.is_empty() {
        // None; for a required field ([`required`]): left as it is.
        return Ok(Value::Null);
    }
    let decimal = || text.replace(',', ".").parse::<f64>().ok();
    match field.kind {
        Kind::Rate => match decimal() {
            Some(rate) if bounds::check_admission_rate(rate).is_ok() => Ok(json!(rate)),
            _ => bad(),
        },
        Kind::Secs(min, max) | Kind::Count(min, max) => match text.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(json!(n)),
            _ => bad(),
        },
        Kind::Text(max) if bounds::is_valid_text(text, max) => Ok(json!(text)),
        Kind::Text(_) => bad(),
        Kind::Url => {
            // The server knows its storefront origins; here, the shape: a path or http(s).
            let shaped =
                bounds::check_checkout_url(text, &[]).is_ok() || bounds::url_origin(text).is_some();
            if shaped && !text.contains(char::is_whitespace) {
                Ok(json!(text))
            } else {
                bad()
            }
        }
        Kind::HealthUrl => match vestibule_shared::auto_rate::check_health_url(text) {
            Ok(()) => Ok(json!(text)),
            Err(_) => bad(),
        },
        Kind::Time => match LocalTime::parse(text) {
            Some(local) => Ok(json!(rfc3339(zone.to_ms(local)))),
            None => bad(),
        },
        Kind::Method if matches!(text, "fifo" | "random") => Ok(json!(text)),
        Kind::Method => bad(),
        Kind::Percent => {
            let most = vestibule_shared::auto_rate::MAX_ERROR_RATE_MAX * 100.0;
            match decimal() {
                // Rounded to the fraction's tenth decimal: 1 % is 0.01, not 0.010000000000000002.
                Some(p) if (0.0..=most).contains(&p) => Ok(json!((p * 1e8).round() / 1e10)),
                _ => bad(),
            }
        }
    }
}

/// A field that has a value always (an empty one is left as it is, never sent as null).
fn required(field: &Field) -> bool {
    matches!(field.kind, Kind::Rate | Kind::Secs(..) | Kind::Method)
}

/// Two settings' values are the same (numbers by value, times by instant).
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::String(a), Value::String(b)) => {
            a == b || matches!((parse_rfc3339(a), parse_rfc3339(b)), (Some(x), Some(y)) if x == y)
        }
        (a, b) => a == b,
    }
}

/// The patch a form makes: every field whose value differs from `current` (`Null` when
/// creating: then an empty field is left to the server's default). `Err` names the first field
/// out of its bounds, with them.
pub fn patch(
    current: &Value,
    form: &[(&'static str, String)],
    zone: &dyn Zone,
) -> Result<Value, (Text, String)> {
    let mut patch = Map::new();
    for (api, text) in form {
        let Some(field) = by_api(api) else { continue };
        let value = parse(field, text, zone).map_err(|bounds| (field.label, bounds))?;
        let creating = current.is_null();
        let unchanged = same(current.get(*api).unwrap_or(&Value::Null), &value);
        if unchanged || (value.is_null() && (creating || required(field))) {
            continue;
        }
        patch.insert((*api).to_owned(), value);
    }
    if let Some(auto_rate) = auto::patch(current, form, zone)? {
        patch.insert(auto::API.to_owned(), auto_rate);
    }
    Ok(Value::Object(patch))
}

/// A setting's value for a person: "–" for none, times in local time, rates with "/s".
pub fn value_text(lang: Lang, api: &str, value: &Value, zone: &dyn Zone, now_ms: i64) -> String {
    let unset = match api {
        "stock" => Text::Unlimited,
        "maxActiveUsers" => Text::NoCap,
        auto::API => Text::Off,
        _ => Text::NotSet,
    };
    if let Some(text) = auto::value_text(lang, api, value) {
        return text;
    }
    match value {
        Value::Null => t(lang, unset).to_owned(),
        Value::Bool(on) => t(lang, if *on { Text::Yes } else { Text::No }).to_owned(),
        Value::String(text) if by_api(api).is_some_and(|f| f.kind == Kind::Time) => {
            parse_rfc3339(text).map_or_else(
                || text.clone(),
                |ms| zone.to_local(ms).clock(&zone.to_local(now_ms)),
            )
        }
        Value::String(text) => format!("\u{201c}{text}\u{201d}"),
        Value::Number(n) => {
            let number = crate::rooms::figure(n.as_f64().unwrap_or(0.0));
            match api {
                "admissionRatePerSec" => format!("{number}{}", t(lang, Text::PerSec)),
                "tokenTtlSecs" | "expectedCheckoutSecs" => {
                    format!("{number} {}", t(lang, Text::Seconds))
                }
                _ => number,
            }
        }
        other => other.to_string(),
    }
}

/// The label of a setting for the before → after lines.
fn setting_label(lang: Lang, api: &str) -> String {
    match (by_api(api), api) {
        (Some(field), _) => t(lang, field.label).to_owned(),
        (None, "paused") => t(lang, Text::Paused).to_owned(),
        (None, "closed") => t(lang, Text::ClosedToJoins).to_owned(),
        (None, "soldOut") => t(lang, Text::SoldOutSetting).to_owned(),
        (None, auto::API) => t(lang, Text::AutoRateSetting).to_owned(),
        (None, other) => other.to_owned(),
    }
}

/// One line per field of a new room's settings: "Stock (units left): 5".
pub fn settings_lines(lang: Lang, settings: &Value, zone: &dyn Zone, now_ms: i64) -> Vec<String> {
    let Some(fields) = settings.as_object() else {
        return Vec::new();
    };
    fields
        .iter()
        .map(|(api, value)| {
            let value = value_text(lang, api, value, zone, now_ms);
            format!("{}: {value}", setting_label(lang, api))
        })
        .collect()
}

/// One line per field of `patch`: "Admission rate (people/s): 175/s → 35/s".
pub fn before_after(
    lang: Lang,
    current: &Value,
    patch: &Value,
    zone: &dyn Zone,
    now_ms: i64,
) -> Vec<String> {
    let Some(fields) = patch.as_object() else {
        return Vec::new();
    };
    fields
        .iter()
        .map(|(api, after)| {
            let before = current.get(api).unwrap_or(&Value::Null);
            format!(
                "{}: {} → {}",
                setting_label(lang, api),
                value_text(lang, api, before, zone, now_ms),
                value_text(lang, api, after, zone, now_ms)
            )
        })
        .collect()
}

pub mod auto;
#[cfg(test)]
mod tests;
