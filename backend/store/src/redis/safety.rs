//! How the Redis server is set up where that can lose queue state (`INFO`, `CONFIG GET save`).
//! On a Redis Cluster every node is asked (masters and replicas: a replica becomes a master at a
//! failover) and the riskiest answer counts.

use crate::{StoreError, StoreSafety};

/// One node's settings from its `INFO memory persistence` and `CONFIG GET save`.
pub(super) fn node_safety(info: &str, rdb_save: Option<String>) -> Result<StoreSafety, StoreError> {
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let maxmemory_policy = field("maxmemory_policy")
        .ok_or_else(|| StoreError::Corrupt("INFO has no maxmemory_policy".into()))?
        .to_owned();
    Ok(StoreSafety {
        maxmemory_policy,
        maxmemory_bytes: field("maxmemory").and_then(|v| v.parse().ok()).unwrap_or(0),
        aof_enabled: field("aof_enabled") == Some("1"),
        rdb_save,
    })
}

/// The nodes' settings as one: the first that may evict (else the first node), AOF only if every
/// node has it, and the snapshot schedule of a node without AOF (an empty one first).
pub(super) fn riskiest(nodes: Vec<StoreSafety>) -> Option<StoreSafety> {
    let mut combined = nodes
        .iter()
        .find(|node| node.may_evict())
        .or(nodes.first())?
        .clone();
    combined.aof_enabled = nodes.iter().all(|node| node.aof_enabled);
    if !combined.aof_enabled {
        let without_aof: Vec<&StoreSafety> = nodes.iter().filter(|n| !n.aof_enabled).collect();
        combined.rdb_save = without_aof
            .iter()
            .find(|node| node.rdb_save.as_deref() == Some(""))
            .or_else(|| without_aof.iter().find(|node| node.rdb_save.is_none()))
            .or(without_aof.first())
            .and_then(|node| node.rdb_save.clone());
    }
    Some(combined)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(policy: &str, aof: bool, save: Option<&str>) -> StoreSafety {
        StoreSafety {
            maxmemory_policy: policy.into(),
            maxmemory_bytes: 0,
            aof_enabled: aof,
            rdb_save: save.map(str::to_owned),
        }
    }

    #[test]
    fn one_risky_node_makes_the_cluster_risky() {
        let safe = node("noeviction", true, Some(""));
        assert_eq!(riskiest(vec![safe.clone()]), Some(safe.clone()));
        let combined = riskiest(vec![
            safe.clone(),
            node("allkeys-lru", true, None),
            node("noeviction", false, Some("")),
        ])
        .unwrap();
        assert!(combined.may_evict());
        assert_eq!(combined.persists(), Some(false));
        let combined = riskiest(vec![
            safe.clone(),
            node("noeviction", false, Some("3600 1")),
        ]);
        assert_eq!(combined.unwrap().persists(), Some(true));
        assert_eq!(riskiest(vec![]), None);
    }
}
