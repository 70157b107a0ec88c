//! The fields of a room's settings ([`crate::form::FIELDS`]) as inputs, shared by the create
//! form (ids prefixed `new-`) and a room's controls; the bounds of each input are the shared ones.

use std::collections::HashMap;

use leptos::prelude::*;
use serde_json::Value;

use crate::form::{self, auto, Field, Kind, FIELDS};
use crate::i18n::{t, Lang, Text};
use crate::local_time::Browser;

/// The text typed in each field, by admin API name.
pub type Values = RwSignal<HashMap<&'static str, String>>;

/// The fields' texts in the form's order (then `autoRate`'s switch and numbers), for
/// [`form::patch`].
pub fn texts(values: Values) -> Vec<(&'static str, String)> {
    let keys = FIELDS
        .iter()
        .chain(auto::FIELDS)
        .map(|field| field.api)
        .chain([auto::API]);
    values.with_untracked(|values| {
        keys.map(|api| (api, values.get(api).cloned().unwrap_or_default()))
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
            .chain(auto::shown_texts(settings, &Browser))
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
        Kind::Percent => view! {
            <input id=id type="number" step="any" min="0"
                max=vestibule_shared::auto_rate::MAX_ERROR_RATE_MAX * 100.0
                prop:value=value on:input=set />
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
        Kind::HealthUrl => view! {
            <input id=id type="text" inputmode="url" spellcheck="false"
                placeholder="https://shop.example/vestibule-health"
                maxlength=vestibule_shared::auto_rate::HEALTH_URL_MAX_CHARS
                prop:value=value on:input=set />
        }
        .into_any(),
    }
}

/// `autoRate`'s switch (on: the four numbers and the health URL are sent as its object; off:
/// null).
fn auto_switch(lang: RwSignal<Lang>, prefix: &'static str, values: Values) -> impl IntoView {
    let id = format!("{prefix}auto-rate");
    let help_id = format!("{id}-help");
    let on = move || values.with(|values| values.get(auto::API).is_some_and(|v| v == "on"));
    let set = move |event: leptos::ev::Event| {
        let checked = event_target_checked(&event);
        values.update(|values| {
            values.insert(auto::API, if checked { "on" } else { "" }.to_owned());
        });
    };
    view! {
        <div class="field wide switch">
            <label>
                <input id=id type="checkbox" aria-describedby=help_id.clone()
                    prop:checked=on on:change=set />
                {move || t(lang.get(), Text::AutoRateSetting)}
            </label>
            <p class="help" id=help_id>{move || t(lang.get(), Text::AutoHelp)}</p>
        </div>
    }
}

/// Every settings field, labelled, with help where a field needs it; `autoRate` last.
#[component]
pub fn SettingsFields(lang: RwSignal<Lang>, values: Values, prefix: &'static str) -> impl IntoView {
    let flat = fields(lang, values, prefix, FIELDS);
    let auto = fields(lang, values, prefix, auto::FIELDS);
    view! { {flat} {auto_switch(lang, prefix, values)} {auto} }
}

/// `fields` as labelled inputs.
fn fields(
    lang: RwSignal<Lang>,
    values: Values,
    prefix: &'static str,
    fields: &'static [Field],
) -> impl IntoView {
    fields
        .iter()
        .map(move |field| {
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
