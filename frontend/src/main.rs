//! Vestibule's waiting-room page: Leptos CSR, built by trunk from the root `index.html`.
//!
//! - `main`: picks the view by the path relative to the page's base ([`urls`]): `checkout` is
//!   the demo checkout, anything else waits.
//! - [`urls`]: the base the page was loaded from (any mount prefix), the URLs built on it, and
//!   the same-origin rule of gate mode's `return`.
//! - [`page_params`]: the query parameters `room`, `lang`, `transport` and `return`.
//! - [`i18n`]: every visible string in English and Korean, and the ETA in words.
//! - [`storage`]: ticket id, idempotency key, starting position and entry token per room.
//! - [`api`]: the JSON API v1 calls and their errors.
//! - [`json`]: reading and writing the API's JSON (no serde in the WASM).
//! - [`early`]: the first answer, asked for by `index.html` while the WASM downloads.
//! - [`backoff`]: exponential back-off with jitter for a lost connection.
//! - [`announce`]: what the screen-reader live region says about the ticket, and when.
//! - [`connection`]: the signals the waiting view renders (phase, link state, countdown).
//! - [`sse`]: the ticket's event stream, with a watchdog for a silent (hung) stream.
//! - [`opening`]: before a room opens: when the page joins by itself, the opening in words.
//! - [`proof`]: a join's proof of work, solved in slices without freezing the page.
//! - [`queue`]: the ticket life cycle: join or resume, then SSE or adaptive polling.
//! - [`focus`]: moving keyboard focus to the result of an action.
//! - [`waiting`]: the waiting view, one component per part (status, stats, progress,
//!   connection, announcer).
//! - [`handoff`]: leaving once admitted: to checkout, or gate mode's session hand-off.
//! - [`language_switch`]: the link to the page in the other language.
//! - [`order`]: placing the order exactly once: one idempotency key, retries, the receipt.
//! - [`checkout`]: the demo checkout view.
//! - [`embed`]: telling a storefront that frames or mounts the page what happens.
//! - [`widget`]: the script widget: the waiting view mounted into a storefront's element.

mod announce;
mod api;
mod backoff;
mod checkout;
mod connection;
mod early;
mod embed;
mod focus;
mod handoff;
mod heartbeat;
mod i18n;
mod json;
mod language_switch;
mod opening;
mod order;
mod page_params;
mod proof;
mod queue;
mod sale_text;
mod sse;
mod storage;
mod urls;
mod waiting;
mod widget;

use leptos::prelude::*;

/// A small free-list allocator instead of the standard library's dlmalloc: about 7 KB less
/// WASM. The page allocates little and runs on one thread; the lock is uncontended.
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: lol_alloc::LockedAllocator<lol_alloc::FreeListAllocator> =
    lol_alloc::LockedAllocator::new(lol_alloc::FreeListAllocator::new());

use crate::{
    checkout::CheckoutView,
    i18n::{t, Text},
    page_params::{apply_document_lang, PageParams},
    urls::{view_of, View},
    waiting::WaitingView,
};

fn main() {
    if let Some(widget) = widget::WidgetSetup::from_window() {
        widget.mount_all();
        return;
    }
    let params = PageParams::from_location();
    let path = window().location().pathname().unwrap_or_default();
    let view = view_of(&path);
    let title = match view {
        View::Checkout => Text::Checkout,
        View::Waiting => Text::WaitingRoom,
    };
    apply_document_lang(params.lang, t(params.lang, title));
    match view {
        View::Checkout => mount_to_body(move || view! { <CheckoutView params=params /> }),
        View::Waiting => mount_to_body(move || view! { <WaitingView params=params /> }),
    }
}
