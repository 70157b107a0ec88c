//! The admin API's view of a room's settings: `RoomSettings` (what `GET`/`PATCH
//! /api/v1/admin/rooms/{room}` answer) and `RoomSettingsPatch` (a change). Bounds and checks are
//! in [`crate::settings`].

use serde::{Deserialize, Serialize};
#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::numbers::{nullable, nullable_whole_number, whole_number};

/// The operator's live knobs for a room (`GET`/`PATCH /api/v1/admin/rooms/{room}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RoomSettings {
    /// Room slug. Example: `"main"`.
    pub room: String,
    /// Shoppers admitted per second, 0–100000. Example: `175.0`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 100000, example = 175.0)
    )]
    pub admission_rate_per_sec: f64,
    /// Admission stopped; places are kept. Example: `false`.
    pub paused: bool,
    /// Entry token TTL in seconds, 1–86400. Example: `300`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, maximum = 86400, example = 300)
    )]
    pub token_ttl_secs: u64,
    /// Cap on active users (tokens outstanding), 1–10000000; null = no cap. Example: `500`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, maximum = 10000000, example = 500)
    )]
    pub max_active_users: Option<u64>,
    /// Where the page sends an admitted shopper: a path here or an http(s) URL on an origin of
    /// `--cors-origins` ([`settings::check_checkout_url`]); null = the demo checkout. Example:
    /// `"https://shop.example/checkout"`.
    #[cfg_attr(feature = "openapi", schema(max_length = 2048))]
    pub checkout_url: Option<String>,
    /// Whether the page hands the entry token to the storefront embedding it. Example: `false`.
    pub share_token_with_embedder: bool,
    /// Seconds without a poll, stream or heartbeat before a waiting ticket is skipped, 1–86400:
    /// no admission slot, not in `waiting` nor in others' positions. Never applied under 3× the
    /// longest poll tier.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, maximum = 86400, example = 300)
    )]
    pub abandon_after_secs: u64,
    /// Seconds a skipped ticket keeps its place, 0–86400: heard from again within it, the ticket
    /// goes back to its place (`placeKept: true`); later it is `EXPIRED`. Example: `1800`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 86400, example = 1800)
    )]
    pub hold_place_secs: u64,
    /// How long a shopper is expected to keep an entry token before using it, seconds (the
    /// capacity calculator's average checkout time): under a cap on active users, the ETA's
    /// pace until a checkout has been measured. null = a third of the token TTL (the
    /// calculator's TTL is 1.5 × the P95 checkout, and an average about half the P95).
    /// Example: `45`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, maximum = 86400, example = 45)
    )]
    #[serde(default)]
    pub expected_checkout_secs: Option<u64>,
    /// The scheduled opening (RFC 3339): the draw places the pre-queue then; before it nobody is
    /// admitted. null = none. Example: `"2026-11-27T09:00:00Z"`.
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    #[serde(default)]
    pub opens_at: Option<String>,
    /// When joins start, as `PRE_QUEUE` tickets (RFC 3339, ≤ `opensAt`); null = no pre-queue.
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    #[serde(default)]
    pub prequeue_opens_at: Option<String>,
    /// Leading zero bits a join's proof of work needs, 0–26; 0 = no proof of work (the default).
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 26, example = 0))]
    pub proof_of_work_difficulty: u8,
    /// Joins per second (this replica's) from which the difficulty rises by one bit per doubling;
    /// null = fixed difficulty. Example: `null`.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000000))]
    pub proof_of_work_auto_joins_per_sec: Option<u64>,
    /// Joins need a signed `X-User-Assertion`: one live ticket per user. Example: `false`.
    pub require_user_assertion: bool,
    /// Shoppers waiting now. Example: `1200`.
    pub waiting: u64,
    /// Active users now. Example: `310`.
    pub active_users: u64,
    /// Units of stock left, 0–1000000000; null = unlimited. Each order (or storefront
    /// `…/entries/consume`) uses one in the same step as its entry token, on every store and
    /// replica; admission never leaves more tokens out than units left; 0 sells the room out.
    /// Example: `100`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 1000000000, example = 100)
    )]
    #[serde(default)]
    pub stock: Option<u64>,
    /// Units sold by orders so far (read only). Example: `0`.
    #[serde(default)]
    pub sold: u64,
    /// The room is sold out: set by an operator, by a stock of 0, or by the order that took the
    /// last unit. Every shopper not yet admitted is `SOLD_OUT` at once, new joins get 409
    /// `sold_out`, admission stops; tokens out work until used or expired. Final: it cannot be
    /// set back to false. Example: `false`.
    #[serde(default)]
    pub sold_out: bool,
    /// Closed to new joins (409 `room_closed`); shoppers in line keep their places. Example:
    /// `false`.
    #[serde(default)]
    pub closed: bool,
    /// The sold-out message shown to shoppers, English; null = the page's own text.
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 500,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    #[serde(default)]
    pub sold_out_message_en: Option<String>,
    /// The sold-out message shown to shoppers, Korean; null = the page's own text.
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 500,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    #[serde(default)]
    pub sold_out_message_ko: Option<String>,
    /// The room's name for people, English; null = the slug. Example: `"Drop 7"`.
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 100,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    #[serde(default)]
    pub display_name_en: Option<String>,
    /// The room's name for people, Korean; null = the slug.
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 100,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    #[serde(default)]
    pub display_name_ko: Option<String>,
    /// The message to waiters, English, shown above the position on every waiting page (each
    /// ticket answer and `GET /api/v1/rooms/{room}` carry it); null = none. Example:
    /// `"Sizes 42–44 are sold out"`.
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 280,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    #[serde(default)]
    pub message_en: Option<String>,
    /// The message to waiters, Korean; null = none.
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 280,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    #[serde(default)]
    pub message_ko: Option<String>,
    /// How the room orders its waiting shoppers: `"fifo"` (arrival order, the default) or
    /// `"random"` (by lottery key, docs/DESIGN.md "Random queueing").
    #[serde(default)]
    pub queueing_method: crate::QueueingMethod,
    /// The closed loop: the admission rate follows the origin's health within [min, max]
    /// (docs/DESIGN.md "Closed-loop admission"); null = the operator's rate alone.
    #[serde(default)]
    pub auto_rate: Option<crate::auto_rate::AutoRate>,
}

/// A partial update of [`RoomSettings`]; absent fields stay as they are. Each field's bounds are
/// in its description; a value out of them is 400 `invalid_field` (checked by
/// `RoomSettingsPatch::validate`, rules in the `settings` module).
///
/// `maxActiveUsers: null` removes the cap. Example: `{"admissionRatePerSec": 50, "paused": false}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoomSettingsPatch {
    /// New admission rate, shoppers per second, 0–100000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 100000, example = 50.0)
    )]
    pub admission_rate_per_sec: Option<f64>,
    /// Pause (true) or resume (false) admission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// New entry token TTL in seconds, 1–86400 (applies to tokens issued from now on).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "whole_number"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, maximum = 86400, example = 120)
    )]
    pub token_ttl_secs: Option<u64>,
    /// New active-users cap; `null` clears it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nullable_whole_number"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<u64>, minimum = 1, maximum = 10000000, example = 500)
    )]
    pub max_active_users: Option<Option<u64>>,
    /// New checkout URL ([`settings::check_checkout_url`]); `null` = the demo checkout again.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nullable"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, max_length = 2048))]
    pub checkout_url: Option<Option<String>>,
    /// Hand the entry token to the embedding storefront (true) or not (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_token_with_embedder: Option<bool>,
    /// New abandon time in seconds, 1–86400.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "whole_number"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, maximum = 86400, example = 300)
    )]
    pub abandon_after_secs: Option<u64>,
    /// New place-holding time in seconds, 0–86400.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "whole_number"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 86400, example = 1800)
    )]
    pub hold_place_secs: Option<u64>,
    /// New expected checkout time in seconds, 1–86400; `null` = a third of the token TTL.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nullable_whole_number"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<u64>, minimum = 1, maximum = 86400, example = 45)
    )]
    pub expected_checkout_secs: Option<Option<u64>>,
    /// New units of stock left, 0–1000000000 (0 sells the room out); `null` = unlimited.
    /// Refused (409 `sold_out`) once the room is sold out.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nullable_whole_number"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<u64>, minimum = 0, maximum = 1000000000, example = 100)
    )]
    pub stock: Option<Option<u64>>,
    /// `true` marks the room sold out (final: `false` on a sold-out room is 409 `sold_out`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sold_out: Option<bool>,
    /// Close (true) or reopen (false) the room to new joins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed: Option<bool>,
    /// New English sold-out message, 1–500 characters without control characters; `null` = the
    /// page's own text.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nullable"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, max_length = 500, pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$")
    )]
    pub sold_out_message_en: Option<Option<String>>,
    /// New Korean sold-out message (as `soldOutMessageEn`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nullable"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, max_length = 500, pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$")
    )]
    pub sold_out_message_ko: Option<Option<String>>,
    /// New opening (RFC 3339, e.g. `"2026-11-27T09:00:00Z"`); `null` = none.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nullable"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub opens_at: Option<Option<String>>,
    /// New pre-queue opening (RFC 3339, not after `opensAt`); `null` = none.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nullable"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub prequeue_opens_at: Option<Option<String>>,
    /// New proof-of-work difficulty in leading zero bits, 0–26 (0 = off).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "whole_number"
    )]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 26, example = 16))]
    pub proof_of_work_difficulty: Option<u8>,
    /// New auto-rise threshold in joins per second, 1–1000000; `null` = fixed difficulty.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nullable_whole_number"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>, minimum = 1, maximum = 1000000))]
    pub proof_of_work_auto_joins_per_sec: Option<Option<u64>>,
    /// Require a signed `X-User-Assertion` on joins (true) or not (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_user_assertion: Option<bool>,
    /// New English display name, 1–100 characters without control characters; `null` = none.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nullable"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, max_length = 100, pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$")
    )]
    pub display_name_en: Option<Option<String>>,
    /// New Korean display name (as `displayNameEn`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nullable"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, max_length = 100, pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$")
    )]
    pub display_name_ko: Option<Option<String>>,
    /// New English message to waiters, 1–280 characters without control characters; `null`
    /// clears it. Reaches every waiting page within one poll or SSE refresh.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nullable"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, max_length = 280, pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$")
    )]
    pub message_en: Option<Option<String>>,
    /// New Korean message to waiters (as `messageEn`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nullable"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, max_length = 280, pattern = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$")
    )]
    pub message_ko: Option<Option<String>>,
    /// How the room orders its waiting shoppers from now on: `"fifo"` or `"random"` (any other
    /// value is 400 `invalid_field`). Switching to `"random"` puts every waiting ticket into the
    /// lottery at once; switching back to `"fifo"` returns to arrival order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::QueueingMethod>))]
    pub queueing_method: Option<String>,
    /// Turn the closed loop on (an object of `min`, `max` shoppers/s, `targetP95Ms`,
    /// `maxErrorRate`) or off (`null`: the rate stays where the loop left it).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nullable"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<crate::auto_rate::AutoRate>)
    )]
    pub auto_rate: Option<Option<crate::auto_rate::AutoRate>>,
}
