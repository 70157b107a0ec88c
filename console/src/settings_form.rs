//! The fields of a room's settings ([`crate::form::FIELDS`]) as inputs, shared by the create
//! form (ids prefixed `new-`) and a room's controls; the bounds of each input are the shared ones.

use std::collections::HashMap;

use leptos::prelude::*;
use serde_json::Value;

use crate::form::{self, Field, Kind, FIELDS};
use crate::i18n::{t, Lang, Text};
use crate::local_time::Browser;

/// The text typed in each field, by admin API name.
pub type Values = RwSignal<HashMap<&'static str, String>>;

/// The fields' texts in the form's order, for [`form::patch`].
pub fn texts(values: Values) -> Vec<(&'static str, String)> {
    values.with_untracked(|values| {
        FIELDS
            .iter()
            .map(|field| {
                (
                    field.api,
                    values.get(field.api).cloned().unwrap_or_default(),
                )
            })
            .collect()
    })
}

/// Fills the fields from `settings` as the API gave them (times in local time).
pub fn fill(values: Values, settings: &Value) {
    values.set(
        FIELDS
            .iter()
            .map(|field| {
                let value = settings.get(field.api).unwrap_or(&Value::Null);
                (field.api, form::shown(field, value, &Browser))
            })
            .collect(),
    );
}

/// The patch of `values` against `current` (`Null`: a new room), or the field out of bounds
/// in words.
pub fn patch_of(values: Values, current: &Value, lang: Lang) -> Result<Value, String> {
    form::patch(current, &texts(values), &Browser).map_err(|(label, bounds)| {
        format!(
            "{}: {} ({bounds})",
            t(lang, Text::OutOfBounds),
            t(lang, label)
        )
    })
}

fn input(lang: RwSignal<Lang>, field: &'static Field, id: String, values: Values) -> AnyView {
    let value = move || values.with(|values| values.get(field.api).cloned().unwrap_or_default());
    let set = move |event| {
        let text = event_target_value(&event);
        values.update(|values| {
            values.insert(field.api, text);
        });
    };
    match field.kind {
        Kind::Method => view! {
            <select id=id prop:value=value on:change=set>
                <option value="">"–"</option>
                <option value="fifo">{move || t(lang.get(), Text::Fifo)}</option>
                <option value="random">{move || t(lang.get(), Text::Random)}</option>
            </select>
        }
        .into_any(),
        Kind::Time => view! {
            <input id=id type="datetime-local" step="1" prop:value=value on:input=set />
        }
        .into_any(),
        Kind::Rate => view! {
            <input id=id type="number" step="any" min="0"
                max=vestibule_shared::settings::ADMISSION_RATE_PER_SEC_MAX
                prop:value=value on:input=set />
        }
        .into_any(),
        Kind::Secs(min, max) | Kind::Count(min, max) => view! {
            <input id=id type="number" step="1" min=min max=max prop:value=value on:input=set />
        }
        .into_any(),
        Kind::Text(max) => {
            let lang_attr = if field.api.ends_with("Ko") {
                "ko"
            } else {
                "en"
            };
            view! {
                <input id=id type="text" maxlength=max lang=lang_attr prop:value=value on:input=set />
            }
            .into_any()
        }
        Kind::Url => view! {
            <input id=id type="text" inputmode="url" spellcheck="false"
                maxlength=vestibule_shared::settings::CHECKOUT_URL_MAX_CHARS
                prop:value=value on:input=set />
        }
        .into_any(),
    }
}

/// Every settings field, labelled, with help where a field needs it.
#[component]
pub fn SettingsFields(lang: RwSignal<Lang>, values: Values, prefix: &'static str) -> impl IntoView {
    FIELDS
        .iter()
        .map(|field| {
            let id = format!("{prefix}{}", field.id);
            let help = match field.api {
                "opensAt" => Some(Text::TimeHelp),
                "maxActiveUsers" => Some(Text::CapHelp),
                "messageKo" => Some(Text::MessageHelp),
                _ => None,
            };
            let wide = matches!(field.kind, Kind::Text(_) | Kind::Url);
            let help_id = format!("{id}-help");
            view! {
                <div class="field" class:wide=wide>
                    <label for=id.clone()>{move || t(lang.get(), field.label)}</label>
                    {input(lang, field, id, values)}
                    {help.map(|help| view! {
                        <p class="help" id=help_id>{move || t(lang.get(), help)}</p>
                    })}
                </div>
            }
        })
        .collect_view()
}
