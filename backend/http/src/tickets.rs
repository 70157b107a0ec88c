//! Tickets: join (`POST`), poll (`GET`), leave (`DELETE`) and the heartbeat of a client that does
//! not poll (`POST …/heartbeat`). A poll, the first SSE event and a heartbeat are presence
//! (docs/DESIGN.md "Presence"): the store marks the ticket heard from in the same step.

use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::{ErrorBody, TicketState, TicketStatus};

use super::openapi::{EdgeErrors, StoreReadErrors, StoreWriteErrors};
use crate::error::{ApiError, Json, Path};
use crate::state::AppState;
use vestibule_room::presence::poll_rules;
use vestibule_room::status::ticket_status;
use vestibule_store::ids::{is_well_formed_id, log_tag};
use vestibule_store::{now_ms, LeaveOutcome, TicketRecord};

mod join;

pub use join::join;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(join::join))
        .routes(routes!(poll, leave))
        .routes(routes!(heartbeat))
}

/// The current status of a ticket named in a path (poll and the first SSE event); the ticket is
/// heard from in the same store step (a skipped ticket within its hold comes back to its place).
///
/// # Errors
/// 404 unknown room or ticket, 400 malformed id, 503 store unreachable.
pub async fn current_status(
    state: &AppState,
    room: &str,
    ticket_id: &str,
) -> Result<TicketStatus, ApiError> {
    let runtime = state.room(room)?;
    checked_ticket_id(ticket_id)?;
    let record = heard_record(state, &runtime, ticket_id, true)
        .await?
        .ok_or_else(|| ApiError::TicketNotFound(room.to_owned()))?;
    Ok(ticket_status(&state.room_options, &runtime, &record))
}

/// A poll's status: from the room's SSE hub when it follows the ticket far enough from the head
/// (docs/DESIGN.md "Polls answered from memory"), else read from the store (heard from in the
/// same step), which anchors the ticket for the next polls.
///
/// # Errors
/// 404 unknown room or ticket, 400 malformed id, 503 store unreachable.
async fn polled_status(
    state: &AppState,
    room: &str,
    ticket_id: &str,
) -> Result<(std::sync::Arc<vestibule_room::RoomRuntime>, TicketStatus), ApiError> {
    let runtime = state.room(room)?;
    checked_ticket_id(ticket_id)?;
    let rules = poll_rules(&state.room_options, &runtime.shared_settings().settings);
    if let Some(answer) = runtime.hub.answer_poll(ticket_id, &rules) {
        runtime.poll_metrics().from_memory.increment(1);
        let mut record = TicketRecord::waiting(ticket_id, answer.position);
        record.place_kept = answer.place_kept;
        let status = ticket_status(&state.room_options, &runtime, &record);
        return Ok((runtime, status));
    }
    let sent = std::time::Instant::now();
    let hearing = runtime.hub.hearing(&[ticket_id.to_owned()]);
    let (record, anchor) = state
        .store
        .hear_polled(runtime.id(), ticket_id, now_ms())
        .await?
        .ok_or_else(|| ApiError::TicketNotFound(room.to_owned()))?;
    hearing.answered(record.place_kept.then_some(anchor.map(|anchor| anchor.seq)));
    runtime
        .hub
        .note_poll(ticket_id, &record, anchor, sent, &rules);
    let status = ticket_status(&state.room_options, &runtime, &record);
    Ok((runtime, status))
}

/// One ticket heard from now (`Store::hear`), as it stands after.
async fn heard_record(
    state: &AppState,
    runtime: &vestibule_room::RoomRuntime,
    ticket_id: &str,
    positions: bool,
) -> Result<Option<TicketRecord>, ApiError> {
    let ids = [ticket_id.to_owned()];
    let hearing = runtime.hub.hearing(&ids);
    let mut records = state
        .store
        .hear(runtime.id(), &ids, now_ms(), positions)
        .await?;
    let record = records.pop().flatten();
    hearing.answered(record.iter().filter(|r| r.place_kept).map(|_| None));
    Ok(record)
}

/// Checks the form of a ticket id from a path.
pub fn checked_ticket_id(ticket_id: &str) -> Result<(), ApiError> {
    if is_well_formed_id(ticket_id) {
        Ok(())
    } else {
        Err(ApiError::BadRequest(
            "a ticket id is 22 URL-safe base64 characters".into(),
        ))
    }
}

/// `GET /api/v1/rooms/{room}/tickets/{ticketId}`: poll a ticket.
#[utoipa::path(
    get,
    path = "/api/v1/rooms/{room}/tickets/{ticketId}",
    tag = "tickets",
    operation_id = "poll",
    params(
        ("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main"),
        ("ticketId" = String, Path, pattern = "^[A-Za-z0-9_-]{22}$", description = "Ticket id from the join (22 URL-safe base64 characters)", example = "Zb3n0W6m1q8VqL2pX9cT4A"),
    ),
    responses(
        (status = 200, description = "The ticket's status; poll again after `nextPollAfterMs`", body = TicketStatus),
        (status = 400, description = "Malformed ticket id (`bad_request`)", body = ErrorBody),
        (status = 404, description = "Unknown room or ticket (`room_not_found`, `ticket_not_found`; tickets are forgotten an hour after they end)", body = ErrorBody),
        EdgeErrors, StoreReadErrors,
    )
)]
pub async fn poll(
    State(state): State<AppState>,
    Path((room, ticket_id)): Path<(String, String)>,
) -> Result<Json<TicketStatus>, ApiError> {
    let (runtime, status) = polled_status(&state, &room, &ticket_id).await?;
    runtime.counters.polled();
    runtime.poll_metrics().polls.increment(1);
    // The per-ticket poll log (debug level, target `vestibule::poll_log`): shows whether clients
    // follow the hints. The tag is a hash; the ticket id itself never reaches a log.
    tracing::debug!(
        target: "vestibule::poll_log",
        ticket = %log_tag(&ticket_id),
        position = ?status.position,
        next_poll_after_ms = status.next_poll_after_ms,
        "ticket polled"
    );
    Ok(Json(status))
}

/// `POST /api/v1/rooms/{room}/tickets/{ticketId}/heartbeat`: "still here" from a client that does
/// not poll (the page while its tab is hidden), every `heartbeatAfterMs`.
///
/// Cheaper than a poll: one store step, no position, no status. A ticket skipped for silence and
/// still within its hold goes back to its place (the next poll says `placeKept`).
#[utoipa::path(
    post,
    path = "/api/v1/rooms/{room}/tickets/{ticketId}/heartbeat",
    tag = "tickets",
    operation_id = "heartbeat",
    params(
        ("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main"),
        ("ticketId" = String, Path, pattern = "^[A-Za-z0-9_-]{22}$", description = "Ticket id from the join", example = "Zb3n0W6m1q8VqL2pX9cT4A"),
    ),
    responses(
        (status = 204, description = "Heard: the ticket is waiting (its place kept)"),
        (status = 400, description = "Malformed ticket id (`bad_request`)", body = ErrorBody),
        (status = 404, description = "Unknown room or ticket (`room_not_found`, `ticket_not_found`)", body = ErrorBody),
        (status = 409, description = "The ticket is no longer waiting (admitted, ended or expired): poll it (`conflict`)", body = ErrorBody),
        EdgeErrors, StoreReadErrors,
    )
)]
pub async fn heartbeat(
    State(state): State<AppState>,
    Path((room, ticket_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let runtime = state.room(&room)?;
    checked_ticket_id(&ticket_id)?;
    let record = heard_record(&state, &runtime, &ticket_id, false)
        .await?
        .ok_or_else(|| ApiError::TicketNotFound(room.clone()))?;
    metrics::counter!("vestibule_heartbeats_total", "room" => room).increment(1);
    if matches!(record.state, TicketState::Waiting | TicketState::PreQueue) {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::Conflict(format!(
            "the ticket is {}, no longer waiting: poll it",
            record.state.as_str()
        )))
    }
}

/// `DELETE /api/v1/rooms/{room}/tickets/{ticketId}`: leave the queue (or give back a token).
///
/// 204 also when the ticket had already ended; everyone behind a waiting ticket moves up one.
#[utoipa::path(
    delete,
    path = "/api/v1/rooms/{room}/tickets/{ticketId}",
    tag = "tickets",
    operation_id = "leave",
    params(
        ("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main"),
        ("ticketId" = String, Path, pattern = "^[A-Za-z0-9_-]{22}$", description = "Ticket id from the join", example = "Zb3n0W6m1q8VqL2pX9cT4A"),
    ),
    responses(
        (status = 204, description = "Left (or had already ended): safe to repeat"),
        (status = 400, description = "Malformed ticket id (`bad_request`)", body = ErrorBody),
        (status = 404, description = "Unknown room or ticket", body = ErrorBody),
        EdgeErrors, StoreWriteErrors,
    )
)]
pub async fn leave(
    State(state): State<AppState>,
    Path((room, ticket_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let runtime = state.room(&room)?;
    checked_ticket_id(&ticket_id)?;
    let outcome = state
        .store
        .leave(runtime.id(), &ticket_id, now_ms())
        .await?;
    match outcome {
        LeaveOutcome::Left => {
            runtime.hub.forget(&ticket_id);
            metrics::counter!("vestibule_leaves_total", "room" => room).increment(1);
            Ok(StatusCode::NO_CONTENT)
        }
        LeaveOutcome::AlreadyEnded(_) => Ok(StatusCode::NO_CONTENT),
        LeaveOutcome::NotFound => Err(ApiError::TicketNotFound(room)),
    }
}
