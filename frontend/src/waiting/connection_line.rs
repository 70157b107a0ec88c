//! The waiting view's connection line: what is really happening to the link, and "Retry now".

use std::rc::Rc;

use leptos::prelude::*;

use crate::{
    connection::{ActiveTransport, Connection},
    focus::focus_after_render,
    i18n::{retrying_in, t, Lang, Text},
    queue::Queue,
};

/// The words for the link's state, e.g. "Live updates" or "Retrying in 4 s".
fn connection_text(lang: Lang, connection: Connection, transport: ActiveTransport) -> String {
    match connection {
        Connection::Connecting => t(lang, Text::ConnConnecting).to_owned(),
        Connection::Live => match transport {
            ActiveTransport::Sse => t(lang, Text::ConnLiveSse).to_owned(),
            ActiveTransport::Poll => t(lang, Text::ConnLivePoll).to_owned(),
        },
        Connection::Hidden => t(lang, Text::ConnHidden).to_owned(),
        Connection::Retrying { in_secs } => retrying_in(lang, in_secs),
        Connection::Reconnecting => t(lang, Text::ConnReconnecting).to_owned(),
        Connection::Offline => t(lang, Text::ConnOffline).to_owned(),
        Connection::Stopped => t(lang, Text::ConnStopped).to_owned(),
        Connection::Scheduled => t(lang, Text::ConnScheduled).to_owned(),
    }
}

/// `#connection` with `data-state` and `data-transport`; "Retry now" while waiting to retry or
/// offline, which moves focus to this line (the button goes away: the line says what happens).
#[component]
pub fn ConnectionLine(
    lang: Lang,
    connection: RwSignal<Connection>,
    transport: RwSignal<ActiveTransport>,
    queue: StoredValue<Rc<Queue>, LocalStorage>,
) -> impl IntoView {
    let can_retry_now = move || {
        matches!(
            connection.get(),
            Connection::Retrying { .. } | Connection::Offline
        )
    };
    // Memoised as `<Show>` does, without its fallback view: a smaller page.
    let retry_now_shown = ArcMemo::new(move |_| can_retry_now());
    view! {
        <p
            id="connection"
            tabindex="-1"
            class="connection"
            data-transport=super::shared(move || transport.get().as_str())
            data-state=super::shared(move || connection.get().as_str())
        >
            <span class="dot" aria-hidden="true"></span>
            <span class="connection-text">
                {super::shared(move || connection_text(lang, connection.get(), transport.get()))}
            </span>
            {move || retry_now_shown.get().then(|| view! {
                <button type="button" class="link-button" id="retry-now"
                    on:click=move |ev| {
                        queue.with_value(|q| q.retry_now());
                        focus_after_render(&ev, "connection");
                    }>
                    {t(lang, Text::RetryNow)}
                </button>
            })}
        </p>
    }
}
