//! Vestibule's operator console: a second Leptos CSR app, built by trunk from `console/` into
//! `dist/console/` and served at `{base}console/`; nothing of it is in the shopper page.
//!
//! - [`api`]: the admin API calls (bearer token from `sessionStorage`) and their errors.
//! - [`stream`]: the admin event stream read with `fetch` (EventSource cannot send the bearer
//!   header), parsed and reconnected here.
//! - [`state`]: the console's shared signals and the last 15 minutes of figures per room.
//! - [`i18n`]: every string in English and Korean.
//! - [`rooms`]: the rooms list with create (any settings: [`settings_form`], [`form`]), close
//!   and delete; display names and opening times from [`catalog`].
//! - [`schedule`]: the true state label, the opening times with a countdown ([`local_time`]) and
//!   why admission is below the rate.
//! - [`room_view`]: one room live: figures and charts ([`chart`]), the closed loop and the
//!   origin ([`auto_rate`]), [`controls`], the [`calculator`], the sale's [`summary`].

mod api;
mod auto_rate;
mod calculator;
mod catalog;
mod chart;
mod controls;
mod form;
mod i18n;
mod local_time;
mod room_view;
mod rooms;
mod schedule;
mod settings_form;
mod state;
mod stream;
mod summary;

use leptos::prelude::*;

use crate::i18n::{t, Lang, Text};
use crate::room_view::RoomView;
use crate::rooms::RoomsList;
use crate::state::{Console, Link};

/// The language asked for by `?lang=`, else the browser's, else English.
fn initial_lang() -> Lang {
    let from_query = window()
        .location()
        .search()
        .ok()
        .and_then(|search| {
            search
                .trim_start_matches('?')
                .split('&')
                .find_map(|pair| pair.strip_prefix("lang=").map(str::to_owned))
        })
        .and_then(|tag| Lang::from_tag(&tag));
    from_query
        .or_else(|| {
            window()
                .navigator()
                .language()
                .and_then(|tag| Lang::from_tag(&tag))
        })
        .unwrap_or(Lang::En)
}

fn main() {
    let console = Console::new(initial_lang(), api::stored_token());
    mount_to_body(move || view! { <App console=console /> });
}

/// `<html lang>` and the title follow the language.
fn apply_lang(lang: Lang) {
    if let Some(document) = window().document() {
        if let Some(root) = document.document_element() {
            let _ = root.set_attribute("lang", lang.code());
        }
        document.set_title(t(lang, Text::Title));
    }
}

#[component]
fn App(console: Console) -> impl IntoView {
    let lang = console.lang;
    Effect::new(move |_| apply_lang(lang.get()));
    // A stream per sign-in.
    Effect::new(move |_| {
        if console.token.get().is_some() {
            console.session.update(|session| *session += 1);
            stream::start(console);
            catalog::refresh(console);
        }
    });
    catalog::follow(console);
    let switch = move |_| lang.update(|lang| *lang = lang.other());
    let link = move || {
        let lang = lang.get();
        match console.link.get() {
            Link::Live => ("link live", t(lang, Text::Live)),
            Link::Connecting => ("link", t(lang, Text::Connecting)),
            Link::Lost => ("link lost", t(lang, Text::Reconnecting)),
        }
    };
    view! {
        <header class="top">
            <h1>{move || t(lang.get(), Text::Title)}</h1>
            <div class="top-actions">
                {move || console.token.get().is_some().then(|| view! {
                    <span id="link" class=move || link().0 role="status">{move || link().1}</span>
                })}
                <button type="button" id="language" lang=move || lang.get().other().code()
                    aria-label=move || format!("{}: {}", t(lang.get(), Text::Language), lang.get().other().native_name())
                    on:click=switch>
                    {move || lang.get().other().native_name()}
                </button>
                {move || console.token.get().is_some().then(|| view! {
                    <button type="button" id="sign-out" on:click=move |_| console.sign_out(false)>
                        {move || t(lang.get(), Text::SignOut)}
                    </button>
                })}
            </div>
        </header>
        {move || if console.token.get().is_some() {
            view! {
                <main class="layout">
                    <RoomsList console=console />
                    <div class="detail"><RoomView console=console /></div>
                </main>
            }.into_any()
        } else {
            view! { <SignIn console=console /> }.into_any()
        }}
    }
}

#[component]
fn SignIn(console: Console) -> impl IntoView {
    let lang = console.lang;
    let token = RwSignal::new(String::new());
    let submit = move |event: leptos::ev::SubmitEvent| {
        event.prevent_default();
        let value = token.get_untracked().trim().to_owned();
        if value.is_empty() {
            return;
        }
        api::store_token(Some(&value));
        console.refused.set(false);
        console.token.set(Some(value));
    };
    view! {
        <main class="sign-in">
            <form class="panel" on:submit=submit>
                <h2>{move || t(lang.get(), Text::SignInTitle)}</h2>
                {move || console.refused.get().then(|| view! {
                    <p class="outcome bad" role="alert">{t(lang.get(), Text::WrongToken)}</p>
                })}
                <p class="help">{move || t(lang.get(), Text::SignInHelp)}</p>
                <div class="field">
                    <label for="admin-token">{move || t(lang.get(), Text::AdminToken)}</label>
                    <input id="admin-token" type="password" autocomplete="current-password" required
                        autofocus prop:value=move || token.get()
                        on:input=move |event| token.set(event_target_value(&event)) />
                </div>
                <button type="submit" id="sign-in" class="primary">{move || t(lang.get(), Text::SignIn)}</button>
            </form>
        </main>
    }
}
