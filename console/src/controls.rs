//! A room's controls: rate, pause/resume, cap, token TTL, close, message to waiters (en/ko).
//! Every change is one `PATCH` with `If-Match` (a change made meanwhile by someone else is
//! refused, not overwritten); a change that alters admission by more than 2× asks first; the
//! answer's audit entries are shown (the `X-Audit-Ids` the PATCH answered, else the newest).

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{json, Map, Value};

use crate::api::{self, ApiError};
use crate::i18n::{t, Text};
use crate::state::Console;

/// What a change ended in, shown under the controls.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Applied (else failed).
    pub ok: bool,
    /// One line.
    pub text: String,
    /// The audit entries it made, one line each.
    pub audit: Vec<String>,
}

/// The effective admission rate of settings (0 while paused) and their cap.
fn admission(settings: &Value) -> (f64, Option<f64>) {
    let rate = if settings["paused"].as_bool().unwrap_or(false) {
        0.0
    } else {
        settings["admissionRatePerSec"].as_f64().unwrap_or(0.0)
    };
    (rate, settings["maxActiveUsers"].as_f64())
}

/// How many times `patch` would change admission (≥ 1; infinite from or to none): the larger of
/// the effective rate's factor and the cap's.
pub fn admission_factor(current: &Value, patch: &Value) -> f64 {
    let mut after = current.clone();
    if let (Some(after), Some(patch)) = (after.as_object_mut(), patch.as_object()) {
        for (field, value) in patch {
            after.insert(field.clone(), value.clone());
        }
    }
    let factor = |a: f64, b: f64| {
        if a == b {
            1.0
        } else if a <= 0.0 || b <= 0.0 {
            f64::INFINITY
        } else {
            (a / b).max(b / a)
        }
    };
    let ((rate, cap), (new_rate, new_cap)) = (admission(current), admission(&after));
    let cap_factor = match (cap, new_cap) {
        (Some(a), Some(b)) => factor(a, b),
        (None, None) => 1.0,
        _ => f64::INFINITY,
    };
    factor(rate, new_rate).max(cap_factor)
}

/// One audit entry in a line: `admissionRatePerSec: 5 → 8 (web-1-a8Xk2p, 2026-11-30T19:13:20Z)`.
pub fn audit_line(entry: &Value) -> String {
    format!(
        "{}: {} → {} ({}, {})",
        entry["field"].as_str().unwrap_or("?"),
        entry["old"],
        entry["new"],
        entry["replica"].as_str().unwrap_or("?"),
        entry["at"].as_str().unwrap_or("?"),
    )
}

/// The selected room's settings as last read, and the changes made to it.
#[derive(Clone, Copy)]
pub struct Changes {
    console: Console,
    /// The settings (`GET …/admin/rooms/{room}`), `Null` while not read.
    pub settings: RwSignal<Value>,
    etag: RwSignal<Option<String>>,
    /// The last change's outcome.
    pub outcome: RwSignal<Option<Outcome>>,
}

impl Changes {
    /// Nothing read yet.
    pub fn new(console: Console) -> Self {
        Self {
            console,
            settings: RwSignal::new(Value::Null),
            etag: RwSignal::new(None),
            outcome: RwSignal::new(None),
        }
    }

    fn failed(&self, error: &ApiError) {
        if error.is_auth() {
            self.console.sign_out(true);
            return;
        }
        self.outcome.set(Some(Outcome {
            ok: false,
            text: error.describe(self.console.lang.get_untracked()),
            audit: Vec::new(),
        }));
    }

    /// Reads `room`'s settings.
    pub fn load(self, room: &str) {
        let path = format!("admin/rooms/{room}");
        spawn_local(async move {
            match api::call("GET", &path, None).await {
                Ok(answer) => {
                    self.etag.set(answer.etag);
                    self.settings.set(answer.body);
                }
                Err(error) => self.failed(&error),
            }
        });
    }

    /// Applies `patch` to `room`, asking first when admission would change by more than 2×.
    pub fn apply(self, room: &str, patch: Value) {
        let lang = self.console.lang.get_untracked();
        if patch.as_object().is_none_or(Map::is_empty) {
            self.outcome.set(Some(Outcome {
                ok: true,
                text: t(lang, Text::NoChange).into(),
                audit: Vec::new(),
            }));
            return;
        }
        let current = self.settings.get_untracked();
        if !current.is_null() && admission_factor(&current, &patch) > 2.0 {
            let asked = window().confirm_with_message(t(lang, Text::ConfirmBigChange));
            if !asked.unwrap_or(false) {
                return;
            }
        }
        let fields = patch.as_object().map_or(0, Map::len);
        let room = room.to_owned();
        let etag = self.etag.get_untracked();
        spawn_local(async move {
            let path = format!("admin/rooms/{room}");
            let answer = match api::call_if_match("PATCH", &path, &patch, etag.as_deref()).await {
                Ok(answer) => answer,
                Err(error) => {
                    self.failed(&error);
                    // Someone else changed it (412) or it failed: show what is in force.
                    self.load(&room);
                    return;
                }
            };
            self.etag.set(answer.etag.clone());
            self.settings.set(answer.body.clone());
            let audit = audit_entries(&room, &answer.audit_ids, fields).await;
            self.outcome.set(Some(Outcome {
                ok: true,
                text: t(lang, Text::Applied).into(),
                audit: audit.unwrap_or_else(|error| {
                    vec![format!(
                        "{}: {}",
                        t(lang, Text::AuditUnavailable),
                        error.describe(lang)
                    )]
                }),
            }));
        });
    }
}

/// The audit entries a change made: those named by `ids`, else the newest `fields`.
async fn audit_entries(room: &str, ids: &[String], fields: usize) -> Result<Vec<String>, ApiError> {
    let limit = if ids.is_empty() { fields.max(1) } else { 50 };
    let answer = api::call(
        "GET",
        &format!("admin/rooms/{room}/audit?limit={limit}"),
        None,
    )
    .await?;
    let entries = answer.body["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok(entries
        .iter()
        .filter(|entry| ids.is_empty() || ids.iter().any(|id| entry["id"].as_str() == Some(id)))
        .map(audit_line)
        .collect())
}

/// A text field's value as a JSON number, `null` when empty (`None`: not a number).
fn optional_number(text: &str) -> Option<Value> {
    let text = text.trim();
    if text.is_empty() {
        return Some(Value::Null);
    }
    text.parse::<f64>().ok().map(|n| json!(n))
}

/// The fields of the form that differ from `current`, as a patch.
pub fn form_patch(current: &Value, form: &[(&str, Value)]) -> Value {
    let mut patch = Map::new();
    for (field, value) in form {
        let same = match (&current[*field], value) {
            (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
            (a, b) => a == b,
        };
        if !same {
            patch.insert((*field).to_owned(), value.clone());
        }
    }
    Value::Object(patch)
}

/// The controls of `room`.
#[component]
pub fn Controls(console: Console, room: String, changes: Changes) -> impl IntoView {
    let lang = console.lang;
    let rate = RwSignal::new(String::new());
    let cap = RwSignal::new(String::new());
    let ttl = RwSignal::new(String::new());
    let message_en = RwSignal::new(String::new());
    let message_ko = RwSignal::new(String::new());
    // The form shows what is in force whenever the settings are read again.
    Effect::new(move |_| {
        let settings = changes.settings.get();
        let number = |field: &str| {
            settings[field]
                .as_f64()
                .map(|n| n.to_string())
                .unwrap_or_default()
        };
        let text = |field: &str| settings[field].as_str().unwrap_or_default().to_owned();
        rate.set(number("admissionRatePerSec"));
        cap.set(number("maxActiveUsers"));
        ttl.set(number("tokenTtlSecs"));
        message_en.set(text("messageEn"));
        message_ko.set(text("messageKo"));
    });
    let paused = move || {
        changes
            .settings
            .with(|s| s["paused"].as_bool().unwrap_or(false))
    };
    let closed = move || {
        changes
            .settings
            .with(|s| s["closed"].as_bool().unwrap_or(false))
    };
    let apply_room = room.clone();
    let apply = move |event: leptos::ev::SubmitEvent| {
        event.prevent_default();
        let text_or_null = |text: String| {
            let text = text.trim().to_owned();
            if text.is_empty() {
                Value::Null
            } else {
                json!(text)
            }
        };
        let mut form = Vec::new();
        if let Some(Value::Number(rate)) = optional_number(&rate.get_untracked()) {
            form.push(("admissionRatePerSec", Value::Number(rate)));
        }
        if let Some(cap) = optional_number(&cap.get_untracked()) {
            form.push(("maxActiveUsers", cap));
        }
        if let Some(Value::Number(ttl)) = optional_number(&ttl.get_untracked()) {
            form.push(("tokenTtlSecs", Value::Number(ttl)));
        }
        let settings = changes.settings.get_untracked();
        // The message fields exist on servers with rooms at run time; elsewhere they are left out.
        if settings.get("messageEn").is_some() {
            form.push(("messageEn", text_or_null(message_en.get_untracked())));
            form.push(("messageKo", text_or_null(message_ko.get_untracked())));
        }
        changes.apply(&apply_room, form_patch(&settings, &form));
    };
    let pause_room = room.clone();
    let toggle_pause = move |_| {
        changes.apply(&pause_room, json!({"paused": !paused()}));
    };
    let close_room = room.clone();
    let toggle_close = move |_| {
        let ask = if closed() {
            Text::ConfirmReopen
        } else {
            Text::ConfirmClose
        };
        if window()
            .confirm_with_message(t(lang.get_untracked(), ask))
            .unwrap_or(false)
        {
            changes.apply(&close_room, json!({"closed": !closed()}));
        }
    };
    let input =
        move |id: &'static str, label: Text, value: RwSignal<String>, kind: &'static str| {
            view! {
                <div class="field">
                    <label for=id>{move || t(lang.get(), label)}</label>
                    <input id=id type=kind step="any" min="0"
                        prop:value=move || value.get()
                        on:input=move |event| value.set(event_target_value(&event)) />
                </div>
            }
        };
    let messages = move || {
        changes
            .settings
            .with(|s| s.get("messageEn").is_some())
            .then(|| {
                view! {
                    <div class="field wide">
                        <label for="message-en">{move || t(lang.get(), Text::MessageEn)}</label>
                        <input id="message-en" type="text" maxlength="280" lang="en"
                            prop:value=move || message_en.get()
                            on:input=move |event| message_en.set(event_target_value(&event)) />
                    </div>
                    <div class="field wide">
                        <label for="message-ko">{move || t(lang.get(), Text::MessageKo)}</label>
                        <input id="message-ko" type="text" maxlength="280" lang="ko"
                            prop:value=move || message_ko.get()
                            on:input=move |event| message_ko.set(event_target_value(&event)) />
                        <p class="help">{move || t(lang.get(), Text::MessageHelp)}</p>
                    </div>
                }
            })
    };
    let outcome = move || {
        changes.outcome.get().map(|outcome| {
            let class = if outcome.ok {
                "outcome ok"
            } else {
                "outcome bad"
            };
            let audit = (!outcome.audit.is_empty()).then(|| view! {
                <p>{move || t(lang.get(), Text::AuditMade)}</p>
                <ul class="audit">
                    {outcome.audit.into_iter().map(|line| view! { <li>{line}</li> }).collect_view()}
                </ul>
            });
            view! { <div class=class id="change-outcome"><p>{outcome.text}</p>{audit}</div> }
        })
    };
    view! {
        <section class="panel" aria-labelledby="controls-title">
            <h2 id="controls-title">{move || t(lang.get(), Text::Controls)}</h2>
            <form on:submit=apply>
                <div class="fields">
                    {input("rate", Text::RatePerSec, rate, "number")}
                    <div class="field">
                        <label for="cap">{move || t(lang.get(), Text::Cap)}</label>
                        <input id="cap" type="number" min="1" step="1" aria-describedby="cap-help"
                            prop:value=move || cap.get()
                            on:input=move |event| cap.set(event_target_value(&event)) />
                        <p class="help" id="cap-help">{move || t(lang.get(), Text::CapHelp)}</p>
                    </div>
                    {input("ttl", Text::TokenTtl, ttl, "number")}
                    {messages}
                </div>
                <div class="buttons">
                    <button type="submit" id="apply" class="primary">{move || t(lang.get(), Text::Apply)}</button>
                    <button type="button" id="pause" on:click=toggle_pause>
                        {move || t(lang.get(), if paused() { Text::Resume } else { Text::Pause })}
                    </button>
                    <button type="button" id="close" on:click=toggle_close>
                        {move || t(lang.get(), if closed() { Text::Reopen } else { Text::Close })}
                    </button>
                </div>
            </form>
            <div role="status" aria-live="polite">{outcome}</div>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubling_is_allowed_more_asks() {
        let current = json!({"admissionRatePerSec": 10.0, "paused": false, "maxActiveUsers": null});
        assert_eq!(
            admission_factor(&current, &json!({"admissionRatePerSec": 20.0})),
            2.0
        );
        assert_eq!(
            admission_factor(&current, &json!({"admissionRatePerSec": 4.0})),
            2.5
        );
        assert!(admission_factor(&current, &json!({"paused": true})).is_infinite());
        assert!(admission_factor(&current, &json!({"maxActiveUsers": 100})).is_infinite());
        assert_eq!(
            admission_factor(&current, &json!({"tokenTtlSecs": 60})),
            1.0
        );
        let capped = json!({"admissionRatePerSec": 10.0, "paused": false, "maxActiveUsers": 100});
        assert_eq!(
            admission_factor(&capped, &json!({"maxActiveUsers": 300})),
            3.0
        );
    }

    #[test]
    fn the_patch_holds_only_what_changed() {
        let current =
            json!({"admissionRatePerSec": 10.0, "maxActiveUsers": null, "tokenTtlSecs": 300});
        let patch = form_patch(
            &current,
            &[
                ("admissionRatePerSec", json!(10)),
                ("maxActiveUsers", Value::Null),
                ("tokenTtlSecs", json!(120.0)),
            ],
        );
        assert_eq!(patch, json!({"tokenTtlSecs": 120.0}));
    }
}
