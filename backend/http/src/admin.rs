//! `GET`/`PATCH /api/v1/admin/rooms/{room}`: the operator's live knobs.
//!
//! Needs `Authorization: Bearer <admin token>` (compared in constant time). A change is written
//! to the store, so every replica's scheduler picks it up on its next tick.
//!
//! Reads come from the store (a change through one replica is seen at once through any other),
//! and every answer carries the settings' version as `ETag`. A PATCH sets absolute values, so
//! repeating it cannot apply anything twice; with `If-Match: "<version>"` it applies only if
//! nobody changed the settings since that version (412 otherwise), which makes a retry after a
//! 504 safe even when another operator is changing the room too.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret;
use subtle::ConstantTimeEq;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::{ErrorBody, RoomSettings, RoomSettingsPatch};

use super::openapi::{EdgeErrors, StoreReadErrors, StoreWriteErrors};

use crate::error::{ApiError, Json, Path};
use crate::state::AppState;
use vestibule_room::status::rfc3339_from_ms;
use vestibule_store::{
    now_ms, RoomCounts, SalePatch, Settings, SettingsPatch, SettingsUpdate, VersionedSettings,
};

mod patch;

use patch::{check_not_reopening, prepare_lottery};
pub(crate) use patch::{check_opening, check_rate_within_loop, parse_patch};

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(settings, update))
}

/// Checks the bearer token.
///
/// # Errors
/// The credentials of an `Authorization: Bearer …` header; the scheme is matched without regard
/// to case (RFC 9110 §11.1: `bearer`, `BEARER` are the same scheme). `None` without one.
pub fn bearer_credentials(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, credentials) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(credentials.trim())
}

/// 401 when none is sent, 403 when it is wrong or the admin API is off.
pub fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(expected) = &state.admin_token else {
        return Err(ApiError::Forbidden(
            "the admin API is disabled on this server".into(),
        ));
    };
    let presented = bearer_credentials(headers).ok_or(ApiError::Unauthorized)?;
    if bool::from(
        presented
            .trim()
            .as_bytes()
            .ct_eq(expected.expose_secret().as_bytes()),
    ) {
        Ok(())
    } else {
        Err(ApiError::Forbidden("wrong admin token".into()))
    }
}

/// The admin API's view of a room's settings with its live counts.
pub fn view(room: &str, in_force: Settings, counts: RoomCounts) -> RoomSettings {
    RoomSettings {
        room: room.to_owned(),
        admission_rate_per_sec: in_force.admission_rate_per_sec,
        paused: in_force.paused,
        token_ttl_secs: in_force.token_ttl_ms / 1000,
        max_active_users: in_force.max_active_users,
        checkout_url: in_force.checkout_url,
        share_token_with_embedder: in_force.share_token_with_embedder,
        abandon_after_secs: in_force.abandon_after_ms / 1000,
        hold_place_secs: in_force.hold_place_ms / 1000,
        expected_checkout_secs: in_force.expected_checkout_ms.map(|ms| ms / 1000),
        opens_at: in_force.opens_at_ms.map(rfc3339_from_ms),
        prequeue_opens_at: in_force.prequeue_opens_at_ms.map(rfc3339_from_ms),
        proof_of_work_difficulty: in_force.pow_difficulty,
        proof_of_work_auto_joins_per_sec: in_force.pow_auto_joins_per_sec,
        require_user_assertion: in_force.require_user_assertion,
        waiting: counts.waiting,
        active_users: counts.active,
        stock: in_force.sale.stock,
        sold: in_force.sale.sold,
        sold_out: in_force.sale.sold_out,
        closed: in_force.sale.closed,
        sold_out_message_en: in_force.sale.message_en,
        sold_out_message_ko: in_force.sale.message_ko,
        display_name_en: in_force.labels.display_name_en,
        display_name_ko: in_force.labels.display_name_ko,
        message_en: in_force.labels.message_en,
        message_ko: in_force.labels.message_ko,
        queueing_method: in_force.queueing_method,
        auto_rate: in_force.auto_rate,
    }
}

/// The settings answer: body with the live counts, and the version as `ETag`.
pub(crate) async fn answer(
    state: &AppState,
    room: &str,
    settings: VersionedSettings,
) -> Result<Response, ApiError> {
    let id = vestibule_store::RoomId::new(room, settings.generation);
    let counts = state.store.counts(id, now_ms()).await?;
    let body = view(room, settings.settings, counts);
    let mut response = Json(body).into_response();
    if let Ok(etag) = HeaderValue::from_str(&format!("\"{}\"", settings.version)) {
        response.headers_mut().insert(header::ETAG, etag);
    }
    Ok(response)
}

/// The version an `If-Match` header names: `None` without the header or with `*`.
///
/// # Errors
/// 400 when it is not one quoted version number (`"7"`).
fn if_match(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(value) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let malformed = || {
        ApiError::BadRequest("If-Match must be one ETag from a settings answer, e.g. \"7\"".into())
    };
    let text = value.to_str().map_err(|_| malformed())?.trim();
    // An empty field carries no condition (some clients send the header always).
    if text.is_empty() || text == "*" {
        return Ok(None);
    }
    text.strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
        .and_then(|version| version.parse().ok())
        .map(Some)
        .ok_or_else(malformed)
}

/// Reads a room's settings and counts.
#[utoipa::path(
    get,
    path = "/api/v1/admin/rooms/{room}",
    tag = "admin",
    operation_id = "room_settings",
    params(("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main")),
    security(("admin_token" = [])),
    responses(
        (status = 200, body = RoomSettings, description = "The settings as stored now (any replica), with live counts",
            headers(("ETag" = String, description = "The settings' version, for If-Match"))),
        (status = 401, description = "No bearer token (`unauthorized`)", body = ErrorBody),
        (status = 403, description = "Wrong token, or the admin API is off (`forbidden`)", body = ErrorBody),
        (status = 404, description = "Unknown room", body = ErrorBody),
        EdgeErrors, StoreReadErrors,
    )
)]
pub async fn settings(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&state, &headers)?;
    state.room(&room)?;
    let settings = state.store.room_settings(&room).await?;
    answer(&state, &room, settings).await
}

/// Changes a room's settings live (absent fields stay).
#[utoipa::path(
    patch,
    path = "/api/v1/admin/rooms/{room}",
    tag = "admin",
    operation_id = "update_room_settings",
    params(
        ("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main"),
        ("If-Match" = Option<String>, Header, pattern = "^(|\"[0-9]{1,19}\"|\\*)$", description = "Apply only at this settings version (an ETag of an earlier answer)"),
    ),
    request_body = RoomSettingsPatch,
    security(("admin_token" = [])),
    responses(
        (status = 200, body = RoomSettings, description = "Applied; the settings now in force",
            headers(
                ("ETag" = String, description = "The settings' new version"),
                ("X-Audit-Ids" = String, description = "Comma-separated ids of the audit entries this change made, one per changed field (absent when nothing changed; `GET …/audit` lists them)"),
            )),
        (status = 400, description = "Not a JSON object, unknown field, value out of range, a `checkoutUrl` that is neither a path here nor on a `--cors-origins` origin, an opening time that is not RFC 3339, a `queueingMethod` other than `fifo` or `random`, `requireUserAssertion: true` without `--user-assertion-secret`, or a malformed If-Match (`bad_request`, `invalid_field`)", body = ErrorBody),
        (status = 401, description = "No bearer token", body = ErrorBody),
        (status = 403, description = "Wrong token, or the admin API is off", body = ErrorBody),
        (status = 404, description = "Unknown room", body = ErrorBody),
        (status = 409, description = "The room is sold out, which is final: `soldOut: false` or a new `stock` (`sold_out`); or the schedule the patch would leave is inconsistent: a `prequeueOpensAt` after `opensAt` or without one; or `queueingMethod: \"random\"` with a `prequeueOpensAt`, in a room whose seed is published already, or in a room that stays closed; or reopening a closed random room; or an `admissionRatePerSec` outside `autoRate`'s min–max while the loop is on; or `autoRate.min` above `autoRate.max` (`conflict`)", body = ErrorBody),
        (status = 412, description = "If-Match names an old version: nothing changed (`precondition_failed`)", body = ErrorBody),
        (status = 415, description = "The body is not `application/json`", body = ErrorBody),
        EdgeErrors, StoreWriteErrors,
    )
)]
pub async fn update(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
    Json(body): Json<serde_json::Value>,
) -> Result<Response, ApiError> {
    authorize(&state, &headers)?;
    state.room(&room)?;
    let named: Vec<String> = body
        .as_object()
        .map(|fields| fields.keys().cloned().collect())
        .unwrap_or_default();
    let patch = parse_patch(&state, body)?;
    let expected = if_match(&headers)?;
    crate::on_live_room(&state, &room, |runtime| {
        update_in(&state, runtime, &named, &patch, expected)
    })
    .await
}

/// A settings change of `runtime`'s generation of the room (see [`update`]).
async fn update_in(
    state: &AppState,
    runtime: std::sync::Arc<vestibule_room::RoomRuntime>,
    named: &[String],
    patch: &SettingsPatch,
    expected: Option<u64>,
) -> Result<Response, ApiError> {
    let room = runtime.name.as_str();
    if named.is_empty() {
        // `{}` changes nothing: the settings in force, their version unchanged, still checked
        // against `If-Match`.
        let current = state.store.room_settings(room).await?;
        if let Some(expected) = expected.filter(|expected| *expected != current.version) {
            return Err(ApiError::PreconditionFailed {
                expected,
                current: current.version,
            });
        }
        return answer(state, room, current).await;
    }
    let needs_current = patch.sale != SalePatch::default()
        || patch.opens_at_ms.is_some()
        || patch.prequeue_opens_at_ms.is_some()
        || patch.queueing_method.is_some();
    // The change is based on the store's settings when the checks read them, else on this
    // replica's copy (refreshed every tick): then it goes to the store in one call (a
    // compare-and-set), so that one stalled is answered 504 (sent, maybe applied), never 503
    // from a read before it. The audit log's old values are the base's.
    let base = if needs_current {
        let current = state.store.room_settings(room).await?;
        if current.generation != runtime.generation {
            return Err(ApiError::RoomDeleted(room.to_owned()));
        }
        check_not_reopening(&current.settings.sale, &patch.sale)?;
        check_opening(&current.settings, patch)?;
        prepare_lottery(state, runtime.id(), &current.settings, patch).await?;
        current
    } else {
        runtime.versioned_settings()
    };
    check_rate_within_loop(&base.settings, patch)?;
    let before = base.settings.clone();
    let settings = match state
        .store
        .update_room(runtime.id(), &base, patch, expected)
        .await?
    {
        SettingsUpdate::Applied(settings) => settings,
        SettingsUpdate::VersionMismatch(current) => {
            return Err(ApiError::PreconditionFailed {
                expected: expected.unwrap_or_default(),
                current: current.version,
            })
        }
    };
    runtime.set_settings(settings.clone());
    let changes = super::audit::changes_named(room, &before, &settings.settings, named);
    let summary = changes
        .iter()
        .map(|change| format!("{} {} → {}", change.field, change.old, change.new))
        .collect::<Vec<_>>()
        .join(", ");
    tracing::info!(%room, version = settings.version, "room settings changed: {summary}");
    let ids = super::audit::record(state, room, changes).await;
    let mut response = answer(state, room, settings).await?;
    super::audit::ids_header(&mut response, &ids);
    Ok(response)
}

#[cfg(test)]
mod tests;
