//! The waiting view (`{base}`): room, position, people ahead, ETA, progress, connection state.
//!
//! One small component per part, each given only the signals it renders:
//! - [`status`]: the headline, its explanation and what to do next (leave, join again,
//!   continue, gate mode's hand-off with "Try again");
//! - [`stats`]: place, people ahead and ETA;
//! - [`progress`]: the progress bar from the first place seen;
//! - [`connection_line`]: the state of the link to the server and "Retry now";
//! - [`message`]: the room's message to waiters, above the place;
//! - [`announcer`]: the polite live region.

mod announcer;
mod connection_line;
mod countdown;
mod message;
mod progress;
mod stats;
mod status;

use leptos::prelude::*;

use crate::{
    connection::Phase,
    early,
    embed::Host,
    i18n::{t, Text},
    language_switch::LanguageSwitch,
    page_params::PageParams,
    queue::Queue,
};
use announcer::Announcer;
use connection_line::ConnectionLine;
use countdown::Countdown;
use message::WaiterMessage;
use progress::ProgressBar;
use stats::Stats;
use status::StatusSection;

/// One type for the view's reactive closures of one output type: tachys' render code is then
/// instantiated once per output type, not once per closure (a smaller page).
pub(crate) fn shared<T: 'static>(
    f: impl FnMut() -> T + Send + 'static,
) -> std::sync::Arc<std::sync::Mutex<dyn FnMut() -> T + Send>> {
    std::sync::Arc::new(std::sync::Mutex::new(f))
}

/// Marks when the place is first on screen (a user timing for Lighthouse and DevTools), and
/// removes the place `index.html` showed before the page ran: that place was marked there and
/// goes with the first answer (the same one), so the view replaces it without showing "Joining"
/// again.
fn mark_place_on_screen(phase: RwSignal<Phase>) {
    Effect::new(move |marked: Option<bool>| {
        if marked == Some(true) || phase.with(|p| *p == Phase::Joining) {
            return marked == Some(true);
        }
        let shown_early = early::remove_early_place();
        let shown = phase.with(Phase::waiting_position).is_some();
        if shown && !shown_early {
            if let Some(performance) = window().performance() {
                let _ = performance.mark("vestibule:place-on-screen");
            }
        }
        shown || shown_early
    });
}

/// The waiting view of the room named in the URL.
#[component]
pub fn WaitingView(params: PageParams) -> impl IntoView {
    let lang = params.lang;
    let queue = Queue::start(&params);
    crate::heartbeat::install(&queue, &params.room);
    let state = queue.view();
    let exit = StoredValue::new_local(queue.exit());
    let queue = StoredValue::new_local(queue);
    let phase = state.phase;
    let checking = state.checking;
    // Memoised as `<Show>` does, without its fallback view: a smaller page.
    let checking_shown = ArcMemo::new(move |_| checking.get());
    let joining = Signal::derive(move || phase.with(|p| *p == Phase::Joining));
    mark_place_on_screen(phase);
    // The room's name for people in the page's language once an answer named it, else the slug:
    // the heading (which labels the `main` landmark) and, on the page's own tab or frame, the
    // document's title.
    let slug = params.room.clone();
    let display_name = state.display_name;
    let room_name = move || display_name.get().unwrap_or_else(|| slug.clone());
    if !matches!(params.host, Host::Widget(_)) {
        let name = room_name.clone();
        Effect::new(move |_| {
            document().set_title(&format!("{} · {}", name(), t(lang, Text::WaitingRoom)));
        });
    }
    // The storefront chooses the widget's language (`data-vestibule-lang`): no link away.
    let language_switch = (!matches!(params.host, Host::Widget(_)))
        .then(|| view! { <LanguageSwitch params=params.clone() /> });

    view! {
        <main class="card" aria-labelledby="room-name">
            <header class="card-header">
                <p class="eyebrow">{t(lang, Text::WaitingRoom)}</p>
                <h1 id="room-name">{room_name}</h1>
            </header>
            <StatusSection params=params.clone() phase=phase queue=queue exit=exit />
            <Countdown lang=lang phase=phase />
            {move || checking_shown.get().then(|| view! {
                <p id="checking-browser" class="checking" role="status">
                    {t(lang, Text::CheckingBrowser)}
                </p>
            })}
            <WaiterMessage lang=lang phase=phase />
            <Stats lang=lang phase=phase connection=state.connection joining=joining />
            <ProgressBar
                lang=lang
                phase=phase
                starting=state.starting_position
                joining=joining
            />
            <ConnectionLine
                lang=lang
                connection=state.connection
                transport=state.transport
                queue=queue
            />
            <Announcer text=state.announcement />
        </main>
        {language_switch}
    }
}
