//! Moving keyboard focus to the result of an action.
//!
//! A button that disappears or is disabled after a click drops focus to the page body, and a
//! keyboard or screen-reader user loses their place; the page moves focus to what changed.
//!
//! The target is looked up in the tree the action happened in: the document on the page, the
//! storefront element's shadow root in the widget (`document.getElementById` never
//! finds an element there).

use leptos::prelude::{document, request_animation_frame};
use wasm_bindgen::JsCast;
use web_sys::{HtmlElement, Node, ShadowRoot};

/// Focuses the element with `id` once the current update is on screen (the element may be
/// rendered by it), looking in the tree of `near` (the clicked element's document or shadow
/// root). The target needs `tabindex="-1"` unless it is focusable anyway.
pub fn focus_after_render(near: &web_sys::Event, id: &'static str) {
    let root = near
        .target()
        .and_then(|target| target.dyn_into::<Node>().ok())
        .map(|node| node.get_root_node())
        .and_then(|root| root.dyn_into::<ShadowRoot>().ok());
    request_animation_frame(move || {
        let element = match &root {
            Some(shadow) => shadow.get_element_by_id(id),
            None => document().get_element_by_id(id),
        };
        if let Some(element) = element.and_then(|e| e.dyn_into::<HtmlElement>().ok()) {
            let _ = element.focus();
        }
    });
}

/// [`focus_after_render`] in the document (the checkout page, never in a shadow root).
pub fn focus_in_document_after_render(id: &'static str) {
    request_animation_frame(move || {
        if let Some(element) = document()
            .get_element_by_id(id)
            .and_then(|e| e.dyn_into::<HtmlElement>().ok())
        {
            let _ = element.focus();
        }
    });
}
