//! The names of a room's Redis keys. Every key of a room has the hash tag `{room}`, so on a Redis
//! Cluster a room lives on one slot and one script may touch any of its keys.
//!
//! - Of the slug, whatever its generation: the document (`vestibule:{r}:room`), the counter of
//!   generations and versions (`vestibule:{r}:gen`, never deleted) and the audit log
//!   (`vestibule:{r}:audit`, which outlives every generation).
//! - Of one generation: everything else, under `vestibule:{r}:g<generation>:`. Generation 0 is
//!   a room written before generations existed: its keys have no `g…:` part
//!   (`catalog::migrate`).
//!
//! The catalog, the index of room slugs, is the set [`ROOMS_KEY`] under the hash tag
//! `{_catalog}`, which no slug can be.

use crate::RoomId;

/// The set of room slugs: an index of the rooms, derived from their documents.
pub const ROOMS_KEY: &str = "vestibule:{_catalog}:rooms";

/// A key of a room, by its part in the room model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    /// HASH: the room's document: `gen`, `ver`, `state` (`live` | `deleted`), `cfg` (the settings
    /// no script reads, JSON) and the fields scripts read (`doc.rs`).
    Doc,
    /// STRING counter: the slug's last generation or version handed out.
    Gen,
    /// STREAM: the audit log of admin changes.
    Audit,
    /// ZSET id → arrival seq: the waiting line.
    Queue,
    /// STRING counter: the last arrival seq handed out.
    Seq,
    /// HASH key → ticket id: keyed re-joins after a ticket ended.
    Dedup,
    /// ZSET id → token expiry ms: the tokens out (active users).
    Active,
    /// STRING: instant admissions the scheduler's unused quota left for joins.
    Bank,
    /// STRING counter: shoppers ever admitted.
    Popped,
    /// SET: pre-queue tickets not drawn yet.
    Prequeue,
    /// HASH: the draw's seed and progress.
    Draw,
    /// LIST: the drawn tags in place order.
    DrawTags,
    /// ZSET (scores 0): pre-queue tickets in drawn order.
    PrequeueOrder,
    /// HASH id → its member of the drawn order.
    PrequeueMac,
    /// ZSET (scores 0): the pre-queue as it closed at the draw's first step (`prequeue_order`
    /// renamed), read to compute the mix; deleted once the final order is filed.
    DrawSealed,
    /// ZSET (scores 0): the sealed pre-queue keyed by the mixed seed, the order the draw's steps
    /// place.
    DrawOrder,
    /// LIST: the pre-queue joins' seqs in arrival order.
    PrequeueSeqs,
    /// ZSET (scores 0): a random room's tickets in lottery order.
    Lottery,
    /// HASH id → its member of the lottery.
    LotteryMac,
    /// STRING: a switch to random whose tickets are still being filed.
    LotteryFiling,
    /// STRING holder (PX lease): the scheduler's leader.
    Leader,
    /// STRING counter: the leader's fencing epoch.
    Epoch,
    /// STRING: the HMAC key of derived ticket ids.
    Secret,
    /// STRING: the leader's measured pace.
    Pace,
    /// LIST: the seqs of waiting tickets that left (the last 10,000).
    Left,
    /// STRING counter: waiting tickets ever left.
    LeftCount,
    /// STRING: the next seq the silence sweep looks at.
    Sweep,
    /// STRING: the lowest `seen:` chunk not yet deleted.
    SweepLow,
    /// HASH replica → `<expiry ms> <record>`: each replica's figures of its last second
    /// (`figures.lua`; expired fields are dropped by the next share).
    Figures,
    /// HASH: the sale's totals no other key counts: `expired`, `peak_waiting`,
    /// `longest_wait_secs`, `sold_out_at_ms` (`figures.lua`).
    FigureTotals,
}

impl Key {
    /// The key's name after its prefix; also its Lua local's name in the scripts.
    pub(super) const fn name(self) -> &'static str {
        match self {
            Self::Doc => "room",
            Self::Gen => "gen",
            Self::Audit => "audit",
            Self::Queue => "queue",
            Self::Seq => "seq",
            Self::Dedup => "dedup",
            Self::Active => "active",
            Self::Bank => "bank",
            Self::Popped => "popped",
            Self::Prequeue => "prequeue",
            Self::Draw => "draw",
            Self::DrawTags => "draw_tags",
            Self::PrequeueOrder => "prequeue_order",
            Self::PrequeueMac => "prequeue_mac",
            Self::DrawSealed => "draw_sealed",
            Self::DrawOrder => "draw_order",
            Self::PrequeueSeqs => "prequeue_seqs",
            Self::Lottery => "lottery",
            Self::LotteryMac => "lottery_mac",
            Self::LotteryFiling => "lottery_filing",
            Self::Leader => "leader",
            Self::Epoch => "epoch",
            Self::Secret => "secret",
            Self::Pace => "pace",
            Self::Left => "left",
            Self::LeftCount => "left_count",
            Self::Sweep => "sweep",
            Self::SweepLow => "sweep_low",
            Self::Figures => "figures",
            Self::FigureTotals => "figure_totals",
        }
    }

    /// Whether the key belongs to one generation (else to the slug).
    pub(super) const fn of_generation(self) -> bool {
        !matches!(self, Self::Doc | Self::Gen | Self::Audit)
    }
}

/// The key names of one room: of its slug, and of one generation.
#[derive(Debug, Clone)]
pub(super) struct RoomKeys {
    /// `vestibule:{r}:`
    slug: String,
    /// `vestibule:{r}:g<n>:` (`vestibule:{r}:` for generation 0).
    generation: String,
}

impl RoomKeys {
    /// The keys of `room` at its generation.
    pub(super) fn new(room: RoomId<'_>) -> Self {
        let slug = slug_prefix(room.slug);
        let generation = generation_prefix(room.slug, room.generation);
        Self { slug, generation }
    }

    /// The keys of `slug`'s document, counter and audit log (no generation: its per-generation
    /// keys are those of generation 0, which only [`RoomKeys::new`] should name).
    pub(super) fn slug(slug: &str) -> Self {
        Self::new(RoomId::new(slug, 0))
    }

    /// The full name of `key`.
    pub(super) fn of(&self, key: Key) -> String {
        let prefix = if key.of_generation() {
            &self.generation
        } else {
            &self.slug
        };
        format!("{prefix}{}", key.name())
    }

    /// The prefix of the generation's keys, for the keys scripts name themselves (`ticket:<id>`,
    /// `token:<secret>`, `seen:<chunk>`, …).
    pub(super) fn prefix(&self) -> &str {
        &self.generation
    }
}

/// `vestibule:{slug}:`
pub(super) fn slug_prefix(slug: &str) -> String {
    format!("vestibule:{{{slug}}}:")
}

/// The prefix of `slug`'s keys of `generation`.
pub(super) fn generation_prefix(slug: &str, generation: u64) -> String {
    if generation == 0 {
        slug_prefix(slug)
    } else {
        format!("vestibule:{{{slug}}}:g{generation}:")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_a_generation_carry_it_and_keys_of_the_slug_do_not() {
        let keys = RoomKeys::new(RoomId::new("drop-7", 12));
        assert_eq!(keys.of(Key::Queue), "vestibule:{drop-7}:g12:queue");
        assert_eq!(keys.of(Key::Doc), "vestibule:{drop-7}:room");
        assert_eq!(keys.of(Key::Gen), "vestibule:{drop-7}:gen");
        assert_eq!(keys.of(Key::Audit), "vestibule:{drop-7}:audit");
        assert_eq!(keys.prefix(), "vestibule:{drop-7}:g12:");
        let legacy = RoomKeys::new(RoomId::new("main", 0));
        assert_eq!(legacy.of(Key::Queue), "vestibule:{main}:queue");
    }
}
