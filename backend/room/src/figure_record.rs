//! What one replica shares of a room's last second ([`ReplicaRecord`], JSON in the store's
//! figures role) and how every live replica's records add up to the room's figures
//! ([`Merged`]): counts that each replica makes of its own answers are summed; what only the
//! leader knows is taken from the leader's record (the highest fencing epoch, should a deposed
//! leader's record still be live).

use serde::{Deserialize, Serialize};
use vestibule_shared::WaitReason;

/// One replica's share of a room's figures over its last second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaRecord {
    /// Joins answered per second.
    pub joins: f64,
    /// Polls answered per second.
    pub polls: f64,
    /// Entry tokens used per second.
    pub used: f64,
    /// Open SSE ticket streams.
    pub streams: u64,
    /// Set while this replica leads the room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<LeaderRecord>,
    /// The origin's signals over this replica's window, when it forwarded or was told of
    /// requests (the closed loop's input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<vestibule_shared::auto_rate::OriginSignals>,
}

/// What the leader shares besides its counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderRecord {
    /// The leading replica.
    pub replica: String,
    /// Its fencing epoch.
    pub epoch: u64,
    /// Shoppers admitted per second over its last second.
    pub admitted: f64,
    /// Tokens expired unused per second over its last second.
    pub expired: f64,
    /// The wait at the back of the line it computed (seconds, as shown).
    #[serde(default)]
    pub eta_back: Option<u64>,
    /// The reason a shopper at the back is shown.
    #[serde(default)]
    pub reason: Option<WaitReason>,
    /// The closed loop's last step and move, while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_rate: Option<crate::auto_rate::shown::LoopRecord>,
}

/// Every live replica's records added up.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Merged {
    /// Summed joins per second.
    pub joins: f64,
    /// Summed polls per second.
    pub polls: f64,
    /// Summed tokens used per second.
    pub used: f64,
    /// Summed open streams.
    pub streams: u64,
    /// The leader's record, if one is live.
    pub leader: Option<LeaderRecord>,
    /// The origin's signals merged from every replica's ([`crate::auto_rate::window::merge`]).
    pub origin: Option<vestibule_shared::auto_rate::OriginSignals>,
}

impl Merged {
    /// The sum of `records` (JSON); one that does not parse (another version's) is passed over.
    pub fn of(records: &[String]) -> Self {
        let mut merged = Self::default();
        let mut origins = Vec::new();
        for record in records {
            let Ok(record) = serde_json::from_str::<ReplicaRecord>(record) else {
                tracing::debug!(%record, "a replica's figures record left out");
                continue;
            };
            merged.joins += record.joins;
            merged.polls += record.polls;
            merged.used += record.used;
            merged.streams += record.streams;
            origins.extend(record.origin);
            if let Some(leader) = record.leader {
                if merged
                    .leader
                    .as_ref()
                    .is_none_or(|known| known.epoch < leader.epoch)
                {
                    merged.leader = Some(leader);
                }
            }
        }
        merged.origin = crate::auto_rate::window::merge(&origins, crate::auto_rate::MIN_REQUESTS);
        merged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_the_newest_leader_wins() {
        let record = |joins: f64, leader: Option<(&str, u64)>| {
            serde_json::to_string(&ReplicaRecord {
                joins,
                polls: 2.0 * joins,
                used: 1.0,
                streams: 3,
                origin: None,
                leader: leader.map(|(replica, epoch)| LeaderRecord {
                    replica: replica.into(),
                    epoch,
                    admitted: 10.0,
                    ..LeaderRecord::default()
                }),
            })
            .unwrap()
        };
        let merged = Merged::of(&[
            record(5.0, Some(("old", 3))),
            "not json".into(),
            record(7.0, Some(("new", 4))),
            record(1.0, None),
        ]);
        assert_eq!((merged.joins, merged.polls, merged.used), (13.0, 26.0, 3.0));
        assert_eq!(merged.streams, 9);
        assert_eq!(merged.leader.unwrap().replica, "new");
    }
}
