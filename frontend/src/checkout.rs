//! The demo checkout (`/checkout?room=…`): places one order with the entry token.

use leptos::{prelude::*, task::spawn_local};
use vestibule_shared::{error_code, is_valid_room_slug, OrderReceipt, OrderRequest, TicketState};
use wasm_bindgen::JsValue;

use crate::{
    api::{self, ApiError},
    i18n::{t, valid_until, Lang, Text},
    page_params::PageParams,
    storage::RoomMemory,
    LanguageSwitch,
};

/// The product the demo checkout orders.
const DEMO_SKU: &str = "demo-sneaker";

/// The answer to the last order attempt, shown in `#checkout-result[data-outcome]`.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// No order sent yet.
    Idle,
    /// An order is in flight.
    Sending,
    /// 201: the order was placed.
    Ordered(OrderReceipt),
    /// 403 `entry_token_expired`.
    Expired,
    /// 403 `entry_token_used`.
    Used,
    /// Anything else; the error code when the server sent one.
    Error { code: Option<String>, network: bool },
}

impl Outcome {
    fn from_result(result: Result<OrderReceipt, ApiError>) -> Self {
        match result {
            Ok(receipt) => Self::Ordered(receipt),
            Err(e) if e.code() == Some(error_code::TOKEN_EXPIRED) => Self::Expired,
            Err(e) if e.code() == Some(error_code::TOKEN_USED) => Self::Used,
            Err(e) => Self::Error {
                code: e.code().map(str::to_owned),
                network: matches!(e, ApiError::Network),
            },
        }
    }

    fn data_outcome(&self) -> Option<&'static str> {
        match self {
            Self::Idle | Self::Sending => None,
            Self::Ordered(_) => Some("ordered"),
            Self::Expired => Some("expired"),
            Self::Used => Some("used"),
            Self::Error { .. } => Some("error"),
        }
    }
}

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
    let outcome = RwSignal::new(Outcome::Idle);

    if !token_checked.get_untracked() {
        // Opened in another tab than the one that waited: the ticket (kept per room) still
        // knows its entry token while it is TOKEN_ISSUED.
        let room = room.clone();
        spawn_local(async move {
            if let Some(ticket_id) = memory.ticket_id().filter(|_| is_valid_room_slug(&room)) {
                if let Ok(status) = api::ticket(&room, &ticket_id).await {
                    if let (TicketState::TokenIssued, Some(found)) =
                        (status.status, status.entry_token)
                    {
                        memory.set_entry_token(&found, status.token_expires_at.as_deref());
                        token.set(Some(found));
                        expires_at.set(status.token_expires_at);
                    }
                }
            }
            token_checked.set(true);
        });
    }

    let order_room = room.clone();
    let place_order = move |_| {
        if outcome.get_untracked() == Outcome::Sending {
            return;
        }
        outcome.set(Outcome::Sending);
        let room = order_room.clone();
        let entry_token = token.get_untracked();
        spawn_local(async move {
            let order = OrderRequest {
                sku: Some(DEMO_SKU.to_owned()),
                quantity: Some(1),
            };
            let result = api::place_order(&room, entry_token.as_deref(), &order).await;
            outcome.set(Outcome::from_result(result));
        });
    };

    let sending = move || outcome.with(|o| *o == Outcome::Sending);
    let no_token = move || token_checked.get() && token.with(Option::is_none);
    let waiting_href = params.waiting_href();
    let waiting_href_result = waiting_href.clone();
    let result_view = move || {
        let back = waiting_href_result.clone();
        match outcome.get() {
            Outcome::Idle | Outcome::Sending => ().into_any(),
            Outcome::Ordered(receipt) => view! {
                <p class="result-title">{t(lang, Text::Ordered)}</p>
                <p>
                    {t(lang, Text::OrderNumber)} ": "
                    <strong id="order-id">{receipt.order_id}</strong>
                </p>
            }
            .into_any(),
            Outcome::Expired => view! {
                <p class="result-title">{t(lang, Text::OrderExpired)}</p>
                <a class="button button-secondary" href=back>{t(lang, Text::BackToLine)}</a>
            }
            .into_any(),
            Outcome::Used => view! {
                <p class="result-title">{t(lang, Text::OrderUsed)}</p>
            }
            .into_any(),
            Outcome::Error { code, network } => {
                let message = if network {
                    Text::OrderNetwork
                } else {
                    Text::OrderFailed
                };
                view! {
                    <p class="result-title">{t(lang, message)}</p>
                    {code.map(|code| view! { <p class="error-code"><code>{code}</code></p> })}
                }
                .into_any()
            }
        }
    };

    view! {
        <main class="card" aria-labelledby="checkout-title">
            <header class="card-header">
                <p class="eyebrow">
                    {t(lang, Text::Checkout)} " · " <span id="room-name">{room}</span>
                </p>
                <h1 id="checkout-title">
                    {move || t(lang, if no_token() { Text::NoTokenTitle } else { Text::CheckoutTitle })}
                </h1>
                <p class="detail">{t(lang, Text::CheckoutIntro)}</p>
            </header>

            <section class="product">
                <p class="product-name">{t(lang, Text::Product)}</p>
                <p class="product-quantity">{t(lang, Text::Quantity)}</p>
                {move || expires_at.get().and_then(|at| local_time(lang, &at)).map(|time| view! {
                    <p class="detail" id="token-expiry">{valid_until(lang, &time)}</p>
                })}
            </section>

            <Show when=no_token>
                <p class="notice" id="no-token">
                    {t(lang, Text::NoToken)} " "
                    <a href=waiting_href.clone()>{t(lang, Text::BackToLine)}</a>
                </p>
            </Show>

            // Without a token an order can only be refused: offer the way back instead.
            <button
                type="button"
                id="place-order"
                hidden=no_token
                class="button button-wide"
                on:click=place_order
                disabled=sending
                aria-busy=move || sending().to_string()
            >
                {move || t(lang, if sending() { Text::PlacingOrder } else { Text::PlaceOrder })}
            </button>

            <div
                id="checkout-result"
                class="result"
                role="status"
                aria-live="polite"
                data-outcome=move || outcome.with(Outcome::data_outcome)
                data-error=move || outcome.with(|o| match o {
                    Outcome::Error { code, .. } => code.clone(),
                    _ => None,
                })
            >
                {result_view}
            </div>
        </main>
        <LanguageSwitch params=params />
    }
}
