//! The room's message to waiters (issue 14), above the place: in the page's language, or in the
//! other one when the room wrote only that. A polite live region: a new message is read out
//! without interrupting.

use leptos::prelude::*;

use crate::connection::Phase;
use crate::i18n::Lang;

/// The message of the latest status in `lang` (the other language when that one is unset).
pub fn message_text(lang: Lang, phase: &Phase) -> Option<String> {
    let Phase::Ticket(status) = phase else {
        return None;
    };
    let (first, second) = match lang {
        Lang::En => (&status.message_en, &status.message_ko),
        Lang::Ko => (&status.message_ko, &status.message_en),
    };
    first.clone().or_else(|| second.clone())
}

/// The message to waiters, hidden when the room has none.
#[component]
pub fn WaiterMessage(lang: Lang, phase: RwSignal<Phase>) -> impl IntoView {
    let text = Memo::new(move |_| phase.with(|phase| message_text(lang, phase)));
    view! {
        <p
            id="waiter-message"
            class="waiter-message"
            aria-live="polite"
            hidden=move || text.with(Option::is_none)
        >
            {move || text.get().unwrap_or_default()}
        </p>
    }
}
