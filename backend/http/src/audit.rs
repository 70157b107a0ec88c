//! The audit log of admin changes: `GET /api/v1/admin/rooms/{room}/audit`, and what
//! the admin handlers call to write it. One entry per changed field (old → new as the admin API
//! shows them), plus `room` entries for a create (null → the slug) and a delete (the slug →
//! null); each names the replica that made it ([`crate::state::replica_id`]). Kept by the store,
//! bounded ([`vestibule_store::catalog::AUDIT_KEPT`] per room); a PATCH answers the ids of the
//! entries it made in `X-Audit-Ids`.

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::response::Response;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::ErrorBody;

use super::admin::{authorize, view};
use super::openapi::{EdgeErrors, StoreReadErrors};
use crate::error::{ApiError, Json, Path};
use crate::state::{replica_id, AppState};
use vestibule_room::status::rfc3339_from_ms;
use vestibule_store::{now_ms, AuditRecord, RoomCounts, Settings};

/// The header of a PATCH answer that names the audit entries it made (comma-separated ids).
pub const AUDIT_IDS_HEADER: &str = "x-audit-ids";

/// Fields of the settings view that are live counts or set by orders, not admin changes.
const NOT_AUDITED: [&str; 4] = ["room", "waiting", "activeUsers", "sold"];

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(audit_log))
}

/// One admin change of one field.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// The entry's id (ordered by time; the ids a PATCH answers in `X-Audit-Ids`).
    /// Example: `"1764530000000-0"`.
    pub id: String,
    /// When, Unix ms. Example: `1764530000000`.
    pub at_ms: u64,
    /// When, RFC 3339 (UTC). Example: `"2026-11-30T19:13:20Z"`.
    #[schema(format = DateTime)]
    pub at: String,
    /// The admin API field changed, e.g. `admissionRatePerSec`; `room` for a create or delete.
    pub field: String,
    /// The value before, any JSON (null = none, or the room did not exist).
    pub old: serde_json::Value,
    /// The value after, any JSON (null = none, or the room was deleted).
    pub new: serde_json::Value,
    /// The replica that made the change (`$HOSTNAME` and a random suffix).
    pub replica: String,
}

/// A room's audit log, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct AuditLog {
    /// The entries, newest first.
    pub entries: Vec<AuditEntry>,
}

impl From<AuditRecord> for AuditEntry {
    fn from(record: AuditRecord) -> Self {
        Self {
            id: record.id,
            at: rfc3339_from_ms(record.at_ms),
            at_ms: record.at_ms,
            field: record.field,
            old: record.old,
            new: record.new,
            replica: record.replica,
        }
    }
}

/// One entry of this replica, now.
pub fn entry(field: &str, old: serde_json::Value, new: serde_json::Value) -> AuditRecord {
    AuditRecord {
        id: String::new(),
        at_ms: now_ms(),
        field: field.to_owned(),
        old,
        new,
        replica: replica_id().to_owned(),
    }
}

/// One entry per admin field named in `fields` (a PATCH body's keys) whose value differs between
/// `before` and `after`, plus `soldOut` whenever it changed (a `stock` of 0 sets it). Fields a
/// PATCH did not name are left out: an order that took a unit meanwhile is no admin change.
pub fn changes_named(
    room: &str,
    before: &Settings,
    after: &Settings,
    fields: &[String],
) -> Vec<AuditRecord> {
    changes(room, before, after)
        .into_iter()
        .filter(|entry| entry.field == "soldOut" || fields.contains(&entry.field))
        .collect()
}

/// One entry per admin field that differs between `before` and `after`, in the view's field
/// order.
pub fn changes(room: &str, before: &Settings, after: &Settings) -> Vec<AuditRecord> {
    let as_json = |settings: &Settings| {
        serde_json::to_value(view(room, settings.clone(), RoomCounts::default()))
            .unwrap_or_default()
    };
    let (before, after) = (as_json(before), as_json(after));
    let (Some(before), Some(after)) = (before.as_object(), after.as_object()) else {
        return Vec::new();
    };
    after
        .iter()
        .filter(|(field, _)| !NOT_AUDITED.contains(&field.as_str()))
        .filter_map(|(field, new)| {
            let old = before.get(field).cloned().unwrap_or_default();
            (old != *new).then(|| entry(field, old, new.clone()))
        })
        .collect()
}

/// Writes `entries` to `room`'s audit log; their ids. A store failure is logged and answered
/// with no ids: the change itself is made and stays (the audit log is the operator's record,
/// not a gate).
pub async fn record(state: &AppState, room: &str, entries: Vec<AuditRecord>) -> Vec<String> {
    if entries.is_empty() {
        return Vec::new();
    }
    match state.store.append_audit(room, &entries).await {
        Ok(ids) => ids,
        Err(error) => {
            tracing::warn!(%room, %error, ?entries, "audit entries not written");
            Vec::new()
        }
    }
}

/// Adds `X-Audit-Ids` to an answer when it made entries.
pub fn ids_header(response: &mut Response, ids: &[String]) {
    if ids.is_empty() {
        return;
    }
    if let Ok(value) = HeaderValue::from_str(&ids.join(",")) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(AUDIT_IDS_HEADER), value);
    }
}

/// `limit` from a query string: 1–1000, default 100.
fn limit(query: Option<&str>) -> Result<usize, ApiError> {
    let mut limit = 100;
    for (name, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        if name == "limit" {
            limit = value
                .parse::<usize>()
                .ok()
                .filter(|limit| (1..=1000).contains(limit))
                .ok_or_else(|| {
                    ApiError::InvalidField(format!("limit must be 1–1000, not {value:?}"))
                })?;
        }
    }
    Ok(limit)
}

/// A room's audit log: every admin change (create, each changed field of a PATCH, close, delete),
/// newest first. Readable after the room is deleted (the log outlives it) until the room is
/// forgotten by the store.
#[utoipa::path(
    get,
    path = "/api/v1/admin/rooms/{room}/audit",
    tag = "admin",
    operation_id = "room_audit",
    params(
        ("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 1000, description = "Most entries, newest first; default 100"),
    ),
    security(("admin_token" = [])),
    responses(
        (status = 200, body = AuditLog, description = "The newest entries first"),
        (status = 400, description = "`limit` is not 1–1000 (`invalid_field`)", body = ErrorBody),
        (status = 401, description = "No bearer token (`unauthorized`)", body = ErrorBody),
        (status = 403, description = "Wrong token, or the admin API is off (`forbidden`)", body = ErrorBody),
        (status = 404, description = "Unknown room, and no audit log under that name (`room_not_found`)", body = ErrorBody),
        EdgeErrors, StoreReadErrors,
    )
)]
pub async fn audit_log(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Json<AuditLog>, ApiError> {
    authorize(&state, &headers)?;
    let limit = limit(query.as_deref())?;
    let entries = state.store.audit(&room, limit).await?;
    if entries.is_empty() && !state.rooms.contains(&room) {
        return Err(ApiError::RoomNotFound(room.chars().take(64).collect()));
    }
    Ok(Json(AuditLog {
        entries: entries.into_iter().map(AuditEntry::from).collect(),
    }))
}
