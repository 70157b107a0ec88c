//! The store's side of a scheduled opening (docs/DESIGN.md "Scheduled opening and the draw"):
//! the room's draw seed (created once), the pre-queue (kept in drawn order since the joins on
//! Redis), and the draw at the opening: fenced steps that end all at once for shoppers. With the
//! published algorithm ([`fresh_seed`], [`seed_commitment`], [`draw_mac`], [`draw_order`],
//! [`draw_key`]: `vestibule_shared::draw::DRAW_ALGORITHM`), which `verify-draw` recomputes.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::ids::log_tag;
use crate::{RoomId, StoreError};

/// A room's draw as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrawRecord {
    /// The seed: 32 CSPRNG bytes as 64 lowercase hex digits, written once and never changed.
    pub seed: String,
    /// When the draw was made, Unix ms; `None` until then.
    pub drawn_at_ms: Option<u64>,
    /// Tickets drawn (0 until the draw).
    pub count: u64,
}

/// One step of the draw, made by the room's leader at the opening.
#[derive(Debug, Clone)]
pub struct DrawRequest<'a> {
    /// The lease holder asking (only the room's leader draws).
    pub holder: &'a str,
    /// Its fencing epoch; a stale one is refused.
    pub epoch: u64,
    /// Now, Unix ms (the draw's time; drawn tickets count as heard from then).
    pub now_ms: u64,
    /// At most this many places per step (Redis: one script each, so Redis is never blocked for
    /// long and each step stays well under the store timeout; the embedded stores draw every
    /// place in one step under their lock).
    pub places_per_step: u64,
}

/// Places per draw step on Redis: about 50 ms of one script.
pub const DRAW_PLACES_PER_STEP: u64 = 10_000;

/// What a draw step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrawOutcome {
    /// The draw is made: every pre-queue ticket now waits at its drawn place.
    Drawn {
        /// Tickets drawn.
        count: u64,
    },
    /// This step placed more tickets, but some are left: call again (the pre-queue's tickets
    /// are still `PRE_QUEUE` and nobody is admitted until the last step).
    Placed {
        /// Places drawn so far.
        placed: u64,
    },
    /// The draw had been made already (by this or another replica): nothing changed.
    AlreadyDrawn,
    /// The caller does not hold the lease at this epoch: nothing changed.
    Fenced,
    /// The room has no seed: nothing changed.
    NoSeed,
}

/// A fresh draw seed: 32 bytes from the OS CSPRNG as 64 lowercase hex digits.
pub fn fresh_seed() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS CSPRNG is available");
    hex(&bytes)
}

/// The seed's bytes; `None` unless it is 64 hex digits.
pub fn seed_bytes(seed_hex: &str) -> Option<Vec<u8>> {
    if seed_hex.len() != 64 {
        return None;
    }
    (0..32)
        .map(|i| u8::from_str_radix(seed_hex.get(i * 2..i * 2 + 2)?, 16).ok())
        .collect()
}

/// The commitment published while the pre-queue is open: SHA-256 of the seed's bytes, hex.
pub fn seed_commitment(seed: &[u8]) -> String {
    hex(&Sha256::digest(seed))
}

/// HMAC-SHA256 with the seed as key over a ticket tag's ASCII: the draw's sort key.
pub fn draw_mac(seed: &[u8], tag: &str) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(seed).expect("HMAC takes any key length");
    mac.update(tag.as_bytes());
    mac.finalize().into_bytes().into()
}

/// `items` in drawn place order: ascending by [`draw_mac`] of `tag_of(item)`, ties by tag.
pub fn draw_order<T>(seed: &[u8], items: Vec<T>, tag_of: impl Fn(&T) -> String) -> Vec<T> {
    let mut keyed: Vec<([u8; 32], String, T)> = items
        .into_iter()
        .map(|item| {
            let tag = tag_of(&item);
            (draw_mac(seed, &tag), tag, item)
        })
        .collect();
    keyed.sort_unstable_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    keyed.into_iter().map(|(_, _, item)| item).collect()
}

/// A ticket's key in the drawn order: `hex(draw_mac(seed, tag)) .. tag` (64 + 12 characters),
/// tag = [`log_tag`] of `ticket_id`. Byte order of these keys is [`draw_order`]'s order (the MAC
/// has a fixed width, so ties fall to the tag): the Redis store keeps its pre-queue sorted by it
/// from the joins on, so the draw only walks it.
pub fn draw_key(seed: &[u8], ticket_id: &str) -> String {
    let tag = log_tag(ticket_id);
    let mut key = hex(&draw_mac(seed, &tag));
    key.push_str(&tag);
    key
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The draw role of a store (docs/DESIGN.md "Scheduled opening and the draw"): atomic per room as
/// [`crate::Queue`].
#[async_trait::async_trait]
pub trait Draw: Send + Sync {
    /// The room's draw seed: `fresh_seed` (64 hex digits) is written only if the room has none
    /// (atomically: the first caller's seed wins, later callers read it); returns the record in
    /// force.
    async fn draw_seed(&self, room: RoomId<'_>, fresh_seed: &str)
        -> Result<DrawRecord, StoreError>;

    /// The room's draw record (`None` = no seed yet).
    async fn draw_record(&self, room: RoomId<'_>) -> Result<Option<DrawRecord>, StoreError>;

    /// The drawn tags in place order from `offset`, at most `limit` (empty before the draw).
    async fn draw_tags(
        &self,
        room: RoomId<'_>,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<String>, StoreError>;

    /// The ids of every `PRE_QUEUE` ticket (any order).
    async fn prequeue_ids(&self, room: RoomId<'_>) -> Result<Vec<String>, StoreError>;

    /// One step of the draw, exactly once over all steps: fenced like [`crate::Admission::admit`]; refused
    /// if made already. Places the next pre-queue tickets in drawn order (HMAC-SHA256(seed, tag),
    /// ties by tag), at most `request.places_per_step` (Redis; the embedded stores place all at
    /// once): `Placed` = call again, `Drawn` = done. Until the last step every pre-queue ticket
    /// reads `PRE_QUEUE` and nobody is admitted; a leader that dies between steps leaves the
    /// next one to go on. The pre-queue tickets' arrival seqs are handed out again in place
    /// order (place k gets the k-th smallest), so every ticket that joined after the opening
    /// stays behind all of them; drawn tickets count as heard from; the tags are kept for
    /// `GET …/draw`.
    async fn draw(
        &self,
        room: RoomId<'_>,
        request: &DrawRequest<'_>,
    ) -> Result<DrawOutcome, StoreError>;
}
