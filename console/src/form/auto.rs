//! `autoRate` in the settings form: a switch, its four numbers (`min`, `max` shoppers/s,
//! `targetP95Ms`, `maxErrorRate` typed as a percentage) and its optional health URL, sent as one
//! object, or `null` when the switch is turned off. `min` above `max` is left to the server,
//! whose 409 `conflict` says so.

use serde_json::{Map, Value};
use vestibule_shared::auto_rate::{AutoRate, TARGET_P95_MS_MAX, TARGET_P95_MS_MIN};

use super::{bounds_of, field, parse, same, shown, Field, Kind};
use crate::i18n::{t, Lang, Text};
use crate::local_time::Zone;

/// The setting's name in the admin API, and the form's key of its switch (`"on"` or empty).
pub const API: &str = "autoRate";

/// The four numbers, then the health URL (empty = none), keyed `autoRate.<name>` in the form.
pub const FIELDS: &[Field] = &[
    field("autoRate.min", "auto-min", Text::AutoMin, Kind::Rate),
    field("autoRate.max", "auto-max", Text::AutoMax, Kind::Rate),
    field(
        "autoRate.targetP95Ms",
        "auto-target-p95",
        Text::AutoTargetP95,
        Kind::Count(TARGET_P95_MS_MIN, TARGET_P95_MS_MAX),
    ),
    field(
        "autoRate.maxErrorRate",
        "auto-max-errors",
        Text::AutoMaxErrors,
        Kind::Percent,
    ),
    field(
        "autoRate.healthUrl",
        "auto-health-url",
        Text::AutoHealthUrl,
        Kind::HealthUrl,
    ),
];

/// The name of a field inside the `autoRate` object (`autoRate.min` → `min`).
fn inner(field: &Field) -> &'static str {
    field.api.strip_prefix("autoRate.").unwrap_or(field.api)
}

/// The form's texts of `settings`' `autoRate`: the switch, then each number (empty when off).
pub fn shown_texts(settings: &Value, zone: &dyn Zone) -> Vec<(&'static str, String)> {
    let auto = settings.get(API).unwrap_or(&Value::Null);
    let switch = if auto.is_object() { "on" } else { "" };
    std::iter::once((API, switch.to_owned()))
        .chain(FIELDS.iter().map(|field| {
            let value = auto.get(inner(field)).unwrap_or(&Value::Null);
            (field.api, shown(field, value, zone))
        }))
        .collect()
}

/// What the form sends for `autoRate` against `current` (`Null` when creating): `None` when
/// unchanged (or off on a new room), `Null` when turned off, else the object. `Err` names the
/// first number missing or out of its bounds (or a health URL out of its rule).
///
/// # Errors
/// The field's label and bounds.
pub fn patch(
    current: &Value,
    form: &[(&'static str, String)],
    zone: &dyn Zone,
) -> Result<Option<Value>, (Text, String)> {
    let text = |key: &str| {
        form.iter()
            .find(|(api, _)| *api == key)
            .map_or("", |(_, text)| text.as_str())
    };
    let before = current.get(API).unwrap_or(&Value::Null);
    if text(API) != "on" {
        return Ok((!before.is_null()).then_some(Value::Null));
    }
    let mut after = Map::new();
    for field in FIELDS {
        match parse(field, text(field.api), zone) {
            // No health URL: none is sent, and the leader polls none.
            Ok(Value::Null) if field.kind == Kind::HealthUrl => {}
            Ok(Value::Null) => return Err((field.label, bounds_of(field))),
            Ok(value) => {
                after.insert(inner(field).to_owned(), value);
            }
            Err(bounds) => return Err((field.label, bounds)),
        }
    }
    let unchanged = FIELDS.iter().all(|field| {
        let name = inner(field);
        same(
            before.get(name).unwrap_or(&Value::Null),
            after.get(name).unwrap_or(&Value::Null),
        )
    });
    Ok((!unchanged).then_some(Value::Object(after)))
}

/// `autoRate`'s value for a person ("5–40/s · p95 ≤ 500 ms · errors ≤ 1%", then its health URL
/// if any, or "off"); `None` for another setting.
pub fn value_text(lang: Lang, api: &str, value: &Value) -> Option<String> {
    if api != API {
        return None;
    }
    Some(match serde_json::from_value::<AutoRate>(value.clone()) {
        Ok(auto) => {
            let bounds = crate::auto_rate::bounds_line(lang, &auto);
            match &auto.health_url {
                Some(url) => format!("{bounds} · {url}"),
                None => bounds,
            }
        }
        Err(_) if value.is_null() => t(lang, Text::Off).to_owned(),
        Err(_) => value.to_string(),
    })
}
