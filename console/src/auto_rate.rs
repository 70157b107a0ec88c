//! The closed loop (`autoRate`) and the origin's health in the room view, from the admin
//! stream's `origin` and `autoRate` figures: the loop's bounds and targets, the rate now, the
//! origin's p95, p50, errors and requests, what the loop does this second and its last change in
//! words ("Cut: origin p95 over target (900 ms > 500 ms) · 175 → 148.8/s · 12 s ago"), and the
//! series of the origin's charts (p95 against its target, errors against their limit). The
//! formatting is pure; [`AutoRatePanel`] only reads the stream.

use leptos::prelude::*;
use vestibule_shared::admin_events::RoomFigures;
use vestibule_shared::auto_rate::{AutoRate, AutoRateChange, AutoRateReason, OriginSignals};

use crate::chart::Series;
use crate::i18n::{change_verb, reason_phrase, step_verb, t, Lang, Numbers, Text};
use crate::room_view::{figure_grid, figure_list, Cell};
use crate::rooms::figure;
use crate::state::{Console, Sample};
use crate::summary::wait_span;

/// A latency for a person: "900 ms".
pub fn ms_text(ms: f64) -> String {
    format!("{ms:.0} ms")
}

/// A fraction as a percentage to two decimals at most: 0.2 → "20%", 0.0125 → "1.25%".
pub fn percent(fraction: f64) -> String {
    let text = format!("{:.2}", fraction * 100.0);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}%")
}

/// The loop's bounds and targets: "5–40/s · p95 ≤ 500 ms · errors ≤ 1%".
pub fn bounds_line(lang: Lang, setting: &AutoRate) -> String {
    let errors = if lang == Lang::Ko {
        "오류율"
    } else {
        "errors"
    };
    format!(
        "{}–{}{} · p95 ≤ {} · {errors} ≤ {}",
        figure(setting.min),
        figure(setting.max),
        t(lang, Text::PerSec),
        ms_text(setting.target_p95_ms as f64),
        percent(setting.max_error_rate)
    )
}

fn numbers(setting: &AutoRate, p95_ms: Option<f64>, error_rate: Option<f64>) -> Numbers {
    Numbers {
        p95_ms,
        error_rate,
        target_p95_ms: setting.target_p95_ms,
        max_error_rate: setting.max_error_rate,
    }
}

/// What the loop's last step does, with the origin's numbers now: "Holding: the origin is
/// draining its backlog after a cut".
pub fn step_line(
    lang: Lang,
    reason: AutoRateReason,
    origin: Option<&OriginSignals>,
    setting: &AutoRate,
) -> String {
    let numbers = numbers(
        setting,
        origin.map(|o| o.p95_ms),
        origin.map(|o| o.error_rate),
    );
    format!(
        "{}: {}",
        step_verb(lang, reason),
        reason_phrase(lang, reason, &numbers)
    )
}

/// The loop's last change, with the numbers it acted on and how long ago (on the server's
/// clock, `now_ms`): "Cut: origin p95 over target (900 ms > 500 ms) · 175 → 148.8/s · 12 s ago".
pub fn change_line(lang: Lang, change: &AutoRateChange, setting: &AutoRate, now_ms: u64) -> String {
    let numbers = numbers(setting, change.p95_ms, change.error_rate);
    let ago = wait_span(lang, now_ms.saturating_sub(change.at_ms) / 1000);
    format!(
        "{}: {} · {} → {}{} · {ago} {}",
        change_verb(lang, change.reason, change.from, change.to),
        reason_phrase(lang, change.reason, &numbers),
        figure(change.from),
        figure(change.to),
        t(lang, Text::PerSec),
        t(lang, Text::Ago)
    )
}

/// The origin's figures: p95, p50, errors, requests and in flight ("–" without signals).
pub fn origin_cells(lang: Lang, origin: Option<&OriginSignals>) -> Vec<Cell> {
    let or_dash = |text: Option<String>| text.unwrap_or_else(|| "–".into());
    vec![
        (
            "origin-p95",
            Text::OriginP95,
            or_dash(origin.map(|o| ms_text(o.p95_ms))),
        ),
        (
            "origin-p50",
            Text::OriginP50,
            or_dash(origin.map(|o| ms_text(o.p50_ms))),
        ),
        (
            "origin-errors",
            Text::OriginErrors,
            or_dash(origin.map(|o| percent(o.error_rate))),
        ),
        (
            "origin-requests",
            Text::OriginRequests,
            or_dash(origin.map(|o| {
                format!(
                    "{} · {} {}",
                    o.requests,
                    o.in_flight,
                    t(lang, Text::InFlight)
                )
            })),
        ),
    ]
}

/// The loop's rate now and then the origin's figures, or `None` when the room has neither the
/// loop on nor signals.
pub fn cells(lang: Lang, room: &RoomFigures) -> Option<Vec<Cell>> {
    if room.auto_rate.is_none() && room.origin.is_none() {
        return None;
    }
    let mut cells = Vec::new();
    if room.auto_rate.is_some() {
        cells.push((
            "auto-rate-now",
            Text::AutoRateNow,
            format!(
                "{}{}",
                figure(room.admission_rate_per_sec),
                t(lang, Text::PerSec)
            ),
        ));
    }
    cells.extend(origin_cells(lang, room.origin.as_ref()));
    Some(cells)
}

/// The loop's lines: its bounds and targets, then in words this second's step and the last
/// change (or why there is none), then the health URL the leader reads, if any; empty while
/// the loop is off.
pub fn lines(lang: Lang, room: &RoomFigures, now_ms: u64) -> Vec<Cell> {
    let Some(auto) = &room.auto_rate else {
        return Vec::new();
    };
    let step = auto.reason.map_or_else(
        || t(lang, Text::AutoNotStepped).to_owned(),
        |reason| step_line(lang, reason, room.origin.as_ref(), &auto.setting),
    );
    let change = auto.last_change.map_or_else(
        || t(lang, Text::AutoNoChangeYet).to_owned(),
        |change| change_line(lang, &change, &auto.setting, now_ms),
    );
    let mut lines = vec![
        (
            "auto-bounds",
            Text::AutoBounds,
            bounds_line(lang, &auto.setting),
        ),
        ("auto-step", Text::AutoStep, step),
        ("auto-last-change", Text::AutoLastChange, change),
    ];
    if let Some(url) = &auto.setting.health_url {
        lines.push(("auto-health-url", Text::AutoSignalsFrom, url.clone()));
    }
    lines
}

/// The origin's charts' lines: p95 against the target, errors (in %) against their limit.
/// `None` when no sample has signals or the loop on.
pub fn origin_series(lang: Lang, samples: &[Sample]) -> Option<(Vec<Series>, Vec<Series>)> {
    let shown = samples
        .iter()
        .any(|s| s.p95_ms.is_some() || s.target_p95_ms.is_some());
    if !shown {
        return None;
    }
    let line = |name: Text, class, dashed, pick: &dyn Fn(&Sample) -> Option<f64>| Series {
        name: t(lang, name).into(),
        class,
        dashed,
        points: samples
            .iter()
            .filter_map(|s| pick(s).map(|value| (s.at_ms, value)))
            .collect(),
    };
    let p95 = vec![
        line(Text::OriginP95, "line-a", false, &|s| s.p95_ms),
        line(Text::Target, "line-b", true, &|s| s.target_p95_ms),
    ];
    let errors = vec![
        line(Text::OriginErrors, "line-a", false, &|s| {
            s.error_rate.map(|e| e * 100.0)
        }),
        line(Text::ErrorLimit, "line-b", true, &|s| {
            s.max_error_rate.map(|e| e * 100.0)
        }),
    ];
    Some((p95, errors))
}

/// The loop and the origin of `room`, live; nothing while the room has neither.
#[component]
pub fn AutoRatePanel(console: Console, room: String) -> impl IntoView {
    let lang = console.lang;
    move || {
        let lang = lang.get();
        let (at_ms, figures) = console.latest.with(|latest| {
            latest.as_ref().map_or((0, None), |event| {
                let figures = event.rooms.iter().find(|r| r.room == room).cloned();
                (event.at_ms, figures)
            })
        });
        let figures = figures?;
        let cells = cells(lang, &figures)?;
        let lines = lines(lang, &figures, at_ms);
        let off = figures
            .auto_rate
            .is_none()
            .then(|| view! { <p class="help" id="auto-off">{t(lang, Text::AutoOff)}</p> });
        Some(view! {
            <section class="auto" id="auto-loop" aria-labelledby="auto-title">
                <h3 id="auto-title">{t(lang, Text::AutoTitle)}</h3>
                {off}
                {figure_list(lang, cells)}
                {(!lines.is_empty()).then(|| figure_grid(lang, "figures lines", lines))}
            </section>
        })
    }
}

#[cfg(test)]
mod tests;
