//! Where the page lives and the URLs it builds: nothing in the page is absolute, so it works
//! under any mount prefix (at `/?room=main`, or at `/_vestibule/?room=main` with the API at
//! `/_vestibule/api/v1/…` when Vestibule runs in gate mode in front of a store).
//!
//! The **base** is the path of the folder the page was loaded from: the path up to and including
//! its last `/` (`/` → `/`, `/_vestibule/checkout` → `/_vestibule/`). Every API call, event
//! stream and link of the page is the base plus a relative path (`api/v1/…`, `checkout`), and the
//! view is chosen by the path relative to the base. The inline script of `index.html` derives the
//! base the same way, and trunk writes the asset URLs relative (`public_url = "./"`).

use leptos::prelude::window;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// What `encodeURIComponent` leaves as it is: letters, digits and `-_.!~*'()`.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// `value` percent-encoded for one path segment or query value, as `encodeURIComponent` does.
pub fn encode_component(value: &str) -> String {
    utf8_percent_encode(value, COMPONENT).to_string()
}

/// The base of `pathname` (a URL path, `/…`): everything up to and including its last `/`;
/// `/` when it has none.
pub fn base_of(pathname: &str) -> &str {
    // `get`, not an index: a string slice that might panic brings the panic's message
    // formatting (Debug of a char, Unicode tables) into the WASM; the last `/` found by bytes,
    // not by a `str` pattern (a smaller page).
    last_slash(pathname)
        .and_then(|at| pathname.get(..=at))
        .unwrap_or("/")
}

/// Where the last `/` of `path` is.
fn last_slash(path: &str) -> Option<usize> {
    path.bytes().rposition(|b| b == b'/')
}

thread_local! {
    /// The widget's base (absolute), once `widget.js` mounted the page into a storefront.
    static WIDGET_BASE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Makes `base` (absolute, e.g. `https://queue.shop.example/`) the base of every URL the page
/// builds: the widget runs in the storefront's document, its API is where `widget.js` came from.
pub fn set_widget_base(base: &str) {
    WIDGET_BASE.with(|b| b.replace(Some(base.to_owned())));
}

/// The base of the page as loaded (from `location.pathname`), or the widget's.
pub fn current_base() -> String {
    if let Some(base) = WIDGET_BASE.with(|b| b.borrow().clone()) {
        return base;
    }
    let pathname = window().location().pathname().unwrap_or_default();
    base_of(&pathname).to_owned()
}

/// Which view a page path shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The waiting view (the base itself, `index.html`, anything else).
    Waiting,
    /// The demo checkout (`{base}checkout`).
    Checkout,
}

/// The view of the page at `pathname`, by its path relative to the base.
pub fn view_of(pathname: &str) -> View {
    let relative = last_slash(pathname)
        .and_then(|at| pathname.get(at + 1..))
        .unwrap_or(pathname);
    if relative == "checkout" {
        View::Checkout
    } else {
        View::Waiting
    }
}

/// An API v1 URL under `base`: `api_url("/_vestibule/", "rooms/main")` is
/// `/_vestibule/api/v1/rooms/main`.
pub fn api_url(base: &str, path: &str) -> String {
    format!("{base}api/v1/{path}")
}

/// `{base}api/v1/rooms/{room}/{rest}` with the room percent-encoded; `base` may be absolute (a
/// shop's `https://shop.example/_vestibule/`).
pub fn room_api_url(base: &str, room: &str, rest: &str) -> String {
    api_url(base, &format!("rooms/{}/{rest}", encode_component(room)))
}

/// Whether `target` is a path on this origin that is safe to navigate to: it starts with exactly
/// one `/` (not `//` nor `/\`, which browsers read as another host), and holds no control
/// characters (browsers drop tabs and line breaks from URLs, so `/\t/evil` would become
/// `//evil`). Such a path has no scheme. This is the open-redirect rule of gate mode's `return`
/// (docs/DESIGN.md).
pub fn is_same_origin_path(target: &str) -> bool {
    let mut chars = target.chars();
    chars.next() == Some('/')
        && !matches!(chars.next(), Some('/' | '\\'))
        && !target.chars().any(char::is_control)
}

/// Whether the path part of `target` (before `?` or `#`) escapes a `/`, a `\\` or a control
/// character (`%2F%2F`, `%5C`, `%09`, `%0A`, `%0D`…), or has a dot segment: a path a decoding
/// server reads as another one, or that the gate refuses as ambiguous.
fn has_unclean_escape(target: &str) -> bool {
    // Bytes, not `str` patterns and substring searches: a smaller page.
    let path = target
        .as_bytes()
        .split(|&b| b == b'?' || b == b'#')
        .next()
        .unwrap_or_default();
    // `%0x` and `%1x` are the control characters, `%7F` too; an escaped dot is never needed in
    // a path.
    path.windows(3).any(|triple| match *triple {
        [b'%', high, low] => matches!(
            (high, low.to_ascii_lowercase()),
            (b'0' | b'1', _) | (b'7', b'f') | (b'2', b'f' | b'e') | (b'5', b'c')
        ),
        _ => false,
    }) || path
        .split(|&b| b == b'/')
        .any(|segment| segment == b"." || segment == b"..")
}

/// Where gate mode sends an admitted shopper: the page URL's `return` when it is a clean
/// [same-origin path](is_same_origin_path) (no escaped `/`, `\\` or control character in its
/// path, no dot segment), else `/` (the origin's home).
pub fn safe_return(target: &str) -> &str {
    if is_same_origin_path(target) && !has_unclean_escape(target) {
        target
    } else {
        "/"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_is_the_path_up_to_its_last_slash() {
        assert_eq!(base_of("/"), "/");
        assert_eq!(base_of("/checkout"), "/");
        assert_eq!(base_of("/index.html"), "/");
        assert_eq!(base_of("/_vestibule/"), "/_vestibule/");
        assert_eq!(base_of("/_vestibule/checkout"), "/_vestibule/");
        assert_eq!(base_of("/a/b/_vestibule/index.html"), "/a/b/_vestibule/");
        assert_eq!(base_of(""), "/");
    }

    #[test]
    fn the_view_is_chosen_by_the_path_relative_to_the_base() {
        assert_eq!(view_of("/checkout"), View::Checkout);
        assert_eq!(view_of("/_vestibule/checkout"), View::Checkout);
        assert_eq!(view_of("/"), View::Waiting);
        assert_eq!(view_of("/_vestibule/"), View::Waiting);
        assert_eq!(view_of("/_vestibule/index.html"), View::Waiting);
        // Not the checkout: a page named differently, or a folder named so.
        assert_eq!(view_of("/checkouts"), View::Waiting);
        assert_eq!(view_of("/checkout/"), View::Waiting);
    }

    #[test]
    fn api_urls_are_built_under_the_base() {
        assert_eq!(
            api_url("/", "rooms/main/tickets"),
            "/api/v1/rooms/main/tickets"
        );
        assert_eq!(
            api_url("/_vestibule/", "rooms/main/session"),
            "/_vestibule/api/v1/rooms/main/session"
        );
    }

    #[test]
    fn components_are_encoded_as_encode_uri_component_does() {
        assert_eq!(encode_component("main-1_a.b"), "main-1_a.b");
        assert_eq!(
            encode_component("/checkout?x=1&y=2"),
            "%2Fcheckout%3Fx%3D1%26y%3D2"
        );
        assert_eq!(encode_component("a b+c#d"), "a%20b%2Bc%23d");
        assert_eq!(encode_component("대기"), "%EB%8C%80%EA%B8%B0");
        assert_eq!(encode_component("!~*'()"), "!~*'()");
    }

    #[test]
    fn a_return_path_on_this_origin_is_kept() {
        for path in [
            "/",
            "/checkout",
            "/checkout?x=1",
            "/drops/42/buy?size=9&colour=red#top",
            "/checkout?next=%2F%2Fx",
            "/path\\with-a-backslash-later",
            "/sale/50%25-off/%E2%9C%93",
            "/a/.well/..b/x.",
            "/100%",
        ] {
            assert!(is_same_origin_path(path), "{path}");
            assert_eq!(safe_return(path), path);
        }
    }

    #[test]
    fn a_return_with_escapes_a_server_reads_otherwise_goes_home() {
        for target in [
            "/%2F%2Fevil.example",
            "/a/%2f%2fevil.example",
            "/%5Cevil.example",
            "/%09/evil.example",
            "/checkout%0a",
            "/checkout%0B",
            "/%0d/x",
            "/checkout/../admin",
            "/checkout/%2e%2e/admin",
            "/a%7Fb",
            "/a%7f",
            "/%1b",
            "/checkout/.",
            "/./checkout?x=1",
        ] {
            assert_eq!(safe_return(target), "/", "{target:?}");
        }
    }

    #[test]
    fn every_open_redirect_variant_goes_home_instead() {
        for target in [
            "",
            "//evil.example",
            "//evil.example/checkout",
            "/\\evil.example",
            "\\\\evil.example",
            "\\/evil.example",
            "https://evil.example/",
            "http:evil.example",
            "javascript:alert(1)",
            "data:text/html,x",
            "evil.example/checkout",
            " /checkout",
            "/\t/evil.example",
            "/\n/evil.example",
            "/\r\n/evil.example",
            "/checkout\u{0}",
            "/checkout\u{7f}",
            "/checkout\u{85}",
        ] {
            assert!(!is_same_origin_path(target), "{target:?}");
            assert_eq!(safe_return(target), "/", "{target:?}");
        }
    }
}
