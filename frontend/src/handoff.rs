//! How an admitted shopper leaves the waiting room.
//!
//! - **Standalone** (no `?return=`): two seconds after the turn (time for the live region to say
//!   so), the page goes to the checkout link ([`crate::page_params::checkout_href`]).
//! - **Gate mode** (`?return=<path>`, set by the gate's 303 to the waiting room, issue 11): the
//!   page hands the entry token to the server (`POST {base}api/v1/rooms/{room}/session` with the
//!   token in the JSON body, never in a URL), the server sets an HttpOnly session cookie, and
//!   the page goes to `return` ([`crate::urls::safe_return`]: a same-origin path, else `/`). A
//!   failed hand-off (no answer, 4xx, 5xx) is shown with a "Try again" button; nothing moves on
//!   until it succeeds.
//!
//! Both leave with `location.replace`, so Back from the store returns to the shop, not to this
//! redirect.

use std::{
    cell::{Cell, RefCell},
    rc::Rc,
    time::Duration,
};

use leptos::{prelude::*, task::spawn_local};

use crate::{
    api::{self, ApiError},
    embed::Embedder,
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

    /// The `data-state` value: `"idle"`, `"sending"`, `"done"` or `"failed"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Sending => "sending",
            Self::Done => "done",
            Self::Failed { .. } => "failed",
        }
    }
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

    /// The shopper was admitted with `token`: leave for `checkout` (standalone), or hand the
    /// token over and leave for `return` (gate mode).
    pub fn admitted(self: &Rc<Self>, token: Option<&str>, checkout: String) {
        self.turn_at.set(js_sys::Date::now());
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
        };
        assert_eq!(
            HandoffState::from_error(&busy).failure_text(),
            Some(Text::HandoffUnsent)
        );
        assert_eq!(HandoffState::Sending.failure_text(), None);
    }
}
