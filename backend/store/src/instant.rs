//! Instant admission (docs/DESIGN.md "No wait when there is no line"): what a join carries to
//! admit its shopper in the same atomic step when nobody waits.

/// What a join needs to admit its shopper at once when nobody is waiting and the bank of the
/// scheduler's unused quota allows (docs/DESIGN.md "No wait when there is no line").
#[derive(Debug, Clone)]
pub struct InstantAdmission {
    /// A fresh entry token for the shopper.
    pub token: String,
    /// Now, Unix milliseconds.
    pub now_ms: u64,
    /// Token TTL in milliseconds.
    pub token_ttl_ms: u64,
    /// The settings version the join was decided on (proof of work, user assertion, opening
    /// phase). When the store's version differs the join changes nothing and answers
    /// [`super::JoinReply::SettingsChanged`]; `None` checks nothing.
    pub settings_version: Option<u64>,
}
