//! `GET /api/v1/rooms/{room}/tickets/{ticketId}/events`: a ticket's status as Server-Sent Events.
//!
//! Sends `event: status` with the TicketStatus JSON at once, then whenever it changes (fed by the
//! room's [`vestibule_room::ticket_watch`]), with an increasing `id`, and `event: keepalive` (data `{}`) after
//! [`KEEP_ALIVE_SECS`] without news; ends after a terminal status or when the server shuts down.
//!
//! A finished ticket's stream must not invite reconnects: the terminal status goes out with the id
//! [`FINAL_EVENT_ID`] and a [`FINAL_RETRY`] hint, and a reconnect that names that id
//! (`Last-Event-ID`) is answered 204, which the SSE standard defines as "stop reconnecting". A
//! reconnect that names any other id still gets the final status once, so no client misses it.
//! The keep-alive is an event, not a comment, because a browser hands comments to no one: the
//! page needs to hear it to tell a quiet stream from a hung connection.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{stream, StreamExt};
use tokio_stream::wrappers::WatchStream;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::ErrorBody;

use super::openapi::{EdgeErrors, StoreReadErrors};
use super::tickets::current_status;
use crate::error::{ApiError, Path};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(events))
}

/// Seconds without news before a keep-alive event (the page drops a stream silent for two).
pub const KEEP_ALIVE_SECS: u64 = 10;

/// The `id` of the event that carries a terminal status (the others count 0, 1, 2, …).
pub const FINAL_EVENT_ID: &str = "end";

/// The `retry` sent with the terminal status: a client that reconnects anyway waits this long
/// before it asks, and is then answered 204.
pub const FINAL_RETRY: Duration = Duration::from_secs(60);

/// Streams a ticket's status changes.
#[utoipa::path(
    get,
    path = "/api/v1/rooms/{room}/tickets/{ticketId}/events",
    tag = "tickets",
    operation_id = "events",
    description = "Server-Sent Events (`text/event-stream`), an alternative to polling. Each \
        message is `event: status`, `id: <n>` (0, 1, 2, … per stream) and `data: <TicketStatus \
        JSON>`: the current status at once, then each change. After 10 s without news the server \
        sends `event: keepalive` with `data: {}` (an event, not a comment, so a browser's \
        EventSource sees it): a client that hears nothing for about 20 s should reconnect. The \
        stream stays open while the ticket is PRE_QUEUE, WAITING or TOKEN_ISSUED, and ends after \
        the first final status (COMPLETED, EXPIRED, LEFT, SOLD_OUT) or when the server shuts \
        down. The final status is sent with `id: end` and `retry: 60000`; a reconnect that sends \
        `Last-Event-ID: end` is answered 204 No Content, which tells a standard EventSource to \
        stop. Any other reconnect (with or without `Last-Event-ID`) starts again with the current \
        status. Cross-origin clients may send `Last-Event-ID` and `Cache-Control` (CORS allows \
        both for the configured origins).",
    params(
        ("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main"),
        ("ticketId" = String, Path, pattern = "^[A-Za-z0-9_-]{22}$", description = "Ticket id from the join", example = "Zb3n0W6m1q8VqL2pX9cT4A"),
    ),
    responses(
        (status = 200, description = "The stream of `status` events, and a `keepalive` event (`data: {}`) after 10 s without news", content_type = "text/event-stream", body = String,
            example = "event: status\nid: 0\ndata: {\"ticketId\":\"Zb3n0W6m1q8VqL2pX9cT4A\",\"room\":\"main\",\"status\":\"WAITING\",\"position\":42,…}\n\n"),
        (status = 204, description = "The ticket is finished and the client already has its final status (`Last-Event-ID: end`): stop reconnecting"),
        (status = 400, description = "Malformed ticket id (`bad_request`)", body = ErrorBody),
        (status = 404, description = "Unknown room or ticket", body = ErrorBody),
        EdgeErrors, StoreReadErrors,
    )
)]
pub async fn events(
    State(state): State<AppState>,
    Path((room, ticket_id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let first = current_status(&state, &room, &ticket_id).await?;
    let seen_final = headers
        .get("last-event-id")
        .is_some_and(|id| id.as_bytes() == FINAL_EVENT_ID.as_bytes());
    if first.status.is_terminal() && seen_final {
        return Ok((
            StatusCode::NO_CONTENT,
            [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        )
            .into_response());
    }
    let runtime = state.room(&room)?;
    tracing::debug!(target: "vestibule::poll_log", ticket = %vestibule_store::ids::log_tag(&ticket_id), "ticket stream opened");
    let updates = if first.status.is_terminal() {
        None
    } else {
        Some(WatchStream::from_changes(
            runtime.hub.subscribe(&ticket_id, first.clone()),
        ))
    };
    let mut shutdown = state.shutdown.clone();
    // A deleted room's streams end too; a reconnect is answered 410 `room_deleted`.
    let deleted = runtime.clone();
    let stopped = async move {
        tokio::select! {
            _ = shutdown.wait_for(|stopping| *stopping) => {}
            () = deleted.retired() => {}
        }
    };
    let statuses = stream::once(async move { first })
        .chain(stream::iter(updates).flatten())
        // End right after the first terminal status.
        .scan(false, |ended, status| {
            let out = (!*ended).then(|| {
                *ended = status.status.is_terminal();
                status
            });
            async move { out }
        })
        .take_until(stopped)
        .enumerate()
        .map(|(index, status)| {
            let json = serde_json::to_string(&status).unwrap_or_default();
            let event = Event::default().event("status").data(json);
            Ok::<_, Infallible>(if status.status.is_terminal() {
                event.id(FINAL_EVENT_ID).retry(FINAL_RETRY)
            } else {
                event.id(index.to_string())
            })
        });
    let sse = Sse::new(statuses).keep_alive(
        KeepAlive::new()
            .interval(Duration::from_secs(KEEP_ALIVE_SECS))
            .event(Event::default().event("keepalive").data("{}")),
    );
    Ok((
        [
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (
                HeaderName::from_static("x-accel-buffering"),
                HeaderValue::from_static("no"),
            ),
        ],
        sse,
    )
        .into_response())
}
