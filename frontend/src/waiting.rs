//! The waiting view (`/`): room, position, people ahead, ETA, progress, connection state.

use leptos::prelude::*;
use vestibule_shared::{RoomState, TicketState};

use crate::{
    connection::{ActiveTransport, Connection, Phase},
    early,
    focus::focus_after_render,
    i18n::{eta_words, retrying_in, t, Lang, Text},
    page_params::{checkout_href, PageParams},
    queue::Queue,
    LanguageSwitch,
};

/// How far along the line the shopper is, in percent, from the first position seen.
///
/// 0 at the starting position, approaching 100 at position 1 (100 means admitted).
pub fn progress_percent(starting_position: u64, position: u64) -> u8 {
    if starting_position == 0 {
        return 0;
    }
    let position = position.min(starting_position);
    ((starting_position - position) * 100 / starting_position) as u8
}

/// A figure of the stats, or a dash while it is not known yet (the layout stays put).
fn figure(value: Option<u64>) -> String {
    value.map_or_else(|| "–".to_owned(), |v| v.to_string())
}

/// "Leave the line", asking first: a slip of the finger must not cost a place in a long line.
#[component]
fn LeaveLine(lang: Lang, on_leave: impl Fn() + Copy + Send + Sync + 'static) -> impl IntoView {
    let asking = RwSignal::new(false);
    view! {
        <Show
            when=move || asking.get()
            fallback=move || view! {
                <button type="button" class="link-button" id="leave-line"
                    on:click=move |_| {
                        asking.set(true);
                        focus_after_render("leave-question");
                    }>
                    {t(lang, Text::LeaveLine)}
                </button>
            }
        >
            <div class="confirm" role="group" aria-labelledby="leave-question">
                <p id="leave-question" tabindex="-1">{t(lang, Text::LeaveQuestion)}</p>
                <button type="button" class="button button-secondary" id="leave-confirm"
                    on:click=move |_| on_leave()>
                    {t(lang, Text::LeaveConfirm)}
                </button>
                <button type="button" class="button" id="leave-cancel"
                    on:click=move |_| {
                        asking.set(false);
                        focus_after_render("leave-line");
                    }>
                    {t(lang, Text::StayInLine)}
                </button>
            </div>
        </Show>
    }
}

/// The status headline and explanation for a phase.
fn headline(phase: &Phase) -> (Text, Text) {
    match phase {
        Phase::Joining => (Text::Joining, Text::JoiningDetail),
        Phase::RoomNotFound => (Text::RoomNotFound, Text::RoomNotFoundDetail),
        Phase::Failed => (Text::Failed, Text::FailedDetail),
        Phase::Ticket(s) => match (s.status, s.room_state) {
            (TicketState::Waiting, RoomState::Open) => (Text::InLine, Text::InLineDetail),
            (TicketState::Waiting, RoomState::Paused) => (Text::Paused, Text::PausedDetail),
            (TicketState::TokenIssued, _) => (Text::YourTurn, Text::YourTurnDetail),
            (TicketState::Completed, _) => (Text::Completed, Text::CompletedDetail),
            (TicketState::Expired, _) => (Text::Expired, Text::ExpiredDetail),
            (TicketState::Left, _) => (Text::Left, Text::LeftDetail),
        },
    }
}

/// What the status section offers to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NextStep {
    None,
    Leave,
    Checkout(String),
    JoinAgain,
    Reload,
}

/// The waiting view of the room named in the URL.
#[component]
pub fn WaitingView(params: PageParams) -> impl IntoView {
    let lang: Lang = params.lang;
    let queue = Queue::start(&params);
    let state = queue.view();
    let queue = StoredValue::new_local(queue);
    let phase = state.phase;
    let connection = state.connection;
    let transport = state.transport;
    let starting = state.starting_position;

    let waiting_position = move || {
        phase.with(|p| match p {
            Phase::Ticket(s) if s.status == TicketState::Waiting => s.position,
            _ => None,
        })
    };
    let has_position = move || waiting_position().is_some();
    // A user timing (Lighthouse, DevTools) of when the place is first on screen.
    // The place `index.html` showed before the page ran was marked there; it goes with the
    // first answer (the same one), so the view replaces it without showing "Joining" again.
    let joining = move || phase.with(|p| *p == Phase::Joining);
    Effect::new(move |marked: Option<bool>| {
        if marked == Some(true) || joining() {
            return marked == Some(true);
        }
        let shown_early = early::remove_early_place();
        let shown = has_position();
        if shown && !shown_early {
            if let Some(performance) = window().performance() {
                let _ = performance.mark("vestibule:place-on-screen");
            }
        }
        shown || shown_early
    });
    let data_status = move || {
        phase.with(|p| match p {
            Phase::Ticket(s) => s.status.as_str(),
            _ => "",
        })
    };
    let data_room_state = move || {
        phase.with(|p| match p {
            Phase::Ticket(s) => match s.room_state {
                RoomState::Open => "OPEN",
                RoomState::Paused => "PAUSED",
            },
            Phase::RoomNotFound => "NOT_FOUND",
            Phase::Joining | Phase::Failed => "",
        })
    };
    let eta_seconds = move || {
        phase.with(|p| match p {
            Phase::Ticket(s) if s.status == TicketState::Waiting => s.eta_seconds,
            _ => None,
        })
    };
    let eta_text = move || {
        phase.with(|p| match p {
            Phase::Ticket(s) if s.status == TicketState::Waiting => {
                match (s.room_state, s.eta_seconds) {
                    (RoomState::Paused, _) => t(lang, Text::EtaPaused).to_owned(),
                    (RoomState::Open, Some(secs)) => eta_words(lang, secs),
                    (RoomState::Open, None) => t(lang, Text::EtaUnknown).to_owned(),
                }
            }
            _ => figure(None),
        })
    };
    let ticket_state = move || {
        phase.with(|p| match p {
            Phase::Ticket(s) => Some(s.status),
            _ => None,
        })
    };
    let admitted = move || {
        matches!(
            ticket_state(),
            Some(TicketState::TokenIssued | TicketState::Completed)
        )
    };
    let progress = move || {
        if admitted() {
            return 100;
        }
        match (starting.get(), waiting_position()) {
            (Some(start), Some(position)) => progress_percent(start, position),
            _ => 0,
        }
    };
    // The bar means something while waiting and once admitted; not for an ended or unknown place.
    let show_progress = move || admitted() || ticket_state() == Some(TicketState::Waiting);
    let paused = move || {
        phase.with(|p| match p {
            Phase::Ticket(s) => {
                s.status == TicketState::Waiting && s.room_state == RoomState::Paused
            }
            _ => false,
        })
    };

    let room_name = params.room.clone();
    let room_for_links = params.room.clone();
    let lang_in_links = params.lang_from_url.then_some(lang);
    let next_step = move || {
        phase.with(|p| match p {
            Phase::Ticket(s) => match s.status {
                TicketState::TokenIssued => NextStep::Checkout(checkout_href(
                    &room_for_links,
                    lang_in_links,
                    s.checkout_url.as_deref(),
                )),
                TicketState::Completed | TicketState::Expired | TicketState::Left => {
                    NextStep::JoinAgain
                }
                TicketState::Waiting => NextStep::Leave,
            },
            Phase::Failed => NextStep::Reload,
            Phase::Joining | Phase::RoomNotFound => NextStep::None,
        })
    };
    let next_step_view = move || match next_step() {
        NextStep::None => ().into_any(),
        NextStep::Leave => view! {
            <LeaveLine lang=lang on_leave=move || {
                queue.with_value(|q| q.leave());
                focus_after_render("status");
            } />
        }
        .into_any(),
        NextStep::Checkout(href) => view! {
            <a class="button" href=href>{t(lang, Text::ContinueToCheckout)}</a>
        }
        .into_any(),
        NextStep::JoinAgain => view! {
            <button type="button" class="button" id="join-again"
                on:click=move |_| {
                    queue.with_value(|q| q.join_again());
                    focus_after_render("status");
                }>
                {t(lang, Text::JoinAgain)}
            </button>
        }
        .into_any(),
        NextStep::Reload => view! {
            <button type="button" class="button"
                on:click=move |_| { let _ = window().location().reload(); }>
                {t(lang, Text::TryAgain)}
            </button>
        }
        .into_any(),
    };

    let connection_text = move || match connection.get() {
        Connection::Connecting => t(lang, Text::ConnConnecting).to_owned(),
        Connection::Live => match transport.get() {
            ActiveTransport::Sse => t(lang, Text::ConnLiveSse).to_owned(),
            ActiveTransport::Poll => t(lang, Text::ConnLivePoll).to_owned(),
        },
        Connection::Hidden => t(lang, Text::ConnHidden).to_owned(),
        Connection::Retrying { in_secs } => retrying_in(lang, in_secs),
        Connection::Reconnecting => t(lang, Text::ConnReconnecting).to_owned(),
        Connection::Offline => t(lang, Text::ConnOffline).to_owned(),
        Connection::Stopped => t(lang, Text::ConnStopped).to_owned(),
    };
    let lost = move || connection.get().is_lost();
    let can_retry_now = move || {
        matches!(
            connection.get(),
            Connection::Retrying { .. } | Connection::Offline
        )
    };

    view! {
        <main class="card" aria-labelledby="room-name">
            <header class="card-header">
                <p class="eyebrow">{t(lang, Text::WaitingRoom)}</p>
                <h1 id="room-name">{room_name}</h1>
            </header>

            <section
                id="status"
                tabindex="-1"
                class="status"
                class:status-paused=paused
                data-status=data_status
                data-room-state=data_room_state
            >
                <h2 class="headline">{move || t(lang, phase.with(headline).0)}</h2>
                <p class="detail">{move || t(lang, phase.with(headline).1)}</p>
                // Holds the line of "Leave the line" while joining, so nothing moves when it comes.
                <div class="next-step">{next_step_view}</div>
            </section>

            // Shown from the start with placeholders, so the first answer moves nothing.
            <dl class="stats" class:stale=lost hidden=move || !(has_position() || joining())>
                <div class="stat stat-position">
                    <dt>{t(lang, Text::Position)}</dt>
                    <dd id="position">{move || figure(waiting_position())}</dd>
                </div>
                <div class="stat">
                    <dt>{t(lang, Text::Ahead)}</dt>
                    <dd id="ahead">
                        {move || figure(waiting_position().map(|p| p.saturating_sub(1)))}
                    </dd>
                </div>
                <div class="stat">
                    <dt>{t(lang, Text::Eta)}</dt>
                    <dd id="eta" data-seconds=move || eta_seconds().map(|s| s.to_string())>
                        {eta_text}
                    </dd>
                </div>
            </dl>

            <div
                id="progress"
                class="progress"
                role="progressbar"
                hidden=move || !(show_progress() || joining())
                aria-label=t(lang, Text::Progress)
                aria-valuemin="0"
                aria-valuemax="100"
                aria-valuenow=move || progress().to_string()
            >
                <div class="progress-fill" style:width=move || format!("{}%", progress())></div>
            </div>

            <p
                id="connection"
                tabindex="-1"
                class="connection"
                data-transport=move || transport.get().as_str()
                data-state=move || connection.get().as_str()
            >
                <span class="dot" aria-hidden="true"></span>
                <span class="connection-text">{connection_text}</span>
                <Show when=can_retry_now>
                    <button type="button" class="link-button" id="retry-now"
                        on:click=move |_| {
                            queue.with_value(|q| q.retry_now());
                            // The button goes away: the connection line says what happens next.
                            focus_after_render("connection");
                        }>
                        {t(lang, Text::RetryNow)}
                    </button>
                </Show>
            </p>

            <div
                id="announcer"
                class="visually-hidden"
                role="status"
                aria-live="polite"
                aria-atomic="true"
            >
                {move || state.announcement.get()}
            </div>
        </main>
        <LanguageSwitch params=params />
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_starts_at_zero_and_grows_as_the_line_moves() {
        assert_eq!(progress_percent(200, 200), 0);
        assert_eq!(progress_percent(200, 100), 50);
        assert_eq!(progress_percent(200, 1), 99);
    }

    #[test]
    fn progress_is_clamped_when_the_position_is_above_the_start() {
        assert_eq!(progress_percent(10, 15), 0);
        assert_eq!(progress_percent(0, 5), 0);
        assert_eq!(progress_percent(1, 1), 0);
    }
}
