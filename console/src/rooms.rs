//! The rooms list (from the admin stream: state, waiting, active, rate; display names and the
//! state's opening times from the [`catalog`]) with create (any settings), close and delete,
//! each confirmed. Create and delete need a server with rooms at run time; on one
//! without them the answer (404) is shown, nothing breaks.

use leptos::prelude::*;
use leptos::task::spawn_local;
use serde_json::json;
use vestibule_shared::is_valid_room_slug;

use crate::api::{self, ApiError};
use crate::catalog::{self, display_name};
use crate::form;
use crate::i18n::{label_text, t, Text};
use crate::local_time::Browser;
use crate::schedule::label;
use crate::settings_form::{patch_of, SettingsFields, Values};
use crate::state::Console;

/// A rate or count for a table cell: whole numbers plain, else one decimal.
pub fn figure(value: f64) -> String {
    if (value - value.round()).abs() < 0.05 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// The rooms list and the create form.
#[component]
pub fn RoomsList(console: Console) -> impl IntoView {
    let lang = console.lang;
    let notice = RwSignal::new(None::<(bool, String)>);
    let report = move |result: Result<Text, ApiError>| match result {
        Err(error) if error.is_auth() => console.sign_out(true),
        Err(error) => notice.set(Some((false, error.describe(lang.get_untracked())))),
        Ok(done) => notice.set(Some((true, t(lang.get_untracked(), done).to_owned()))),
    };
    let slug = RwSignal::new(String::new());
    let values: Values = RwSignal::new(Default::default());
    let create = move |event: leptos::ev::SubmitEvent| {
        event.prevent_default();
        let lang = lang.get_untracked();
        let room = slug.get_untracked().trim().to_owned();
        if !is_valid_room_slug(&room) {
            notice.set(Some((false, t(lang, Text::SlugHelp).to_owned())));
            return;
        }
        let mut body = match patch_of(values, &serde_json::Value::Null, lang) {
            Ok(body) => body,
            Err(text) => return notice.set(Some((false, text))),
        };
        let scheduled = body.get("opensAt").is_some();
        let now_ms = js_sys::Date::now() as i64;
        let lines = form::settings_lines(lang, &body, &Browser, now_ms);
        let joins = t(
            lang,
            if scheduled {
                Text::JoinsOnSchedule
            } else {
                Text::JoinsAtOnce
            },
        );
        let ask = std::iter::once(format!("{room}: {}", t(lang, Text::ConfirmCreate)))
            .chain(lines.iter().map(|line| format!("• {line}")))
            .chain([String::new(), joins.to_owned()])
            .collect::<Vec<_>>()
            .join("\n");
        if !window().confirm_with_message(&ask).unwrap_or(false) {
            return;
        }
        body["room"] = json!(room);
        spawn_local(async move {
            let result = api::call("POST", "admin/rooms", Some(&body)).await;
            if result.is_ok() {
                slug.set(String::new());
                values.set(Default::default());
                console.selected.set(Some(room));
                catalog::refresh(console);
            }
            report(result.map(|_| Text::Created));
        });
    };
    let close = move |room: String, closed: bool| {
        let ask = if closed {
            Text::ConfirmReopen
        } else {
            Text::ConfirmClose
        };
        if !window()
            .confirm_with_message(&format!("{room}: {}", t(lang.get_untracked(), ask)))
            .unwrap_or(false)
        {
            return;
        }
        spawn_local(async move {
            let patch = json!({"closed": !closed});
            let result = api::call("PATCH", &format!("admin/rooms/{room}"), Some(&patch)).await;
            report(result.map(|_| Text::Applied));
        });
    };
    let delete = move |room: String| {
        let ask = format!("{room}: {}", t(lang.get_untracked(), Text::ConfirmDelete));
        if !window().confirm_with_message(&ask).unwrap_or(false) {
            return;
        }
        spawn_local(async move {
            let path = format!("admin/rooms/{room}");
            let mut result = api::call("DELETE", &path, None).await;
            if matches!(&result, Err(error) if error.code() == "room_not_empty") {
                let ask = format!(
                    "{room}: {}",
                    t(lang.get_untracked(), Text::ConfirmForceDelete)
                );
                if !window().confirm_with_message(&ask).unwrap_or(false) {
                    return;
                }
                result = api::call("DELETE", &format!("{path}?force=true"), None).await;
            }
            if result.is_ok() && console.selected.get_untracked().as_deref() == Some(room.as_str())
            {
                console.selected.set(None);
            }
            report(result.map(|_: api::Answer| Text::Deleted));
        });
    };
    let rows = move || {
        let lang = lang.get();
        let (at_ms, rooms) = console.latest.with(|latest| {
            latest
                .as_ref()
                .map(|event| (event.at_ms as i64, event.rooms.clone()))
                .unwrap_or_default()
        });
        if rooms.is_empty() {
            return view! { <tr><td colspan="6">{t(lang, Text::NoRooms)}</td></tr> }.into_any();
        }
        rooms
            .into_iter()
            .map(|room| {
                let (view_name, close_name, delete_name) =
                    (room.room.clone(), room.room.clone(), room.room.clone());
                let pressed_name = view_name.clone();
                let current = move || console.selected.get().as_deref() == Some(view_name.as_str());
                let pressed =
                    move || (console.selected.get().as_deref() == Some(pressed_name.as_str())).to_string();
                let select_name = room.room.clone();
                let admitted = room.admitted_per_sec.map_or("–".into(), figure);
                let (name, times) = console.catalog.with(|catalog| {
                    let settings = catalog.get(&room.room);
                    (display_name(lang, settings), catalog::times(settings))
                });
                let (state, state_class) = label_text(lang, label(room.state, times, at_ms));
                view! {
                    <tr class:current=current data-room=room.room.clone()>
                        <th scope="row">
                            <button type="button" class="link" aria-pressed=pressed
                                on:click=move |_| console.selected.set(Some(select_name.clone()))>
                                {name.clone().unwrap_or_else(|| room.room.clone())}
                            </button>
                            {name.is_some().then(|| view! { <span class="slug">{room.room.clone()}</span> })}
                        </th>
                        <td class="state-cell"><span class=state_class>{state}</span></td>
                        <td class="num waiting">{room.waiting}</td>
                        <td class="num">{room.active_users}</td>
                        <td class="num">{admitted} " / " {figure(room.admission_rate_per_sec)} {t(lang, Text::PerSec)}</td>
                        <td class="actions">
                            <button type="button" on:click=move |_| close(close_name.clone(), room.closed)>
                                {t(lang, if room.closed { Text::Reopen } else { Text::Close })}
                            </button>
                            <button type="button" class="danger" on:click=move |_| delete(delete_name.clone())>
                                {t(lang, Text::Delete)}
                            </button>
                        </td>
                    </tr>
                }
            })
            .collect_view()
            .into_any()
    };
    let shown_notice = move || {
        notice.get().map(|(ok, text)| {
            view! { <p class=if ok { "outcome ok" } else { "outcome bad" }>{text}</p> }
        })
    };
    view! {
        <section class="panel rooms" aria-labelledby="rooms-title">
            <h2 id="rooms-title">{move || t(lang.get(), Text::Rooms)}</h2>
            <div class="table-wrap">
                <table>
                    <thead>
                        <tr>
                            <th scope="col">{move || t(lang.get(), Text::Room)}</th>
                            <th scope="col">{move || t(lang.get(), Text::State)}</th>
                            <th scope="col" class="num">{move || t(lang.get(), Text::Waiting)}</th>
                            <th scope="col" class="num">{move || t(lang.get(), Text::Active)}</th>
                            <th scope="col" class="num">{move || format!("{} / {}", t(lang.get(), Text::Admitted), t(lang.get(), Text::Rate))}</th>
                            <th scope="col">{move || t(lang.get(), Text::Actions)}</th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
            <form class="create" on:submit=create>
                <h3>{move || t(lang.get(), Text::CreateRoom)}</h3>
                <div class="field">
                    <label for="new-room">{move || t(lang.get(), Text::NewRoomSlug)}</label>
                    <input id="new-room" type="text" pattern="[a-z0-9-]{1,64}" maxlength="64"
                        autocomplete="off" spellcheck="false" aria-describedby="new-room-help"
                        prop:value=move || slug.get()
                        on:input=move |event| slug.set(event_target_value(&event)) />
                    <p class="help" id="new-room-help">{move || t(lang.get(), Text::SlugHelp)}</p>
                </div>
                <details class="create-settings">
                    <summary>{move || t(lang.get(), Text::CreateSettings)}</summary>
                    <div class="fields">
                        <SettingsFields lang=lang values=values prefix="new-" />
                    </div>
                </details>
                <button type="submit">{move || t(lang.get(), Text::Create)}</button>
            </form>
            <div role="status" aria-live="polite">{shown_notice}</div>
        </section>
    }
}
