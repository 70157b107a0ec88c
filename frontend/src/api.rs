//! The JSON API v1 calls the page makes, all same-origin under the page's base
//! ([`crate::urls`]), and the errors they can end in.
//!
//! Every call has a deadline: an `AbortController` cancels the request (and the reading of its
//! body) when the answer takes longer, so a hung connection can never freeze the page.

use std::{cell::Cell, rc::Rc, time::Duration};

use leptos::prelude::{set_timeout_with_handle, window};
use vestibule_shared::bots::{Challenge, PROOF_OF_WORK_HEADER};
use vestibule_shared::draw::RoomNotOpen;
use vestibule_shared::{
    OrderReceipt, OrderRequest, TicketStatus, ENTRY_TOKEN_HEADER, IDEMPOTENCY_KEY_HEADER,
};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, Headers, RequestCache, RequestInit, Response};

use crate::json::FromJson;
use crate::urls::{current_base, encode_component, room_api_url};

/// Longest `Retry-After` the page honours; a larger value is treated as this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// Deadline of a join, poll or leave. The server answers these in milliseconds (its store calls
/// are bounded at 1 s by default); 6 s leaves room for a new connection on a slow mobile link.
pub const TICKET_CALL_TIMEOUT: Duration = Duration::from_secs(6);

/// Deadline of an order: above the server's own bound on the store call, so the page normally
/// hears the server's `504 store_timeout` rather than giving up first.
pub const ORDER_TIMEOUT: Duration = Duration::from_secs(8);

/// Why an API call did not give the expected answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// The server answered with an error status and (usually) a `vestibule_shared::ErrorBody`.
    Status {
        /// HTTP status, e.g. 404.
        status: u16,
        /// Error code from `vestibule_shared::error_code`, empty when the body was not the JSON
        /// error shape.
        code: String,
        /// `Retry-After` in seconds, when sent (503, 504 and 429; 409 `room_not_open`).
        retry_after: Option<Duration>,
        /// The body of a refused join (409 `room_not_open`, `sold_out`, `room_closed`): the
        /// room's times, names and sold-out message.
        refusal: Option<Box<RoomNotOpen>>,
    },
    /// No answer: offline, server down, connection reset.
    Network,
    /// No complete answer before the call's deadline (the request was aborted).
    Timeout,
    /// A success status with a body that is not the expected JSON (e.g. a captive portal page).
    Decode,
}

impl ApiError {
    /// The error code of the answer, e.g. `"room_not_found"`.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Status { code, .. } if !code.is_empty() => Some(code),
            _ => None,
        }
    }

    /// Whether trying again later can help: no answer, a server-side failure or a rate limit.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Network | Self::Timeout | Self::Decode => true,
            Self::Status { status, .. } => matches!(status, 408 | 429 | 500..=599),
        }
    }

    /// Whether anything answered at all. A server that answers is busy or failing and gets the
    /// long back-off; a missing answer (cut or hung link) costs it nothing to retry sooner.
    pub fn server_answered(&self) -> bool {
        matches!(self, Self::Status { .. } | Self::Decode)
    }

    /// How long the server asked the client to wait (`Retry-After`), if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Whether the room named in the request does not exist (404 `room_not_found`), or was
    /// deleted by an operator, which ended every ticket in it (410 `room_deleted`).
    pub fn is_room_not_found(&self) -> bool {
        matches!(
            self.code(),
            Some(
                vestibule_shared::error_code::ROOM_NOT_FOUND
                    | vestibule_shared::error_code::ROOM_DELETED
            )
        )
    }

    /// The room state of a join refused for good: 409 `sold_out` → `SOLD_OUT`, 409 `room_closed`
    /// → `CLOSED`.
    pub fn refused_join(&self) -> Option<vestibule_shared::RoomState> {
        use vestibule_shared::{error_code, RoomState};
        match self.code() {
            Some(error_code::SOLD_OUT) => Some(RoomState::SoldOut),
            Some(error_code::ROOM_CLOSED) => Some(RoomState::Closed),
            _ => None,
        }
    }

    /// The body of a join refused with a 409 that names the room's times, names and message.
    pub fn refusal(&self) -> Option<&RoomNotOpen> {
        match self {
            Self::Status { refusal, .. } => refusal.as_deref(),
            _ => None,
        }
    }

    /// Whether the room does not take joins yet (409 `room_not_open`).
    pub fn is_room_not_open(&self) -> bool {
        self.code() == Some(vestibule_shared::error_code::ROOM_NOT_OPEN)
    }

    /// Whether the ticket named in the request is unknown (404 `ticket_not_found`).
    pub fn is_ticket_not_found(&self) -> bool {
        self.code() == Some(vestibule_shared::error_code::TICKET_NOT_FOUND)
    }
}

/// `{base}api/v1/rooms/{room}/{rest}` with the room percent-encoded.
fn room_url(room: &str, rest: &str) -> String {
    room_api_url(&current_base(), room, rest)
}

fn tickets_path(room: &str) -> String {
    room_url(room, "tickets")
}

fn ticket_path(room: &str, ticket_id: &str) -> String {
    format!("{}/{}", tickets_path(room), encode_component(ticket_id))
}

/// The SSE stream URL of a ticket (`event: status` with a [`TicketStatus`] as data, and
/// `event: keepalive` while nothing changes).
pub fn events_url(room: &str, ticket_id: &str) -> String {
    format!("{}/events", ticket_path(room, ticket_id))
}

/// Joins `room` (201 new / 200 existing ticket); the idempotency key makes a retry safe. With
/// `proof`, sends the solved challenge (`{challenge}:{nonce}`, [`crate::proof`]).
///
/// # Errors
/// 404 `room_not_found`, 503 with `Retry-After`, `proof_of_work_*` (the room asks for proof of
/// work), [`ApiError::Network`] when offline, [`ApiError::Timeout`] past [`TICKET_CALL_TIMEOUT`].
pub async fn join(
    room: &str,
    idempotency_key: &str,
    proof: Option<&str>,
) -> Result<TicketStatus, ApiError> {
    let mut request =
        Request::post(&tickets_path(room)).header(IDEMPOTENCY_KEY_HEADER, idempotency_key);
    if let Some(proof) = proof {
        request = request.header(PROOF_OF_WORK_HEADER, proof);
    }
    parse(&exchange(request, None, TICKET_CALL_TIMEOUT).await?)
}

/// A proof-of-work challenge for one join (docs/bots.md, "Proof of work").
///
/// # Errors
/// 404 `room_not_found`, 503, [`ApiError::Network`], [`ApiError::Timeout`].
pub async fn challenge(room: &str) -> Result<Challenge, ApiError> {
    let request = Request::get(&room_url(room, "challenge")).no_store();
    parse(&exchange(request, None, TICKET_CALL_TIMEOUT).await?)
}

/// The current status of a ticket.
///
/// # Errors
/// 404 `ticket_not_found` / `room_not_found`, 503 with `Retry-After`, [`ApiError::Network`],
/// [`ApiError::Timeout`].
pub async fn ticket(room: &str, ticket_id: &str) -> Result<TicketStatus, ApiError> {
    // A poll must reach the server: a cached answer would freeze the position.
    let request = Request::get(&ticket_path(room, ticket_id)).no_store();
    parse(&exchange(request, None, TICKET_CALL_TIMEOUT).await?)
}

/// Leaves the queue (or gives back an unused token): 204, also when the ticket had ended.
///
/// # Errors
/// 404 `ticket_not_found` / `room_not_found`, 503 with `Retry-After`, [`ApiError::Network`],
/// [`ApiError::Timeout`].
pub async fn leave(room: &str, ticket_id: &str) -> Result<(), ApiError> {
    let request = Request::delete(&ticket_path(room, ticket_id));
    exchange(request, None, TICKET_CALL_TIMEOUT).await.map(drop)
}

/// "Still here" from a hidden tab that does not poll: 204 while the ticket waits.
///
/// # Errors
/// 409 `conflict` (no longer waiting: poll it), 404, 503, [`ApiError::Network`],
/// [`ApiError::Timeout`].
pub async fn heartbeat(room: &str, ticket_id: &str) -> Result<(), ApiError> {
    let request = Request::post(&format!("{}/heartbeat", ticket_path(room, ticket_id)));
    exchange(request, None, TICKET_CALL_TIMEOUT).await.map(drop)
}

/// Places the demo order, sending the entry token (if any) in `X-Entry-Token` and the order's
/// `Idempotency-Key`: a retry with the same key gets the same receipt, never `entry_token_used`.
///
/// # Errors
/// 403 `entry_token_missing|unknown|expired|used|wrong_room`, 409 `idempotency_key_reused`,
/// 503 (surely not done), 504 `store_timeout` (outcome unknown: retry with the same key),
/// [`ApiError::Network`], [`ApiError::Timeout`] past [`ORDER_TIMEOUT`].
pub async fn place_order(
    room: &str,
    entry_token: Option<&str>,
    idempotency_key: &str,
    order: &OrderRequest,
) -> Result<OrderReceipt, ApiError> {
    let mut request =
        Request::post(&room_url(room, "orders")).header(IDEMPOTENCY_KEY_HEADER, idempotency_key);
    if let Some(token) = entry_token {
        request = request.header(ENTRY_TOKEN_HEADER, token);
    }
    let body = crate::json::order_request(order);
    parse(&exchange(request, Some(body), ORDER_TIMEOUT).await?)
}

/// The body of `POST …/rooms/{room}/session` (gate mode): `{"entryToken": "…"}`, the entry
/// token sent in the body so that it never appears in a URL.
fn session_request(entry_token: &str) -> String {
    crate::json::Writer::object()
        .string("entryToken", Some(entry_token))
        .end()
}

/// Hands the entry token to the server in gate mode: `POST {base}api/v1/rooms/{room}/session`
/// with `{"entryToken": "…"}`; the server answers 200 `{"room", "expiresAt"}` (Unix ms) and sets
/// an HttpOnly session cookie that the gate checks on the store's protected paths.
///
/// # Errors
/// 403 `entry_token_*` (unknown, expired, used, wrong room), 404 (no gate mode on this server),
/// 503 with `Retry-After`, [`ApiError::Network`], [`ApiError::Timeout`] past
/// [`TICKET_CALL_TIMEOUT`].
pub async fn open_session(room: &str, entry_token: &str) -> Result<(), ApiError> {
    let body = session_request(entry_token);
    let request = Request::post(&room_url(room, "session"));
    exchange(request, Some(body), TICKET_CALL_TIMEOUT)
        .await
        .map(drop)
}

/// What the page may tell the storefront embedding it ([`crate::embed`]).
///
/// # Errors
/// 404 `room_not_found`, [`ApiError::Network`] (also a refused CORS request: a storefront
/// origin that is not configured), [`ApiError::Timeout`] past [`TICKET_CALL_TIMEOUT`].
pub async fn embedding(room: &str) -> Result<vestibule_shared::embed::EmbeddingInfo, ApiError> {
    let request = Request::get(&room_url(room, "embedding")).no_store();
    parse(&exchange(request, None, TICKET_CALL_TIMEOUT).await?)
}

/// The JSON body of a 2xx answer as `T`.
///
/// # Errors
/// [`ApiError::Decode`] when it is not.
pub fn parse<T: FromJson>(body: &str) -> Result<T, ApiError> {
    crate::json::decode(body).ok_or(ApiError::Decode)
}

/// The body of a 2xx answer; any other status as [`ApiError::Status`] with its error code and
/// `Retry-After` (capped at [`MAX_RETRY_AFTER`]).
///
/// # Errors
/// [`ApiError::Status`] for a status outside 200–299.
pub fn read_answer(
    status: u16,
    retry_after: Option<&str>,
    body: String,
) -> Result<String, ApiError> {
    if (200..300).contains(&status) {
        return Ok(body);
    }
    // Every error body is an `ErrorBody`; a refused join's has more (optional) fields, so one
    // decoder of the larger shape reads both.
    let body = crate::json::decode::<RoomNotOpen>(&body);
    Err(ApiError::Status {
        status,
        code: body
            .as_ref()
            .map(|body| body.error.clone())
            .unwrap_or_default(),
        refusal: body.filter(|_| status == 409).map(Box::new),
        retry_after: retry_after
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|secs| Duration::from_secs(secs).min(MAX_RETRY_AFTER)),
    })
}

/// A request about to be sent: method, URL, headers and whether it must reach the server
/// (built on `fetch` itself, which is smaller in the WASM than gloo-net's builder).
struct Request {
    method: &'static str,
    url: String,
    headers: Vec<(&'static str, String)>,
    no_store: bool,
}

impl Request {
    fn new(method: &'static str, url: &str) -> Self {
        Self {
            method,
            url: url.to_owned(),
            headers: vec![("Accept", "application/json".to_owned())],
            no_store: false,
        }
    }

    fn get(url: &str) -> Self {
        Self::new("GET", url)
    }

    fn post(url: &str) -> Self {
        Self::new("POST", url)
    }

    fn delete(url: &str) -> Self {
        Self::new("DELETE", url)
    }

    fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_owned()));
        self
    }

    /// `cache: "no-store"`: never answered from the HTTP cache.
    fn no_store(mut self) -> Self {
        self.no_store = true;
        self
    }

    /// The `fetch` request, aborted by `controller`; with `json_body` as its JSON body.
    fn build(
        self,
        controller: &AbortController,
        json_body: Option<String>,
    ) -> Option<web_sys::Request> {
        let init = RequestInit::new();
        init.set_method(self.method);
        init.set_signal(Some(&controller.signal()));
        if self.no_store {
            init.set_cache(RequestCache::NoStore);
        }
        let headers = Headers::new().ok()?;
        for (name, value) in &self.headers {
            headers.set(name, value).ok()?;
        }
        if let Some(body) = json_body {
            headers.set("Content-Type", "application/json").ok()?;
            init.set_body(&JsValue::from_str(&body));
        }
        init.set_headers(&headers);
        web_sys::Request::new_with_str_and_init(&self.url, &init).ok()
    }
}

/// Sends the request and reads the whole answer before `timeout`; the body text on a 2xx.
async fn exchange(
    request: Request,
    json_body: Option<String>,
    timeout: Duration,
) -> Result<String, ApiError> {
    let controller = AbortController::new().map_err(|_| ApiError::Network)?;
    let request = request
        .build(&controller, json_body)
        .ok_or(ApiError::Decode)?;

    let timed_out = Rc::new(Cell::new(false));
    let flag = Rc::clone(&timed_out);
    let deadline = set_timeout_with_handle(
        move || {
            flag.set(true);
            controller.abort();
        },
        timeout,
    )
    .ok();
    let result = async {
        let response: Response = JsFuture::from(window().fetch_with_request(&request))
            .await
            .map_err(|_| ApiError::Network)?
            .unchecked_into();
        let retry_after = response.headers().get("Retry-After").ok().flatten();
        let text = JsFuture::from(response.text().map_err(|_| ApiError::Network)?)
            .await
            .map_err(|_| ApiError::Network)?
            .as_string()
            .unwrap_or_default();
        read_answer(response.status(), retry_after.as_deref(), text)
    }
    .await;
    if let Some(deadline) = deadline {
        deadline.clear();
    }
    match result {
        Err(ApiError::Network) if timed_out.get() => Err(ApiError::Timeout),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vestibule_shared::error_code;

    fn status(status: u16, code: &str) -> ApiError {
        ApiError::Status {
            status,
            code: code.to_owned(),
            retry_after: None,
            refusal: None,
        }
    }

    #[test]
    fn outages_timeouts_and_rate_limits_are_worth_retrying() {
        assert!(ApiError::Network.is_transient());
        assert!(ApiError::Timeout.is_transient());
        assert!(status(503, error_code::STORE_UNAVAILABLE).is_transient());
        assert!(status(504, error_code::STORE_TIMEOUT).is_transient());
        assert!(status(429, error_code::RATE_LIMITED).is_transient());
        assert!(status(502, "").is_transient());
    }

    #[test]
    fn client_errors_are_not_retried_blindly() {
        assert!(!status(404, error_code::ROOM_NOT_FOUND).is_transient());
        assert!(!status(400, error_code::BAD_REQUEST).is_transient());
        assert!(status(404, error_code::TICKET_NOT_FOUND).is_ticket_not_found());
        assert!(status(404, error_code::ROOM_NOT_FOUND).is_room_not_found());
    }

    #[test]
    fn only_an_answer_counts_as_the_server_answering() {
        assert!(status(503, "").server_answered());
        assert!(ApiError::Decode.server_answered());
        assert!(!ApiError::Network.server_answered());
        assert!(!ApiError::Timeout.server_answered());
    }

    #[test]
    fn the_session_hand_off_sends_the_token_in_the_body_only() {
        let body = session_request("tok-1");
        assert_eq!(body, r#"{"entryToken":"tok-1"}"#);
    }
}
