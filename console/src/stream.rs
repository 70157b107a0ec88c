//! The admin event stream, read with `fetch` and a streaming body: `EventSource` cannot send the
//! bearer header. The SSE text is parsed here ([`take_events`]); a broken or silent stream is
//! opened again after a growing pause (1 s, 2 s, … 10 s); a refused token signs out.
//!
//! The charts' first 15 minutes come from the server's history of the room ([`load_history`]),
//! read when a room is shown and again after the stream reconnects (to fill the gap).

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use js_sys::{Reflect, Uint8Array};
use leptos::prelude::*;
use leptos::task::spawn_local;
use vestibule_shared::admin_events::{AdminEvent, FigureHistory, ADMIN_EVENT_NAME};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, Headers, ReadableStreamDefaultReader, RequestInit, Response};

use crate::api::{self, api_url, stored_token};
use crate::state::{Console, Link};

/// A stream silent this long is dead (the server sends an event every second, a comment every
/// 10 s at worst).
const SILENT_LIMIT: Duration = Duration::from_secs(15);

/// Longest pause between reconnections.
const MAX_PAUSE: Duration = Duration::from_secs(10);

/// Complete SSE blocks taken off the front of `buffer`, as `(event name, data)`; an incomplete
/// block stays. Comments and blocks without data are skipped.
pub fn take_events(buffer: &mut Vec<u8>) -> Vec<(String, String)> {
    let mut events = Vec::new();
    while let Some(end) = find_block_end(buffer) {
        let block: Vec<u8> = buffer.drain(..end.0 + end.1).collect();
        let text = String::from_utf8_lossy(&block[..end.0]);
        let mut name = String::from("message");
        let mut data: Vec<&str> = Vec::new();
        for line in text.lines() {
            if let Some(value) = line.strip_prefix("event:") {
                name = value.trim().to_owned();
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push(value.strip_prefix(' ').unwrap_or(value));
            }
        }
        if !data.is_empty() {
            events.push((name, data.join("\n")));
        }
    }
    events
}

/// Where the first block ends: `(its length, the separator's length)`.
fn find_block_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer
        .windows(2)
        .position(|pair| pair == b"\n\n")
        .map(|at| (at, 2));
    let crlf = buffer
        .windows(4)
        .position(|quad| quad == b"\r\n\r\n")
        .map(|at| (at, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// How one connection ended.
enum Ended {
    /// 401/403: sign out.
    Refused,
    /// Anything else: try again.
    Broken,
}

/// Reads `room`'s history (`GET …/admin/rooms/{room}/history`) into the charts' samples,
/// merged with what the stream brought meanwhile ([`crate::state::History::merge`]). A
/// server without it (older) or a failed read leaves the charts to the stream alone.
pub fn load_history(console: Console, room: String) {
    let session = console.session.get_untracked();
    spawn_local(async move {
        let path = format!("admin/rooms/{room}/history");
        match api::call("GET", &path, None).await {
            Ok(answer) => {
                let Ok(history) = serde_json::from_value::<FigureHistory>(answer.body) else {
                    return;
                };
                // A history read for an ended session is not the new one's.
                if console.session.get_untracked() == session {
                    console.history.update(|samples| samples.merge(&history));
                }
            }
            Err(error) if error.is_auth() && console.session.get_untracked() == session => {
                console.sign_out(true);
            }
            Err(_) => {}
        }
    });
}

/// Starts reading the stream for the current session; stops when the session changes.
pub fn start(console: Console) {
    let session = console.session.get_untracked();
    spawn_local(async move {
        let mut pause = Duration::from_secs(1);
        let mut first = true;
        loop {
            if console.session.get_untracked() != session || console.token.get_untracked().is_none()
            {
                return;
            }
            console.link.set(Link::Connecting);
            // After a break the history fills the shown room's gap (the room view reads it
            // when it is shown, so the first connection needs none).
            if !std::mem::take(&mut first) {
                if let Some(room) = console.selected.get_untracked() {
                    load_history(console, room);
                }
            }
            match connect(console, session).await {
                Ended::Refused => {
                    if console.session.get_untracked() == session {
                        console.sign_out(true);
                    }
                    return;
                }
                Ended::Broken => {
                    if console.link.get_untracked() == Link::Live {
                        pause = Duration::from_secs(1);
                    }
                    console.link.set(Link::Lost);
                }
            }
            sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    });
}

/// Waits `duration` (a JS timer behind a promise).
pub async fn sleep(duration: Duration) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let _ = window().set_timeout_with_callback_and_timeout_and_arguments_0(
            &resolve,
            duration.as_millis() as i32,
        );
    });
    let _ = JsFuture::from(promise).await;
}

/// One connection: open, read events until it breaks, goes silent or the session ends.
async fn connect(console: Console, session: u32) -> Ended {
    let Some(token) = stored_token() else {
        return Ended::Refused;
    };
    let Ok(controller) = AbortController::new() else {
        return Ended::Broken;
    };
    let init = RequestInit::new();
    init.set_method("GET");
    if let Ok(headers) = Headers::new() {
        let _ = headers.set("Authorization", &format!("Bearer {token}"));
        let _ = headers.set("Accept", "text/event-stream");
        init.set_headers(&headers);
    }
    init.set_cache(web_sys::RequestCache::NoStore);
    init.set_signal(Some(&controller.signal()));
    let fetched = window().fetch_with_str_and_init(&api_url("admin/events"), &init);
    let Ok(response) = JsFuture::from(fetched).await else {
        return Ended::Broken;
    };
    let Ok(response) = response.dyn_into::<Response>() else {
        return Ended::Broken;
    };
    if matches!(response.status(), 401 | 403) {
        return Ended::Refused;
    }
    let Some(body) = response.body().filter(|_| response.ok()) else {
        return Ended::Broken;
    };
    let reader: ReadableStreamDefaultReader = body.get_reader().unchecked_into();
    // The watchdog aborts a stream silent for too long (or of an ended session).
    let heard = Rc::new(Cell::new(js_sys::Date::now()));
    let watchdog = {
        let (heard, controller) = (heard.clone(), controller.clone());
        set_interval_with_handle(
            move || {
                let silent = js_sys::Date::now() - heard.get() > SILENT_LIMIT.as_millis() as f64;
                if silent || console.session.get_untracked() != session {
                    controller.abort();
                }
            },
            Duration::from_secs(1),
        )
        .ok()
    };
    let mut buffer = Vec::new();
    let ended = loop {
        let Ok(chunk) = JsFuture::from(reader.read()).await else {
            break Ended::Broken;
        };
        let done = Reflect::get(&chunk, &JsValue::from_str("done"))
            .ok()
            .and_then(|done| done.as_bool())
            .unwrap_or(true);
        if done || console.session.get_untracked() != session {
            break Ended::Broken;
        }
        let Ok(value) = Reflect::get(&chunk, &JsValue::from_str("value")) else {
            break Ended::Broken;
        };
        heard.set(js_sys::Date::now());
        buffer.extend(Uint8Array::new(&value).to_vec());
        for (name, data) in take_events(&mut buffer) {
            if name != ADMIN_EVENT_NAME {
                continue;
            }
            if let Ok(event) = serde_json::from_str::<AdminEvent>(&data) {
                console.link.set(Link::Live);
                console.record(event);
            }
        }
    };
    if let Some(watchdog) = watchdog {
        watchdog.clear();
    }
    controller.abort();
    ended
}

#[cfg(test)]
mod tests {
    use super::take_events;

    #[test]
    fn events_are_taken_whole_and_the_rest_waits() {
        let mut buffer =
            b"event: figures\ndata: {\"a\":1}\n\n: keepalive\n\nevent: figures\ndata: {\"b\""
                .to_vec();
        let events = take_events(&mut buffer);
        assert_eq!(events, [("figures".to_owned(), "{\"a\":1}".to_owned())]);
        assert_eq!(buffer, b"event: figures\ndata: {\"b\"".to_vec());
        buffer.extend(b":2}\r\n\r\n");
        assert_eq!(
            take_events(&mut buffer),
            [("figures".to_owned(), "{\"b\":2}".to_owned())]
        );
        assert!(buffer.is_empty());
    }
}
