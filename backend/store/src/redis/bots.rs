//! Single use of proof-of-work challenges across replicas (README "Bots at the door"): one
//! `SET NX PX` per join, no script. The mark is the slug's, not a generation's (a challenge is
//! for the room, whichever generation the join lands in), and expires with its challenge.

use super::keys::slug_prefix;
use super::RedisStore;
use crate::{RoomId, StoreError};

/// How long a used challenge's marker outlives the challenge, ms (clock skew between replicas).
const MARK_SLACK_MS: u64 = 5_000;

impl RedisStore {
    /// `SET vestibule:{room}:pow:<id> 1 NX PX (expiry − now + slack)`: true when this call set it.
    pub(super) async fn use_challenge_in_redis(
        &self,
        room: RoomId<'_>,
        id: &str,
        expires_at_ms: u64,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        let ttl_ms = expires_at_ms.saturating_sub(now_ms) + MARK_SLACK_MS;
        let mut connection = self.connection();
        let set: Option<String> = self
            .link
            .bounded(
                redis::cmd("SET")
                    .arg(format!("{}pow:{id}", slug_prefix(room.slug)))
                    .arg(1)
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl_ms)
                    .query_async(&mut connection),
            )
            .await?;
        Ok(set.is_some())
    }
}
