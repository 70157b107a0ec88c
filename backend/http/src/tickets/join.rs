//! `POST /api/v1/rooms/{room}/tickets`: a join, decided on the room's settings (proof of work,
//! user assertion, opening phase), then answered 201 new or 200 existing.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, Extensions, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret;
use vestibule_shared::{ErrorBody, TicketState, TicketStatus, USER_ASSERTION_HEADER};

use super::heard_record;
use crate::bots;
use crate::client_ip::{client_ip, limit_key};
use crate::error::{ApiError, Json, Path};
use crate::idempotency::idempotency_key;
use crate::openapi::{EdgeErrors, StoreWriteErrors};
use crate::state::AppState;
use crate::user_assertion;
use vestibule_room::opening::{self, opening_phase, Phase};
use vestibule_room::status::{rfc3339_from_ms, ticket_status};
use vestibule_room::RoomRuntime;
use vestibule_store::ids::{entry_token, random_id};
use vestibule_store::{
    now_ms, InstantAdmission, JoinKind, JoinLimit, JoinOutcome, JoinReply, JoinRequest, Unconfirmed,
};

/// The dedup key of a join: a verified user id beats an `Idempotency-Key`.
fn dedup_key(
    state: &AppState,
    room: &str,
    headers: &HeaderMap,
) -> Result<Option<String>, ApiError> {
    if let Some(value) = headers.get(USER_ASSERTION_HEADER) {
        let text = value
            .to_str()
            .map_err(|_| ApiError::UserAssertion("the user assertion is not ASCII".into()))?;
        let now_secs = now_ms() / 1000;
        let secret = state
            .config
            .user_assertion_secret
            .as_ref()
            .map(|secret| secret.expose_secret().as_bytes());
        let user = user_assertion::verify(secret, room, text, now_secs)
            .map_err(|error| ApiError::UserAssertion(error.to_string()))?;
        return Ok(Some(format!("u:{user}")));
    }
    Ok(idempotency_key(headers)?.map(|key| ["k:", &key].concat()))
}
/// `POST /api/v1/rooms/{room}/tickets`: join the queue.
///
/// 201 with a new ticket, or 200 with the existing one when the `Idempotency-Key` (or a signed
/// user assertion) names a live ticket — same id, same place. A new ticket in a room where
/// nobody waits and the current tick's quota has room is `TOKEN_ISSUED` at once. In a room with
/// a scheduled opening (docs/DESIGN.md "Scheduled opening and the draw"): 409 `room_not_open`
/// before the pre-queue opens, a `PRE_QUEUE` ticket between the pre-queue's opening and the
/// opening (its place is drawn then), and after the opening a place behind the drawn ones.
#[utoipa::path(
    post,
    path = "/api/v1/rooms/{room}/tickets",
    tag = "tickets",
    operation_id = "join",
    params(
        ("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug, `[a-z0-9-]{1,64}`", example = "main"),
        ("Idempotency-Key" = Option<String>, Header, pattern = "^[!-~]{1,128}$", description = "Makes the join idempotent: the same key returns the same ticket and place (1–128 printable ASCII, no spaces; a secret like the ticket id)", example = "3f9c2a7e5b1d4c8a"),
        ("X-User-Assertion" = Option<String>, Header, pattern = "^[!-~]+\\.[0-9]+\\.[0-9a-f]{64}$", description = "`userId.expiryUnixSecs.hexHmac` signed by the storefront with `--user-assertion-secret`: one live ticket per user. 403 `user_assertion_invalid` when it does not verify; required (403 `user_assertion_required`) in a room with `requireUserAssertion`"),
        ("X-Proof-Of-Work" = Option<String>, Header, pattern = "^[A-Za-z0-9._-]{1,200}:[0-9]{1,20}$", description = "`{challenge}:{nonce}`: a solved challenge of `GET …/challenge` (README \"Bots at the door\"), required in a room with `proofOfWorkDifficulty` > 0; each works for one join"),
    ),
    responses(
        (status = 201, description = "New ticket at the back of the line, or already `TOKEN_ISSUED` when nobody was waiting and the admission rate had room", body = TicketStatus,
            headers(("Location" = String, description = "The ticket's URL"))),
        (status = 200, description = "The live ticket already joined under this key or user (same id, same place)", body = TicketStatus,
            headers(("Location" = String, description = "The ticket's URL"))),
        (status = 400, description = "Malformed `Idempotency-Key`, or a body that says it is JSON (or says nothing) and is not (`bad_request`; a join takes no body: none, `{}` or whitespace are fine)", body = ErrorBody),
        (status = 403, description = "Invalid user assertion (`user_assertion_invalid`), none where the room requires one (`user_assertion_required`); proof of work missing (`proof_of_work_required`), malformed or not from this waiting room (`proof_of_work_malformed`), short of the difficulty (`proof_of_work_wrong`), expired (`proof_of_work_expired`) or for another room (`proof_of_work_wrong_room`)", body = ErrorBody),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        (status = 409, description = "No new place. The proof of work's challenge was already used by a join (`proof_of_work_reused`). Sold out (`sold_out`, the body carrying the room's `soldOutMessage`) or closed to new joins (`room_closed`): a join whose key or user names a live ticket still gets it (200; `SOLD_OUT` once the room sold out). Before the room's pre-queue opens (`prequeueOpensAt`, or `opensAt` without a pre-queue): `room_not_open` with both times (`opensAt`, `prequeueOpensAt`) and `Retry-After`; nothing was created (a join whose key or user names a live ticket still gets it: 200). The bodies of `sold_out`, `room_closed` and `room_not_open` also carry the room's `displayNameEn` / `displayNameKo`", body = vestibule_shared::draw::RoomNotOpen,
            headers(("Retry-After" = u64, description = "With `room_not_open`: seconds until joins start"))),
        (status = 429, description = "Over the per-client join limit (`rate_limited`); a retried join that finds its ticket is never refused", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait"))),
        EdgeErrors, StoreWriteErrors,
    )
)]
pub async fn join(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
    extensions: Extensions,
) -> Result<Response, ApiError> {
    state.room(&room)?;
    let client = client_ip(&headers, &extensions, state.config.client_ip_source()).map(limit_key);
    state
        .bots
        .record_attempt(&room, client.as_deref(), now_ms());
    let key = dedup_key(&state, &room, &headers).inspect_err(|error| {
        // Only a bad assertion is the operator's abuse signal; a malformed Idempotency-Key is not.
        if matches!(error, ApiError::UserAssertion(_)) {
            bots::count_refusal(&room, "user_assertion", "invalid");
        }
    })?;
    let limit = state
        .config
        .joins_per_ip_per_minute
        .zip(client)
        .map(|(per_minute, client)| JoinLimit {
            client,
            per_minute: per_minute.get(),
        });
    // A proof of work is used once, whichever generation of the room the join ends in.
    let challenge_used = AtomicBool::new(false);
    let answer = crate::on_live_room(&state, &room, |runtime| {
        join_in(
            &state,
            runtime,
            &headers,
            key.as_deref(),
            limit.as_ref(),
            &challenge_used,
        )
    })
    .await;
    match answer {
        Err(error @ (ApiError::SoldOut(_) | ApiError::RoomClosed(_))) => {
            Ok(refusal_with_room(&state, &room, error))
        }
        other => other,
    }
}

/// A join refused 409 `sold_out` or `room_closed`, its body carrying what a page shows a
/// shopper who got no place: the room's names and, when sold out, its sold-out message (a new
/// visitor sees the same words as those who waited). Status, code, message and the error's
/// report for the logs are the plain error's.
fn refusal_with_room(state: &AppState, room: &str, error: ApiError) -> Response {
    let Ok(runtime) = state.room(room) else {
        return error.into_response();
    };
    let settings = runtime.settings();
    let sold_out = matches!(error, ApiError::SoldOut(_));
    let body = vestibule_shared::draw::RoomNotOpen {
        error: error.code().to_owned(),
        message: error.to_string(),
        opens_at: None,
        prequeue_opens_at: None,
        sold_out_message: sold_out
            .then(|| vestibule_room::public_state::sold_out_message(&settings)),
        display_name_en: settings.labels.display_name_en.clone(),
        display_name_ko: settings.labels.display_name_ko.clone(),
    };
    let (mut parts, _) = error.into_response().into_parts();
    let (fresh, body) = Json(body).into_response().into_parts();
    parts.headers = fresh.headers;
    Response::from_parts(parts, body)
}

/// A join in `runtime`'s generation of the room.
async fn join_in(
    state: &AppState,
    runtime: Arc<RoomRuntime>,
    headers: &HeaderMap,
    key: Option<&str>,
    limit: Option<&JoinLimit>,
    challenge_used: &AtomicBool,
) -> Result<Response, ApiError> {
    let room = runtime.name.clone();
    // The join is decided on this replica's copy of the settings (refreshed every tick) and the
    // store refuses it when they have changed since (another replica's admin change): then it
    // is decided once more on the store's settings, so a room that has just turned on proof of
    // work, a user assertion or a pre-queue never takes a join that skipped them.
    let mut settings = runtime.versioned_settings();
    for attempt in 1..=JOIN_DECISIONS {
        bots::check_join(state, &runtime, &settings.settings, headers, challenge_used).await?;
        // The last decision is on settings read from the store a moment ago: it checks nothing.
        let version = (attempt < JOIN_DECISIONS).then_some(settings.version);
        let phase = opening_phase(&settings.settings, now_ms());
        let reply = match phase {
            Phase::NotOpen { joins_from_ms } => {
                // A keyed retry (or a user's join) still gets the live ticket it has: the window
                // refuses new places only.
                let found = match key {
                    Some(key) => {
                        state
                            .store
                            .keyed_ticket(runtime.id(), key, now_ms())
                            .await?
                    }
                    None => None,
                };
                let Some(ticket) = found else {
                    return Ok(room_not_open(&settings.settings, joins_from_ms));
                };
                JoinReply::Joined(JoinOutcome {
                    ticket,
                    created: false,
                })
            }
            Phase::PreQueue { .. } => {
                // The seed is committed before the first pre-queue ticket exists (room::opening).
                if !runtime.seeded() {
                    opening::ensure_seed(&*state.store, &runtime).await?;
                }
                let id = random_id();
                let kind = JoinKind::PreQueue {
                    settings_version: version,
                };
                let request = JoinRequest::new(&id).keyed(key).limited(limit);
                state
                    .store
                    .join(runtime.id(), &request.of_kind(kind))
                    .await?
            }
            Phase::Open => {
                let decided = (&settings.settings, version);
                join_open(state, &runtime, key, limit, decided).await?
            }
        };
        if reply != JoinReply::SettingsChanged {
            return finish_join(state, &runtime, room, reply).await;
        }
        settings = state.store.room_settings(&room).await?;
        if settings.generation != runtime.generation {
            return Err(ApiError::RoomDeleted(room));
        }
        runtime.set_settings(settings.clone());
    }
    Err(ApiError::from(vestibule_store::StoreError::Corrupt(
        "a join's last decision was refused as stale".into(),
    )))
}

/// How many times a join is decided: once on this replica's copy of the settings, and once
/// more, without a settings check, on the store's settings read after the store refused the
/// first as stale.
const JOIN_DECISIONS: u32 = 2;

/// 409 `room_not_open` with both times and `Retry-After` until `joins_from_ms`.
fn room_not_open(settings: &vestibule_store::Settings, joins_from_ms: u64) -> Response {
    let body = vestibule_shared::draw::RoomNotOpen {
        error: vestibule_shared::error_code::ROOM_NOT_OPEN.to_owned(),
        message: format!(
            "the room is not open yet: joins start at {}",
            rfc3339_from_ms(joins_from_ms)
        ),
        opens_at: settings.opens_at_ms.map(rfc3339_from_ms),
        prequeue_opens_at: settings.prequeue_opens_at_ms.map(rfc3339_from_ms),
        sold_out_message: None,
        display_name_en: settings.labels.display_name_en.clone(),
        display_name_ko: settings.labels.display_name_ko.clone(),
    };
    let wait_secs = joins_from_ms.saturating_sub(now_ms()).div_ceil(1000).max(1);
    let mut response = (
        StatusCode::CONFLICT,
        [(header::RETRY_AFTER, wait_secs.to_string())],
        Json(body),
    )
        .into_response();
    // Counted by its code like every other refusal, not as `none`.
    response.extensions_mut().insert(crate::observe::AnswerCode(
        vestibule_shared::error_code::ROOM_NOT_OPEN,
    ));
    response
}

/// A join in an open room (possibly admitted at once).
async fn join_open(
    state: &AppState,
    runtime: &RoomRuntime,
    key: Option<&str>,
    limit: Option<&JoinLimit>,
    (settings, settings_version): (&vestibule_store::Settings, Option<u64>),
) -> Result<JoinReply, ApiError> {
    // With nobody waiting the join may admit at once (docs/DESIGN.md "No wait when there is no
    // line"): it carries a fresh entry token for that case.
    let instant = InstantAdmission {
        token: entry_token(&runtime.name),
        now_ms: now_ms(),
        token_ttl_ms: settings.token_ttl_ms,
        settings_version,
    };
    let id = random_id();
    // Answered 504, its ticket is parked until its shopper is heard from (docs/DESIGN.md "Joins
    // nobody heard the answer of").
    let unconfirmed = Unconfirmed {
        hold_place_ms: settings.hold_place_ms,
        retry_for_ms: settings.abandon_after_ms,
    };
    let request = JoinRequest::new(&id)
        .keyed(key)
        .limited(limit)
        .of_kind(JoinKind::Admitting(&instant))
        .unconfirmed(unconfirmed);
    Ok(state.store.join(runtime.id(), &request).await?)
}

/// The answer to a join the store made: 201 new / 200 existing with the ticket's status.
async fn finish_join(
    state: &AppState,
    runtime: &vestibule_room::RoomRuntime,
    room: String,
    reply: JoinReply,
) -> Result<Response, ApiError> {
    let mut outcome = match reply {
        // The join-rate meter of the difficulty's rise counts the joins the store accepted.
        JoinReply::Joined(outcome) => {
            state.bots.record_join(&room, now_ms());
            outcome
        }
        JoinReply::RateLimited { retry_after_ms } => {
            bots::count_refusal(&room, "rate_limit", "");
            metrics::counter!("vestibule_joins_rate_limited_total", "room" => room).increment(1);
            return Err(ApiError::RateLimited {
                retry_after_secs: retry_after_ms.div_ceil(1000).max(1),
            });
        }
        JoinReply::Refused(refusal) => return Err(ApiError::refused_join(refusal)),
        JoinReply::SettingsChanged => {
            return Err(ApiError::from(vestibule_store::StoreError::Corrupt(
                "a stale join reached its answer".into(),
            )))
        }
    };
    if outcome.ticket.state == TicketState::Waiting && outcome.ticket.position.is_none() {
        // The key names a ticket skipped for silence, within its hold: this join is its holder
        // heard from again, so it goes back to its place.
        if let Some(record) = heard_record(state, runtime, &outcome.ticket.id, true).await? {
            outcome.ticket = record;
        }
    }
    let status_code = if outcome.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    runtime.count_join(outcome.created);
    runtime.counters.joined();
    let body = ticket_status(&state.room_options, runtime, &outcome.ticket);
    let location = vestibule_shared::paths::ticket(&room, &body.ticket_id);
    let mut response = (status_code, Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}
