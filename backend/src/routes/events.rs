//! `GET /api/v1/rooms/{room}/tickets/{ticketId}/events`: a ticket's status as Server-Sent Events.
//!
//! Sends `event: status` with the TicketStatus JSON at once, then whenever it changes (fed by the
//! room's [`crate::sse_hub`]), with an increasing `id`, and `event: keepalive` (data `{}`) after
//! [`KEEP_ALIVE_SECS`] without news; ends after a terminal status or when the server shuts down.
//! The keep-alive is an event, not a comment, because a browser hands comments to no one: the
//! page needs to hear it to tell a quiet stream from a hung connection.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderName, HeaderValue};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use futures_util::{stream, StreamExt};
use tokio_stream::wrappers::WatchStream;

use super::tickets::current_status;
use crate::error::{ApiError, Path};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route(
        "/api/v1/rooms/{room}/tickets/{ticket_id}/events",
        get(events),
    )
}

/// Seconds without news before a keep-alive event (the page drops a stream silent for two).
const KEEP_ALIVE_SECS: u64 = 10;

/// Streams a ticket's status changes.
#[utoipa::path(
    get,
    path = "/api/v1/rooms/{room}/tickets/{ticketId}/events",
    params(("room" = String, Path), ("ticketId" = String, Path)),
    responses(
        (status = 200, description = "text/event-stream of `status` events (TicketStatus JSON) and `keepalive` events (`{}`) every 10 s without news", content_type = "text/event-stream"),
        (status = 404, description = "Unknown room or ticket", body = vestibule_shared::ErrorBody),
        (status = 503, description = "Store unreachable", body = vestibule_shared::ErrorBody),
    )
)]
pub async fn events(
    State(state): State<AppState>,
    Path((room, ticket_id)): Path<(String, String)>,
) -> Result<impl IntoResponse, ApiError> {
    let first = current_status(&state, &room, &ticket_id).await?;
    let runtime = state.room(&room)?;
    tracing::debug!(target: "vestibule::poll_log", ticket = %crate::ids::log_tag(&ticket_id), "ticket stream opened");
    let updates = if first.status.is_terminal() {
        None
    } else {
        Some(WatchStream::from_changes(
            runtime.hub.subscribe(&ticket_id, first.clone()),
        ))
    };
    let mut shutdown = state.shutdown.clone();
    let stopped = async move {
        let _ = shutdown.wait_for(|stopping| *stopping).await;
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
            Ok::<_, Infallible>(
                Event::default()
                    .event("status")
                    .id(index.to_string())
                    .data(json),
            )
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
    ))
}
