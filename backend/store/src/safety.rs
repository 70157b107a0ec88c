//! `StoreSafety`: the Redis settings that decide whether the queue can be lost (`/readyz`).

/// How a Redis server is set up, as far as it matters for keeping the queue (`/readyz`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct StoreSafety {
    /// `maxmemory-policy`; anything but `noeviction` lets Redis delete tickets and tokens that
    /// carry a TTL when memory runs short.
    pub maxmemory_policy: String,
    /// `maxmemory` in bytes (0 = no limit).
    pub maxmemory_bytes: u64,
    /// Whether the append-only file is on (`appendonly yes`).
    pub aof_enabled: bool,
    /// The RDB snapshot schedule (`save`), `None` when the server does not tell.
    pub rdb_save: Option<String>,
}

impl StoreSafety {
    /// Whether Redis may delete keys on its own when memory runs short.
    pub fn may_evict(&self) -> bool {
        self.maxmemory_policy != "noeviction"
    }

    /// Whether a restart of Redis keeps its data (AOF or RDB snapshots); `None` when that cannot
    /// be told (no AOF, and the snapshot schedule is hidden, as `CONFIG` is on managed Redis).
    pub fn persists(&self) -> Option<bool> {
        if self.aof_enabled {
            return Some(true);
        }
        self.rdb_save.as_deref().map(|save| !save.is_empty())
    }

    /// One sentence per setting that can lose queue state, for logs and `/readyz`.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.may_evict() {
            warnings.push(format!(
                "Redis maxmemory-policy is {:?}: under memory pressure Redis deletes tickets and \
                 entry tokens without telling anyone; set maxmemory-policy noeviction (Vestibule \
                 then answers 503 when memory is full, and loses nothing)",
                self.maxmemory_policy
            ));
        }
        // Unknown is not reported as "none": a warning that always fires on managed Redis
        // would teach operators to ignore the warnings.
        if self.persists() == Some(false) {
            warnings.push(
                "Redis keeps no AOF and no RDB snapshots: a Redis restart empties every queue; \
                 set appendonly yes"
                    .to_owned(),
            );
        }
        warnings
    }
}
