//! The countdown (`#countdown`): while the ticket is `PRE_QUEUE`, the time left to the opening
//! (`opensAt`), ticking every second, "your place will be drawn at the opening" (the status
//! headline says it), and the ticket's tag to check the published draw; before the room takes
//! joins (409 `room_not_open`), "Opens at 09:00 (in 12 min)" and the time left until the page
//! joins by itself.

use std::time::Duration;

use leptos::prelude::*;
use vestibule_shared::TicketState;

use crate::{
    connection::Phase,
    i18n::{t, Lang, Text},
    opening::opens_at_words,
};

/// `h:mm:ss` (or `m:ss` under an hour) of the milliseconds left, never negative.
pub fn countdown_text(left_ms: f64) -> String {
    let secs = (left_ms.max(0.0) / 1000.0).ceil() as u64;
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// What the countdown counts down to.
enum Until {
    /// The draw at the opening, for a `PRE_QUEUE` ticket with its tag.
    Draw(Option<String>),
    /// The time joins start (409 `room_not_open`): the page joins by itself then.
    Joins,
}

/// The time counted down to (Unix ms) and what happens then.
fn counted(phase: &Phase) -> Option<(f64, Until)> {
    match phase {
        Phase::Ticket(s) if s.status == TicketState::PreQueue => {
            let opens = js_sys::Date::parse(s.opens_at.as_deref()?);
            (!opens.is_nan()).then(|| (opens, Until::Draw(s.ticket_tag.clone())))
        }
        Phase::NotOpen { joins_at_ms } => Some((*joins_at_ms, Until::Joins)),
        _ => None,
    }
}

/// The local time of day of `at_ms` (the shopper's time zone).
fn local_time(at_ms: f64) -> (u32, u32) {
    let date = js_sys::Date::new(&at_ms.into());
    (date.get_hours(), date.get_minutes())
}

/// The countdown block, shown while the ticket is `PRE_QUEUE` ("Opens in") or before joins
/// start ("Opens at 09:00 (in 12 min)", ticking with the clock).
#[component]
pub fn Countdown(lang: Lang, phase: RwSignal<Phase>) -> impl IntoView {
    let now = RwSignal::new(js_sys::Date::now());
    if let Ok(handle) = set_interval_with_handle(
        move || now.set(js_sys::Date::now()),
        Duration::from_millis(1000),
    ) {
        on_cleanup(move || handle.clear());
    }
    move || {
        phase.with(counted).map(|(at, until)| {
            let left = move || countdown_text(at - now.get());
            let (label, tag) = match until {
                Until::Draw(tag) => (None, tag),
                Until::Joins => (Some(local_time(at)), None),
            };
            let label = move || match label {
                Some(time) => opens_at_words(lang, time, at - now.get()),
                None => t(lang, Text::OpensIn).to_owned(),
            };
            view! {
                <section class="countdown" id="countdown" aria-labelledby="countdown-label">
                    <p id="countdown-label" class="countdown-label">{label}</p>
                    <p class="countdown-time" id="countdown-time" aria-live="off">{left}</p>
                    {tag.map(|tag| view! {
                        <p class="ticket-tag">
                            {t(lang, Text::TicketTag)}": "<code id="ticket-tag">{tag}</code>
                        </p>
                    })}
                </section>
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::countdown_text;

    #[test]
    fn the_countdown_reads_minutes_and_seconds_and_hours_when_needed() {
        assert_eq!(countdown_text(61_000.0), "1:01");
        assert_eq!(countdown_text(999.0), "0:01");
        assert_eq!(countdown_text(-5.0), "0:00");
        assert_eq!(countdown_text(3_600_000.0 + 62_000.0), "1:01:02");
    }
}
