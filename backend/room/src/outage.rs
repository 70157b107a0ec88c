//! What protected paths do while the store is unreachable (`--outage-policy`): a business
//! choice per room between keeping checkout closed and keeping it open unverified.

use std::str::FromStr;

/// What the protected paths do while the store is unreachable (a business choice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutagePolicy {
    /// Answer 503 + `Retry-After`: nobody reaches checkout without a verified token.
    Reject,
    /// Let requests through unverified: checkout stays open while the waiting room is down.
    Pass,
}

impl FromStr for OutagePolicy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "reject" => Ok(Self::Reject),
            "pass" => Ok(Self::Pass),
            other => Err(format!("outage policy {other:?} is not reject or pass")),
        }
    }
}

/// The outage policy of every room: a default and per-room exceptions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutagePolicies {
    /// For rooms without an exception.
    pub default: OutagePolicy,
    /// `(room, policy)` exceptions.
    pub rooms: Vec<(String, OutagePolicy)>,
}

impl OutagePolicies {
    /// The policy of `room`.
    pub fn for_room(&self, room: &str) -> OutagePolicy {
        self.rooms
            .iter()
            .find(|(name, _)| name == room)
            .map_or(self.default, |(_, policy)| *policy)
    }
}

impl FromStr for OutagePolicies {
    type Err = String;

    /// `reject`, `pass`, or either followed by `,room=policy` exceptions.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut default = OutagePolicy::Reject;
        let mut rooms = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('=') {
                Some((room, policy)) => rooms.push((room.trim().to_owned(), policy.parse()?)),
                None => default = part.parse()?,
            }
        }
        Ok(Self { default, rooms })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outage_policies_have_a_default_and_per_room_exceptions() {
        let policies: OutagePolicies = "reject,flash=pass".parse().unwrap();
        assert_eq!(policies.for_room("main"), OutagePolicy::Reject);
        assert_eq!(policies.for_room("flash"), OutagePolicy::Pass);
        assert_eq!(
            "pass".parse::<OutagePolicies>().unwrap().for_room("x"),
            OutagePolicy::Pass
        );
        assert!("maybe".parse::<OutagePolicies>().is_err());
    }
}
