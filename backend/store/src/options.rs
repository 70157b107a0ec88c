//! What a store keeps the same for every call, set when it is built.

/// A store's fixed timings, from `--lease-ms` and `--terminal-ticket-ttl-secs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// How long a scheduler lease lasts (milliseconds) after it is taken or renewed: another
    /// replica may take over this long after the leader stops renewing ([`crate::Admission`]).
    pub lease_ms: u64,
    /// How long an ended ticket (left, expired, completed) and a used token's order receipt stay
    /// readable, in milliseconds.
    pub keep_ms: u64,
}

impl Default for StoreOptions {
    /// The server's defaults: a 1 s lease, ended tickets kept for an hour.
    fn default() -> Self {
        Self {
            lease_ms: 1_000,
            keep_ms: 3_600_000,
        }
    }
}
