//! How the Redis server is set up where that can lose queue state (`INFO`, `CONFIG GET save`).

use super::RedisStore;
use crate::store::{StoreError, StoreSafety};

impl RedisStore {
    pub(super) async fn safety_in_redis(&self) -> Result<Option<StoreSafety>, StoreError> {
        let mut connection = self.connection.clone();
        let info: String = self
            .bounded(
                redis::cmd("INFO")
                    .arg("memory")
                    .arg("persistence")
                    .query_async(&mut connection),
            )
            .await
            .map_err(StoreError::for_read)?;
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        let maxmemory_policy = field("maxmemory_policy")
            .ok_or_else(|| StoreError::Corrupt("INFO has no maxmemory_policy".into()))?
            .to_owned();
        let maxmemory_bytes = field("maxmemory").and_then(|v| v.parse().ok()).unwrap_or(0);
        let aof_enabled = field("aof_enabled") == Some("1");
        // Managed Redis services often refuse CONFIG: then the snapshot schedule is unknown.
        let rdb_save = self
            .bounded(
                redis::cmd("CONFIG")
                    .arg("GET")
                    .arg("save")
                    .query_async::<Vec<String>>(&mut connection),
            )
            .await
            .ok()
            .and_then(|pair| pair.into_iter().nth(1));
        Ok(Some(StoreSafety {
            maxmemory_policy,
            maxmemory_bytes,
            aof_enabled,
            rdb_save,
        }))
    }
}
