//! The sale summary panel of the room view: joined, admitted, ordered, abandoned (tokens expired
//! unused), the longest line, the longest wait and when the room sold out, in the operator's
//! local time. Read from `GET …/admin/rooms/{room}/summary` when the room is shown, every 5 s
//! and after each change made here. The formatting is pure ([`rows`]); only the time zone comes
//! from the browser.

use std::time::Duration;

use leptos::prelude::*;
use leptos::task::spawn_local;
use vestibule_shared::admin_events::SaleSummary;

use crate::api;
use crate::controls::Changes;
use crate::i18n::{t, Lang, Text};
use crate::local_time::{Browser, Zone};
use crate::room_view::{figure_list, Cell};
use crate::state::Console;

/// How often the summary is read again.
const REFRESH: Duration = Duration::from_secs(5);

/// "42 s", "5 min 3 s", "1 h 2 min": a wait to the second under an hour, to the minute above.
pub fn wait_span(lang: Lang, secs: u64) -> String {
    // Korean writes a unit right after its number ("3분"), English with a space ("3 min").
    let gap = if lang == Lang::Ko { "" } else { " " };
    let unit = |n: u64, unit: Text| format!("{n}{gap}{}", t(lang, unit));
    match secs {
        0..60 => unit(secs, Text::Seconds),
        60..3600 if secs.is_multiple_of(60) => unit(secs / 60, Text::Minutes),
        60..3600 => format!(
            "{} {}",
            unit(secs / 60, Text::Minutes),
            unit(secs % 60, Text::Seconds)
        ),
        _ => format!(
            "{} {}",
            unit(secs / 3600, Text::Hours),
            unit(secs % 3600 / 60, Text::Minutes)
        ),
    }
}

/// The local time of `at_ms` to the second (`14:05:32`), with the date when it is not
/// `now_ms`'s (`11-27 14:05:32`).
pub fn local_clock(zone: &impl Zone, at_ms: i64, now_ms: i64) -> String {
    zone.to_local(at_ms).clock_to_second(&zone.to_local(now_ms))
}

/// The panel's rows: `(element id, label, value)`, in reading order. Counts stand bare (the
/// labels name what they count: no "1 people").
pub fn rows(lang: Lang, summary: &SaleSummary, zone: &impl Zone, now_ms: i64) -> Vec<Cell> {
    let sold_out = match (summary.sold_out, summary.sold_out_at_ms) {
        (_, Some(at_ms)) => local_clock(zone, at_ms as i64, now_ms),
        // Sold out before the server marked the time (an older server): no time to show.
        (true, None) => t(lang, Text::Yes).to_owned(),
        (false, None) => t(lang, Text::NotSoldOut).to_owned(),
    };
    vec![
        ("sum-joined", Text::Joined, summary.joined.to_string()),
        (
            "sum-admitted",
            Text::AdmittedTotal,
            summary.admitted.to_string(),
        ),
        ("sum-ordered", Text::Ordered, summary.ordered.to_string()),
        (
            "sum-expired",
            Text::ExpiredUnused,
            summary.expired_unused.to_string(),
        ),
        ("sum-peak", Text::PeakLine, summary.peak_waiting.to_string()),
        (
            "sum-longest",
            Text::LongestWait,
            wait_span(lang, summary.longest_wait_secs),
        ),
        ("sum-sold-out", Text::SoldOutAt, sold_out),
    ]
}

/// Reads `room`'s summary into `summary`; a refused token signs out, any other failure keeps
/// the last one shown (the next read tries again).
fn read(console: Console, room: String, summary: RwSignal<Option<SaleSummary>>) {
    spawn_local(async move {
        let path = format!("admin/rooms/{room}/summary");
        match api::call("GET", &path, None).await {
            Ok(answer) => {
                if let Ok(read) = serde_json::from_value::<SaleSummary>(answer.body) {
                    // The panel may be gone (another room shown) by the time it answers.
                    let _ = summary.try_set(Some(read));
                }
            }
            Err(error) if error.is_auth() => console.sign_out(true),
            Err(_) => {}
        }
    });
}

/// The summary of `room`, kept fresh while it is shown.
#[component]
pub fn SummaryPanel(console: Console, room: String, changes: Changes) -> impl IntoView {
    let lang = console.lang;
    let summary = RwSignal::new(None::<SaleSummary>);
    // At once, and again after each change (the settings are read back after every one).
    let changed_room = room.clone();
    Effect::new(move |_| {
        changes.settings.track();
        read(console, changed_room.clone(), summary);
    });
    let timer = set_interval_with_handle(move || read(console, room.clone(), summary), REFRESH);
    if let Ok(timer) = timer {
        on_cleanup(move || timer.clear());
    }
    let body = move || {
        let lang = lang.get();
        match summary.get() {
            None => view! { <p>{t(lang, Text::Loading)}</p> }.into_any(),
            Some(summary) => figure_list(
                lang,
                rows(lang, &summary, &Browser, js_sys::Date::now() as i64),
            )
            .into_any(),
        }
    };
    view! {
        <section class="panel summary" aria-labelledby="summary-title">
            <h2 id="summary-title">{move || t(lang.get(), Text::SaleSummary)}</h2>
            {body}
        </section>
    }
}

#[cfg(test)]
mod tests;
