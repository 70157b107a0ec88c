//! How an admitted shopper leaves the waiting room.
//!
//! - **Standalone** (no `?return=`): two seconds after the turn (time for the live region to say
//!   so), the page goes to the checkout link ([`crate::page_params::checkout_href`]).
//! - **Gate mode** (`?return=<path>`, set by the gate's 303 to the waiting room): the
//!   page hands the entry token to the server (`POST {base}api/v1/rooms/{room}/session` with the
//!   token in the JSON body, never in a URL), the server sets an HttpOnly session cookie, and
//!   the page goes to `return` ([`crate::urls::safe_return`]: a same-origin path, else `/`). A
//!   failed hand-off (no answer, 4xx, 5xx) is shown with a "Try again" button; nothing moves on
//!   until it succeeds.
//!
//! - **A shop on another origin** (the room's `checkoutUrl` is an `http(s)` URL on another
//!   origin than the page's, e.g. a storefront checking tokens with `vestibule-guard`): the page
//!   hands the token to the shop's own origin by a top-level navigation, a form POST (the token
//!   in the body, never in a URL) to `{shop}/_vestibule/api/v1/rooms/{room}/handoff` with
//!   `return` resolved against the shop's origin (the page's `return`, else the checkout URL's
//!   path); the shop verifies it, sets its own first-party cookie and answers 303 to `return`.
//! - **Gate mode in a frame** (framed by a storefront on another site, where the frame's cookie
//!   would be a third-party one the browser drops): the same form POST, to the gate's own
//!   `{base}api/v1/rooms/{room}/handoff`, with `target="_top"`, so the cookie is set for the
//!   top-level document. The form shows a "Continue to checkout" button: a browser lets a
//!   cross-site frame navigate the top only after a click.
//!
//! Page and session hand-offs leave with `location.replace`, so Back from the store returns to
//! the shop, not to this redirect.

use std::{
    cell::{Cell, RefCell},
    rc::Rc,
    time::Duration,
};

use leptos::{prelude::*, task::spawn_local};

use vestibule_shared::settings::url_origin;
use wasm_bindgen::JsCast;

use crate::{
    api::{self, ApiError},
    embed::{Embedder, Host},
    i18n::{t, Lang, Text},
    page_params::PageParams,
    urls::safe_return,
};

/// Time the live region gets to say "It's your turn" before the page moves on.
pub const TURN_ANNOUNCEMENT: Duration = Duration::from_millis(2_000);

/// Where gate mode's hand-off stands, shown in the status section (`#handoff[data-state]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandoffState {
    /// No hand-off (standalone page, or not admitted yet).
    Idle,
    /// The token is on its way to the server.
    Sending,
    /// The session is open; the page is about to go to `return`.
    Done,
    /// The token goes by a top-level form POST ([`FormHandoff`]) once the turn was announced;
    /// the "Continue to checkout" button (`#handoff-continue`) posts it again (a framed page
    /// may only navigate the top after a click).
    Posting,
    /// The server did not take the token: shown with "Try again".
    Failed {
        /// Worth trying again as it is: no answer (offline, timeout), 429 or 5xx; `false` for
        /// a refusal (4xx, e.g. an expired token).
        transient: bool,
        /// The error code of the answer, e.g. `entry_token_expired`.
        code: Option<String>,
    },
}

impl HandoffState {
    fn from_error(error: &ApiError) -> Self {
        Self::Failed {
            transient: error.is_transient(),
            code: error.code().map(str::to_owned),
        }
    }

    /// What to tell the shopper about a failed hand-off; `None` unless it failed.
    pub fn failure_text(&self) -> Option<Text> {
        match self {
            Self::Failed {
                transient: true, ..
            } => Some(Text::HandoffUnsent),
            Self::Failed {
                transient: false, ..
            } => Some(Text::HandoffRefused),
            _ => None,
        }
    }

    /// The `data-state` value: `"idle"`, `"sending"`, `"done"`, `"posting"` or `"failed"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Sending => "sending",
            Self::Done => "done",
            Self::Posting => "posting",
            Self::Failed { .. } => "failed",
        }
    }
}

/// Where a form hand-off posts the token: the shop's or the gate's hand-off route.
#[derive(Debug, PartialEq, Eq)]
pub struct FormHandoff {
    /// The hand-off route (absolute on another origin, or under the base).
    pub action: String,
    /// The `return` field: a path on the action's origin.
    pub back: String,
}

/// The way out of the waiting room for one page; see the module docs.
pub struct Exit {
    room: String,
    lang: Lang,
    /// Gate mode's destination (already made safe); `None` for the standalone page.
    return_to: Option<String>,
    /// The hand-off's state (the view renders it).
    pub state: RwSignal<HandoffState>,
    announcement: RwSignal<String>,
    token: RefCell<Option<String>>,
    /// When the turn was seen (ms since the epoch): the page leaves no sooner than
    /// [`TURN_ANNOUNCEMENT`] after it.
    turn_at: Cell<f64>,
    /// The storefront embedding the page, told of the turn first ([`crate::embed`]).
    embed: Rc<Embedder>,
    /// Whether the page runs in a frame: its hand-off then navigates the top.
    framed: bool,
    /// The page's base (the gate's hand-off route is under it).
    base: String,
    /// The form hand-off, once admitted, when the page hands the token over by a form.
    form: RefCell<Option<FormHandoff>>,
}

impl Exit {
    /// The exit for the page described by `params`; says failures through `announcement` (the
    /// polite live region). Must run inside a reactive owner.
    pub fn new(
        params: &PageParams,
        announcement: RwSignal<String>,
        embed: Rc<Embedder>,
    ) -> Rc<Self> {
        Rc::new(Self {
            room: params.room.clone(),
            lang: params.lang,
            return_to: params
                .return_to
                .as_deref()
                .map(|r| safe_return(r).to_owned()),
            state: RwSignal::new(HandoffState::Idle),
            announcement,
            token: RefCell::new(None),
            turn_at: Cell::new(0.0),
            embed,
            framed: matches!(params.host, Host::Framed { .. }),
            base: params.base.clone(),
            form: RefCell::new(None),
        })
    }

    /// Whether the page runs in gate mode (its URL has `?return=`).
    pub fn is_gate(&self) -> bool {
        self.return_to.is_some()
    }

    /// Gate mode's destination, made safe ([`safe_return`]).
    pub fn return_to(&self) -> Option<String> {
        self.return_to.clone()
    }

    /// The shopper was admitted with `token`: leave for `checkout` (standalone), hand the
    /// token to a shop on another origin or out of a frame (form POST), or open the session and
    /// leave for `return` (gate mode).
    pub fn admitted(self: &Rc<Self>, token: Option<&str>, checkout: String) {
        self.turn_at.set(js_sys::Date::now());
        let own_origin = window().location().origin().unwrap_or_default();
        let form = form_handoff(
            &self.room,
            &self.base,
            self.framed,
            &own_origin,
            self.return_to.as_deref(),
            &checkout,
        );
        if let (Some(form), Some(token)) = (form, token) {
            self.token.replace(Some(token.to_owned()));
            self.form.replace(Some(form));
            // The embedder hears of the turn first and may keep the page where it is (its
            // parent navigates, or said so).
            let this = Rc::clone(self);
            let leave: Box<dyn FnOnce()> = Box::new(move || {
                this.state.set(HandoffState::Posting);
                // After the turn was announced. A browser that keeps a frame from navigating
                // the top without a click leaves the button to do it.
                set_timeout(move || this.post(), TURN_ANNOUNCEMENT);
            });
            self.embed.admitted(&checkout, Some(token), Some(leave));
            return;
        }
        if !self.is_gate() {
            // The embedder hears of the turn first and may keep the page where it is.
            let href = checkout.clone();
            let leave = Box::new(move || set_timeout(move || go(&href), TURN_ANNOUNCEMENT));
            self.embed.admitted(&checkout, token, Some(leave));
            return;
        }
        self.embed.admitted(&checkout, token, None);
        if let Some(token) = token {
            self.token.replace(Some(token.to_owned()));
        }
        self.hand_off();
    }

    /// Posts the token to the hand-off route by a top-level form (the "Continue to checkout"
    /// button too); nothing unless the hand-off is a form one.
    pub fn post(&self) {
        if let (Some(form), Some(token)) = (&*self.form.borrow(), self.token.borrow().as_deref()) {
            let _ = submit_form(&form.action, token, &form.back);
        }
    }

    /// Tries the hand-off again (the "Try again" button).
    pub fn retry(self: &Rc<Self>) {
        if matches!(self.state.get_untracked(), HandoffState::Failed { .. }) {
            self.hand_off();
        }
    }

    fn hand_off(self: &Rc<Self>) {
        let (Some(target), Some(token)) = (self.return_to.clone(), self.token.borrow().clone())
        else {
            return;
        };
        if matches!(
            self.state.get_untracked(),
            HandoffState::Sending | HandoffState::Done
        ) {
            return;
        }
        self.state.set(HandoffState::Sending);
        let this = Rc::clone(self);
        spawn_local(async move {
            match api::open_session(&this.room, &token).await {
                Ok(()) => {
                    this.state.set(HandoffState::Done);
                    let waited = js_sys::Date::now() - this.turn_at.get();
                    let rest = TURN_ANNOUNCEMENT
                        .saturating_sub(Duration::from_millis(waited.max(0.0) as u64));
                    set_timeout(move || go(&target), rest);
                }
                Err(error) => {
                    let failed = HandoffState::from_error(&error);
                    if let Some(text) = failed.failure_text() {
                        this.announcement.set(t(this.lang, text).to_owned());
                    }
                    this.state.set(failed);
                }
            }
        });
    }
}

/// The form hand-off for an admitted page, if it needs one: to the shop's origin when the
/// checkout URL `checkout` is absolute on another origin than `own_origin` (`return` there:
/// the page's `return_to`, else the checkout URL's path), or, in a frame (`framed`) in gate
/// mode (`return_to` set), to the gate's hand-off under `base`.
pub fn form_handoff(
    room: &str,
    base: &str,
    framed: bool,
    own_origin: &str,
    return_to: Option<&str>,
    checkout: &str,
) -> Option<FormHandoff> {
    let (under, back) = match url_origin(checkout) {
        Some(shop) if !shop.eq_ignore_ascii_case(own_origin) => {
            // `get`, not an index: a slice that might panic brings the panic's message
            // formatting into the WASM. An empty path is not a safe return: `/` then.
            let path = checkout.get(shop.len()..).unwrap_or_default();
            (shop + "/_vestibule/", return_to.unwrap_or(path))
        }
        _ if framed => (base.to_owned(), return_to?),
        _ => return None,
    };
    Some(FormHandoff {
        action: crate::urls::room_api_url(&under, room, "handoff"),
        back: safe_return(back).to_owned(),
    })
}

/// Posts `entryToken` and `return` to `action` by a hidden form with `target="_top"`: a
/// top-level navigation, the token in the body (never in a URL). Built on the DOM, not in the
/// view, so the page carries no form component for it.
fn submit_form(action: &str, token: &str, back: &str) -> Option<()> {
    let doc = document();
    let form = doc.create_element("form").ok()?;
    for (name, value) in [
        ("method", "post"),
        ("action", action),
        ("target", "_top"),
        ("hidden", ""),
    ] {
        form.set_attribute(name, value).ok()?;
    }
    for (name, value) in [("entryToken", token), ("return", back)] {
        let input = doc.create_element("input").ok()?;
        input.set_attribute("type", "hidden").ok()?;
        input.set_attribute("name", name).ok()?;
        input.set_attribute("value", value).ok()?;
        form.append_child(&input).ok()?;
    }
    doc.body()?.append_child(&form).ok()?;
    let sent = form.unchecked_ref::<web_sys::HtmlFormElement>().submit();
    form.remove();
    sent.ok()
}

/// Leaves for `href` without leaving this page in the history.
fn go(href: &str) {
    let _ = window().location().replace(href);
}

#[cfg(test)]
mod tests {
    use super::*;
    use vestibule_shared::error_code;

    #[test]
    fn a_failed_hand_off_tells_no_answer_from_a_refusal() {
        assert_eq!(
            HandoffState::from_error(&ApiError::Timeout),
            HandoffState::Failed {
                transient: true,
                code: None
            }
        );
        let refused = ApiError::Status {
            status: 403,
            code: error_code::TOKEN_EXPIRED.to_owned(),
            retry_after: None,
            refusal: None,
        };
        assert_eq!(
            HandoffState::from_error(&refused),
            HandoffState::Failed {
                transient: false,
                code: Some("entry_token_expired".to_owned())
            }
        );
        assert_eq!(
            HandoffState::from_error(&refused).failure_text(),
            Some(Text::HandoffRefused)
        );
        assert_eq!(
            HandoffState::from_error(&ApiError::Network).failure_text(),
            Some(Text::HandoffUnsent)
        );
        let busy = ApiError::Status {
            status: 503,
            code: error_code::STORE_UNAVAILABLE.to_owned(),
            retry_after: None,
            refusal: None,
        };
        assert_eq!(
            HandoffState::from_error(&busy).failure_text(),
            Some(Text::HandoffUnsent)
        );
        assert_eq!(HandoffState::Sending.failure_text(), None);
    }

    #[test]
    fn a_shop_on_another_origin_gets_the_token_at_its_own_origin() {
        let posting = |action: &str, back: &str| {
            Some(FormHandoff {
                action: action.into(),
                back: back.into(),
            })
        };
        let shop = "http://shop.test/_vestibule/api/v1/rooms/main/handoff";
        // The page's return is a path on the shop, not on the waiting room.
        assert_eq!(
            form_handoff(
                "main",
                "/",
                false,
                "http://queue.test",
                Some("/checkout?size=42"),
                "http://shop.test/checkout"
            ),
            posting(shop, "/checkout?size=42")
        );
        // Started on the waiting room: the checkout URL's own path.
        assert_eq!(
            form_handoff(
                "main",
                "/",
                false,
                "http://queue.test",
                None,
                "http://shop.test/checkout?x=1"
            ),
            posting(shop, "/checkout?x=1")
        );
        assert_eq!(
            form_handoff(
                "main",
                "/",
                false,
                "http://queue.test",
                Some("//evil.example"),
                "http://shop.test"
            ),
            posting(shop, "/")
        );
        // Gate mode on its own origin: the session request, no form; in a frame, the form.
        assert_eq!(
            form_handoff(
                "main",
                "/_vestibule/",
                false,
                "http://shop.test",
                Some("/checkout"),
                "/checkout"
            ),
            None
        );
        assert_eq!(
            form_handoff(
                "main",
                "/_vestibule/",
                true,
                "http://shop.test",
                Some("/checkout"),
                "/checkout"
            ),
            posting("/_vestibule/api/v1/rooms/main/handoff", "/checkout")
        );
        // A standalone page framed with no way back to a shop: nothing to hand over.
        assert_eq!(
            form_handoff(
                "main",
                "/",
                true,
                "http://q.test",
                None,
                "/checkout?room=main"
            ),
            None
        );
    }
}
