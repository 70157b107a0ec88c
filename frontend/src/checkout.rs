//! The demo checkout (`{base}checkout?room=…`): places one order with the entry token.
//!
//! The receipt is kept per room (see [`crate::storage`]), so a reload or a second click shows
//! the same order instead of a new attempt; [`crate::order`] does the sending.

use std::time::Duration;

use leptos::{prelude::*, task::spawn_local};
use vestibule_shared::{is_valid_room_slug, TicketState};
use wasm_bindgen::JsValue;

use crate::{
    api,
    i18n::{t, valid_until, Lang, Text},
    language_switch::LanguageSwitch,
    order::{Order, Outcome},
    page_params::PageParams,
    sale_text::{sale_text, SaleText},
    storage::RoomMemory,
};

/// A live region speaks only of changes: it is filled this long after the page settled, so a
/// screen reader announces where the shopper has arrived.
const OPENING_ANNOUNCEMENT_DELAY: Duration = Duration::from_millis(600);

/// The entry token's expiry as a local clock time, e.g. `"09:05:00"` / `"오전 9:05:00"`.
fn local_time(lang: Lang, rfc3339: &str) -> Option<String> {
    let date = js_sys::Date::new(&JsValue::from_str(rfc3339));
    if date.get_time().is_nan() {
        return None;
    }
    Some(String::from(date.to_locale_time_string(lang.code())))
}

/// The checkout view for the room named in the URL.
#[component]
pub fn CheckoutView(params: PageParams) -> impl IntoView {
    let lang = params.lang;
    let room = params.room.clone();
    let memory = RoomMemory::new(&room);
    let stored = memory.entry_token();
    let token = RwSignal::new(stored.as_ref().map(|(token, _)| token.clone()));
    let expires_at = RwSignal::new(stored.and_then(|(_, at)| at));
    let token_checked = RwSignal::new(token.get_untracked().is_some());
    let outcome = RwSignal::new(
        memory
            .receipt(token.get_untracked().as_deref())
            .map_or(Outcome::Idle, Outcome::Ordered),
    );
    let announcement = RwSignal::new(String::new());

    if !token_checked.get_untracked() {
        // Opened in another tab than the one that waited: the ticket (kept per room) still
        // knows its entry token while it is TOKEN_ISSUED.
        let (room, memory) = (room.clone(), memory.clone());
        spawn_local(async move {
            if let Some(ticket_id) = memory.ticket_id().filter(|_| is_valid_room_slug(&room)) {
                if let Ok(status) = api::ticket(&room, &ticket_id).await {
                    if let (TicketState::TokenIssued, Some(found)) =
                        (status.status, status.entry_token)
                    {
                        memory.set_entry_token(&found, status.token_expires_at.as_deref());
                        // A receipt of an earlier admission does not answer for this one.
                        if memory.receipt(Some(&found)).is_none() {
                            outcome.set(Outcome::Idle);
                        }
                        token.set(Some(found));
                        expires_at.set(status.token_expires_at);
                    }
                }
            }
            token_checked.set(true);
        });
    }

    let order_room = room.clone();
    let order_memory = memory.clone();
    let place_order = move |_| {
        Order::place(
            &order_room,
            token.get_untracked(),
            order_memory.clone(),
            outcome,
        );
    };

    let busy = move || outcome.with(|o| matches!(o, Outcome::Sending | Outcome::Retrying));
    let ordered = move || outcome.with(|o| matches!(o, Outcome::Ordered(_)));
    let no_token = move || token_checked.get() && token.with(Option::is_none) && !ordered();
    // Memoised as `<Show>` does, without its fallback view: a smaller page.
    let no_token_shown = ArcMemo::new(move |_| no_token());
    let valid_until_text = move || {
        expires_at
            .get()
            .and_then(|at| local_time(lang, &at))
            .map(|time| valid_until(lang, &time))
    };

    Effect::new(move |_| {
        if !token_checked.get() {
            return;
        }
        set_timeout(
            move || {
                let text = match outcome.get_untracked() {
                    Outcome::Ordered(receipt) => format!(
                        "{} {}: {}",
                        t(lang, Text::Ordered),
                        t(lang, Text::OrderNumber),
                        receipt.order_id
                    ),
                    _ if no_token() => {
                        format!("{} {}", t(lang, Text::NoTokenTitle), t(lang, Text::NoToken))
                    }
                    _ => [
                        t(lang, Text::CheckoutTitle).to_owned(),
                        t(lang, Text::CheckoutIntro).to_owned(),
                        valid_until_text().unwrap_or_default(),
                    ]
                    .join(" "),
                };
                announcement.set(text);
            },
            OPENING_ANNOUNCEMENT_DELAY,
        );
    });

    let waiting_href = params.waiting_href();
    let waiting_href_result = waiting_href.clone();
    // One view with optional parts rather than one `AnyView` per outcome: the same elements in
    // the same order, for less WASM.
    let result_view = move || {
        let back = waiting_href_result.clone();
        let (title, detail, receipt, back, code) = match outcome.get() {
            Outcome::Idle | Outcome::Sending => return None,
            Outcome::Retrying => (t(lang, Text::OrderRetrying), None, None, None, None),
            Outcome::Ordered(receipt) => (t(lang, Text::Ordered), None, Some(receipt), None, None),
            Outcome::Expired => (t(lang, Text::OrderExpired), None, None, Some(back), None),
            Outcome::Used => (t(lang, Text::OrderUsed), None, None, None, None),
            Outcome::Error { code, .. }
                if code.as_deref() == Some(vestibule_shared::error_code::SOLD_OUT) =>
            {
                // No unit left: the order did not go through (the token was not used up).
                let detail = sale_text(lang, SaleText::SoldOutDetail);
                (
                    sale_text(lang, SaleText::SoldOut),
                    Some(detail),
                    None,
                    None,
                    None,
                )
            }
            Outcome::Error { code, network } => {
                let message = if network {
                    Text::OrderNetwork
                } else {
                    Text::OrderFailed
                };
                (t(lang, message), None, None, None, code)
            }
        };
        Some(view! {
            <p class="result-title">{title}</p>
            {detail.map(|detail| view! { <p>{detail}</p> })}
            {receipt.map(|receipt| view! {
                <p>
                    {t(lang, Text::OrderNumber)} ": "
                    <strong id="order-id">{receipt.order_id}</strong>
                </p>
            })}
            {back.map(|back| view! {
                <a class="button button-secondary" href=back>{t(lang, Text::BackToLine)}</a>
            })}
            {code.map(|code| view! { <p class="error-code"><code>{code}</code></p> })}
        })
    };
    let title = move || {
        t(
            lang,
            if ordered() {
                Text::Completed
            } else if no_token() {
                Text::NoTokenTitle
            } else {
                Text::CheckoutTitle
            },
        )
    };
    let button_text = move || {
        t(
            lang,
            if busy() {
                Text::PlacingOrder
            } else if ordered() {
                Text::OrderDone
            } else {
                Text::PlaceOrder
            },
        )
    };

    view! {
        <main class="card" aria-labelledby="checkout-title">
            <header class="card-header">
                <p class="eyebrow">
                    {t(lang, Text::Checkout)} " · " <span id="room-name">{room}</span>
                </p>
                <h1 id="checkout-title">{title}</h1>
                <p class="detail">
                    {crate::waiting::shared(move || t(lang, if ordered() { Text::CompletedDetail } else { Text::CheckoutIntro }))}
                </p>
            </header>

            <section class="product">
                <p class="product-name">{t(lang, Text::Product)}</p>
                <p class="product-quantity">{t(lang, Text::Quantity)}</p>
                {move || valid_until_text().filter(|_| !ordered()).map(|text| view! {
                    <p class="detail" id="token-expiry">{text}</p>
                })}
            </section>

            {move || no_token_shown.get().then(|| view! {
                <p class="notice" id="no-token">
                    {t(lang, Text::NoToken)} " "
                    <a href=waiting_href.clone()>{t(lang, Text::BackToLine)}</a>
                </p>
            })}

            // Without a token an order can only be refused: offer the way back instead.
            // Disabled while an order is in flight and once it is placed: one order per token.
            <button
                type="button"
                id="place-order"
                hidden=no_token
                class="button button-wide"
                on:click=place_order
                disabled=crate::waiting::shared(move || busy() || ordered())
                aria-busy=crate::waiting::shared(move || busy().to_string())
            >
                {button_text}
            </button>

            // Not a live region: focus moves here when an answer arrives, which reads it once.
            <div
                id="checkout-result"
                class="result"
                tabindex="-1"
                data-outcome=crate::waiting::shared(move || outcome.with(Outcome::data_outcome))
                data-error=move || outcome.with(|o| match o {
                    Outcome::Error { code, .. } => code.clone(),
                    _ => None,
                })
            >
                {result_view}
            </div>

            <div id="checkout-announcer" class="visually-hidden" role="status" aria-live="polite">
                {crate::waiting::shared(move || announcement.get())}
            </div>
        </main>
        <LanguageSwitch params=params />
    }
}
