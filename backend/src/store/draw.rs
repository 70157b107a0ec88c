//! The store's side of a scheduled opening (docs/DESIGN.md "Scheduled opening and the draw"):
//! the room's draw seed (created once), the pre-queue (kept in drawn order since the joins on
//! Redis), and the draw at the opening: fenced steps that end all at once for shoppers.

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
    /// The lease is renewed for this long by every step (Redis), as by an admission tick: a long
    /// draw does not lose its leader.
    pub lease_ms: u64,
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
