//! Proof of work on the page (README "Bots at the door"): when a join is refused for want of
//! one, get a challenge, solve it without freezing the page, join with the solution.
//!
//! The solver runs on the main thread in slices of [`SLICE_MS`]: between slices it yields to the
//! event loop through a `MessageChannel` message (no 4 ms timer clamp), so input, animation
//! frames and the view keep running. Meanwhile the view says "Checking your browser…"
//! ([`crate::connection::QueueView::checking`]).

use leptos::prelude::*;
use vestibule_shared::bots::solve_range;
use vestibule_shared::TicketStatus;
use wasm_bindgen::{JsCast, JsValue};

use crate::api::{self, ApiError};

/// Longest the solver holds the main thread at a time, ms.
const SLICE_MS: f64 = 10.0;
/// Nonces tried between two looks at the clock.
const BATCH: u64 = 1024;
/// Challenges tried per join when the server refuses a solution (expired while solving, …).
const ATTEMPTS: usize = 3;

/// Whether `error` is a refusal of the join's proof of work (get a challenge and solve it).
pub fn needed(error: &ApiError) -> bool {
    error
        .code()
        .is_some_and(|code| code.starts_with("proof_of_work_"))
}

/// Joins `room` with a solved challenge, showing `checking` while solving; gets a new challenge
/// when the server refuses a solution (at most [`ATTEMPTS`] times).
///
/// # Errors
/// As [`api::join`] and [`api::challenge`].
pub async fn join(
    room: &str,
    idempotency_key: &str,
    checking: RwSignal<bool>,
) -> Result<TicketStatus, ApiError> {
    let mut refused = None;
    for _ in 0..ATTEMPTS {
        let challenge = api::challenge(room).await?;
        let proof = if challenge.difficulty == 0 {
            None
        } else {
            checking.set(true);
            let nonce = solve(&challenge.challenge, challenge.difficulty).await;
            checking.set(false);
            Some(format!("{}:{nonce}", challenge.challenge))
        };
        match api::join(room, idempotency_key, proof.as_deref()).await {
            Err(error) if needed(&error) => refused = Some(error),
            answer => return answer,
        }
    }
    Err(refused.unwrap_or(ApiError::Decode))
}

/// Finds a nonce for `challenge` at `difficulty` bits, yielding every [`SLICE_MS`].
async fn solve(challenge: &str, difficulty: u8) -> u64 {
    let mut start = 0u64;
    loop {
        let began = js_sys::Date::now();
        while js_sys::Date::now() - began < SLICE_MS {
            if let Some(nonce) = solve_range(challenge, difficulty, start, BATCH) {
                return nonce;
            }
            start += BATCH;
        }
        yield_to_page().await;
    }
}

/// Lets the browser run what is waiting (input, frames, timers) before going on.
async fn yield_to_page() {
    let Ok(channel) = web_sys::MessageChannel::new() else {
        return;
    };
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        channel.port1().set_onmessage(Some(resolve.unchecked_ref()));
        let _ = channel.port2().post_message(&JsValue::NULL);
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}
