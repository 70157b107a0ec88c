//! The room's message to waiters, above the place: in the page's language, or in the
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
            hidden=super::shared(move || text.with(Option::is_none))
        >
            {super::shared(move || text.get().unwrap_or_default())}
        </p>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(en: Option<&str>, ko: Option<&str>) -> Phase {
        let mut status: vestibule_shared::TicketStatus =
            serde_json::from_value(serde_json::json!({
                "ticketId": "t", "room": "main", "status": "WAITING", "position": 3,
                "etaSeconds": 30, "nextPollAfterMs": 1000, "entryToken": null,
                "tokenExpiresAt": null, "checkoutUrl": null, "roomState": "OPEN"
            }))
            .expect("a TicketStatus");
        status.message_en = en.map(str::to_owned);
        status.message_ko = ko.map(str::to_owned);
        Phase::Ticket(status)
    }

    #[test]
    fn the_page_language_comes_first_and_the_other_stands_in() {
        let both = phase(Some("Sold out: 42"), Some("42 품절"));
        assert_eq!(
            message_text(Lang::En, &both).as_deref(),
            Some("Sold out: 42")
        );
        assert_eq!(message_text(Lang::Ko, &both).as_deref(), Some("42 품절"));
        let english = phase(Some("Sold out: 42"), None);
        assert_eq!(
            message_text(Lang::Ko, &english).as_deref(),
            Some("Sold out: 42")
        );
        assert_eq!(message_text(Lang::En, &phase(None, None)), None);
        assert_eq!(message_text(Lang::En, &Phase::Joining), None);
    }
}
