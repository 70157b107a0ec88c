//! The selected room live: its figures from the admin stream, the closed loop and the origin
//! ([`crate::auto_rate`]), charts of the last 15 minutes (waiting and active users; admitted per
//! second against the configured rate; with signals or the loop on, the origin's p95 against
//! its target and its errors against their limit), its sale summary, controls and the capacity
//! calculator. The charts begin with the server's
//! history of the room, read each time it is shown, and go on with the stream.

use leptos::prelude::*;
use vestibule_shared::admin_events::RoomFigures;

use serde_json::Value;

use crate::auto_rate::{origin_series, AutoRatePanel};
use crate::calculator::Calculator;
use crate::catalog::{self, display_name};
use crate::chart::{LineChart, Series};
use crate::controls::{Changes, Controls};
use crate::i18n::{held_back_text, label_text, t, Lang, Text};
use crate::local_time::Browser;
use crate::rooms::figure;
use crate::schedule::{held_back, label, schedule_line};
use crate::state::Console;
use crate::summary::SummaryPanel;

/// One figure of the grid: label, value and its unit. `settings` (the room's, as last read)
/// give the opening times for the state's label and the cap for why admission is held back.
fn cells(lang: Lang, room: &RoomFigures, settings: &Value, at_ms: i64) -> Vec<Cell> {
    let per_sec = t(lang, Text::PerSec);
    let rate = |value: f64| format!("{}{per_sec}", figure(value));
    let leader = room.leader.as_ref().map_or_else(
        || t(lang, Text::OtherReplica).to_owned(),
        |leader| format!("{} · epoch {}", leader.replica, leader.epoch),
    );
    let shown = label(room.state, catalog::times(Some(settings)), at_ms);
    let held = held_back(shown, room, settings["maxActiveUsers"].as_u64());
    vec![
        (
            "fig-state",
            Text::State,
            label_text(lang, shown).0.to_owned(),
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
            "fig-stock",
            Text::StockLeft,
            room.stock_left.map_or_else(
                || t(lang, Text::Unlimited).to_owned(),
                |left| left.to_string(),
            ),
        ),
        ("fig-sold", Text::Sold, room.sold.to_string()),
        (
            "fig-outstanding",
            Text::TokensOutstanding,
            room.active_users.to_string(),
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
            held.map_or("–", |held| held_back_text(lang, held))
                .to_owned(),
        ),
        ("fig-leader", Text::Leader, leader),
    ]
}

/// One figure of a grid: its element id, label and value.
pub type Cell = (&'static str, Text, String);

/// A grid of figures (the room's live ones, the sale summary's).
pub fn figure_list(lang: Lang, cells: Vec<Cell>) -> impl IntoView {
    figure_grid(lang, "figures", cells)
}

/// [`figure_list`] with its own CSS class (`figures lines`: one figure a row).
pub fn figure_grid(lang: Lang, class: &'static str, cells: Vec<Cell>) -> impl IntoView {
    view! {
        <dl class=class>
            {cells
                .into_iter()
                .map(|(id, label, value)| view! {
                    <div><dt>{t(lang, label)}</dt><dd id=id>{value}</dd></div>
                })
                .collect_view()}
        </dl>
    }
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
    // The charts show the last 15 minutes at once (after a reload, a sign-in or another room).
    crate::stream::load_history(console, room.clone());
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
        let (at_ms, room) = console.latest.with(|latest| {
            latest.as_ref().map_or((0, None), |event| {
                let room = event.rooms.iter().find(|r| r.room == figures_room).cloned();
                (event.at_ms as i64, room)
            })
        });
        match room {
            // Figures come every second: a room missing from them is not running (any more).
            None if console.latest.with(Option::is_some) => {
                view! { <p class="outcome bad">{t(lang, Text::NotRunning)}</p> }.into_any()
            }
            None => view! { <p>{t(lang, Text::Loading)}</p> }.into_any(),
            Some(room) => figure_list(
                lang,
                changes
                    .settings
                    .with(|settings| cells(lang, &room, settings, at_ms)),
            )
            .into_any(),
        }
    };
    // The display name in the operator's language, the slug small beside it.
    let heading_room = room.clone();
    let heading = move || {
        let lang = lang.get();
        let name = changes
            .settings
            .with(|settings| display_name(lang, Some(settings)));
        let slug = heading_room.clone();
        match name {
            Some(name) => view! { {name} " " <span class="slug">{slug}</span> }.into_any(),
            None => view! { {t(lang, Text::Room)} ": " {slug} }.into_any(),
        }
    };
    // Both opening times, counting down on the server's clock (the figures' second).
    let schedule = move || {
        let lang = lang.get();
        let at_ms = console
            .latest
            .with(|latest| latest.as_ref().map(|event| event.at_ms));
        let now_ms = at_ms.map_or_else(|| js_sys::Date::now() as i64, |at| at as i64);
        let times = changes
            .settings
            .with(|settings| catalog::times(Some(settings)));
        schedule_line(lang, times, now_ms, &Browser)
            .map(|line| view! { <p class="schedule" id="schedule">{line}</p> })
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
    // The origin's charts, while any point has its signals or the loop on.
    let origin_room = room.clone();
    let origin = Memo::new(move |_| {
        let lang = lang.get();
        console
            .history
            .with(|history| origin_series(lang, &history.of(&origin_room)))
    });
    let p95_series = Signal::derive(move || origin.get().map(|(p95, _)| p95).unwrap_or_default());
    let error_series =
        Signal::derive(move || origin.get().map(|(_, errors)| errors).unwrap_or_default());
    view! {
        <section class="panel room" aria-labelledby="room-title">
            <h2 id="room-title" tabindex="-1">{heading}</h2>
            {schedule}
            {figures}
            <AutoRatePanel console=console room=room.clone() />
            <div class="charts">
                <LineChart title=Text::ChartLine unit=Text::People series=line_series lang=lang />
                <LineChart title=Text::ChartRate unit=Text::PerSec series=rate_series lang=lang />
                <Show when=move || origin.with(Option::is_some)>
                    <LineChart title=Text::ChartP95 unit=Text::Ms series=p95_series lang=lang />
                    <LineChart title=Text::ChartErrors unit=Text::Percent series=error_series lang=lang />
                </Show>
            </div>
        </section>
        <SummaryPanel console=console room=room.clone() changes=changes />
        <Controls console=console room=room.clone() changes=changes />
        <Calculator console=console room=room changes=changes />
    }
}
