//! Rooms at run time: `POST /api/v1/admin/rooms` (create), `GET
//! /api/v1/admin/rooms` (list), `DELETE /api/v1/admin/rooms/{room}` and `GET
//! /api/v1/admin/rooms/{room}/waiters` (who is waiting, never their ticket ids). Reading and
//! changing one room's settings is `admin.rs`; the audit log is `audit.rs`.
//!
//! A room is data in the store (docs/DESIGN.md "Rooms at run time"): the replica that creates
//! one starts it at once, every other replica within one tick (`room::registry::sync_loop`).

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::{is_valid_room_slug, ErrorBody, RoomSettings, RoomSettingsPatch};

use super::admin::{answer, authorize, check_opening, check_rate_within_loop, parse_patch, view};
use super::audit::{self, ids_header};
use super::openapi::{EdgeErrors, StoreReadErrors, StoreWriteErrors};
use crate::error::{ApiError, Json, Path};
use crate::state::AppState;
use vestibule_room::RoomRuntime;
use vestibule_store::{now_ms, RoomDeletion, RoomDoc, RoomId, StoreError};

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_room, list_rooms))
        .routes(routes!(delete_room))
        .routes(routes!(waiters))
}

/// The body of a create: the new room's slug and any settings (absent ones take the server's
/// defaults: `--admission-rate`, `--token-ttl-secs`, …). Example: `{"room": "drop-7",
/// "admissionRatePerSec": 50, "displayNameEn": "Drop 7", "messageEn": "Sizes 42–44 are gone"}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateRoom {
    /// The new room's slug, `[a-z0-9-]{1,64}`. Example: `"drop-7"`.
    #[schema(pattern = "^[a-z0-9-]{1,64}$", example = "drop-7")]
    pub room: String,
    /// Any field of a settings patch.
    #[serde(flatten)]
    pub settings: RoomSettingsPatch,
}

/// Every room's settings and live counts.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RoomList {
    /// Sorted by slug.
    pub rooms: Vec<RoomSettings>,
}

/// One waiting shopper (never the ticket id, which is a bearer secret).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Waiter {
    /// 1-based place in arrival order: a FIFO room's queue order. In a random room
    /// (`queueingMethod: "random"`) a shopper's own `position` is their rank by lottery key, not
    /// this. Example: `1`.
    #[schema(minimum = 1)]
    pub position: u64,
    /// Seconds since the ticket joined (0 when unknown: a place handed out by a draw). Example: `95`.
    pub age_secs: u64,
    /// Seconds since the shopper was last heard from (a poll, stream or heartbeat); null =
    /// unknown. Example: `3`.
    pub last_seen_secs_ago: Option<u64>,
    /// The ticket's tag: 12 hex digits of SHA-256 of its id, as in the logs and the draw (the
    /// shopper can read it out to support). Example: `"3f9a0c12be47"`.
    #[schema(pattern = "^[0-9a-f]{12}$")]
    pub ticket_tag: String,
}

/// A page of the waiting line.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Waiters {
    /// Shoppers waiting in all. Example: `1200`.
    pub total: u64,
    /// The page, in queue order.
    pub waiters: Vec<Waiter>,
}

/// Creates a room with the server's defaults and any settings given. It admits at once through
/// this replica, and through every other replica within one scheduler tick.
#[utoipa::path(
    post,
    path = "/api/v1/admin/rooms",
    tag = "admin",
    operation_id = "create_room",
    request_body = CreateRoom,
    security(("admin_token" = [])),
    responses(
        (status = 201, body = RoomSettings, description = "Created; its settings",
            headers(
                ("Location" = String, description = "`/api/v1/admin/rooms/{room}`"),
                ("ETag" = String, description = "The settings' version, for If-Match"),
                ("X-Audit-Ids" = String, description = "Ids of the audit entries the create made"),
            )),
        (status = 400, description = "Not a JSON object, no `room`, a slug that is not `[a-z0-9-]{1,64}`, an unknown field, or a value out of range as for PATCH (`bad_request`, `invalid_field`)", body = ErrorBody),
        (status = 401, description = "No bearer token (`unauthorized`)", body = ErrorBody),
        (status = 403, description = "Wrong token, or the admin API is off (`forbidden`)", body = ErrorBody),
        (status = 409, description = "A room with that slug exists (`room_exists`; a create sent again with an `Idempotency-Key` that finds the room as it made it, unchanged, answers 201 again), or the schedule is inconsistent, or `queueingMethod: \"random\"` comes with a `prequeueOpensAt` or with `closed: true`, or `admissionRatePerSec` is outside `autoRate`'s min–max (`conflict`)", body = ErrorBody),
        (status = 415, description = "The body is not `application/json`", body = ErrorBody),
        EdgeErrors, StoreWriteErrors,
    )
)]
pub async fn create_room(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(body): Json<serde_json::Value>,
) -> Result<Response, ApiError> {
    authorize(&state, &headers)?;
    let retried = crate::idempotency::idempotency_key(&headers)?.is_some();
    let serde_json::Value::Object(mut fields) = body else {
        return Err(ApiError::BadRequest(
            "the room must be a JSON object".into(),
        ));
    };
    let room = match fields.remove("room") {
        Some(serde_json::Value::String(room)) => room,
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "room must be a string, not {other}"
            )))
        }
        None => return Err(ApiError::BadRequest("room (the slug) is missing".into())),
    };
    if !is_valid_room_slug(&room) {
        return Err(ApiError::InvalidField(format!(
            "room must be a slug [a-z0-9-]{{1,64}}, not {:?}",
            room.chars().take(80).collect::<String>()
        )));
    }
    let patch = parse_patch(&state, serde_json::Value::Object(fields))?;
    let defaults = state.default_settings_for(&room);
    check_opening(&defaults, &patch)?;
    check_rate_within_loop(&defaults, &patch)?;
    let settings = defaults.patched(&patch);
    let created = match state.store.create_room(&room, &settings).await? {
        Some(created) => created,
        // A retry of the create (it sends an `Idempotency-Key`, docs/DESIGN.md "Retries") that
        // finds the room as that create made it, unchanged since (a retry after a 504 whose
        // first try Redis took): answered as the create was. Without a key a create cannot be
        // told from another operator's of the same room: 409.
        None => match state.store.room_doc(&room).await? {
            Some(RoomDoc::Live(live))
                if retried && live.settings == settings && live.version == live.generation =>
            {
                live
            }
            _ => return Err(ApiError::RoomExists(room)),
        },
    };
    let id = RoomId::new(&room, created.generation);
    // A random room's keys need its seed before the first join (docs/DESIGN.md "Random
    // queueing").
    if created.settings.queueing_method.is_random() {
        state
            .store
            .draw_seed(id, &vestibule_room::opening::fresh_seed())
            .await?;
    }
    // A runtime of the slug still here is an earlier generation's: the new one takes its place.
    let runtime = RoomRuntime::new(room.clone(), created.clone(), state.tokens.clone());
    state.rooms.put(Arc::new(runtime));
    tracing::info!(%room, "room created");
    let mut entries = vec![audit::entry(
        "room",
        serde_json::Value::Null,
        serde_json::Value::String(room.clone()),
    )];
    entries.extend(audit::changes(&room, &defaults, &created.settings));
    let ids = audit::record(&state, &room, entries).await;
    let mut response = answer(&state, &room, created).await?;
    *response.status_mut() = StatusCode::CREATED;
    if let Ok(location) = HeaderValue::from_str(&format!("/api/v1/admin/rooms/{room}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    ids_header(&mut response, &ids);
    Ok(response)
}

/// Every room, with its settings and live counts, sorted by slug.
#[utoipa::path(
    get,
    path = "/api/v1/admin/rooms",
    tag = "admin",
    operation_id = "list_rooms",
    security(("admin_token" = [])),
    responses(
        (status = 200, body = RoomList, description = "Every room in the store, sorted by slug"),
        (status = 401, description = "No bearer token (`unauthorized`)", body = ErrorBody),
        (status = 403, description = "Wrong token, or the admin API is off (`forbidden`)", body = ErrorBody),
        EdgeErrors, StoreReadErrors,
    )
)]
pub async fn list_rooms(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<RoomList>, ApiError> {
    authorize(&state, &headers)?;
    let mut rooms = Vec::new();
    for room in state.store.list_rooms().await? {
        let read = async {
            let settings = state.store.room_settings(&room).await?;
            let id = RoomId::new(&room, settings.generation);
            Ok((settings.settings, state.store.counts(id, now_ms()).await?))
        };
        match read.await {
            Ok((settings, counts)) => rooms.push(view(&room, settings, counts)),
            // Deleted between the list and this read (the index follows the documents), or lost
            // by the store: left out.
            Err(StoreError::RoomGone(_) | StoreError::RoomLost(_)) => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(Json(RoomList { rooms }))
}

/// Deletes a room. Refused while shoppers wait or hold entry tokens, unless `force=true`: then
/// every ticket ends with the room (polls and streams of it answer 410 `room_deleted` on this
/// replica, 404 `room_not_found` after a restart), and its keys are removed from the store. Its
/// audit log stays.
#[utoipa::path(
    delete,
    path = "/api/v1/admin/rooms/{room}",
    tag = "admin",
    operation_id = "delete_room",
    params(
        ("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main"),
        ("force" = Option<bool>, Query, description = "End every waiting and active ticket with the room (default false)"),
    ),
    security(("admin_token" = [])),
    responses(
        (status = 204, description = "Deleted",
            headers(("X-Audit-Ids" = String, description = "Ids of the audit entries the delete made"))),
        (status = 400, description = "`force` is not true or false (`invalid_field`)", body = ErrorBody),
        (status = 401, description = "No bearer token (`unauthorized`)", body = ErrorBody),
        (status = 403, description = "Wrong token, or the admin API is off (`forbidden`)", body = ErrorBody),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        (status = 409, description = "Shoppers wait or hold entry tokens and `force` is not true (`room_not_empty`)", body = ErrorBody),
        EdgeErrors, StoreWriteErrors,
    )
)]
pub async fn delete_room(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    authorize(&state, &headers)?;
    let mut force = false;
    for (name, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        if name == "force" {
            force = match value.as_ref() {
                "true" => true,
                "false" => false,
                other => {
                    return Err(ApiError::InvalidField(format!(
                        "force must be true or false, not {other:?}"
                    )))
                }
            };
        }
    }
    // The generation this replica runs, or else the live one; when another generation is live
    // by now (created again through another replica), that one.
    let mut generation = match state.rooms.get(&room) {
        Some(running) => Some(running.generation),
        None => live_generation(&state, &room).await?,
    };
    let mut outcome = RoomDeletion::NotFound;
    for _ in 0..2 {
        let Some(named) = generation else { break };
        outcome = state
            .store
            .delete_room(RoomId::new(&room, named), force, now_ms())
            .await?;
        if outcome != RoomDeletion::NotFound {
            generation = Some(named);
            break;
        }
        generation = live_generation(&state, &room)
            .await?
            .filter(|live| *live != named);
    }
    match outcome {
        RoomDeletion::NotFound => Err(ApiError::RoomNotFound(room.chars().take(64).collect())),
        RoomDeletion::NotEmpty { waiting, active } => Err(ApiError::RoomNotEmpty {
            room,
            waiting,
            active,
        }),
        RoomDeletion::Deleted { ended } => {
            state.rooms.stop(&room, generation.unwrap_or_default());
            state.bots.forget_room(&room);
            tracing::info!(%room, ended, "room deleted");
            let ids = audit::record(
                &state,
                &room,
                vec![audit::entry(
                    "room",
                    serde_json::Value::String(room.clone()),
                    serde_json::Value::Null,
                )],
            )
            .await;
            let mut response = StatusCode::NO_CONTENT.into_response();
            ids_header(&mut response, &ids);
            Ok(response)
        }
    }
}

/// Who is waiting, in arrival order (a FIFO room's queue order; in a random room each waiter's
/// `position` is its place in the lottery), paged: position, how long since they joined and since they
/// were last heard from, and the ticket's tag (never its id), for support questions.
#[utoipa::path(
    get,
    path = "/api/v1/admin/rooms/{room}/waiters",
    tag = "admin",
    operation_id = "room_waiters",
    params(
        ("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main"),
        ("offset" = Option<u64>, Query, minimum = 0, maximum = 9223372036854775807_u64, description = "Index of the first waiter (position = offset + index + 1); default 0"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 500, description = "Most waiters; default 50"),
    ),
    security(("admin_token" = [])),
    responses(
        (status = 200, body = Waiters, description = "A page of the line in arrival order (a FIFO room's queue order; a random room's shoppers are admitted by lottery rank instead)"),
        (status = 400, description = "`offset` or `limit` is not a whole number in range (`invalid_field`)", body = ErrorBody),
        (status = 401, description = "No bearer token (`unauthorized`)", body = ErrorBody),
        (status = 403, description = "Wrong token, or the admin API is off (`forbidden`)", body = ErrorBody),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        EdgeErrors, StoreReadErrors,
    )
)]
pub async fn waiters(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Json<Waiters>, ApiError> {
    authorize(&state, &headers)?;
    let runtime = state.room(&room)?;
    let (offset, limit) = super::draw::page(query.as_deref(), 50, 500)?;
    let page = state.store.waiters(runtime.id(), offset, limit).await?;
    let now = now_ms();
    let secs_ago = |at: u64| now.saturating_sub(at) / 1000;
    Ok(Json(Waiters {
        total: page.total,
        waiters: page
            .waiters
            .into_iter()
            .map(|waiter| Waiter {
                position: waiter.position,
                age_secs: waiter.joined_ms.map_or(0, secs_ago),
                last_seen_secs_ago: waiter.seen_ms.map(secs_ago),
                ticket_tag: vestibule_store::ids::log_tag(&waiter.ticket_id),
            })
            .collect(),
    }))
}

/// The live generation of `room` in the store (`None`: deleted, never created, or lost).
///
/// # Errors
/// The store's, reading the document.
async fn live_generation(state: &AppState, room: &str) -> Result<Option<u64>, ApiError> {
    Ok(match state.store.room_doc(room).await? {
        Some(RoomDoc::Live(settings)) => Some(settings.generation),
        _ => None,
    })
}
