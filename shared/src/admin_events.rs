//! The admin event stream (`GET /api/v1/admin/events`, Server-Sent Events): once a second, every
//! room's live figures as one replica sees them. The operator console (`console/`) draws its
//! rooms list, numbers and charts from it.
//!
//! Every figure is the room's, the same through every replica (within one refresh): waiting,
//! active users, the rate and the state are read from the store; joins, polls, streams and
//! tokens used are the sum of every live replica's last second, shared through the store; the
//! leader's figures (admitted, expired, the wait at the back, `leader`) are those the leader
//! shared. [`FigureHistory`] is the last hour of them, [`SaleSummary`] the sale's totals.

use serde::{Deserialize, Serialize};
#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::RoomState;

/// The SSE event name of [`AdminEvent`] (`event: figures`).
pub const ADMIN_EVENT_NAME: &str = "figures";

/// One second of every room's figures (`event: figures`, `data:` this JSON).
///
/// Example: `{"atMs":1764530000000,"replica":"web-1-a8Xk2p","rooms":[{"room":"main",…}]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AdminEvent {
    /// When the figures were read, Unix ms. Example: `1764530000000`.
    pub at_ms: u64,
    /// The replica that sent the event (`$HOSTNAME` and a random suffix, fixed per process).
    pub replica: String,
    /// Every running room, sorted by slug. A room whose counts the store could not give this
    /// second is left out (the console shows a gap, not a stale value).
    pub rooms: Vec<RoomFigures>,
}

/// Which replica's scheduler admits for a room, and its fencing epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RoomLeader {
    /// The leading replica. Example: `"web-1-a8Xk2p"`.
    pub replica: String,
    /// The lease's fencing epoch (grows at every change of leader). Example: `3`.
    pub epoch: u64,
}

/// One room's figures in an [`AdminEvent`]. Rates are per second over the last second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RoomFigures {
    /// Room slug. Example: `"main"`.
    pub room: String,
    /// The room's state. Example: `"OPEN"`.
    pub state: RoomState,
    /// Shoppers waiting (room-wide, from the store). Example: `1200`.
    pub waiting: u64,
    /// Active users: entry tokens issued, not used, not expired (room-wide): the tokens
    /// outstanding, each holding a unit of stock while the room has a stock. Example: `310`.
    pub active_users: u64,
    /// Units of stock left (the answering replica's copy of the settings, at most a tick old);
    /// absent or null = unlimited. Added after the first version: older servers leave it out.
    /// Example: `5`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stock_left: Option<u64>,
    /// Units sold by orders so far (as `stockLeft`); 0 from older servers. Example: `0`.
    #[serde(default)]
    pub sold: u64,
    /// The configured admission rate, shoppers per second. Example: `175.0`.
    pub admission_rate_per_sec: f64,
    /// Shoppers actually admitted per second, counted by the leader over its last second; null
    /// while no leader shared it (then the leader's published pace, about the last minute, if
    /// any). Example: `174.0`.
    pub admitted_per_sec: Option<f64>,
    /// Joins answered per second, every replica (new tickets and repeated joins). Example: `40.0`.
    pub joins_per_sec: f64,
    /// Ticket polls answered per second, every replica. Example: `900.0`.
    pub polls_per_sec: f64,
    /// Open SSE ticket streams, every replica. Example: `12`.
    pub sse_streams: u64,
    /// Entry tokens used by orders or the storefront's consume, per second, every replica.
    pub tokens_used_per_sec: f64,
    /// Entry tokens expired unused per second (counted by the leader).
    pub tokens_expired_per_sec: f64,
    /// The estimated wait at the back of the line, seconds (the median a shopper joining now
    /// would be shown); null while paused or with nobody waiting. Example: `7`.
    pub eta_back_of_line_secs: Option<u64>,
    /// Why a shopper at the back of the line waits longer than the configured rate makes it
    /// (the `reason` such a shopper is shown: `STOCK_HELD`, `CAP_REACHED`, …); null when the
    /// rate alone sets the wait. Example: `"CAP_REACHED"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<crate::WaitReason>,
    /// Admission paused by an operator.
    pub paused: bool,
    /// Closed to new joins.
    pub closed: bool,
    /// The replica leading the room, as it shared; null while none did.
    pub leader: Option<RoomLeader>,
    /// The origin's health over the last few seconds, merged from every replica's (gate mode's
    /// own measurements and storefront reports at `POST …/signals`): requests summed, the error
    /// rate weighted by requests, the worst p50/p95 of the replicas that saw at least 10
    /// requests; absent or null when no replica has signals in its window. Added with
    /// `autoRate`: older servers leave it out. Example:
    /// `{"requests":820,"p50Ms":120,"p95Ms":310,"errorRate":0.002,"inFlight":35}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<crate::auto_rate::OriginSignals>,
    /// The closed loop, while the room's `autoRate` is on: its setting, the reason of its last
    /// step and its last move (the leader's, as it shared); absent or null while off. Example:
    /// `{"setting":{"min":5,"max":40,"targetP95Ms":500,"maxErrorRate":0.01},"reason":"SETTLING",
    /// "lastChange":{"reason":"LATENCY_HIGH","from":20,"to":11.1,"atMs":1764530000000,
    /// "p95Ms":900,"errorRate":0}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_rate: Option<crate::auto_rate::AutoRateFigures>,
}

/// One point of a room's [`FigureHistory`]: the figures as they were at `at_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct FigurePoint {
    /// When they were read, Unix ms.
    pub at_ms: u64,
    /// The room's figures then.
    pub figures: RoomFigures,
}

/// The last hour of a room's figures, oldest first (`GET /api/v1/admin/rooms/{room}/history`):
/// what the console's charts show again after a reload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct FigureHistory {
    /// Room slug. Example: `"main"`.
    pub room: String,
    /// Seconds between two points. Example: `5`.
    pub every_secs: u64,
    /// The points, oldest first (at most an hour's).
    pub points: Vec<FigurePoint>,
}

/// A room's sale so far (`GET /api/v1/admin/rooms/{room}/summary`), the same through every
/// replica: kept in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SaleSummary {
    /// Room slug. Example: `"main"`.
    pub room: String,
    /// Tickets created (shoppers who joined; a repeated join is not counted). Example: `5000`.
    pub joined: u64,
    /// Shoppers admitted (by the scheduler or at once). Example: `1200`.
    pub admitted: u64,
    /// Orders placed (units sold). Example: `1000`.
    pub ordered: u64,
    /// Entry tokens that expired unused (admitted, never ordered). Example: `150`.
    pub expired_unused: u64,
    /// Shoppers still waiting. Example: `0`.
    pub waiting: u64,
    /// Whether the room is sold out.
    pub sold_out: bool,
    /// When the room was first seen sold out, Unix ms (within a second); null if not.
    pub sold_out_at_ms: Option<u64>,
    /// The longest line seen, shoppers. Example: `4100`.
    pub peak_waiting: u64,
    /// The longest any shopper at the front of the line had waited, seconds. Example: `1930`.
    pub longest_wait_secs: u64,
}
