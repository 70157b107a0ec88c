//! A scheduled opening with a pre-queue and a provably fair draw (docs/DESIGN.md
//! "Scheduled opening and the draw"): what `GET /api/v1/rooms/{room}/draw` answers and the body
//! of a join refused before the pre-queue opens.

use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The draw's algorithm, as published (issue 42, "Who chooses the draw"): the committed seed is
/// mixed with the hash of the drawn tag list, which nobody knows before the pre-queue closes, and
/// with a public beacon's value when the room named one. tagsSha256 = SHA-256 of the drawn tags
/// sorted ascending, each followed by `\n`; drawSeed = SHA-256(`vestibule-draw-v2` ‖ 0x00 ‖ seed
/// bytes ‖ tagsSha256 bytes ‖ beacon randomness bytes, if any). Every pre-queue ticket's tag (the
/// first 12 hex digits of SHA-256 of its ticket id, also the entry token's `sub`) is keyed with
/// drawSeed; tickets are placed in ascending order of that HMAC (bytewise, ties by tag), place =
/// index + 1.
pub const DRAW_ALGORITHM: &str =
    "drawSeed = SHA-256(\"vestibule-draw-v2\" || 0x00 || seed bytes || \
     tagsSha256 bytes || beacon randomness bytes if any), tagsSha256 = SHA-256 of the drawn tags \
     sorted ascending, each followed by \"\\n\"; HMAC-SHA256(key = drawSeed bytes, message = \
     ticketTag as ASCII); places in ascending order of the MAC (bytewise, ties by tag), place = \
     index + 1";

/// The algorithm of draws made before the mix (the order keyed with the committed seed alone):
/// published for those draws (no `tagsSha256`), which `verify-draw` checks only when asked to
/// (`--unmixed`), since whoever could write the store before the pre-queue opened could have
/// chosen their seed.
pub const DRAW_ALGORITHM_UNMIXED: &str = "HMAC-SHA256(key = seed bytes, message = ticketTag as \
     ASCII); places in ascending order of the MAC (bytewise, ties by tag), place = index + 1";

/// A public randomness beacon mixed into a draw (docs/DESIGN.md "Scheduled opening and the
/// draw"): named before the pre-queue opens, its value taken at the draw.
///
/// Example: `{"drand":{"chainHash":"52db…","round":4711},"randomness":"9f…","signature":"a1…"}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DrawBeacon {
    /// The drand round named: its chain and round number.
    pub drand: DrandRound,
    /// The round's randomness (64 lowercase hex digits: SHA-256 of its signature, as drand
    /// publishes it); null until supplied.
    #[serde(default)]
    pub randomness: Option<String>,
    /// The round's BLS signature (hex), as drand publishes it; null until supplied. Recorded for
    /// anyone to check against the chain's public key: `verify-draw` checks that the randomness
    /// is SHA-256 of it, not the BLS signature itself.
    #[serde(default)]
    pub signature: Option<String>,
}

/// A drand round: the chain (its hash, hex) and the round number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DrandRound {
    /// The chain's hash (hex), e.g. drand's quicknet chain.
    pub chain_hash: String,
    /// The round whose value is mixed in.
    pub round: u64,
}

/// Most tags one page of `GET …/draw` lists.
pub const DRAW_PAGE_MAX: u64 = 10_000;

/// Where a room's draw stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DrawState {
    /// No pre-queue has opened: no seed exists yet (or the room has no scheduled opening).
    None,
    /// The pre-queue is open: the seed exists and only its SHA-256 is published.
    Committed,
    /// The opening passed and the draw was made: seed, algorithm and tags are published.
    Drawn,
}

/// A room's draw (`GET /api/v1/rooms/{room}/draw`): the commitment before the opening, the seed,
/// the algorithm and the drawn tickets' tags (in place order, paged) after it.
///
/// Example (drawn): `{"room":"main","state":"DRAWN","opensAt":"2026-11-27T09:00:00Z",
/// "prequeueOpensAt":"2026-11-27T08:30:00Z","seedSha256":"9f…","seed":"3a…","algorithm":"…",
/// "drawnAt":"2026-11-27T09:00:00.1Z","count":3,"offset":0,"tags":["a1…","07…","c3…"],
/// "nextOffset":null}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DrawInfo {
    /// Room slug.
    pub room: String,
    /// Where the draw stands.
    pub state: DrawState,
    /// The opening (RFC 3339, UTC), null when none is set.
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub opens_at: Option<String>,
    /// When the pre-queue opens (RFC 3339, UTC), null when none is set.
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub prequeue_opens_at: Option<String>,
    /// SHA-256 of the seed's 32 bytes, 64 lowercase hex digits: the commitment, published from
    /// the pre-queue's opening on; null in state `NONE`.
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
    pub seed_sha256: Option<String>,
    /// The seed (32 bytes from the OS CSPRNG, 64 lowercase hex digits); null until `DRAWN`. In a
    /// room that queues by lottery (`queueingMethod: "random"`, docs/DESIGN.md "Random
    /// queueing") it is the lottery's seed, published once the room is back on FIFO, closed or
    /// sold out (state stays `COMMITTED`), never while the lottery runs.
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
    pub seed: Option<String>,
    /// How places follow from seed and tags ([`DRAW_ALGORITHM`]; [`DRAW_ALGORITHM_UNMIXED`] for
    /// a draw made before the mix).
    pub algorithm: String,
    /// SHA-256 of the drawn tags sorted ascending, each followed by `\n` (64 lowercase hex
    /// digits): mixed into the seed; null until `DRAWN`, and for a draw made before the mix.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
    pub tags_sha256: Option<String>,
    /// The public beacon the room named for its draw, with its value once supplied; null when
    /// none was named.
    #[serde(default)]
    pub beacon: Option<DrawBeacon>,
    /// The seed the order follows from: the committed seed mixed with `tagsSha256` and the
    /// beacon's randomness ([`DRAW_ALGORITHM`]), 64 lowercase hex digits; null until `DRAWN`, and
    /// for a draw made before the mix. Published for convenience: `verify-draw` recomputes it.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
    pub draw_seed: Option<String>,
    /// When the draw was made (RFC 3339, UTC); null until `DRAWN`.
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub drawn_at: Option<String>,
    /// Tickets drawn (0 until `DRAWN`).
    pub count: u64,
    /// Index of `tags[0]` in the whole list (place = offset + index + 1).
    pub offset: u64,
    /// Ticket tags (12 hex digits) in place order, from `offset`, at most `limit`
    /// (≤ 10000) of them.
    pub tags: Vec<String>,
    /// The `offset` of the next page; null on the last page.
    pub next_offset: Option<u64>,
}

/// The body of a join refused with 409 `room_not_open`, `sold_out` or `room_closed`: the usual
/// `error` and `message`, the room's two times so a client can show when to come back (null but
/// for `room_not_open`), and what a page shows a shopper who got no place: the room's names for
/// people and, with `sold_out`, its sold-out message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RoomNotOpen {
    /// Always `"room_not_open"`.
    pub error: String,
    /// Human-readable explanation (English).
    pub message: String,
    /// The opening (RFC 3339, UTC).
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub opens_at: Option<String>,
    /// When joins start (RFC 3339, UTC): the pre-queue's opening; null = at `opensAt`.
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub prequeue_opens_at: Option<String>,
    /// Only with `sold_out`: the room's sold-out message, each language null when the room has
    /// none (show your own text then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sold_out_message: Option<crate::SoldOutMessage>,
    /// The room's name for people, English; absent = the slug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name_en: Option<String>,
    /// The room's name for people, Korean; absent = the slug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name_ko: Option<String>,
}
