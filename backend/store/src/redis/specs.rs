//! Every script's contract ([`ScriptSpec`]): its KEYS and ARGV by name, in order. Each script's
//! file starts with the same names (`-- KEYS:`, `-- ARGV:`, `-- EACH:`), which a test checks.

use super::keys::Key::{
    Active, Bank, Dedup, Doc, Draw, DrawOrder, DrawSealed, DrawTags, Epoch, FigureTotals, Figures,
    Gen, Leader, Left, LeftCount, Lottery, LotteryFiling, LotteryMac, Pace, Popped, Prequeue,
    PrequeueMac, PrequeueOrder, PrequeueSeqs, Queue, Secret, Seq, Sweep, SweepLow,
};
use super::script::ScriptSpec;

/// A room created (or seeded): a new generation and its document in one step.
pub(super) static CREATE: ScriptSpec = ScriptSpec {
    name: "create",
    body: include_str!("lua/create.lua"),
    keys: &[Doc, Gen],
    args: &["slug_prefix", "secret", "cfg"],
    each: &["field", "value", "present"],
};

/// A settings change: a compare-and-set on (generation, version).
pub(super) static CHANGE: ScriptSpec = ScriptSpec {
    name: "change",
    body: include_str!("lua/change.lua"),
    keys: &[Doc, Gen, Lottery, LotteryMac, LotteryFiling, LeftCount],
    args: &["generation", "expected", "cfg"],
    each: &["field", "value", "present"],
};

/// A document the store lost, written back as a replica held it, only if still missing.
pub(super) static WRITE_BACK: ScriptSpec = ScriptSpec {
    name: "write_back",
    body: include_str!("lua/write_back.lua"),
    keys: &[Doc, Gen],
    args: &["generation", "version", "cfg"],
    each: &["field", "value", "present"],
};

/// A room deleted: its document marked deleted, unless shoppers wait or hold tokens.
pub(super) static DELETE: ScriptSpec = ScriptSpec {
    name: "delete",
    body: include_str!("lua/delete.lua"),
    keys: &[Doc, Queue, Active],
    args: &["generation", "force", "now_ms"],
    each: &[],
};

/// The scheduler's lease, with the document read in the same step.
pub(super) static LEASE: ScriptSpec = ScriptSpec {
    name: "lease",
    body: include_str!("lua/lease.lua"),
    keys: &[Doc, Leader, Epoch, Secret, Active, Pace],
    args: &["generation", "holder", "lease_ms", "secret_offer"],
    each: &[],
};

/// The lease given up on shutdown.
pub(super) static RELEASE_LEASE: ScriptSpec = ScriptSpec {
    name: "release_lease",
    body: include_str!("lua/release_lease.lua"),
    keys: &[Leader],
    args: &["holder"],
    each: &[],
};

/// One leader tick.
pub(super) static ADMIT: ScriptSpec = ScriptSpec {
    name: "admit",
    body: include_str!("lua/admit.lua"),
    keys: &[
        Doc,
        Queue,
        Active,
        Leader,
        Epoch,
        Popped,
        Left,
        LeftCount,
        Sweep,
        SweepLow,
        Seq,
        Bank,
        Pace,
        Prequeue,
        Lottery,
        LotteryMac,
        LotteryFiling,
    ],
    args: &[
        "generation",
        "holder",
        "fence",
        "now_ms",
        "ttl_ms",
        "keep_ms",
        "cap",
        "prefix",
        "lease_ms",
        "abandon_ms",
        "hold_ms",
        "bank_max",
        "pace_text",
    ],
    each: &["token"],
};

/// One or more joins of a room (a group commit).
pub(super) static JOIN: ScriptSpec = ScriptSpec {
    name: "join",
    body: include_str!("lua/join.lua"),
    keys: &[
        Doc,
        Queue,
        Seq,
        Dedup,
        Active,
        Bank,
        Popped,
        Prequeue,
        Draw,
        PrequeueOrder,
        PrequeueMac,
        PrequeueSeqs,
        Lottery,
        LotteryMac,
        LotteryFiling,
    ],
    args: &["generation", "prefix", "dedup_ttl", "now_ms"],
    each: &[
        "id",
        "key",
        "derived",
        "client",
        "period_ms",
        "burst",
        "token",
        "ttl_ms",
        "keep_ms",
        "prequeue",
        "version",
        "order",
        "derived_order",
    ],
};

/// Holders of tickets heard from (polls, streams, heartbeats).
pub(super) static HEAR: ScriptSpec = ScriptSpec {
    name: "hear",
    body: include_str!("lua/hear.lua"),
    keys: &[
        Doc,
        Queue,
        Left,
        LeftCount,
        Prequeue,
        Lottery,
        LotteryMac,
        LotteryFiling,
        Popped,
        SweepLow,
    ],
    args: &["generation", "prefix", "now_ms", "mode"],
    each: &["id"],
};

/// One SSE hub refresh.
pub(super) static SSE_REFRESH: ScriptSpec = ScriptSpec {
    name: "sse_refresh",
    body: include_str!("lua/sse_refresh.lua"),
    keys: &[
        Doc,
        Queue,
        Popped,
        Left,
        LeftCount,
        Prequeue,
        Lottery,
        LotteryMac,
        LotteryFiling,
    ],
    args: &[
        "generation",
        "prefix",
        "has_cursor",
        "since_popped",
        "since_left",
    ],
    each: &["id"],
};

/// A leave.
pub(super) static LEAVE: ScriptSpec = ScriptSpec {
    name: "leave",
    body: include_str!("lua/leave.lua"),
    keys: &[
        Doc,
        Queue,
        Active,
        Left,
        LeftCount,
        Prequeue,
        PrequeueOrder,
        PrequeueMac,
        Lottery,
        LotteryMac,
    ],
    args: &["generation", "id", "now_ms", "keep_ms", "prefix"],
    each: &[],
};

/// Joins nobody heard the answer of, parked (`Presence::park_unconfirmed`).
pub(super) static PARK: ScriptSpec = ScriptSpec {
    name: "park",
    body: include_str!("lua/park.lua"),
    keys: &[Doc, Queue, Left, LeftCount, Prequeue, Lottery, LotteryMac],
    args: &[
        "generation",
        "prefix",
        "now_ms",
        "joined_ms",
        "hold_ms",
        "keep_ms",
    ],
    each: &["id"],
};

/// An entry token's check, or its use by an order.
pub(super) static TOKEN: ScriptSpec = ScriptSpec {
    name: "token",
    body: include_str!("lua/token.lua"),
    keys: &[Doc, Active],
    args: &[
        "generation",
        "token",
        "now_ms",
        "consume",
        "keep_ms",
        "prefix",
        "order_key",
        "receipt",
    ],
    each: &[],
};

/// One step of the draw.
pub(super) static DRAW: ScriptSpec = ScriptSpec {
    name: "draw",
    body: include_str!("lua/draw.lua"),
    keys: &[
        Doc,
        Leader,
        Epoch,
        Queue,
        Prequeue,
        Draw,
        DrawTags,
        PrequeueOrder,
        PrequeueMac,
        PrequeueSeqs,
        DrawSealed,
        DrawOrder,
    ],
    args: &[
        "generation",
        "holder",
        "fence",
        "prefix",
        "now_ms",
        "per_step",
        "lease_ms",
    ],
    each: &[],
};

/// One batch of the draw's mixed order, and at the last the mix recorded.
pub(super) static DRAW_MIX: ScriptSpec = ScriptSpec {
    name: "draw_mix",
    body: include_str!("lua/draw_mix.lua"),
    keys: &[Doc, Leader, Epoch, Draw, DrawSealed, DrawOrder],
    args: &[
        "generation",
        "holder",
        "fence",
        "last",
        "tags_sha256",
        "draw_seed",
    ],
    each: &["member"],
};

/// The draw's seed written once.
pub(super) static DRAW_SEED: ScriptSpec = ScriptSpec {
    name: "draw_seed",
    body: include_str!("lua/draw_seed.lua"),
    keys: &[Doc, Draw],
    args: &["generation", "seed"],
    each: &[],
};

/// One batch of a switch to random: waiting tickets filed into the lottery.
pub(super) static LOTTERY_FILE: ScriptSpec = ScriptSpec {
    name: "lottery_file",
    body: include_str!("lua/lottery_file.lua"),
    keys: &[Doc, Queue, Lottery, LotteryMac, LotteryFiling, Prequeue],
    args: &["generation", "last"],
    each: &["id", "member"],
};

/// A page of the waiting line.
pub(super) static WAITERS: ScriptSpec = ScriptSpec {
    name: "waiters",
    body: include_str!("lua/waiters.lua"),
    keys: &[Doc, Queue],
    args: &["generation", "prefix", "first", "last"],
    each: &[],
};

/// The room secret for a keyed join.
pub(super) static ROOM_SECRET: ScriptSpec = ScriptSpec {
    name: "room_secret",
    body: include_str!("lua/room_secret.lua"),
    keys: &[Doc, Secret, Dedup],
    args: &["generation", "offer", "dedup_ttl"],
    each: &[],
};

/// A replica's figures shared and every live replica's read, with the sale's totals.
pub(super) static FIGURES: ScriptSpec = ScriptSpec {
    name: "figures",
    body: include_str!("lua/figures.lua"),
    keys: &[Doc, Figures, FigureTotals, Queue, Seq, Popped],
    args: &[
        "generation",
        "prefix",
        "replica",
        "record",
        "expired",
        "now_ms",
        "ttl_ms",
    ],
    each: &[],
};
