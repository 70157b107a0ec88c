//! The script widget: `widget.js` (served by the backend next to the page) sets
//! `window.vestibuleWidget = {base, css}` and loads this WASM; `main` then mounts the waiting
//! view into every `[data-vestibule-room]` element of the storefront's page instead of the body.
//!
//! Each element gets an open shadow root holding the page's stylesheet and the view, so the
//! storefront's CSS and the page's do not mix; the storefront styles the view through the custom
//! properties the stylesheet reads (`--accent`, `--card`, …, docs/embedding.md), which it sets on
//! the element. Every API call goes to `base` (cross-origin: `--cors-origins`); the ticket is kept
//! in the storefront origin's `localStorage` under `vestibule:{room}:…`, so a reload of the
//! storefront page finds it. Events: [`crate::embed`].

use leptos::prelude::*;
use wasm_bindgen::{JsCast, JsValue};

use crate::{page_params::PageParams, urls::set_widget_base, waiting::WaitingView};

/// `window.vestibuleWidget`: the folder `widget.js` came from and the stylesheet's URL.
pub struct WidgetSetup {
    /// Absolute base of the API and the page's files, e.g. `https://queue.shop.example/`.
    pub base: String,
    /// Absolute URL of the page's stylesheet.
    pub css: String,
}

impl WidgetSetup {
    /// What `widget.js` left for the WASM; `None` on the page itself.
    pub fn from_window() -> Option<Self> {
        let setup = js_sys::Reflect::get(&window(), &JsValue::from_str("vestibuleWidget")).ok()?;
        let field = |name: &str| {
            js_sys::Reflect::get(&setup, &JsValue::from_str(name))
                .ok()
                .and_then(|v| v.as_string())
        };
        Some(Self {
            base: field("base")?,
            css: field("css")?,
        })
    }

    /// Mounts the waiting view into every `[data-vestibule-room]` element not mounted yet.
    pub fn mount_all(&self) {
        set_widget_base(&self.base);
        let Ok(elements) = document().query_selector_all("[data-vestibule-room]") else {
            return;
        };
        for index in 0..elements.length() {
            let Some(element) = elements
                .item(index)
                .and_then(|node| node.dyn_into::<web_sys::Element>().ok())
            else {
                continue;
            };
            if element.shadow_root().is_none() {
                self.mount(&element);
            }
        }
    }

    fn mount(&self, element: &web_sys::Element) -> Option<()> {
        let init = web_sys::ShadowRootInit::new(web_sys::ShadowRootMode::Open);
        let shadow = element.attach_shadow(&init).ok()?;
        let link = document().create_element("link").ok()?;
        link.set_attribute("rel", "stylesheet").ok()?;
        link.set_attribute("href", &self.css).ok()?;
        shadow.append_child(&link).ok()?;
        let container: web_sys::HtmlElement =
            document().create_element("div").ok()?.dyn_into().ok()?;
        container.set_class_name("widget");
        shadow.append_child(&container).ok()?;
        let params = PageParams::for_widget(element, &self.base);
        leptos::mount::mount_to(container, move || view! { <WaitingView params=params /> })
            .forget();
        Some(())
    }
}
