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
use vestibule_shared::settings::{self, SettingOutOfRange};
use vestibule_shared::{ErrorBody, RoomSettings, RoomSettingsPatch};

use super::openapi::{EdgeErrors, StoreReadErrors, StoreWriteErrors};

use crate::error::{ApiError, Json, Path};
use crate::state::AppState;
use vestibule_room::status::rfc3339_from_ms;
use vestibule_store::{
    now_ms, LabelsPatch, QueueingMethod, RoomCounts, SalePatch, SaleSettings, Settings,
    SettingsPatch, SettingsUpdate, VersionedSettings,
};

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
pub(crate) fn view(room: &str, in_force: Settings, counts: RoomCounts) -> RoomSettings {
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

/// Validates a patch against the settings' bounds (`vestibule_shared::settings`) and converts
/// it to store units (token TTL in milliseconds).
///
/// # Errors
/// 400 `invalid_field` naming the field and its bounds, e.g. `tokenTtlSecs must be 1–86400 s`.
fn checked(patch: &RoomSettingsPatch, origins: &[String]) -> Result<SettingsPatch, ApiError> {
    let checkout = match &patch.checkout_url {
        Some(Some(url)) => settings::check_checkout_url(url, origins),
        _ => Ok(()),
    };
    patch.validate().and(checkout).map_err(|error| {
        let hint = match error {
            SettingOutOfRange::MaxActiveUsers => " (null removes the cap; pause to stop admission)",
            SettingOutOfRange::AdmissionRate => " (pause to stop admission)",
            SettingOutOfRange::CheckoutUrl => " (null = the demo checkout)",
            SettingOutOfRange::AbandonAfter => " (never applied under 3× the longest poll hint)",
            SettingOutOfRange::Stock => " (units left; each order uses one)",
            SettingOutOfRange::ProofOfWorkDifficulty => " (0 turns proof of work off)",
            SettingOutOfRange::TokenTtl
            | SettingOutOfRange::HoldPlace
            | SettingOutOfRange::SoldOutMessageEn
            | SettingOutOfRange::SoldOutMessageKo
            | SettingOutOfRange::ProofOfWorkAuto => "",
            SettingOutOfRange::MessageEn | SettingOutOfRange::MessageKo => {
                " (null clears the message)"
            }
            SettingOutOfRange::DisplayNameEn | SettingOutOfRange::DisplayNameKo => {
                " (null = the slug)"
            }
        };
        ApiError::InvalidField(format!("{} must be {error}{hint}", error.api_field()))
    })?;
    Ok(SettingsPatch {
        admission_rate_per_sec: patch.admission_rate_per_sec,
        paused: patch.paused,
        token_ttl_ms: patch.token_ttl_secs.map(|secs| secs * 1000),
        max_active_users: patch.max_active_users,
        checkout_url: patch.checkout_url.clone(),
        share_token_with_embedder: patch.share_token_with_embedder,
        abandon_after_ms: patch.abandon_after_secs.map(|secs| secs * 1000),
        hold_place_ms: patch.hold_place_secs.map(|secs| secs * 1000),
        sale: SalePatch {
            stock: patch.stock,
            sold_out: patch.sold_out,
            closed: patch.closed,
            message_en: patch.sold_out_message_en.clone(),
            message_ko: patch.sold_out_message_ko.clone(),
        },
        opens_at_ms: opening_time("opensAt", patch.opens_at.as_ref())?,
        prequeue_opens_at_ms: opening_time("prequeueOpensAt", patch.prequeue_opens_at.as_ref())?,
        pow_difficulty: patch.proof_of_work_difficulty,
        pow_auto_joins_per_sec: patch.proof_of_work_auto_joins_per_sec,
        require_user_assertion: patch.require_user_assertion,
        labels: LabelsPatch {
            display_name_en: patch.display_name_en.clone(),
            display_name_ko: patch.display_name_ko.clone(),
            message_en: patch.message_en.clone(),
            message_ko: patch.message_ko.clone(),
        },
        queueing_method: queueing_method(patch.queueing_method.as_deref())?,
    })
}

/// A patch's queueing method: `None` = unchanged.
///
/// # Errors
/// 400 `invalid_field` when it is neither `"fifo"` nor `"random"`.
fn queueing_method(value: Option<&str>) -> Result<Option<QueueingMethod>, ApiError> {
    value
        .map(|text| {
            QueueingMethod::parse(text).ok_or_else(|| {
                ApiError::InvalidField(format!(
                    "queueingMethod must be \"fifo\" or \"random\", not {text:?}"
                ))
            })
        })
        .transpose()
}

/// Refuses a patch that would undo a sale's end: once sold out, a room stays sold out (its
/// SOLD_OUT tickets are final), so `soldOut: false` and a new `stock` are 409 `sold_out`.
/// (The store keeps the mark too, so a patch racing the last order cannot clear it.)
fn check_not_reopening(current: &SaleSettings, patch: &SalePatch) -> Result<(), ApiError> {
    if current.sold_out && (patch.sold_out == Some(false) || patch.stock.is_some()) {
        return Err(ApiError::SoldOut(
            "this room is sold out, which is final: soldOut stays true and stock cannot change"
                .into(),
        ));
    }
    Ok(())
}

/// A patch's opening time (RFC 3339) in Unix ms: `None` = unchanged, `Some(None)` = cleared.
///
/// # Errors
/// 400 `invalid_field` when it is not an RFC 3339 date-time at or after 1970.
fn opening_time(
    field: &str,
    value: Option<&Option<String>>,
) -> Result<Option<Option<u64>>, ApiError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let Some(text) = value else {
        return Ok(Some(None));
    };
    let at = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map_err(|_| {
            ApiError::InvalidField(format!(
                "{field} must be an RFC 3339 date-time such as 2026-11-27T09:00:00Z, not {text:?}"
            ))
        })?;
    // A time before 1970 is as past as 1970 itself: it opens at once (every RFC 3339 date-time
    // the document allows is taken).
    let ms = u64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
    Ok(Some(Some(ms)))
}

/// Checks the two opening times as they would stand after `patch`: a pre-queue needs an
/// opening, and opens at or before it (docs/DESIGN.md "Scheduled opening and the draw").
///
/// # Errors
/// 409 `conflict`: the schedule the patch would leave (with the stored times) is inconsistent.
/// Each time alone is valid, so this is a conflict of values, not a malformed field.
pub(crate) fn check_opening(current: &Settings, patch: &SettingsPatch) -> Result<(), ApiError> {
    let after = current.patched(patch);
    // A drawn pre-queue publishes the seed at the opening, which would let anyone predict the
    // lottery's keys after it (docs/DESIGN.md "Random queueing").
    if after.queueing_method.is_random() && after.prequeue_opens_at_ms.is_some() {
        return Err(ApiError::Conflict(
            "queueingMethod \"random\" cannot be combined with a prequeueOpensAt (the draw \
             publishes the seed the lottery keys come from); a random room may have an opensAt"
                .into(),
        ));
    }
    // A closed random room publishes its seed and can never reopen random, so a room turns random
    // only open (found by a probe: created closed and random, its seed was out at once and its
    // opening refused): prepare it closed as FIFO, and open it with `{"closed": false,
    // "queueingMethod": "random"}` in one change.
    if after.queueing_method.is_random()
        && after.sale.closed
        && !current.queueing_method.is_random()
    {
        return Err(ApiError::Conflict(
            "a room turns random only while open (a closed random room publishes its seed): \
             send closed: false with queueingMethod \"random\""
                .into(),
        ));
    }
    match (after.prequeue_opens_at_ms, after.opens_at_ms) {
        (Some(_), None) => Err(ApiError::Conflict(
            "prequeueOpensAt needs an opensAt (the draw is made at the opening)".into(),
        )),
        (Some(pre), Some(opens)) if pre > opens => Err(ApiError::Conflict(format!(
            "prequeueOpensAt ({}) must not be after opensAt ({})",
            rfc3339_from_ms(pre),
            rfc3339_from_ms(opens)
        ))),
        _ => Ok(()),
    }
}

/// Before a patch that leaves the room random: refuses it when the lottery's seed is public
/// already (so keys could be predicted), or when it reopens a closed random room (a closed
/// random room publishes its seed), then makes sure the room has a seed, so the store files
/// every waiting ticket under its key in the same step as the switch (docs/DESIGN.md "Random
/// queueing").
///
/// # Errors
/// 409 `conflict` for a seed already published; store errors.
pub(crate) async fn prepare_lottery(
    state: &AppState,
    room: vestibule_store::RoomId<'_>,
    current: &Settings,
    patch: &SettingsPatch,
) -> Result<(), ApiError> {
    let after = current.patched(patch);
    if !after.queueing_method.is_random() {
        return Ok(());
    }
    if current.queueing_method.is_random() && current.sale.closed && !after.sale.closed {
        return Err(ApiError::Conflict(
            "a closed random room has published its seed: switch queueingMethod to \"fifo\" \
             before reopening it"
                .into(),
        ));
    }
    if !current.queueing_method.is_random() {
        let record = state.store.draw_record(room).await?;
        let public = match &record {
            Some(record) => crate::draw::seed_public(&*state.store, room, current, record).await?,
            None => false,
        };
        if public {
            return Err(ApiError::Conflict(
                "this room's seed is published already (a draw or an earlier random window): \
                 its lottery keys would be predictable"
                    .into(),
            ));
        }
    }
    state
        .store
        .draw_seed(room, &vestibule_room::opening::fresh_seed())
        .await?;
    Ok(())
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
        (status = 409, description = "The room is sold out, which is final: `soldOut: false` or a new `stock` (`sold_out`); or the schedule the patch would leave is inconsistent: a `prequeueOpensAt` after `opensAt` or without one; or `queueingMethod: \"random\"` with a `prequeueOpensAt`, in a room whose seed is published already, or in a room that stays closed; or reopening a closed random room (`conflict`)", body = ErrorBody),
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
    tracing::info!(%room, ?patch, version = settings.version, "room settings changed");
    let changes = super::audit::changes_named(room, &before, &settings.settings, named);
    let ids = super::audit::record(state, room, changes).await;
    let mut response = answer(state, room, settings).await?;
    super::audit::ids_header(&mut response, &ids);
    Ok(response)
}

/// A settings patch from a JSON body (an object of [`RoomSettingsPatch`] fields), checked and in
/// store units.
///
/// # Errors
/// 400 `bad_request` (not an object, unknown field, wrong type) or `invalid_field` (out of
/// bounds, `requireUserAssertion` without `--user-assertion-secret`).
pub(crate) fn parse_patch(
    state: &AppState,
    body: serde_json::Value,
) -> Result<SettingsPatch, ApiError> {
    // serde would also read a struct from a JSON array; only an object names its fields.
    if !body.is_object() {
        return Err(ApiError::BadRequest(
            "the settings patch must be a JSON object".into(),
        ));
    }
    let patch: RoomSettingsPatch = serde_json::from_value(body)
        .map_err(|error| ApiError::BadRequest(format!("settings patch: {error}")))?;
    if patch.require_user_assertion == Some(true) && state.config.user_assertion_secret.is_none() {
        return Err(ApiError::InvalidField(
            "requireUserAssertion needs the server started with --user-assertion-secret \
             (nobody could join otherwise)"
                .into(),
        ));
    }
    checked(&patch, &state.config.cors_origins)
}

#[cfg(test)]
mod tests {
    use vestibule_shared::settings::*;

    /// `queueingMethod` is documented as the enum it is, in the admin view, the patch, the
    /// room's info and the ticket status.
    #[test]
    fn the_queueing_method_is_a_documented_enum() {
        let (_, document) = crate::documented_routes();
        let json = serde_json::to_value(&document).unwrap();
        let schemas = &json["components"]["schemas"];
        assert_eq!(
            schemas["QueueingMethod"]["enum"],
            serde_json::json!(["fifo", "random"]),
            "{}",
            schemas["QueueingMethod"]
        );
        for schema in [
            "RoomSettings",
            "RoomSettingsPatch",
            "RoomInfo",
            "TicketStatus",
        ] {
            let property = schemas[schema]["properties"]["queueingMethod"].to_string();
            assert!(
                property.contains("#/components/schemas/QueueingMethod"),
                "{schema}: {property}"
            );
        }
    }

    /// The OpenAPI attributes need literals; this keeps them equal to the one set of bounds.
    #[test]
    fn the_documented_bounds_are_the_settings_bounds() {
        let (_, document) = crate::documented_routes();
        let json = serde_json::to_value(&document).unwrap();
        for schema in ["RoomSettings", "RoomSettingsPatch"] {
            let properties = &json["components"]["schemas"][schema]["properties"];
            let bounds = |field: &str| {
                let property = &properties[field];
                (property["minimum"].as_f64(), property["maximum"].as_f64())
            };
            assert_eq!(
                bounds("admissionRatePerSec"),
                (
                    Some(ADMISSION_RATE_PER_SEC_MIN),
                    Some(ADMISSION_RATE_PER_SEC_MAX)
                ),
                "{schema}: {properties}"
            );
            assert_eq!(
                bounds("tokenTtlSecs"),
                (
                    Some(TOKEN_TTL_SECS_MIN as f64),
                    Some(TOKEN_TTL_SECS_MAX as f64)
                ),
                "{schema}: {properties}"
            );
            assert_eq!(
                bounds("maxActiveUsers"),
                (
                    Some(MAX_ACTIVE_USERS_MIN as f64),
                    Some(MAX_ACTIVE_USERS_MAX as f64)
                ),
                "{schema}: {properties}"
            );
            assert_eq!(
                properties["checkoutUrl"]["maxLength"].as_u64(),
                Some(CHECKOUT_URL_MAX_CHARS as u64),
                "{schema}: {properties}"
            );
            let secs = |min: u64, max: u64| (Some(min as f64), Some(max as f64));
            assert_eq!(
                bounds("abandonAfterSecs"),
                secs(ABANDON_AFTER_SECS_MIN, ABANDON_AFTER_SECS_MAX),
                "{schema}: {properties}"
            );
            assert_eq!(
                bounds("holdPlaceSecs"),
                secs(HOLD_PLACE_SECS_MIN, HOLD_PLACE_SECS_MAX),
                "{schema}: {properties}"
            );
            assert_eq!(
                bounds("stock"),
                (Some(0.0), Some(STOCK_MAX as f64)),
                "{schema}: {properties}"
            );
            for field in ["soldOutMessageEn", "soldOutMessageKo"] {
                assert_eq!(
                    properties[field]["maxLength"].as_u64(),
                    Some(SOLD_OUT_MESSAGE_MAX_CHARS as u64),
                    "{schema}: {properties}"
                );
                assert_eq!(
                    properties[field]["pattern"].as_str(),
                    Some(SOLD_OUT_MESSAGE_PATTERN),
                    "{schema}: {properties}"
                );
            }
            assert_eq!(
                bounds("proofOfWorkDifficulty"),
                secs(0, u64::from(PROOF_OF_WORK_DIFFICULTY_MAX)),
                "{schema}: {properties}"
            );
            assert_eq!(
                bounds("proofOfWorkAutoJoinsPerSec"),
                secs(
                    *PROOF_OF_WORK_AUTO_JOINS_PER_SEC.start(),
                    *PROOF_OF_WORK_AUTO_JOINS_PER_SEC.end()
                ),
                "{schema}: {properties}"
            );
        }
    }
}
