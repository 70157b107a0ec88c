//! A settings patch, from its JSON body to the store's units, and the checks it must pass
//! against the room as it stands: bounds, opening times, a sold-out room's finality, the
//! lottery's seed.

use vestibule_shared::settings::{self, SettingOutOfRange};
use vestibule_shared::RoomSettingsPatch;

use crate::error::ApiError;
use crate::state::AppState;
use vestibule_room::status::rfc3339_from_ms;
use vestibule_store::{
    LabelsPatch, QueueingMethod, SalePatch, SaleSettings, Settings, SettingsPatch,
};

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

/// Validates a patch against the settings' bounds (`vestibule_shared::settings`) and converts
/// it to store units (token TTL in milliseconds).
///
/// # Errors
/// 400 `invalid_field` naming the field and its bounds, e.g. `tokenTtlSecs must be 1–86400 s`;
/// 409 `conflict` for `autoRate.min` above `autoRate.max` (two valid values that disagree).
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
            | SettingOutOfRange::ExpectedCheckout
            | SettingOutOfRange::SoldOutMessageEn
            | SettingOutOfRange::SoldOutMessageKo
            | SettingOutOfRange::ProofOfWorkAuto => "",
            SettingOutOfRange::AutoRate => " (null turns the loop off)",
            SettingOutOfRange::AutoRateHealthUrl => " (absent or null = no polling)",
            SettingOutOfRange::MessageEn | SettingOutOfRange::MessageKo => {
                " (null clears the message)"
            }
            SettingOutOfRange::DisplayNameEn | SettingOutOfRange::DisplayNameKo => {
                " (null = the slug)"
            }
        };
        ApiError::InvalidField(format!("{} must be {error}{hint}", error.api_field()))
    })?;
    if let Some(Some(auto)) = patch
        .auto_rate
        .as_ref()
        .filter(|auto| auto.as_ref().is_some_and(|a| a.min > a.max))
    {
        return Err(ApiError::Conflict(format!(
            "autoRate.min ({}) must not be above autoRate.max ({})",
            auto.min, auto.max
        )));
    }
    Ok(SettingsPatch {
        admission_rate_per_sec: patch.admission_rate_per_sec,
        paused: patch.paused,
        token_ttl_ms: patch.token_ttl_secs.map(|secs| secs * 1000),
        max_active_users: patch.max_active_users,
        checkout_url: patch.checkout_url.clone(),
        share_token_with_embedder: patch.share_token_with_embedder,
        abandon_after_ms: patch.abandon_after_secs.map(|secs| secs * 1000),
        hold_place_ms: patch.hold_place_secs.map(|secs| secs * 1000),
        expected_checkout_ms: patch
            .expected_checkout_secs
            .map(|secs| secs.map(|secs| secs * 1000)),
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
        auto_rate: patch.auto_rate.clone(),
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
pub(super) fn check_not_reopening(
    current: &SaleSettings,
    patch: &SalePatch,
) -> Result<(), ApiError> {
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

/// Checks the settings that must agree with each other as they would stand after `patch`: a
/// pre-queue needs an opening, and opens at or before it (docs/DESIGN.md "Scheduled opening and
/// the draw"); the lottery with the pre-queue.
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
    // only open (created closed and random, its seed would be out at once and its opening
    // refused): prepare it closed as FIFO, and open it with `{"closed": false,
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

/// Refuses an admission rate set by hand outside the loop's bounds while the loop is on, as the
/// patch would leave it (docs/DESIGN.md "Closed-loop admission"): the loop keeps the rate within
/// [`autoRate.min`, `autoRate.max`], and would move it back at its next step. A patch that only
/// moves the bounds is taken (the loop brings the rate within them). `current` is this
/// replica's copy (at most a tick old): a rate that slips past bounds set elsewhere within that
/// tick is brought within at the loop's next step.
///
/// # Errors
/// 409 `conflict`, naming the bounds and the ways out.
pub(crate) fn check_rate_within_loop(
    current: &Settings,
    patch: &SettingsPatch,
) -> Result<(), ApiError> {
    let Some(rate) = patch.admission_rate_per_sec else {
        return Ok(());
    };
    match current.patched(patch).auto_rate {
        Some(auto) if !(auto.min..=auto.max).contains(&rate) => Err(ApiError::Conflict(format!(
            "admissionRatePerSec ({rate}) must be within autoRate's min–max ({}–{}) while the \
             loop is on: set it within them, move them, or turn the loop off (autoRate: null)",
            auto.min, auto.max
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
