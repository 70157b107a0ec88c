//! `GET /api/v1/rooms/{room}/draw`: a room's draw, auditable by anyone (docs/DESIGN.md
//! "Scheduled opening and the draw"). Before the opening only the commitment (SHA-256 of the
//! seed); after it the seed, the algorithm and the drawn tags in place order, paged.

use axum::extract::{RawQuery, State};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::draw::{
    DrawInfo, DrawState, DRAW_ALGORITHM, DRAW_ALGORITHM_UNMIXED, DRAW_PAGE_MAX,
};
use vestibule_shared::ErrorBody;

use super::openapi::{EdgeErrors, StoreReadErrors};
use crate::error::{ApiError, Json, Path};
use crate::state::AppState;
use vestibule_room::opening::{
    self, hex32, mixed_seed, opening_phase, seed_bytes, seed_commitment, Phase,
};
use vestibule_room::status::rfc3339_from_ms;
use vestibule_store::now_ms;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(room_draw))
}

/// The largest `offset` (the OpenAPI document's int64 maximum).
const OFFSET_MAX: u64 = i64::MAX as u64;

/// Whether a room's seed may be published: never while its lottery runs (a random room neither
/// closed nor sold out: a bot that knew the seed could re-join until it drew a small key); else
/// once the draw is made, or when the seed was made for a lottery: no draw scheduled and no
/// pre-queue ticket waiting for one (times cleared while a pre-queue waits: the leader draws at
/// its next tick, and the seed is published after that).
///
/// # Errors
/// The store's, reading the pre-queue.
pub async fn seed_public(
    store: &dyn vestibule_store::Store,
    room: vestibule_store::RoomId<'_>,
    settings: &vestibule_store::Settings,
    record: &vestibule_store::DrawRecord,
) -> Result<bool, vestibule_store::StoreError> {
    let lottery_running =
        settings.queueing_method.is_random() && !settings.sale.closed && !settings.sale.sold_out;
    if lottery_running {
        return Ok(false);
    }
    if record.drawn_at_ms.is_some() {
        return Ok(true);
    }
    Ok(!opening::has_draw(settings) && store.prequeue_ids(room).await?.is_empty())
}

/// `offset` and `limit` from a query string: offset 0–[`OFFSET_MAX`] (default 0), limit
/// 1–`max_limit` (default `default_limit`). Shared by the draw's and the waiters' pages.
///
/// # Errors
/// 400 `invalid_field`: not a whole number, or out of range.
pub(crate) fn page(
    query: Option<&str>,
    default_limit: u64,
    max_limit: u64,
) -> Result<(u64, u64), ApiError> {
    let (mut offset, mut limit) = (0, default_limit);
    for (name, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        let number = || {
            value.parse::<u64>().map_err(|_| {
                ApiError::InvalidField(format!("{name} must be a whole number, not {value:?}"))
            })
        };
        match name.as_ref() {
            "offset" => offset = number()?,
            "limit" => limit = number()?,
            _ => {}
        }
    }
    // The document's bound (an int64): a larger offset lists nothing anyway, but a client that
    // sends one has a bug worth telling.
    if offset > OFFSET_MAX {
        return Err(ApiError::InvalidField(format!(
            "offset must be 0–{OFFSET_MAX}"
        )));
    }
    if !(1..=max_limit).contains(&limit) {
        return Err(ApiError::InvalidField(format!(
            "limit must be 1–{max_limit}"
        )));
    }
    Ok((offset, limit))
}

/// The room's draw: `NONE` (no pre-queue has opened), `COMMITTED` (`seedSha256` published,
/// seed secret) or `DRAWN` (seed, algorithm, drawn tags in place order from `offset`). Once the
/// pre-queue is open the seed is created by the first caller that needs it, this one included.
/// Recompute with `vestibule verify-draw URL`.
#[utoipa::path(
    get,
    path = "/api/v1/rooms/{room}/draw",
    tag = "rooms",
    operation_id = "room_draw",
    params(
        ("room" = String, Path, pattern = "^[a-z0-9-]{1,64}$", description = "Room slug", example = "main"),
        ("offset" = Option<u64>, Query, minimum = 0, maximum = 9223372036854775807_u64, description = "Index of the first tag to list (place = offset + index + 1); default 0"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 10000, description = "Most tags to list; default 10000"),
    ),
    responses(
        (status = 200, body = DrawInfo),
        (status = 400, description = "`offset` or `limit` is not a whole number in range (`invalid_field`)", body = ErrorBody),
        (status = 404, description = "Unknown room (`room_not_found`)", body = ErrorBody),
        EdgeErrors, StoreReadErrors,
    )
)]
pub async fn room_draw(
    State(state): State<AppState>,
    Path(room): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<DrawInfo>, ApiError> {
    let runtime = state.room(&room)?;
    let (offset, limit) = page(query.as_deref(), DRAW_PAGE_MAX, DRAW_PAGE_MAX)?;
    let settings = runtime.settings();
    let phase = opening_phase(&settings, now_ms());
    let record = match state.store.draw_record(runtime.id()).await? {
        None if opening::has_draw(&settings) && !matches!(phase, Phase::NotOpen { .. }) => {
            Some(opening::ensure_seed(&*state.store, &runtime).await?)
        }
        other => other,
    };
    let drawn = record.as_ref().is_some_and(|r| r.drawn_at_ms.is_some());
    let public = match &record {
        Some(record) => seed_public(&*state.store, runtime.id(), &settings, record).await?,
        None => false,
    };
    let tags = if drawn {
        state.store.draw_tags(runtime.id(), offset, limit).await?
    } else {
        Vec::new()
    };
    let count = record.as_ref().map_or(0, |r| r.count);
    // Published with the seed, once the draw is made.
    let tags_sha256 = record
        .as_ref()
        .filter(|_| drawn && public)
        .and_then(|r| r.tags_sha256.clone());
    let next = offset.saturating_add(tags.len() as u64);
    Ok(Json(DrawInfo {
        room,
        state: match (&record, drawn) {
            (None, _) => DrawState::None,
            (Some(_), false) => DrawState::Committed,
            (Some(_), true) => DrawState::Drawn,
        },
        opens_at: settings.opens_at_ms.map(rfc3339_from_ms),
        prequeue_opens_at: settings.prequeue_opens_at_ms.map(rfc3339_from_ms),
        seed_sha256: record
            .as_ref()
            .and_then(|r| seed_bytes(&r.seed))
            .map(|seed| seed_commitment(&seed)),
        seed: record.as_ref().filter(|_| public).map(|r| r.seed.clone()),
        // A draw made before the mix (its record has no tags hash) says so.
        algorithm: if drawn && tags_sha256.is_none() {
            DRAW_ALGORITHM_UNMIXED
        } else {
            DRAW_ALGORITHM
        }
        .to_owned(),
        draw_seed: tags_sha256.as_deref().and_then(|tags| {
            let seed = seed_bytes(&record.as_ref()?.seed)?;
            Some(hex32(&mixed_seed(&seed, tags, None)?))
        }),
        tags_sha256,
        beacon: None,
        drawn_at: record
            .as_ref()
            .and_then(|r| r.drawn_at_ms)
            .map(rfc3339_from_ms),
        count,
        offset,
        tags,
        next_offset: (drawn && next < count).then_some(next),
    }))
}
