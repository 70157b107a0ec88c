//! The waiting view's polite live region: what [`crate::announce`] decided to say.

use leptos::prelude::*;

/// Visually hidden; a screen reader reads each new `text` once, after what it is reading.
#[component]
pub fn Announcer(text: RwSignal<String>) -> impl IntoView {
    view! {
        <div
            id="announcer"
            class="visually-hidden"
            role="status"
            aria-live="polite"
            aria-atomic="true"
        >
            {super::shared(move || text.get())}
        </div>
    }
}
