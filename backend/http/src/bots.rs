//! Bots at the door (docs/bots.md): `GET …/rooms/{room}/challenge`, the checks a
//! join passes before the store sees it ([`check_join`]), and the operator's
//! `GET /api/v1/admin/rooms/{room}/top-clients`.
//!
//! Refusals are counted in `vestibule_joins_refused_total{room, reason, kind}`: `reason` is
//! `rate_limit`, `proof_of_work` (`kind` = [`Refusal::kind`]) or `user_assertion` (`kind`
//! `missing` or `invalid`).

use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::bots::{Challenge, ClientJoins, TopClients, ALGORITHM, PROOF_OF_WORK_HEADER};
use vestibule_shared::{error_code, ErrorBody, USER_ASSERTION_HEADER};

use super::openapi::EdgeErrors;
use crate::admin::authorize;
use crate::error::{ApiError, Json, Path};
use crate::state::AppState;
use vestibule_room::bots::Refusal;
use vestibule_room::RoomRuntime;
use vestibule_store::ids::random_id;
use vestibule_store::{now_ms, Settings};

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(challenge))
        .routes(routes!(top_clients))
}

/// Counts a refused join.
pub fn count_refusal(room: &str, reason: &'static str, kind: &'static str) {
    metrics::counter!(
        "vestibule_joins_refused_total",
        "room" => room.to_owned(),
        "reason" => reason,
        "kind" => kind
    )
    .increment(1);
}

/// The room's bot checks of a join, before the store: a required user assertion is present
/// (its signature is checked with the dedup key), and with proof of work on, the
/// `X-Proof-Of-Work` solution verifies and is used here for the first time (one store write).
///
/// A join decided again on newer settings (another replica changed them) checks again with
/// the same `challenge_used`: a solution this join already used is verified against the new
/// difficulty but not used a second time (it would read as a replay).
///
/// # Errors
/// 403 `user_assertion_required`; the `proof_of_work_*` refusals ([`Refusal`]); 503/504 when
/// the store cannot mark the challenge used.
pub async fn check_join(
    state: &AppState,
    runtime: &RoomRuntime,
    settings: &Settings,
    headers: &HeaderMap,
    challenge_used: &AtomicBool,
) -> Result<(), ApiError> {
    let room = runtime.name.as_str();
    let assertion_missing =
        settings.require_user_assertion && !headers.contains_key(USER_ASSERTION_HEADER);
    let refuse_assertion = || {
        count_refusal(room, "user_assertion", "missing");
        ApiError::JoinRefused {
            code: error_code::USER_ASSERTION_REQUIRED,
            message: "this room allows one place per person: join with the X-User-Assertion \
                      your storefront signs for you",
        }
    };
    // A join that carries a proof of work has it checked, and spent, before a missing
    // assertion refuses it: whichever copy of the settings the refusal is decided on (this
    // replica's, or the store's after a change elsewhere), the solution is used once.
    let checks_proof = settings.pow_difficulty > 0 && headers.contains_key(PROOF_OF_WORK_HEADER);
    if assertion_missing && !checks_proof {
        return Err(refuse_assertion());
    }
    check_proof(state, runtime, settings, headers, challenge_used).await?;
    if assertion_missing {
        return Err(refuse_assertion());
    }
    Ok(())
}

/// The proof-of-work part of [`check_join`]: nothing when the room asks for none; else the
/// `X-Proof-Of-Work` header verified and its challenge spent (once per join: `challenge_used`).
async fn check_proof(
    state: &AppState,
    runtime: &RoomRuntime,
    settings: &Settings,
    headers: &HeaderMap,
    challenge_used: &AtomicBool,
) -> Result<(), ApiError> {
    let room = runtime.name.as_str();
    if settings.pow_difficulty == 0 {
        return Ok(());
    }
    let refuse = |refusal: Refusal| {
        count_refusal(room, "proof_of_work", refusal.kind());
        ApiError::JoinRefused {
            code: refusal.code(),
            message: refusal.message(),
        }
    };
    let header = headers
        .get(PROOF_OF_WORK_HEADER)
        .ok_or_else(|| refuse(Refusal::Missing))?
        .to_str()
        .map_err(|_| refuse(Refusal::Malformed))?;
    let now = now_ms();
    let verified = state
        .bots
        .key()
        .verify(
            room,
            header,
            now,
            state.bots.least_difficulty(room, settings, now),
        )
        .map_err(refuse)?;
    if challenge_used.load(Ordering::Relaxed) {
        return Ok(());
    }
    if !state
        .store
        .use_challenge(runtime.id(), &verified.id, verified.expires_at_ms, now)
        .await?
    {
        return Err(refuse(Refusal::Reused));
    }
    challenge_used.store(true, Ordering::Relaxed);
    Ok(())
}

/// `GET /api/v1/rooms/{room}/challenge`: a proof-of-work challenge for one join.
///
/// Stateless: nothing is stored until a join uses it. The difficulty is the room's in force
/// now (with the automatic rise); 0 when the room asks for none.
#[utoipa::path(
    get,
    path = "/api/v1/rooms/{room}/challenge",
    tag = "rooms",
    operation_id = "challenge",
    params(("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main")),
    responses(
        (status = 200, body = Challenge, description = "Solve it (see `X-Proof-Of-Work` on the join) and join within `expiresAtMs`; one join per challenge"),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        EdgeErrors,
    )
)]
pub async fn challenge(
    State(state): State<AppState>,
    Path(room): Path<String>,
) -> Result<Json<Challenge>, ApiError> {
    let runtime = state.room(&room)?;
    let now = now_ms();
    let difficulty = state.bots.difficulty(&room, &runtime.settings(), now);
    let expires_at_ms = now + state.config.challenge_ttl_secs * 1000;
    let challenge = state
        .bots
        .key()
        .issue(&room, difficulty, &random_id(), expires_at_ms);
    Ok(Json(Challenge {
        challenge,
        difficulty,
        expires_at_ms,
        algorithm: ALGORITHM.to_owned(),
    }))
}

/// How many clients the top list shows.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TopQuery {
    /// At most this many clients, 1–1000 (default 20).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
}

/// `GET /api/v1/admin/rooms/{room}/top-clients`: who joined most in the last minute.
#[utoipa::path(
    get,
    path = "/api/v1/admin/rooms/{room}/top-clients",
    tag = "admin",
    operation_id = "top_clients",
    params(("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main"), TopQuery),
    security(("admin_token" = [])),
    responses(
        (status = 200, body = TopClients, description = "Join attempts (any outcome) by client address on this replica in the last 60 s, most first"),
        (status = 400, description = "`limit` out of 1–1000 (`invalid_field`)", body = ErrorBody),
        (status = 401, description = "No bearer token (`unauthorized`)", body = ErrorBody),
        (status = 403, description = "Wrong token, or the admin API is off (`forbidden`)", body = ErrorBody),
        (status = 404, description = "Unknown room", body = ErrorBody),
        EdgeErrors,
    )
)]
pub async fn top_clients(
    State(state): State<AppState>,
    Path(room): Path<String>,
    headers: HeaderMap,
    Query(query): Query<TopQuery>,
) -> Result<Json<TopClients>, ApiError> {
    authorize(&state, &headers)?;
    state.room(&room)?;
    let limit = query.limit.unwrap_or(20);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::InvalidField("limit must be 1–1000".into()));
    }
    let clients = state
        .bots
        .top_clients(&room, limit, now_ms())
        .into_iter()
        .map(|(client, joins)| ClientJoins { client, joins })
        .collect();
    Ok(Json(TopClients {
        room,
        scope: "replica".into(),
        clients,
    }))
}
