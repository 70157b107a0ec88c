//! Vestibule's waiting-room page: Leptos CSR, built by trunk from the root `index.html`.
//!
//! - `main`: picks the view by path: `/checkout` is the demo checkout, anything else waits.
//! - [`page_params`]: the query parameters `room`, `lang` and `transport`.
//! - [`i18n`]: every visible string in English and Korean, and the ETA in words.
//! - [`storage`]: ticket id, idempotency key, starting position and entry token per room.
//! - [`api`]: the JSON API v1 calls and their errors.
//! - [`early`]: the first answer, asked for by `index.html` while the WASM downloads.
//! - [`backoff`]: exponential back-off with jitter for a lost connection.
//! - [`announce`]: what the screen-reader live region says about the ticket, and when.
//! - [`connection`]: the signals the waiting view renders (phase, link state, countdown).
//! - [`sse`]: the ticket's event stream, with a watchdog for a silent (hung) stream.
//! - [`queue`]: the ticket life cycle: join or resume, then SSE or adaptive polling.
//! - [`focus`]: moving keyboard focus to the result of an action.
//! - [`waiting`]: the waiting view.
//! - [`order`]: placing the order exactly once: one idempotency key, retries, the receipt.
//! - [`checkout`]: the demo checkout view.

mod announce;
mod api;
mod backoff;
mod checkout;
mod connection;
mod early;
mod focus;
mod i18n;
mod order;
mod page_params;
mod queue;
mod sse;
mod storage;
mod waiting;

use leptos::prelude::*;

use crate::{
    checkout::CheckoutView,
    i18n::{t, Text},
    page_params::{apply_document_lang, PageParams},
    waiting::WaitingView,
};

/// A link to this page in the other language.
#[component]
fn LanguageSwitch(params: PageParams) -> impl IntoView {
    let lang = params.lang;
    let other = lang.other();
    view! {
        <footer class="footer">
            <nav aria-label=t(lang, Text::SwitchLanguage)>
                <a href=params.href_with_lang(other) hreflang=other.code() lang=other.code()>
                    {other.native_name()}
                </a>
            </nav>
        </footer>
    }
}

fn main() {
    let params = PageParams::from_location();
    let path = window().location().pathname().unwrap_or_default();
    let is_checkout = path.trim_end_matches('/').ends_with("/checkout");
    let title = if is_checkout {
        Text::Checkout
    } else {
        Text::WaitingRoom
    };
    apply_document_lang(params.lang, t(params.lang, title));
    if is_checkout {
        mount_to_body(move || view! { <CheckoutView params=params /> });
    } else {
        mount_to_body(move || view! { <WaitingView params=params /> });
    }
}
