//! The selected room live: its figures from the admin stream, two charts of the last 15
//! minutes (waiting and active users; admitted per second against the configured rate), its
//! controls and the capacity calculator.

use leptos::prelude::*;
use vestibule_shared::admin_events::RoomFigures;

use crate::calculator::Calculator;
use crate::chart::{LineChart, Series};
use crate::controls::{Changes, Controls};
use crate::i18n::{reason_text, state_text, t, Lang, Text};
use crate::rooms::figure;
use crate::state::Console;

/// One figure of the grid: label, value and its unit.
fn cells(lang: Lang, room: &RoomFigures) -> Vec<(&'static str, Text, String)> {
    let per_sec = t(lang, Text::PerSec);
    let rate = |value: f64| format!("{}{per_sec}", figure(value));
    let leader = room.leader.as_ref().map_or_else(
        || t(lang, Text::OtherReplica).to_owned(),
        |leader| format!("{} · epoch {}", leader.replica, leader.epoch),
    );
    vec![
        (
            "fig-state",
            Text::State,
            state_text(lang, room.state).to_owned(),
        ),
        (
            "fig-waiting",
            Text::Waiting,
            format!("{} {}", room.waiting, t(lang, Text::People)),
        ),
        (
            "fig-active",
            Text::Active,
            format!("{} {}", room.active_users, t(lang, Text::People)),
        ),
        (
            "fig-admitted",
            Text::Admitted,
            format!(
                "{} ({} {})",
                room.admitted_per_sec.map_or("–".into(), rate),
                t(lang, Text::Configured),
                rate(room.admission_rate_per_sec)
            ),
        ),
        ("fig-joins", Text::JoinsPerSec, rate(room.joins_per_sec)),
        ("fig-polls", Text::PollsPerSec, rate(room.polls_per_sec)),
        (
            "fig-streams",
            Text::SseStreams,
            room.sse_streams.to_string(),
        ),
        ("fig-used", Text::TokensUsed, rate(room.tokens_used_per_sec)),
        (
            "fig-expired",
            Text::TokensExpired,
            rate(room.tokens_expired_per_sec),
        ),
        (
            "fig-eta",
            Text::EtaBack,
            room.eta_back_of_line_secs.map_or("–".into(), |secs| {
                format!("{secs} {}", t(lang, Text::Seconds))
            }),
        ),
        (
            "fig-reason",
            Text::SlowedBy,
            room.reason
                .map_or("–", |reason| reason_text(lang, reason))
                .to_owned(),
        ),
        ("fig-leader", Text::Leader, leader),
    ]
}

/// The selected room, or a hint to pick one.
#[component]
pub fn RoomView(console: Console) -> impl IntoView {
    move || {
        match console.selected.get() {
        None => view! {
            <section class="panel hint"><p>{move || t(console.lang.get(), Text::PickRoom)}</p></section>
        }
        .into_any(),
        Some(room) => view! { <RoomPanel console=console room=room /> }.into_any(),
    }
    }
}

#[component]
fn RoomPanel(console: Console, room: String) -> impl IntoView {
    let lang = console.lang;
    let changes = Changes::new(console);
    changes.load(&room);
    // Picking a room takes keyboard focus to it (its heading), not back to the top.
    request_animation_frame(|| {
        use wasm_bindgen::JsCast;
        if let Some(heading) = document()
            .get_element_by_id("room-title")
            .and_then(|element| element.dyn_into::<web_sys::HtmlElement>().ok())
        {
            let _ = heading.focus();
        }
    });
    let figures_room = room.clone();
    let figures = move || {
        let lang = lang.get();
        let room = console.latest.with(|latest| {
            latest
                .as_ref()
                .and_then(|event| event.rooms.iter().find(|r| r.room == figures_room).cloned())
        });
        match room {
            // Figures come every second: a room missing from them is not running (any more).
            None if console.latest.with(Option::is_some) => {
                view! { <p class="outcome bad">{t(lang, Text::NotRunning)}</p> }.into_any()
            }
            None => view! { <p>{t(lang, Text::Loading)}</p> }.into_any(),
            Some(room) => view! {
                <dl class="figures">
                    {cells(lang, &room)
                        .into_iter()
                        .map(|(id, label, value)| view! {
                            <div><dt>{t(lang, label)}</dt><dd id=id>{value}</dd></div>
                        })
                        .collect_view()}
                </dl>
            }
            .into_any(),
        }
    };
    let (line_room, rate_room) = (room.clone(), room.clone());
    let line_series = Signal::derive(move || {
        let lang = lang.get();
        let samples = console.history.with(|history| history.of(&line_room));
        vec![
            Series {
                name: t(lang, Text::Waiting).into(),
                class: "line-a",
                dashed: false,
                points: samples.iter().map(|s| (s.at_ms, s.waiting)).collect(),
            },
            Series {
                name: t(lang, Text::Active).into(),
                class: "line-b",
                dashed: false,
                points: samples.iter().map(|s| (s.at_ms, s.active)).collect(),
            },
        ]
    });
    let rate_series = Signal::derive(move || {
        let lang = lang.get();
        let samples = console.history.with(|history| history.of(&rate_room));
        vec![
            Series {
                name: t(lang, Text::Admitted).into(),
                class: "line-a",
                dashed: false,
                points: samples
                    .iter()
                    .filter_map(|s| s.admitted.map(|admitted| (s.at_ms, admitted)))
                    .collect(),
            },
            Series {
                name: t(lang, Text::Configured).into(),
                class: "line-b",
                dashed: true,
                points: samples.iter().map(|s| (s.at_ms, s.configured)).collect(),
            },
        ]
    });
    view! {
        <section class="panel room" aria-labelledby="room-title">
            <h2 id="room-title" tabindex="-1">{move || t(lang.get(), Text::Room)} ": " {room.clone()}</h2>
            {figures}
            <div class="charts">
                <LineChart title=Text::ChartLine unit=Text::People series=line_series lang=lang />
                <LineChart title=Text::ChartRate unit=Text::PerSec series=rate_series lang=lang />
            </div>
        </section>
        <Controls console=console room=room.clone() changes=changes />
        <Calculator console=console room=room changes=changes />
    }
}
