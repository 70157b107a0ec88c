//! The waiting view's figures: place, people ahead and the ETA in words.

use leptos::prelude::*;
use vestibule_shared::{RoomState, TicketState};

use crate::{
    connection::{Connection, Phase},
    i18n::{eta_range_words, reason_words, t, Lang, Text},
};

/// A figure of the stats, or a dash while it is not known yet (the layout stays put).
pub fn figure(value: Option<u64>) -> String {
    value.map_or_else(|| "–".to_owned(), |v| v.to_string())
}

/// The ETA while waiting: "paused", a duration in words, or "calculating…"; a dash otherwise.
fn eta_text(lang: Lang, phase: &Phase) -> String {
    match phase {
        Phase::Ticket(s) if s.status == TicketState::Waiting => match (s.room_state, s.eta_seconds)
        {
            (RoomState::Paused, _) => t(lang, Text::EtaPaused).to_owned(),
            (_, Some(secs)) => eta_range_words(lang, secs, s.eta_seconds_high.unwrap_or(secs)),
            (_, None) => t(lang, Text::EtaUnknown).to_owned(),
        },
        _ => figure(None),
    }
}

/// The ETA in seconds while waiting (`#eta[data-seconds]`).
fn eta_seconds(phase: &Phase) -> Option<u64> {
    match phase {
        Phase::Ticket(s) if s.status == TicketState::Waiting => s.eta_seconds,
        _ => None,
    }
}

/// Why the wait is longer than the rate alone makes it, in words, while waiting in an open
/// room (the paused state has its own words); empty otherwise.
fn reason_text(lang: Lang, phase: &Phase) -> Option<&'static str> {
    match phase {
        Phase::Ticket(s) if s.status == TicketState::Waiting && s.room_state == RoomState::Open => {
            s.reason.and_then(|reason| reason_words(lang, reason))
        }
        _ => None,
    }
}

/// Whether the room admits in random order (`queueingMethod: "random"`): the place can move.
fn random_order(phase: &Phase) -> bool {
    matches!(phase, Phase::Ticket(s) if s.status == TicketState::Waiting
        && s.queueing_method.is_some_and(|method| method.is_random()))
}

/// Whether the shopper waits behind more people than units left (`beyondStock`).
fn beyond_stock(phase: &Phase) -> bool {
    matches!(phase, Phase::Ticket(s) if s.status == TicketState::Waiting && s.beyond_stock)
}

/// Place, people ahead and ETA (a range), and below them why the wait grew. Shown from the start with placeholders, so the first answer
/// moves nothing; greyed (`stale`) while the link is lost.
#[component]
pub fn Stats(
    lang: Lang,
    phase: RwSignal<Phase>,
    connection: RwSignal<Connection>,
    joining: Signal<bool>,
) -> impl IntoView {
    let position = move || phase.with(Phase::waiting_position);
    let eta_seconds = move || phase.with(eta_seconds);
    let eta_seconds_high = move || {
        phase.with(|p| match p {
            Phase::Ticket(s) if s.status == TicketState::Waiting => s.eta_seconds_high,
            _ => None,
        })
    };
    view! {
        <dl
            class="stats"
            class:stale=super::shared(move || connection.get().is_lost())
            hidden=super::shared(move || !(position().is_some() || joining.get()))
        >
            <div class="stat stat-position">
                <dt>{t(lang, Text::Position)}</dt>
                <dd id="position">{super::shared(move || figure(position()))}</dd>
            </div>
            <div class="stat">
                <dt>{t(lang, Text::Ahead)}</dt>
                <dd id="ahead">{super::shared(move || figure(position().map(|p| p.saturating_sub(1))))}</dd>
            </div>
            <div class="stat">
                <dt>{t(lang, Text::Eta)}</dt>
                <dd
                    id="eta"
                    data-seconds=super::shared(move || eta_seconds().map(|s| s.to_string()))
                    data-seconds-high=super::shared(move || eta_seconds_high().map(|s| s.to_string()))
                >
                    {super::shared(move || phase.with(|p| eta_text(lang, p)))}
                </dd>
            </div>
        </dl>
        <p id="eta-reason" class="eta-reason" hidden=super::shared(move || phase.with(|p| reason_text(lang, p)).is_none())>
            {super::shared(move || phase.with(|p| reason_text(lang, p)).unwrap_or_default())}
        </p>
        <p id="random-order" class="eta-reason" hidden=super::shared(move || !phase.with(random_order))>
            {t(lang, Text::RandomOrder)}
        </p>
        <p id="beyond-stock" class="eta-reason" hidden=super::shared(move || !phase.with(beyond_stock))>
            {t(lang, Text::BeyondStock)}
        </p>
    }
}
