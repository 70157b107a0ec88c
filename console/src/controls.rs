//! A room's controls: every setting of the form ([`crate::form`]), pause/resume, end the sale,
//! close. Every change is one `PATCH` with `If-Match` (a change made meanwhile by someone else is
//! refused, not overwritten), confirmed first with each value before → after (and a note when
//! it alters admission by more than 2×); the answer's audit entries are shown (the
//! `X-Audit-Ids` the PATCH answered, else the newest).

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::{json, Map, Value};

use crate::api::{self, ApiError};
use crate::form;
use crate::i18n::{t, Lang, Text};
use crate::local_time::Browser;
use crate::settings_form::{fill, patch_of, SettingsFields, Values};
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

    /// Applies `patch` to `room` once the operator confirmed it: the confirmation shows every
    /// field's value before → after, says so when admission changes by more than 2×, and adds
    /// `warning` (ending the sale, closing).
    pub fn apply(self, room: &str, patch: Value, warning: Option<Text>) {
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
        let now_ms = js_sys::Date::now() as i64;
        let lines = form::before_after(lang, &current, &patch, &Browser, now_ms);
        let big = !current.is_null() && admission_factor(&current, &patch) > 2.0;
        let ask = confirm_text(lang, room, &lines, big, warning);
        if !window().confirm_with_message(&ask).unwrap_or(false) {
            return;
        }
        let fields = patch.as_object().map_or(0, Map::len);
        let room = room.to_owned();
        let etag = self.etag.get_untracked();
        spawn_local(async move {
            let path = format!("admin/rooms/{room}");
            let answer = match send(&path, &patch, etag, &current).await {
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
            self.console.catalog.update(|catalog| {
                catalog.insert(room.clone(), answer.body.clone());
            });
            let audit = audit_entries(&room, &answer.audit_ids, fields).await;
            self.outcome.set(Some(Outcome {
                ok: true,
                text: format!("{} {}", t(lang, Text::Applied), lines.join(" · ")),
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

/// How many times a change is sent again after 412s caused only by the closed loop's moves.
const LOOP_RETRIES: usize = 3;

/// Sends `patch` on the version `etag` of `read` (the settings the operator saw). A 412 whose
/// only cause is the closed loop moving the rate meanwhile (`autoRate` on, nothing else
/// changed) is sent again on the new version, up to [`LOOP_RETRIES`] times: the loop may move
/// the rate every second, once between the read and the send, and the operator's change wins
/// over the loop's, as DESIGN.md "Closed-loop admission" says.
async fn send(
    path: &str,
    patch: &Value,
    etag: Option<String>,
    read: &Value,
) -> Result<api::Answer, ApiError> {
    let mut answer = api::call_if_match("PATCH", path, patch, etag.as_deref()).await;
    for _ in 0..LOOP_RETRIES {
        let Err(ApiError::Status { status: 412, .. }) = &answer else {
            return answer;
        };
        let now = api::call("GET", path, None).await?;
        if !only_the_loop_moved(read, &now.body) {
            return answer;
        }
        answer = api::call_if_match("PATCH", path, patch, now.etag.as_deref()).await;
    }
    answer
}

/// `after` differs from `before` in the admission rate alone (and the live counts the answer
/// carries), with the closed loop on.
pub fn only_the_loop_moved(before: &Value, after: &Value) -> bool {
    let without_rate = |settings: &Value| {
        let mut settings = settings.clone();
        if let Some(fields) = settings.as_object_mut() {
            for moving in ["admissionRatePerSec", "waiting", "activeUsers"] {
                fields.remove(moving);
            }
        }
        settings
    };
    after["autoRate"].is_object() && without_rate(before) == without_rate(after)
}

/// The confirmation of a change: "drop-8: Apply these changes?", a line per field (before →
/// after), then the 2× note and `warning` when they apply.
pub fn confirm_text(
    lang: Lang,
    room: &str,
    lines: &[String],
    big: bool,
    warning: Option<Text>,
) -> String {
    let mut text = format!("{room}: {}", t(lang, Text::ConfirmChange));
    for line in lines {
        text.push_str("\n• ");
        text.push_str(line);
    }
    for note in [big.then_some(Text::ConfirmBigChange), warning]
        .into_iter()
        .flatten()
    {
        text.push_str("\n\n");
        text.push_str(t(lang, note));
    }
    text
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

/// The controls of `room`.
#[component]
pub fn Controls(console: Console, room: String, changes: Changes) -> impl IntoView {
    let lang = console.lang;
    let values: Values = RwSignal::new(Default::default());
    // The form shows what is in force whenever the settings are read again.
    Effect::new(move |_| changes.settings.with(|settings| fill(values, settings)));
    let flag = move |field: &'static str| {
        move || {
            changes
                .settings
                .with(|s| s[field].as_bool().unwrap_or(false))
        }
    };
    let (paused, closed, sold_out) = (flag("paused"), flag("closed"), flag("soldOut"));
    let apply_room = room.clone();
    let apply = move |event: leptos::ev::SubmitEvent| {
        event.prevent_default();
        let settings = changes.settings.get_untracked();
        match patch_of(values, &settings, lang.get_untracked()) {
            Ok(patch) => changes.apply(&apply_room, patch, None),
            Err(text) => changes.outcome.set(Some(Outcome {
                ok: false,
                text,
                audit: Vec::new(),
            })),
        }
    };
    let pause_room = room.clone();
    let toggle_pause = move |_| {
        changes.apply(&pause_room, json!({"paused": !paused()}), None);
    };
    let close_room = room.clone();
    let toggle_close = move |_| {
        let ask = if closed() {
            Text::ConfirmReopen
        } else {
            Text::ConfirmClose
        };
        changes.apply(&close_room, json!({"closed": !closed()}), Some(ask));
    };
    let end_sale = move |_| {
        changes.apply(&room, json!({"soldOut": true}), Some(Text::ConfirmEndSale));
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
                    <SettingsFields lang=lang values=values prefix="" />
                </div>
                <div class="buttons">
                    <button type="submit" id="apply" class="primary">{move || t(lang.get(), Text::Apply)}</button>
                    <button type="button" id="pause" on:click=toggle_pause>
                        {move || t(lang.get(), if paused() { Text::Resume } else { Text::Pause })}
                    </button>
                    <button type="button" id="close" on:click=toggle_close>
                        {move || t(lang.get(), if closed() { Text::Reopen } else { Text::Close })}
                    </button>
                    <button type="button" id="end-sale" class="danger" on:click=end_sale
                        disabled=sold_out>
                        {move || t(lang.get(), Text::EndSale)}
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
    use crate::local_time::FixedOffset;

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
    fn a_change_is_sent_again_only_past_the_loops_own_moves() {
        let auto = json!({"min": 5, "max": 40, "targetP95Ms": 500, "maxErrorRate": 0.01});
        let read = json!({"admissionRatePerSec": 20.0, "paused": false, "autoRate": auto});
        let moved = json!({"admissionRatePerSec": 11.1, "paused": false, "autoRate": auto,
                           "waiting": 3});
        assert!(only_the_loop_moved(&read, &moved));
        let paused = json!({"admissionRatePerSec": 11.1, "paused": true, "autoRate": auto});
        assert!(
            !only_the_loop_moved(&read, &paused),
            "someone else paused it"
        );
        let off = json!({"admissionRatePerSec": 11.1, "paused": false, "autoRate": null});
        assert!(!only_the_loop_moved(&read, &off), "the loop was turned off");
        let manual = json!({"admissionRatePerSec": 11.1, "paused": false, "autoRate": null});
        let before = json!({"admissionRatePerSec": 20.0, "paused": false, "autoRate": null});
        assert!(
            !only_the_loop_moved(&before, &manual),
            "another operator's rate"
        );
    }

    #[test]
    fn a_rate_change_confirms_with_its_values() {
        let current =
            json!({"admissionRatePerSec": 175.0, "paused": false, "maxActiveUsers": null});
        let patch = json!({"admissionRatePerSec": 35});
        let lines = form::before_after(Lang::En, &current, &patch, &FixedOffset(0), 0);
        let big = admission_factor(&current, &patch) > 2.0;
        assert_eq!(
            confirm_text(Lang::En, "drop-8", &lines, big, None),
            "drop-8: Apply these changes?\n• Admission rate (people/s): 175/s → 35/s\n\n\
             This changes admission by more than 2×. Apply it?"
        );
        let end = confirm_text(Lang::Ko, "drop-8", &[], false, Some(Text::ConfirmEndSale));
        assert!(
            end.starts_with("drop-8: 다음과 같이 바꿀까요?\n\n판매를 종료할까요?"),
            "{end}"
        );
    }
}
