//! The JSON API v1 calls the page makes, all same-origin, and the errors they can end in.

use std::time::Duration;

use gloo_net::http::{Request, Response};
use vestibule_shared::{
    error_code, ErrorBody, OrderReceipt, OrderRequest, TicketStatus, ENTRY_TOKEN_HEADER,
    IDEMPOTENCY_KEY_HEADER,
};
use web_sys::RequestCache;

/// Longest `Retry-After` the page honours; a larger value is treated as this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// Why an API call did not give the expected answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// The server answered with an error status and (usually) an [`ErrorBody`].
    Status {
        /// HTTP status, e.g. 404.
        status: u16,
        /// Error code from [`error_code`], empty when the body was not the JSON error shape.
        code: String,
        /// `Retry-After` in seconds, when sent (503 and 429).
        retry_after: Option<Duration>,
    },
    /// No answer: offline, server down, connection reset.
    Network,
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
            Self::Network | Self::Decode => true,
            Self::Status { status, .. } => matches!(status, 408 | 429 | 500..=599),
        }
    }

    /// How long the server asked the client to wait (`Retry-After`), if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Whether the room named in the request does not exist (404 `room_not_found`).
    pub fn is_room_not_found(&self) -> bool {
        self.code() == Some(error_code::ROOM_NOT_FOUND)
    }

    /// Whether the ticket named in the request is unknown (404 `ticket_not_found`).
    pub fn is_ticket_not_found(&self) -> bool {
        self.code() == Some(error_code::TICKET_NOT_FOUND)
    }
}

fn tickets_path(room: &str) -> String {
    format!("/api/v1/rooms/{}/tickets", encode(room))
}

fn ticket_path(room: &str, ticket_id: &str) -> String {
    format!("{}/{}", tickets_path(room), encode(ticket_id))
}

fn encode(segment: &str) -> String {
    String::from(js_sys::encode_uri_component(segment))
}

/// The SSE stream URL of a ticket (`event: status` with a [`TicketStatus`] as data).
pub fn events_url(room: &str, ticket_id: &str) -> String {
    format!("{}/events", ticket_path(room, ticket_id))
}

/// Joins `room` (201 new / 200 existing ticket); the idempotency key makes a retry safe.
///
/// # Errors
/// 404 `room_not_found`, 503 with `Retry-After`, [`ApiError::Network`] when offline.
pub async fn join(room: &str, idempotency_key: &str) -> Result<TicketStatus, ApiError> {
    let response = Request::post(&tickets_path(room))
        .header(IDEMPOTENCY_KEY_HEADER, idempotency_key)
        .header("Accept", "application/json")
        .send()
        .await
        .map_err(|_| ApiError::Network)?;
    decode(response).await
}

/// The current status of a ticket.
///
/// # Errors
/// 404 `ticket_not_found` / `room_not_found`, 503 with `Retry-After`, [`ApiError::Network`].
pub async fn ticket(room: &str, ticket_id: &str) -> Result<TicketStatus, ApiError> {
    let response = Request::get(&ticket_path(room, ticket_id))
        .header("Accept", "application/json")
        // A poll must reach the server: a cached answer would freeze the position.
        .cache(RequestCache::NoStore)
        .send()
        .await
        .map_err(|_| ApiError::Network)?;
    decode(response).await
}

/// Leaves the queue (or gives back an unused token): 204, also when the ticket had ended.
///
/// # Errors
/// 404 `ticket_not_found` / `room_not_found`, 503 with `Retry-After`, [`ApiError::Network`].
pub async fn leave(room: &str, ticket_id: &str) -> Result<(), ApiError> {
    let response = Request::delete(&ticket_path(room, ticket_id))
        .header("Accept", "application/json")
        .send()
        .await
        .map_err(|_| ApiError::Network)?;
    if response.ok() {
        return Ok(());
    }
    decode::<()>(response).await
}

/// Places the demo order, sending the entry token (if any) in `X-Entry-Token`.
///
/// # Errors
/// 403 `entry_token_missing|unknown|expired|used|wrong_room`, 503, [`ApiError::Network`].
pub async fn place_order(
    room: &str,
    entry_token: Option<&str>,
    order: &OrderRequest,
) -> Result<OrderReceipt, ApiError> {
    let mut request = Request::post(&format!("/api/v1/rooms/{}/orders", encode(room)))
        .header("Accept", "application/json");
    if let Some(token) = entry_token {
        request = request.header(ENTRY_TOKEN_HEADER, token);
    }
    let response = request
        .json(order)
        .map_err(|_| ApiError::Decode)?
        .send()
        .await
        .map_err(|_| ApiError::Network)?;
    decode(response).await
}

async fn decode<T: serde::de::DeserializeOwned>(response: Response) -> Result<T, ApiError> {
    if response.ok() {
        return response.json::<T>().await.map_err(|_| ApiError::Decode);
    }
    let retry_after = response
        .headers()
        .get("Retry-After")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|secs| Duration::from_secs(secs).min(MAX_RETRY_AFTER));
    let code = response
        .json::<ErrorBody>()
        .await
        .map(|body| body.error)
        .unwrap_or_default();
    Err(ApiError::Status {
        status: response.status(),
        code,
        retry_after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16, code: &str) -> ApiError {
        ApiError::Status {
            status,
            code: code.to_owned(),
            retry_after: None,
        }
    }

    #[test]
    fn outages_and_rate_limits_are_worth_retrying() {
        assert!(ApiError::Network.is_transient());
        assert!(status(503, error_code::STORE_UNAVAILABLE).is_transient());
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
}
