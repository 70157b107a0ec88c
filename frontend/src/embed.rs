//! The page inside a storefront: framed in an `<iframe>` of another origin, or
//! mounted into the storefront's own page by `widget.js` ([`crate::widget`]).
//!
//! The page tells its embedder what happens — `vestibule:status`, `vestibule:admitted`,
//! `vestibule:resize` ([`vestibule_shared::embed`]) — and only ever the storefront origins the
//! server names (`GET …/embedding`, from `--cors-origins`):
//! - **framed:** `parent.postMessage(message, origin)` once per configured origin (the browser
//!   delivers it only if the parent is on that origin; never `*`);
//! - **widget:** a `CustomEvent` of the message's type on the storefront's element, with the
//!   message as `detail`, only if the storefront page's origin is configured.
//!
//! Nothing is sent before the server has answered; the entry token goes along only when the
//! room's `shareTokenWithEmbedder` is on. Who navigates once admitted: a framed page whose URL
//! has `embed=1`, or whose parent posted `{type: "vestibule:navigate-self", value: false}`,
//! stays and lets the parent navigate; a widget whose `vestibule:admitted` event was
//! `preventDefault()`ed stays; otherwise the page goes to the checkout URL as on its own.

use std::{
    cell::{Cell, RefCell},
    rc::Rc,
    time::Duration,
};

use js_sys::{Object, Reflect};
use leptos::{prelude::*, task::spawn_local};
use vestibule_shared::{embed, embed::EmbeddingInfo, TicketStatus};
use wasm_bindgen::{closure::Closure, JsCast, JsValue};

use crate::api;

/// Where the page runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// On its own (a tab, or a frame of its own origin).
    Page,
    /// In a frame of another page; `parent_navigates` when the URL says `embed=1`.
    Framed {
        /// The parent navigates on `vestibule:admitted`; the page stays.
        parent_navigates: bool,
    },
    /// Mounted by `widget.js` into this element of the storefront's page.
    Widget(web_sys::Element),
}

impl Host {
    /// The host of a page loaded at the current location: framed when `window.parent` is
    /// another window.
    pub fn of_page(embed_param: bool) -> Self {
        let framed = window()
            .parent()
            .ok()
            .flatten()
            .is_some_and(|parent| !js_sys::Object::is(parent.as_ref(), window().as_ref()));
        if framed {
            Self::Framed {
                parent_navigates: embed_param,
            }
        } else {
            Self::Page
        }
    }
}

/// Attempts at reading the embedding facts before giving up (then nothing is ever sent).
const CONFIG_ATTEMPTS: u32 = 5;

/// What to do once `vestibule:admitted` went out (or could not): go to checkout, or nothing.
type Then = Option<Box<dyn FnOnce()>>;

/// The page's messenger to its embedder; inert on a page of its own.
pub struct Embedder {
    host: Host,
    room: String,
    config: RefCell<Option<EmbeddingInfo>>,
    /// Messages waiting for the server's answer, with their token and follow-up.
    pending: RefCell<Vec<(Object, Option<String>, Then)>>,
    parent_navigates: bool,
    /// The last `vestibule:navigate-self` from the parent: its origin and value.
    parent_said: RefCell<Option<(String, bool)>>,
    height: Cell<f64>,
    listeners: RefCell<Vec<Box<dyn std::any::Any>>>,
}

impl Embedder {
    /// The messenger of a page in `host`, for `room`; reads the embedding facts and starts
    /// reporting its height.
    pub fn start(host: Host, room: &str) -> Rc<Self> {
        let parent_navigates = matches!(
            host,
            Host::Framed {
                parent_navigates: true
            }
        );
        let this = Rc::new(Self {
            host,
            room: room.to_owned(),
            config: RefCell::new(None),
            pending: RefCell::new(Vec::new()),
            parent_navigates,
            parent_said: RefCell::new(None),
            height: Cell::new(0.0),
            listeners: RefCell::new(Vec::new()),
        });
        if this.host != Host::Page {
            this.fetch_config(1);
            this.observe_size();
            if matches!(this.host, Host::Framed { .. }) {
                this.listen_to_parent();
            }
        }
        this
    }

    fn fetch_config(self: &Rc<Self>, attempt: u32) {
        let this = Rc::clone(self);
        spawn_local(async move {
            match api::embedding(&this.room).await {
                Ok(info) => {
                    this.config.replace(Some(info));
                    let pending = std::mem::take(&mut *this.pending.borrow_mut());
                    for (message, token, then) in pending {
                        this.send(message, token.as_deref(), then);
                    }
                    this.send_height();
                }
                Err(_) if attempt < CONFIG_ATTEMPTS => {
                    let again = Rc::clone(&this);
                    set_timeout(
                        move || again.fetch_config(attempt + 1),
                        Duration::from_secs(2 * u64::from(attempt)),
                    );
                }
                Err(_) => {
                    // No origin to tell: nothing is sent, the page navigates as on its own.
                    let pending = std::mem::take(&mut *this.pending.borrow_mut());
                    for (_, _, then) in pending {
                        if let Some(then) = then {
                            then();
                        }
                    }
                }
            }
        });
    }

    /// Reports a ticket's status (`vestibule:status`).
    pub fn status(&self, status: &TicketStatus) {
        if self.host == Host::Page {
            return;
        }
        let number = |n: Option<u64>| n.map_or(JsValue::NULL, |n| JsValue::from_f64(n as f64));
        let message = self.message(embed::STATUS);
        set(
            &message,
            "status",
            &JsValue::from_str(status.status.as_str()),
        );
        set(&message, "position", &number(status.position));
        set(&message, "etaSeconds", &number(status.eta_seconds));
        self.send(message, None, None);
    }

    /// Reports the turn (`vestibule:admitted`) with the checkout URL (absolute) and, when the
    /// room allows it, the token; then runs `go` (leaving for checkout) unless the embedder
    /// navigates itself.
    pub fn admitted(&self, checkout: &str, token: Option<&str>, go: Then) {
        if self.host == Host::Page {
            if let Some(go) = go {
                go();
            }
            return;
        }
        let message = self.message(embed::ADMITTED);
        set(
            &message,
            "checkoutUrl",
            &JsValue::from_str(&absolute(checkout)),
        );
        self.send(message, token, go);
    }

    /// `{type: kind, room}`.
    fn message(&self, kind: &str) -> Object {
        let message = Object::new();
        set(&message, "type", &JsValue::from_str(kind));
        set(&message, "room", &JsValue::from_str(&self.room));
        message
    }

    fn send(&self, message: Object, token: Option<&str>, then: Then) {
        let config = self.config.borrow();
        let Some(config) = config.as_ref() else {
            drop(config);
            self.pending
                .borrow_mut()
                .push((message, token.map(str::to_owned), then));
            return;
        };
        if let (Some(token), true) = (token, config.share_token_with_embedder) {
            set(&message, "entryToken", &JsValue::from_str(token));
        }
        let kind = Reflect::get(&message, &JsValue::from_str("type"))
            .ok()
            .and_then(|k| k.as_string())
            .unwrap_or_default();
        let value: &JsValue = message.as_ref();
        let stays = match &self.host {
            Host::Page => false,
            Host::Framed { .. } => {
                if let Ok(Some(parent)) = window().parent() {
                    for origin in &config.allowed_origins {
                        let _ = parent.post_message(value, origin);
                    }
                }
                let said = self.parent_said.borrow();
                let parent_stays = said.as_ref().is_some_and(|(origin, navigate_self)| {
                    !navigate_self && config.allowed_origins.contains(origin)
                });
                self.parent_navigates || parent_stays
            }
            Host::Widget(element) => {
                let here = window().location().origin().unwrap_or_default();
                if !config.allowed_origins.contains(&here) {
                    false
                } else {
                    let init = web_sys::CustomEventInit::new();
                    init.set_detail(value);
                    init.set_bubbles(true);
                    init.set_cancelable(kind == embed::ADMITTED);
                    web_sys::CustomEvent::new_with_event_init_dict(&kind, &init)
                        .ok()
                        .and_then(|event| element.dispatch_event(&event).ok())
                        .is_some_and(|not_cancelled| !not_cancelled)
                }
            }
        };
        if let (Some(then), false) = (then, stays) {
            then();
        }
    }

    fn send_height(&self) {
        let height = self.height.get();
        if height > 0.0 && self.config.borrow().is_some() {
            let message = self.message(embed::RESIZE);
            set(&message, "height", &JsValue::from_f64(height));
            self.send(message, None, None);
        }
    }

    /// Reports the height (`vestibule:resize`) whenever it changes: the document's when framed,
    /// the element's as a widget.
    fn observe_size(self: &Rc<Self>) {
        let target = match &self.host {
            Host::Widget(element) => element.clone(),
            _ => match document().document_element() {
                Some(root) => root,
                None => return,
            },
        };
        let this = Rc::downgrade(self);
        let measured = target.clone();
        let callback = Closure::<dyn FnMut()>::new(move || {
            let Some(this) = this.upgrade() else { return };
            let height = measured.get_bounding_client_rect().height().ceil();
            if height != this.height.replace(height) {
                this.send_height();
            }
        });
        if let Ok(observer) = web_sys::ResizeObserver::new(callback.as_ref().unchecked_ref()) {
            observer.observe(&target);
            self.listeners.borrow_mut().push(Box::new(observer));
        }
        self.listeners.borrow_mut().push(Box::new(callback));
    }

    /// Remembers `{type: "vestibule:navigate-self", value}` from the parent window (messages
    /// from any other window are ignored); `false` from a configured origin means the parent navigates and the page stays.
    fn listen_to_parent(self: &Rc<Self>) {
        let this = Rc::downgrade(self);
        let callback = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(
            move |event: web_sys::MessageEvent| {
                let Some(this) = this.upgrade() else { return };
                // Only the parent decides, not another frame or window of any origin.
                let from_parent = match (event.source(), window().parent()) {
                    (Some(source), Ok(Some(parent))) => Object::is(&source, parent.as_ref()),
                    _ => false,
                };
                if !from_parent {
                    return;
                }
                let data = event.data();
                let field = |name: &str| Reflect::get(&data, &JsValue::from_str(name));
                let is_navigate = field("type")
                    .ok()
                    .and_then(|t| t.as_string())
                    .is_some_and(|t| t == embed::NAVIGATE_SELF);
                if let (true, Some(value)) =
                    (is_navigate, field("value").ok().and_then(|v| v.as_bool()))
                {
                    // Checked against the configured origins when it matters (`send`).
                    this.parent_said.replace(Some((event.origin(), value)));
                }
            },
        );
        let _ =
            window().add_event_listener_with_callback("message", callback.as_ref().unchecked_ref());
        self.listeners.borrow_mut().push(Box::new(callback));
    }
}

fn set(object: &Object, name: &str, value: &JsValue) {
    let _ = Reflect::set(object, &JsValue::from_str(name), value);
}

/// `href` resolved against the current document (the checkout link may be a path).
fn absolute(href: &str) -> String {
    let base = window().location().href().unwrap_or_default();
    web_sys::Url::new_with_base(href, &base).map_or_else(|_| href.to_owned(), |url| url.href())
}
