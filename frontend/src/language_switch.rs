//! The link to this page in the other language (below the card on every view).

use leptos::prelude::*;

use crate::{
    i18n::{t, Text},
    page_params::PageParams,
};

/// A link to this page in the other language, keeping room, transport and `return`.
#[component]
pub fn LanguageSwitch(params: PageParams) -> impl IntoView {
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
