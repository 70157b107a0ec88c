//! The per-client join limit: a GCRA checked inside the join step of either store.

/// A per-client join limit, checked in the same atomic step as the join so that it counts only
/// joins that create a ticket (a retried join that finds its ticket is never refused) and is
/// shared by every replica on the same store.
///
/// GCRA (a token bucket kept as one timestamp): `per_minute` joins as a burst, refilled evenly.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JoinLimit {
    /// The client the limit is for (its IP address as text).
    pub client: String,
    /// Joins allowed per minute (burst and refill), ≥ 1.
    pub per_minute: u32,
}

impl JoinLimit {
    /// Milliseconds between two refilled joins.
    pub fn period_ms(&self) -> u64 {
        60_000 / u64::from(self.per_minute.max(1))
    }
}

/// One GCRA step: `tat` is the client's theoretical arrival time (Unix ms, 0 = none). `Ok` with
/// the new TAT when a join is allowed at `now_ms`, else `Err` with the milliseconds to wait.
/// The Redis store runs the same arithmetic in `join.lua`.
pub fn gcra(tat: u64, now_ms: u64, limit: &JoinLimit) -> Result<u64, u64> {
    let period = limit.period_ms();
    let burst = u64::from(limit.per_minute.max(1));
    let tat = tat.max(now_ms);
    let allowed_at = (tat + period).saturating_sub(burst * period);
    if now_ms < allowed_at {
        Err(allowed_at - now_ms)
    } else {
        Ok(tat + period)
    }
}
