//! The store's side of a scheduled opening (docs/DESIGN.md "Scheduled opening and the draw"):
//! the room's draw seed (created once), the pre-queue (kept in drawn order since the joins on
//! Redis), and the draw at the opening: fenced steps that end all at once for shoppers. With the
//! published algorithm ([`fresh_seed`], [`seed_commitment`], [`tags_sha256`], [`mixed_seed`],
//! [`draw_mac`], [`draw_order`], [`draw_key`]: `vestibule_shared::draw::DRAW_ALGORITHM`), which
//! `verify-draw` recomputes.

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
    /// [`tags_sha256`] of the drawn tags, mixed into the seed ([`mixed_seed`]); `None` until the
    /// draw, and for a draw made before the mix (ordered by the committed seed alone).
    #[serde(default)]
    pub tags_sha256: Option<String>,
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

/// The label that starts the mix's input, so its hash is of this use only.
const MIX_LABEL: &[u8] = b"vestibule-draw-v2";

/// SHA-256 of a draw's tags sorted ascending, each followed by `\n`, as 64 lowercase hex digits.
/// The set of tags is fixed only when the pre-queue closes (the draw's first step), so nobody
/// knows this hash while the seed can still be chosen; and anyone can recompute it from the
/// published list, whatever its order.
pub fn tags_sha256<S: AsRef<str>>(tags: &[S]) -> String {
    let mut sorted: Vec<&str> = tags.iter().map(AsRef::as_ref).collect();
    sorted.sort_unstable();
    let mut hash = Sha256::new();
    for tag in sorted {
        hash.update(tag.as_bytes());
        hash.update(b"\n");
    }
    hex(&hash.finalize())
}

/// The seed a draw's order follows from (issue 42: no single party chooses it):
/// SHA-256(`vestibule-draw-v2` ‖ 0x00 ‖ committed seed ‖ tags hash ‖ beacon randomness, if
/// any). `tags_sha256` and `beacon` are hex; `None` when either is not hex (a corrupt record or
/// a forged answer, never one this code made).
pub fn mixed_seed(seed: &[u8], tags_sha256: &str, beacon: Option<&str>) -> Option<[u8; 32]> {
    let tags = hex_bytes(tags_sha256).filter(|bytes| bytes.len() == 32)?;
    let beacon = match beacon {
        Some(value) => Some(hex_bytes(value).filter(|bytes| !bytes.is_empty())?),
        None => None,
    };
    let mut hash = Sha256::new();
    hash.update(MIX_LABEL);
    hash.update([0u8]);
    hash.update(seed);
    hash.update(&tags);
    if let Some(beacon) = beacon {
        hash.update(&beacon);
    }
    Some(hash.finalize().into())
}

/// Lowercase or uppercase hex → bytes; `None` unless an even number of hex digits.
pub fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len() / 2)
        .map(|i| u8::from_str_radix(text.get(i * 2..i * 2 + 2)?, 16).ok())
        .collect()
}

/// 64 lowercase hex digits of a 32-byte value (a mixed seed, as published).
pub fn hex32(bytes: &[u8; 32]) -> String {
    hex(bytes)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{i:012x}")).collect()
    }

    /// The mix (issue 42): the tags hash ignores the list's order; the mixed seed changes with
    /// the committed seed, with any ticket added or removed and with the beacon's value, so the
    /// committed seed alone fixes no order; and it matches the published formula byte for byte.
    #[test]
    fn the_mix_depends_on_seed_tags_and_beacon() {
        let seed = [7u8; 32];
        let mut list = tags(50);
        let hash = tags_sha256(&list);
        list.reverse();
        assert_eq!(
            tags_sha256(&list),
            hash,
            "the order of the list does not matter"
        );
        let mut expected = Sha256::new();
        for tag in tags(50) {
            expected.update(format!("{tag}\n"));
        }
        assert_eq!(hash, hex(&expected.finalize()));

        let mixed = mixed_seed(&seed, &hash, None).unwrap();
        let mut formula = Sha256::new();
        formula.update(b"vestibule-draw-v2\0");
        formula.update(seed);
        formula.update(hex_bytes(&hash).unwrap());
        assert_eq!(mixed, <[u8; 32]>::from(formula.finalize()));

        let fewer = tags_sha256(&tags(49));
        assert_ne!(mixed_seed(&seed, &fewer, None).unwrap(), mixed);
        assert_ne!(mixed_seed(&[8u8; 32], &hash, None).unwrap(), mixed);
        let beacon = "ab".repeat(32);
        let with_beacon = mixed_seed(&seed, &hash, Some(&beacon)).unwrap();
        assert_ne!(with_beacon, mixed);
        assert_ne!(
            mixed_seed(&seed, &hash, Some(&"ac".repeat(32))).unwrap(),
            with_beacon
        );
        assert_eq!(mixed_seed(&seed, "zz", None), None);
        assert_eq!(mixed_seed(&seed, &hash, Some("+1")), None);
        // The order by the mixed seed is not the committed seed's.
        let by_seed = draw_order(&seed, tags(50), Clone::clone);
        let by_mix = draw_order(&mixed, tags(50), Clone::clone);
        assert_ne!(by_seed, by_mix);
    }
}
