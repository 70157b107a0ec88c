//! Moving keyboard focus to the result of an action.
//!
//! A button that disappears or is disabled after a click drops focus to the page body, and a
//! keyboard or screen-reader user loses their place; the page moves focus to what changed.

use leptos::prelude::{document, request_animation_frame};
use wasm_bindgen::JsCast;
use web_sys::HtmlElement;

/// Focuses the element with `id` once the current update is on screen (the element may be
/// rendered by it). The target needs `tabindex="-1"` unless it is focusable anyway.
pub fn focus_after_render(id: &'static str) {
    request_animation_frame(move || {
        if let Some(element) = document()
            .get_element_by_id(id)
            .and_then(|e| e.dyn_into::<HtmlElement>().ok())
        {
            let _ = element.focus();
        }
    });
}
