//! Vestibule's waiting-room page: Leptos CSR, built by trunk from the root `index.html`.
//!
//! - `main`: picks the view by path: `/checkout` is the demo checkout, anything else waits.
//! - [`page_params`]: the query parameters `room`, `lang` and `transport`.
//! - [`i18n`]: every visible string in English and Korean, and the ETA in words.
//! - [`storage`]: ticket id, idempotency key, starting position and entry token per room.
//! - [`api`]: the JSON API v1 calls and their errors.
//! - [`backoff`]: exponential back-off with jitter for a lost connection.
//! - [`announce`]: when the screen-reader live region speaks about the position.
//! - [`queue`]: the ticket life cycle: join or resume, then SSE or adaptive polling.
//! - [`waiting`]: the waiting view.
//! - [`checkout`]: the demo checkout view.

mod announce;
mod api;
mod backoff;
mod checkout;
mod i18n;
mod page_params;
mod queue;
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
