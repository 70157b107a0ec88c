//! The store's side of a scheduled opening (docs/DESIGN.md "Scheduled opening and the draw"):
//! the room's draw seed (created once), the pre-queue, and the one atomic draw at the opening.

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

/// One draw, computed by the caller from [`crate::store::Store::prequeue_ids`] and the seed.
#[derive(Debug, Clone)]
pub struct DrawRequest<'a> {
    /// The lease holder asking (only the room's leader draws).
    pub holder: &'a str,
    /// Its fencing epoch; a stale one is refused.
    pub epoch: u64,
    /// Now, Unix ms (the draw's time; drawn tickets count as heard from then).
    pub now_ms: u64,
    /// Every pre-queue ticket id, in drawn place order (place 1 first).
    pub ids: &'a [String],
    /// Their tags, in the same order (published by `GET …/draw`).
    pub tags: &'a [String],
}

/// What a draw call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrawOutcome {
    /// The pre-queue tickets now wait at their drawn places.
    Drawn {
        /// Tickets drawn.
        count: u64,
    },
    /// The draw had been made already (by this or another replica): nothing changed.
    AlreadyDrawn,
    /// The pre-queue is not the set of ids given (a ticket joined or left since it was read):
    /// nothing changed; read it again and retry.
    Changed,
    /// The caller does not hold the lease at this epoch: nothing changed.
    Fenced,
    /// The room has no seed: nothing changed.
    NoSeed,
}
