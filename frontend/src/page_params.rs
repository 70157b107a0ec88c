//! The page's query parameters: `?room=`, `?lang=`, `?transport=`, `?return=` (gate mode).

use crate::{
    embed::Host,
    i18n::Lang,
    urls::{current_base, encode_component, is_same_origin_path},
};
use leptos::prelude::{document, window};
use vestibule_shared::{is_valid_room_slug, settings::url_origin};

/// Room shown when the URL names none.
pub const DEFAULT_ROOM: &str = "main";

/// How the waiting view hears about its ticket (`?transport=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Server-sent events, falling back to polling when the stream errors twice (default).
    Auto,
    /// Server-sent events only (reconnecting with back-off).
    Sse,
    /// Polling, each poll scheduled by the server's `nextPollAfterMs`.
    Poll,
}

impl Transport {
    fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(Self::Auto),
            "sse" => Some(Self::Sse),
            "poll" => Some(Self::Poll),
            _ => None,
        }
    }

    /// The `?transport=` value, e.g. `"sse"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Sse => "sse",
            Self::Poll => "poll",
        }
    }
}

/// What the URL asks of the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageParams {
    /// Room slug as given (default `main`); see [`PageParams::room_is_valid`].
    pub room: String,
    /// Page language.
    pub lang: Lang,
    /// Whether `lang` came from `?lang=` (then links carry it on).
    pub lang_from_url: bool,
    /// Requested transport.
    pub transport: Transport,
    /// `?return=` as given: in gate mode, where the store wants the admitted shopper back (e.g.
    /// `/checkout?x=1`). Its presence turns on the session hand-off ([`crate::handoff`]); it is
    /// only ever navigated to through [`crate::urls::safe_return`].
    pub return_to: Option<String>,
    /// The page's base ([`crate::urls`]), e.g. `/` or `/_vestibule/`; absolute
    /// (`https://queue.shop.example/`) in the widget.
    pub base: String,
    /// Where the page runs: its own tab, a frame (`?embed=1`: the parent navigates), the widget.
    pub host: Host,
}

impl PageParams {
    /// Reads the current location and, for the language, `navigator.language`.
    pub fn from_location() -> Self {
        let search = window().location().search().unwrap_or_default();
        let query = web_sys::UrlSearchParams::new_with_str(&search).ok();
        let get = |name: &str| query.as_ref().and_then(|q| q.get(name));

        let room = get("room")
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| DEFAULT_ROOM.to_owned());
        let url_lang = get("lang").as_deref().and_then(Lang::from_tag);
        let lang = url_lang
            .or_else(|| {
                window()
                    .navigator()
                    .language()
                    .as_deref()
                    .and_then(Lang::from_tag)
            })
            .unwrap_or(Lang::En);
        let transport = get("transport")
            .as_deref()
            .and_then(Transport::parse)
            .unwrap_or(Transport::Auto);
        Self {
            room,
            lang,
            lang_from_url: url_lang.is_some(),
            transport,
            return_to: get("return"),
            base: current_base(),
            host: Host::of_page(get("embed").as_deref() == Some("1")),
        }
    }

    /// The parameters of a widget mounted into `element` (`data-vestibule-room`,
    /// `data-vestibule-lang`, `data-vestibule-transport`), with the API under `base` (the
    /// folder `widget.js` was loaded from). Without `data-vestibule-lang` the language is the
    /// storefront page's `<html lang>`, else the browser's.
    pub fn for_widget(element: &web_sys::Element, base: &str) -> Self {
        let attribute = |name: &str| element.get_attribute(name).map(|v| v.trim().to_owned());
        let page_lang = document()
            .document_element()
            .and_then(|html| html.get_attribute("lang"));
        let lang = attribute("data-vestibule-lang")
            .as_deref()
            .and_then(Lang::from_tag)
            .or_else(|| page_lang.as_deref().and_then(Lang::from_tag))
            .or_else(|| {
                window()
                    .navigator()
                    .language()
                    .as_deref()
                    .and_then(Lang::from_tag)
            })
            .unwrap_or(Lang::En);
        Self {
            room: attribute("data-vestibule-room")
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| DEFAULT_ROOM.to_owned()),
            lang,
            lang_from_url: false,
            transport: attribute("data-vestibule-transport")
                .as_deref()
                .and_then(Transport::parse)
                .unwrap_or(Transport::Auto),
            return_to: None,
            base: base.to_owned(),
            host: Host::Widget(element.clone()),
        }
    }

    /// Whether the room name can exist at all (`[a-z0-9-]{1,64}`); no request is made otherwise.
    pub fn room_is_valid(&self) -> bool {
        is_valid_room_slug(&self.room)
    }

    /// A same-page link with the language switched, keeping room, transport and `return`.
    pub fn href_with_lang(&self, lang: Lang) -> String {
        let mut href = format!(
            "?room={}&lang={}",
            encode_component(&self.room),
            lang.code()
        );
        if self.transport != Transport::Auto {
            href.push_str("&transport=");
            href.push_str(self.transport.as_str());
        }
        if let Some(target) = &self.return_to {
            href.push_str("&return=");
            href.push_str(&encode_component(target));
        }
        href
    }

    /// The waiting view of this room (under the base), carrying the language if the URL chose it.
    pub fn waiting_href(&self) -> String {
        let mut href = format!("{}?room={}", self.base, encode_component(&self.room));
        if self.lang_from_url {
            href.push_str("&lang=");
            href.push_str(self.lang.code());
        }
        href
    }
}

/// Writes the language to `<html lang>` (screen readers pick their voice from it) and the title.
pub fn apply_document_lang(lang: Lang, title: &str) {
    let doc = document();
    if let Some(html) = doc.document_element() {
        // Ignoring the error: a read-only document is no reason to stop the page.
        let _ = html.set_attribute("lang", lang.code());
    }
    doc.set_title(title);
}

/// Whether `url` is a relative reference without a scheme or host (`checkout?room=main`), which
/// the page resolves against its base.
fn is_plain_relative(url: &str) -> bool {
    let head = url.split(['/', '?', '#']).next().unwrap_or_default();
    !url.is_empty()
        && !head.contains(':')
        && !url.starts_with(['/', '\\'])
        && !url.chars().any(char::is_control)
}

/// Where to send an admitted shopper: the server's `checkoutUrl` when it is an `http(s)` URL
/// (the room setting, checked by the server against `--cors-origins`), a path on the page's
/// origin (as is; on the base's origin when the base is absolute, as in the widget) or a
/// relative reference (under `base`), else `{base}checkout?room=…`; carries `lang` when the URL
/// chose one, except to an `http(s)` URL (the storefront's page, taken as configured). Anything
/// else (`javascript:`, `//host`, control characters) is never followed.
pub fn checkout_href(
    base: &str,
    room: &str,
    lang: Option<Lang>,
    checkout_url: Option<&str>,
) -> String {
    let mut href = match checkout_url {
        // The storefront's own page: as configured, without the page's `lang`.
        Some(url) if url_origin(url).is_some() && !url.chars().any(char::is_control) => {
            return url.to_owned();
        }
        Some(url) if is_same_origin_path(url) => {
            format!("{}{url}", url_origin(base).unwrap_or_default())
        }
        Some(url) if is_plain_relative(url) => format!("{base}{url}"),
        _ => format!("{base}checkout?room={room}"),
    };
    if let Some(lang) = lang {
        // Byte windows, not `str::contains`: a string search is 2 KB of WASM.
        if !href.as_bytes().windows(5).any(|w| w == b"lang=") {
            href.push(if href.contains('?') { '&' } else { '?' });
            href.push_str("lang=");
            href.push_str(lang.code());
        }
    }
    href
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkout_goes_to_the_servers_same_origin_path() {
        assert_eq!(
            checkout_href("/", "main", None, Some("/checkout?room=main")),
            "/checkout?room=main"
        );
        assert_eq!(
            checkout_href(
                "/_vestibule/",
                "main",
                None,
                Some("/_vestibule/checkout?room=main")
            ),
            "/_vestibule/checkout?room=main"
        );
    }

    #[test]
    fn a_relative_checkout_url_and_the_default_are_under_the_base() {
        assert_eq!(
            checkout_href("/_vestibule/", "main", None, Some("checkout?room=main")),
            "/_vestibule/checkout?room=main"
        );
        assert_eq!(
            checkout_href("/_vestibule/", "drop-1", None, None),
            "/_vestibule/checkout?room=drop-1"
        );
        assert_eq!(
            checkout_href("/", "drop-1", None, None),
            "/checkout?room=drop-1"
        );
    }

    #[test]
    fn checkout_follows_only_http_urls_and_paths() {
        assert_eq!(
            checkout_href(
                "/",
                "main",
                Some(Lang::Ko),
                Some("https://shop.example/cart?x=1")
            ),
            "https://shop.example/cart?x=1"
        );
        // The widget's base is absolute: a path is on the waiting room's origin.
        assert_eq!(
            checkout_href(
                "https://q.example/_v/",
                "main",
                None,
                Some("/_v/checkout?room=main")
            ),
            "https://q.example/_v/checkout?room=main"
        );
        assert_eq!(
            checkout_href("https://q.example/", "main", None, None),
            "https://q.example/checkout?room=main"
        );
        for url in [
            "//evil.example/x",
            "/\\evil.example",
            "\\evil.example",
            "javascript:x",
            "/\t/evil.example",
            "\t//evil.example",
            "",
        ] {
            assert_eq!(
                checkout_href("/shop/", "main", None, Some(url)),
                "/shop/checkout?room=main",
                "{url:?}"
            );
        }
    }

    #[test]
    fn checkout_keeps_a_language_chosen_in_the_url() {
        assert_eq!(
            checkout_href("/", "main", Some(Lang::Ko), Some("/checkout?room=main")),
            "/checkout?room=main&lang=ko"
        );
        assert_eq!(
            checkout_href("/", "main", Some(Lang::En), Some("/checkout")),
            "/checkout?lang=en"
        );
    }

    #[test]
    fn the_language_link_keeps_the_way_back_to_the_store() {
        let params = PageParams {
            room: "main".into(),
            lang: Lang::Ko,
            lang_from_url: false,
            transport: Transport::Sse,
            return_to: Some("/checkout?x=1&y=2".into()),
            base: "/_vestibule/".into(),
            host: Host::Page,
        };
        assert_eq!(
            params.href_with_lang(Lang::En),
            "?room=main&lang=en&transport=sse&return=%2Fcheckout%3Fx%3D1%26y%3D2"
        );
        assert_eq!(params.waiting_href(), "/_vestibule/?room=main");
    }
}
