//! Vestibule's JSON API v1 types, shared by the backend, the WASM page and mobile apps.
//!
//! Every type serializes with camelCase field names; enums use SCREAMING_SNAKE_CASE values.
//! This crate holds serde types and pure validation only, so it builds for `wasm32-unknown-unknown`.
//!
//! - [`TicketStatus`] / [`TicketState`]: a shopper's place in a room (join, poll, SSE `status` event);
//!   [`WaitReason`]: why its wait grew.
//! - [`RoomInfo`] / [`RoomState`]: the public view of a room.
//! - [`RoomSettings`] / [`RoomSettingsPatch`]: the operator's live knobs (admin API); their
//!   bounds in [`settings`].
//! - [`OrderRequest`] / [`OrderReceipt`]: the demo checkout behind the entry-token layer.
//! - [`ErrorBody`] / [`error_code`]: the one error shape of every 4xx/5xx answer.
//! - [`is_valid_room_slug`]: the room-name rule.
//! - [`paths`]: the API's paths built from room and ticket id (clients, tests, benchmark).
//! - [`gate`]: gate mode's session exchange ([`SessionRequest`] / [`EntrySession`]).
//! - [`embed`]: what a framed page or the widget learns about its storefront embedders.
//! - [`entry`]: the entry token's claims and the storefront's consume / release bodies.
//! - [`bots`]: the proof-of-work puzzle of a join and the operator's top clients.
//! - [`admin_events`]: the admin event stream's figures (the operator console).

pub mod admin_events;
pub mod auto_rate;
pub mod bots;
pub mod draw;
pub mod embed;
pub mod entry;
pub mod error_code;
pub mod gate;
pub mod lang;
pub use gate::{EntrySession, SessionRequest};

use serde::{Deserialize, Serialize};

mod numbers;
mod orders;
pub mod paths;
pub mod reason;
mod room_settings;
pub mod settings;
pub use reason::{EtaBasis, WaitReason};
pub use room_settings::{RoomSettings, RoomSettingsPatch};

pub use orders::{OrderReceipt, OrderRequest};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// Header that carries the entry token on protected paths.
pub const ENTRY_TOKEN_HEADER: &str = "X-Entry-Token";
/// Header that makes a join or an order idempotent (printable ASCII without spaces, 1–128 chars).
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";
/// Header that carries a storefront-signed user assertion (`userId.expiryUnixSecs.hexHmac`).
pub const USER_ASSERTION_HEADER: &str = "X-User-Assertion";

/// How a room orders its waiting shoppers (docs/DESIGN.md "Random queueing"): `"fifo"` (arrival
/// order, the default) or `"random"` (a lottery: each waiting ticket holds a key HMAC-SHA256(seed,
/// ticket tag) and the smallest keys are admitted first, whenever they arrived).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum QueueingMethod {
    /// First in, first out: a position only falls.
    #[default]
    Fifo,
    /// A lottery by key: a position can grow when a later arrival draws a smaller key.
    Random,
}

impl QueueingMethod {
    /// The wire name: `"fifo"` or `"random"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fifo => "fifo",
            Self::Random => "random",
        }
    }

    /// The method a wire name names (`None` = no such method).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "fifo" => Some(Self::Fifo),
            "random" => Some(Self::Random),
            _ => None,
        }
    }

    /// Whether this is the lottery.
    pub fn is_random(self) -> bool {
        self == Self::Random
    }
}

/// Where a ticket is in its life cycle (docs/api.md and docs/internals.md).
///
/// `WAITING` → `TOKEN_ISSUED` → `COMPLETED` | `EXPIRED`; `LEFT` from `WAITING` or `TOKEN_ISSUED`.
/// In a room with a scheduled opening, a join in the pre-queue window is `PRE_QUEUE` until the
/// draw at the opening gives it a place (`WAITING`); `LEFT` from `PRE_QUEUE` too. `SOLD_OUT` from
/// `WAITING` or `PRE_QUEUE` when the room sells out (docs/DESIGN.md "Stock and sold out").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TicketState {
    /// Joined before the opening; its place is drawn at `opensAt` (position null).
    PreQueue,
    /// In the queue; `position` is set.
    Waiting,
    /// Admitted; `entryToken`, `tokenExpiresAt` and `checkoutUrl` are set.
    TokenIssued,
    /// The entry token was used by an order (terminal).
    Completed,
    /// The entry token's TTL passed unused (terminal).
    Expired,
    /// The shopper left the queue (terminal).
    Left,
    /// The room sold out while the shopper waited (terminal): `soldOutMessage` says what the
    /// room wants them told.
    SoldOut,
}

impl TicketState {
    /// Whether no further change can happen to a ticket in this state.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Expired | Self::Left | Self::SoldOut
        )
    }

    /// The wire name, e.g. `"TOKEN_ISSUED"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PreQueue => "PRE_QUEUE",
            Self::Waiting => "WAITING",
            Self::TokenIssued => "TOKEN_ISSUED",
            Self::Completed => "COMPLETED",
            Self::Expired => "EXPIRED",
            Self::Left => "LEFT",
            Self::SoldOut => "SOLD_OUT",
        }
    }
}

/// Where a room is in its sale (docs/DESIGN.md "Room state"), by precedence: `SOLD_OUT`, then
/// `CLOSED`, then `PRE_QUEUE`, then `PAUSED`, else `OPEN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RoomState {
    /// The scheduler admits shoppers at the admission rate.
    Open,
    /// An operator paused admission; shoppers keep their places, ETA is null.
    Paused,
    /// Before the scheduled opening: joins get a place drawn at the opening.
    PreQueue,
    /// Stock is gone (or an operator marked the room sold out): nobody waits any more, new joins
    /// get 409 `sold_out`, entry tokens out are honoured until used or expired.
    SoldOut,
    /// Closed to new joins (409 `room_closed`); shoppers in line keep their places and are
    /// admitted.
    Closed,
}

/// A shopper's ticket as returned by join, poll and the SSE `status` event.
///
/// Example:
/// `{"ticketId":"k3J…","room":"main","status":"WAITING","position":42,"etaSeconds":1,
///   "etaSecondsHigh":2,"reason":null,"nextPollAfterMs":1000,"entryToken":null,"tokenExpiresAt":null,"checkoutUrl":null,
///   "roomState":"OPEN"}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TicketStatus {
    /// Bearer secret naming this ticket: 22 URL-safe base64 chars (128 random bits).
    /// Example: `"Zb3n0W6m1q8VqL2pX9cT4A"`. Anyone holding it can read or cancel the ticket.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[A-Za-z0-9_-]{22}$", example = "Zb3n0W6m1q8VqL2pX9cT4A")
    )]
    pub ticket_id: String,
    /// Room slug, `[a-z0-9-]{1,64}`. Example: `"main"`.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[a-z0-9-]{1,64}$", example = "main")
    )]
    pub room: String,
    /// Life-cycle state. Example: `"WAITING"`.
    pub status: TicketState,
    /// 1-based place in the queue (1 = next to be admitted); null unless `WAITING`. Example: `42`.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, example = 42))]
    pub position: Option<u64>,
    /// Estimated seconds until admission (the median estimate): position ÷ the effective
    /// admission rate × (1 + margin), rounded up. The effective rate is the rate measured over
    /// the last minute, bounded by the configured rate and, under a cap on active users, by the
    /// measured pace at which active shoppers finish (docs/DESIGN.md "ETA and poll hints").
    /// null unless `WAITING` or while the room is paused. Example: `3`.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 3))]
    pub eta_seconds: Option<u64>,
    /// The 90th-percentile estimate in seconds (≥ `etaSeconds`): show "about etaSeconds–
    /// etaSecondsHigh". null exactly when `etaSeconds` is. Example: `5`.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 5))]
    #[serde(default)]
    pub eta_seconds_high: Option<u64>,
    /// Why the wait is longer than the configured admission rate alone would make it; null when
    /// it is not (or the ticket is not `WAITING`). Example: `"CAP_REACHED"`.
    #[serde(default)]
    pub reason: Option<WaitReason>,
    /// What `etaSeconds` rests on: the admission rate, the room's expected checkout time (a
    /// cap before any checkout was measured), the measured checkout pace, or token expiry
    /// (stock held); absent when there is no ETA. Example: `"ADMISSION_RATE"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_basis: Option<EtaBasis>,
    /// Milliseconds the client should wait before polling again: the position's tier (1–10 →
    /// 3000, 11–100 → 10000, beyond → 30000 by default), lowered to half the ETA when that is
    /// shorter, and to the earliest the shopper could be admitted (position ÷ configured rate)
    /// plus max(2 s, 5% of the token TTL) − 0.5 s, so a shopper who polls as told learns of a
    /// token within max(2 s, 5% of the TTL) of its issue; never under 1000. While paused, as at
    /// the configured rate. Example: `3000`.
    #[cfg_attr(feature = "openapi", schema(minimum = 1000, example = 3000))]
    pub next_poll_after_ms: u64,
    /// Entry token, only when `TOKEN_ISSUED`: a JWT (three dot-separated base64url parts, about
    /// 400 characters) signed with Ed25519 (`alg: EdDSA`), whose claims name the room (`room`),
    /// the ticket's token id (`jti`) and the expiry (`exp`). An app treats it as an opaque
    /// secret: it sends it as `X-Entry-Token` to the demo checkout (`POST …/orders`), or hands it
    /// to the storefront at `checkoutUrl` (which checks it offline with the public keys at
    /// `GET /.well-known/jwks.json`, or uses it once with `POST …/entries/consume`). It works
    /// once, until `tokenExpiresAt`; never put it in a URL. Example: `"eyJhbGciOiJFZERTQSIs…"`.
    #[cfg_attr(
        feature = "openapi",
        schema(
            example = "eyJ0eXAiOiJKV1QiLCJhbGciOiJFZERTQSIsImtpZCI6IjVvS3kifQ.eyJyb29tIjoibWFpbiJ9.c2lnbmF0dXJl"
        )
    )]
    pub entry_token: Option<String>,
    /// When the entry token stops working (RFC 3339, UTC). Example: `"2026-11-27T09:00:00Z"`.
    #[cfg_attr(feature = "openapi", schema(format = DateTime, example = "2026-11-27T09:00:00Z"))]
    pub token_expires_at: Option<String>,
    /// Where the shopper goes next, only when `TOKEN_ISSUED`: a path on this server (resolve it
    /// against the API's base URL) or an https URL of the storefront. A browser app opens it
    /// and hands the token over as the storefront expects (the bundled page posts it in a form);
    /// a native app opens it in a browser view or calls the storefront's own checkout API with
    /// the token. Example: `"/checkout?room=main"`.
    #[cfg_attr(feature = "openapi", schema(example = "/checkout?room=main"))]
    pub checkout_url: Option<String>,
    /// Whether the room is admitting right now. Example: `"OPEN"`.
    pub room_state: RoomState,
    /// True once this ticket, skipped after `abandonAfterSecs` of silence, kept its place when
    /// heard from again (docs/DESIGN.md "Presence"); absent = false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub place_kept: bool,
    /// Only when `SOLD_OUT`: the room's sold-out message, each language null when the room has
    /// none (show your own text then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sold_out_message: Option<SoldOutMessage>,
    /// While `WAITING`: ms between heartbeats (`POST …/heartbeat`) of a client that does not poll
    /// (a hidden tab), well under the abandon time. Example: `60000`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_after_ms: Option<u64>,
    /// In a room with a scheduled opening: the opening (RFC 3339, UTC), when the draw places
    /// every `PRE_QUEUE` ticket. Example: `"2026-11-27T09:00:00Z"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub opens_at: Option<String>,
    /// In a room with a scheduled opening: this ticket's tag (12 hex digits of SHA-256 of the
    /// ticket id), as listed by `GET …/draw`, so the shopper can check their drawn place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{12}$"))]
    pub ticket_tag: Option<String>,
    /// The room's message to waiters, English: show it above the position; absent =
    /// none. A change reaches every page within one poll or SSE refresh.
    /// Example: `"Sizes 42–44 are sold out"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_en: Option<String>,
    /// The room's message to waiters, Korean; absent = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_ko: Option<String>,
    /// `true` while `WAITING` behind more shoppers than the room has units left (`stock`): the
    /// shopper is unlikely to get one (units come back only from tokens that expire unused).
    /// Absent otherwise (and in rooms without a stock).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub beyond_stock: bool,
    /// Only in a room that admits in random order (`"random"`; absent = arrival order): the
    /// position is this ticket's rank by lottery key among the waiting tickets, so it can grow
    /// when a later arrival draws a smaller key. Say so ("random order: your place can move").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queueing_method: Option<QueueingMethod>,
    /// The room's name for people, English, for the page's title and heading; absent = the slug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name_en: Option<String>,
    /// The room's name for people, Korean; absent = the slug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name_ko: Option<String>,
}

/// Public facts about a room (`GET /api/v1/rooms/{room}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RoomInfo {
    /// Room slug. Example: `"main"`.
    pub room: String,
    /// Whether the room is admitting. Example: `"OPEN"`.
    pub state: RoomState,
    /// Shoppers waiting in the queue. Example: `1200`.
    pub waiting: u64,
    /// Active users: entry tokens issued and neither used nor expired. Example: `310`.
    pub active_users: u64,
    /// Configured admission rate, shoppers per second. Example: `175.0`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 100000, example = 175.0)
    )]
    pub admission_rate_per_sec: f64,
    /// Entry token TTL in seconds. Example: `300`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, maximum = 86400, example = 300)
    )]
    pub token_ttl_secs: u64,
    /// Units of stock left; null = unlimited. Example: `40`.
    #[serde(default)]
    pub stock_left: Option<u64>,
    /// Units sold by orders (each order uses one). Example: `60`.
    #[serde(default)]
    pub sold: u64,
    /// What the page tells shoppers when the room is sold out.
    #[serde(default)]
    pub sold_out_message: SoldOutMessage,
    /// The room's message to waiters, English; absent = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_en: Option<String>,
    /// The room's message to waiters, Korean; absent = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_ko: Option<String>,
    /// The room's name for people, English; absent = the slug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name_en: Option<String>,
    /// The room's name for people, Korean; absent = the slug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name_ko: Option<String>,
    /// How the room orders its waiting shoppers: `"fifo"` (arrival order) or `"random"` (by
    /// lottery key). Example: `"fifo"`.
    #[serde(default)]
    pub queueing_method: QueueingMethod,
}

/// A room's sold-out message in each language the page speaks; null = the page's own text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct SoldOutMessage {
    /// English. Example: `"All 100 pairs are gone. Thank you for waiting!"`.
    pub en: Option<String>,
    /// Korean. Example: `"100켤레가 모두 판매되었습니다. 기다려 주셔서 감사합니다!"`.
    pub ko: Option<String>,
}

/// The body of every error answer: `{"error": "snake_code", "message": "…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ErrorBody {
    /// Stable machine-readable code from [`error_code`]. Example: `"ticket_not_found"`.
    pub error: String,
    /// Human-readable explanation (English). Example: `"no such ticket in room main"`.
    pub message: String,
}

/// Whether `slug` is a valid room name: `[a-z0-9-]{1,64}`.
pub fn is_valid_room_slug(slug: &str) -> bool {
    (1..=64).contains(&slug.len())
        && slug
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests;
