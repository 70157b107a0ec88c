//! The first answer, fetched before the WASM ran: a small script in `index.html` starts the
//! first join (or the stored ticket's poll) while the WASM downloads, and shows the place as
//! soon as it is known. The queue takes that answer over here instead of asking again, and the
//! waiting view replaces the early place with its own.
//!
//! The script leaves `window.vestibuleEarly = { room, ticketId, key, claimed, answer }`, where
//! `answer` is a promise of `{ status, retryAfter, body }` or `{ failure: "timeout" | "network" }`.

use js_sys::{Promise, Reflect};
use leptos::prelude::{document, window};
use vestibule_shared::TicketStatus;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::{
    api::{self, ApiError},
    storage::RoomMemory,
};

const HANDLE: &str = "vestibuleEarly";
/// The `id` of the place the script shows.
const EARLY_PLACE: &str = "early-place";

fn field(object: &JsValue, name: &str) -> Option<JsValue> {
    Reflect::get(object, &JsValue::from_str(name))
        .ok()
        .filter(|value| !value.is_undefined() && !value.is_null())
}

fn text_field(object: &JsValue, name: &str) -> Option<String> {
    field(object, name).and_then(|value| value.as_string())
}

/// The script's request, when it asked exactly what the page would ask now (the same room, the
/// same stored ticket, or a join with the same `Idempotency-Key`); `None` otherwise.
///
/// Taken once: the handle is removed and marked claimed, so the script shows no place after this.
pub fn claim(
    room: &str,
    ticket_id: Option<&str>,
    memory: &RoomMemory,
) -> Option<impl std::future::Future<Output = Result<TicketStatus, ApiError>>> {
    let window = window();
    let handle = field(&window, HANDLE)?;
    let _ = Reflect::delete_property(&window, &JsValue::from_str(HANDLE));
    let _ = Reflect::set(&handle, &JsValue::from_str("claimed"), &JsValue::TRUE);
    let same_request = text_field(&handle, "room").as_deref() == Some(room)
        && text_field(&handle, "ticketId").as_deref() == ticket_id
        && (ticket_id.is_some()
            || text_field(&handle, "key").as_deref() == Some(&memory.idempotency_key()));
    let answer: Promise = field(&handle, "answer")?.dyn_into().ok()?;
    same_request.then_some(async move {
        let answer = JsFuture::from(answer)
            .await
            .map_err(|_| ApiError::Network)?;
        match text_field(&answer, "failure").as_deref() {
            Some("timeout") => return Err(ApiError::Timeout),
            Some(_) => return Err(ApiError::Network),
            None => {}
        }
        let status = field(&answer, "status")
            .and_then(|s| s.as_f64())
            .ok_or(ApiError::Network)? as u16;
        let retry_after = text_field(&answer, "retryAfter");
        let body = text_field(&answer, "body").unwrap_or_default();
        api::parse(&api::read_answer(status, retry_after.as_deref(), body)?)
    })
}

/// Removes the place the script showed before the page ran; whether there was one.
pub fn remove_early_place() -> bool {
    match document().get_element_by_id(EARLY_PLACE) {
        Some(place) => {
            place.remove();
            true
        }
        None => false,
    }
}
