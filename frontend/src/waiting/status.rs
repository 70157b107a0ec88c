//! The waiting view's status section: the headline, its explanation and what to do next.

use std::rc::Rc;

use leptos::{either::Either, prelude::*};
use vestibule_shared::{RoomState, TicketState};

use crate::{
    connection::Phase,
    focus::focus_after_render,
    handoff::{Exit, HandoffState},
    i18n::{t, Lang, Text},
    page_params::{checkout_href, PageParams},
    queue::Queue,
    sale_text::{sale_text, sold_out_detail, SaleText},
};

/// The status headline and explanation for a phase, in `lang`.
fn headline(lang: Lang, phase: &Phase) -> (String, String) {
    let words = |(headline, detail): (Text, Text)| {
        (t(lang, headline).to_owned(), t(lang, detail).to_owned())
    };
    let sold_out = |message| {
        let headline = sale_text(lang, SaleText::SoldOut).to_owned();
        (headline, sold_out_detail(lang, message))
    };
    match phase {
        Phase::Joining => words((Text::Joining, Text::JoiningDetail)),
        Phase::RoomNotFound => words((Text::RoomNotFound, Text::RoomNotFoundDetail)),
        Phase::Failed => words((Text::Failed, Text::FailedDetail)),
        Phase::NotOpen { .. } => words((Text::NotOpen, Text::NotOpenDetail)),
        Phase::Refused(RoomState::SoldOut, message) => sold_out(message.as_ref()),
        Phase::Refused(..) => (
            sale_text(lang, SaleText::Closed).to_owned(),
            sale_text(lang, SaleText::ClosedDetail).to_owned(),
        ),
        Phase::Ticket(s) => match (s.status, s.room_state) {
            (TicketState::PreQueue, _) => words((Text::PreQueue, Text::PreQueueDetail)),
            (TicketState::Waiting, RoomState::Paused) => words((Text::Paused, Text::PausedDetail)),
            (TicketState::Waiting, _) => words((Text::InLine, Text::InLineDetail)),
            (TicketState::TokenIssued, _) => words((Text::YourTurn, Text::YourTurnDetail)),
            (TicketState::Completed, _) => words((Text::Completed, Text::CompletedDetail)),
            (TicketState::Expired, _) => words((Text::Expired, Text::ExpiredDetail)),
            (TicketState::Left, _) => words((Text::Left, Text::LeftDetail)),
            (TicketState::SoldOut, _) => sold_out(s.sold_out_message.as_ref()),
        },
    }
}

/// `#status[data-status]`: the ticket's state, e.g. `"WAITING"`; empty before an answer.
fn data_status(phase: &Phase) -> &'static str {
    phase.ticket_state().map_or("", TicketState::as_str)
}

/// `#status[data-room-state]`: the room's state (`OPEN`, `PAUSED`, `SOLD_OUT`, …), `NOT_OPEN`
/// (before joins start), `NOT_FOUND`, or empty.
fn data_room_state(phase: &Phase) -> &'static str {
    let name = |state| match state {
        RoomState::Open => "OPEN",
        RoomState::Paused => "PAUSED",
        RoomState::PreQueue => "PRE_QUEUE",
        RoomState::SoldOut => "SOLD_OUT",
        RoomState::Closed => "CLOSED",
    };
    match phase {
        Phase::Ticket(s) => name(s.room_state),
        Phase::Refused(state, _) => name(*state),
        Phase::NotOpen { .. } => "NOT_OPEN",
        Phase::RoomNotFound => "NOT_FOUND",
        Phase::Joining | Phase::Failed => "",
    }
}

/// What the status section offers to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NextStep {
    None,
    Leave,
    Checkout(String),
    /// Gate mode: the hand-off to the store ([`HandoffStep`]).
    HandOff,
    JoinAgain,
    Reload,
}

/// "Leave the line", asking first: a slip of the finger must not cost a place in a long line.
#[component]
fn LeaveLine(
    lang: Lang,
    on_leave: impl Fn(&web_sys::Event) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let asking = RwSignal::new(false);
    // Memoised as `<Show>` does, with an `Either` rather than its boxed fallback view: a
    // smaller page.
    let shown = ArcMemo::new(move |_| asking.get());
    move || {
        if shown.get() {
            Either::Left(view! {
                <div class="confirm" role="group" aria-labelledby="leave-question">
                    <p id="leave-question" tabindex="-1">{t(lang, Text::LeaveQuestion)}</p>
                    <button type="button" class="button button-secondary" id="leave-confirm"
                        on:click=move |ev| on_leave(&ev)>
                        {t(lang, Text::LeaveConfirm)}
                    </button>
                    <button type="button" class="button" id="leave-cancel"
                        on:click=move |ev| {
                            asking.set(false);
                            focus_after_render(&ev, "leave-line");
                        }>
                        {t(lang, Text::StayInLine)}
                    </button>
                </div>
            })
        } else {
            Either::Right(view! {
                <button type="button" class="link-button" id="leave-line"
                    on:click=move |ev| {
                        asking.set(true);
                        focus_after_render(&ev, "leave-question");
                    }>
                    {t(lang, Text::LeaveLine)}
                </button>
            })
        }
    }
}

/// Gate mode's hand-off (`#handoff[data-state]`): nothing while the token is on its way, the
/// link to `return` once the session is open (the page goes there by itself), or what went
/// wrong with "Try again" (`#handoff-retry`, focus then moves to the status).
#[component]
fn HandoffStep(lang: Lang, exit: StoredValue<Rc<Exit>, LocalStorage>) -> impl IntoView {
    let state = exit.with_value(|e| e.state);
    let target = exit.with_value(|e| e.return_to()).unwrap_or_default();
    // Optional parts rather than an `AnyView` per state (a smaller page).
    let step = move || {
        let current = state.get();
        let done = current == HandoffState::Done;
        let posting = matches!(current, HandoffState::Posting);
        let text = current.failure_text();
        let code = match current {
            HandoffState::Failed { code, .. } => code,
            _ => None,
        };
        // One button: "Continue to checkout" (`#handoff-continue`) posts the form again;
        // "Try again" (`#handoff-retry`), after what went wrong, retries.
        let (id, label) = if posting {
            ("handoff-continue", Text::ContinueToCheckout)
        } else {
            ("handoff-retry", Text::TryAgain)
        };
        view! {
            {done.then(|| view! {
                <a class="button" href=target.clone()>{t(lang, Text::ContinueToCheckout)}</a>
            })}
            {(posting || text.is_some()).then(|| view! {
                {text.map(|text| view! { <p class="notice" id="handoff-error">{t(lang, text)}</p> })}
                {code.map(|code| view! { <p class="error-code"><code>{code}</code></p> })}
                <button type="button" class="button" id=id
                    on:click=move |ev| {
                        if posting {
                            exit.with_value(|e| e.post());
                        } else {
                            exit.with_value(|e| e.retry());
                            focus_after_render(&ev, "status");
                        }
                    }>
                    {t(lang, label)}
                </button>
            })}
        }
    };
    view! { <div id="handoff" data-state=move || state.get().as_str()>{step}</div> }
}

/// The status section (`#status`, focus target after "Leave" and "Join again").
#[component]
pub fn StatusSection(
    params: PageParams,
    phase: RwSignal<Phase>,
    queue: StoredValue<Rc<Queue>, LocalStorage>,
    exit: StoredValue<Rc<Exit>, LocalStorage>,
) -> impl IntoView {
    let lang = params.lang;
    let lang_in_links = params.lang_from_url.then_some(lang);
    let gate = exit.with_value(|e| e.is_gate());
    let handoff = exit.with_value(|e| e.state);
    let next_step = move || {
        // A form hand-off (to a shop on another origin) shows its form, gate mode or not.
        let posting = matches!(handoff.get(), HandoffState::Posting);
        phase.with(|p| match p {
            Phase::Ticket(s) => match s.status {
                TicketState::TokenIssued if gate || posting => NextStep::HandOff,
                TicketState::TokenIssued => NextStep::Checkout(checkout_href(
                    &params.base,
                    &params.room,
                    lang_in_links,
                    s.checkout_url.as_deref(),
                )),
                TicketState::Completed | TicketState::Expired | TicketState::Left => {
                    NextStep::JoinAgain
                }
                TicketState::Waiting | TicketState::PreQueue => NextStep::Leave,
                // Nothing to join again: the room has nothing left to sell.
                TicketState::SoldOut => NextStep::None,
            },
            Phase::Failed => NextStep::Reload,
            Phase::Joining | Phase::RoomNotFound | Phase::Refused(..) | Phase::NotOpen { .. } => {
                NextStep::None
            }
        })
    };
    // Once the server says the place was kept (`placeKept`), the page says so until the wait ends.
    let kept = RwSignal::new(false);
    Effect::new(move |_| {
        if phase.with(|p| matches!(p, Phase::Ticket(s) if s.place_kept)) {
            kept.set(true);
        }
    });
    let show_kept = move || {
        kept.get()
            && phase.with(|p| {
                matches!(
                    p.ticket_state(),
                    Some(TicketState::Waiting | TicketState::TokenIssued)
                )
            })
    };
    // Optional parts rather than an `AnyView` per next step: the same elements, for less WASM.
    let next_step_view = move || {
        let step = next_step();
        let checkout = match &step {
            NextStep::Checkout(href) => Some(href.clone()),
            _ => None,
        };
        view! {
            {(step == NextStep::Leave).then(|| view! {
                <LeaveLine lang=lang on_leave=move |ev: &web_sys::Event| {
                    queue.with_value(|q| q.leave());
                    focus_after_render(ev, "status");
                } />
            })}
            {checkout.map(|href| view! {
                <a class="button" href=href>{t(lang, Text::ContinueToCheckout)}</a>
            })}
            {(step == NextStep::HandOff).then(|| view! { <HandoffStep lang=lang exit=exit /> })}
            {(step == NextStep::JoinAgain || step == NextStep::Reload).then(|| {
                // One button for both: "Join again" (`#join-again`) or "Try again" (reload).
                let join = step == NextStep::JoinAgain;
                view! {
                    <button type="button" class="button" id=join.then_some("join-again")
                        on:click=move |ev| {
                            if join {
                                queue.with_value(|q| q.join_again());
                                focus_after_render(&ev, "status");
                            } else {
                                let _ = window().location().reload();
                            }
                        }>
                        {t(lang, if join { Text::JoinAgain } else { Text::TryAgain })}
                    </button>
                }
            })}
        }
    };
    view! {
        <section
            id="status"
            tabindex="-1"
            class="status"
            class:status-paused=super::shared(move || phase.with(Phase::is_paused))
            data-status=super::shared(move || phase.with(data_status))
            data-room-state=super::shared(move || phase.with(data_room_state))
        >
            <h2 class="headline">{super::shared(move || phase.with(|p| headline(lang, p)).0)}</h2>
            <p class="detail">{super::shared(move || phase.with(|p| headline(lang, p)).1)}</p>
            <p id="place-kept" class="detail" hidden=super::shared(move || !show_kept())>
                {t(lang, Text::PlaceKept)}
            </p>
            // Holds the line of "Leave the line" while joining, so nothing moves when it comes.
            <div class="next-step">{next_step_view}</div>
        </section>
    }
}
