//! Bots at the door: the proof-of-work puzzle of a join, its challenge, and the
//! operator's view of who joins most.
//!
//! # The puzzle, byte by byte (for app developers)
//! `GET /api/v1/rooms/{room}/challenge` answers a [`Challenge`]: an ASCII string `challenge` and a
//! `difficulty` in bits. Find a nonce `n` (an unsigned 64-bit integer) such that
//!
//! ```text
//! SHA-256( challenge as its ASCII bytes  ‖  n as 8 bytes, big-endian )
//! ```
//!
//! starts with at least `difficulty` zero bits, counted from the most significant bit of the
//! digest's first byte (difficulty 12: the first byte is 0 and the second is below 16). Try
//! `n = 0, 1, 2, …`; on average it takes 2^difficulty hashes. Then join with the header
//! [`PROOF_OF_WORK_HEADER`]`: {challenge}:{n in decimal}`. A solution works once, in the room it
//! was issued for, until `expiresAt`. The challenge string is opaque: never parse it.
//! [`solution_bits`] and [`solves`] are the check; [`solve`] is a reference solver.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// Header that carries a join's proof of work: `{challenge}:{nonce}` (nonce in decimal).
pub const PROOF_OF_WORK_HEADER: &str = "X-Proof-Of-Work";

/// A proof-of-work challenge (`GET /api/v1/rooms/{room}/challenge`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Challenge {
    /// Opaque ASCII (`[A-Za-z0-9._-]`, at most 200 characters): the bytes to hash before the
    /// nonce. Example: `"main.1767225600000.16.q1Zb3n0W6m1q8VqL2pX9cT.3vY…"`.
    pub challenge: String,
    /// Leading zero bits the digest needs, 0–26 (0: no work needed; the room does not ask for
    /// proof of work and a join may omit the header). Example: `16`.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 26, example = 16))]
    pub difficulty: u8,
    /// When the challenge stops being accepted, Unix milliseconds. Example: `1767225600000`.
    pub expires_at_ms: u64,
    /// The puzzle: always `"sha256-leading-zero-bits"` (SHA-256 of the challenge's bytes and the
    /// nonce as 8 big-endian bytes). Example: `"sha256-leading-zero-bits"`.
    pub algorithm: String,
}

/// The only puzzle, [`Challenge::algorithm`].
pub const ALGORITHM: &str = "sha256-leading-zero-bits";

/// The leading zero bits of SHA-256(`challenge` ‖ `nonce` as 8 big-endian bytes).
pub fn solution_bits(challenge: &str, nonce: u64) -> u32 {
    let mut hasher = Sha256::new();
    hasher.update(challenge.as_bytes());
    hasher.update(nonce.to_be_bytes());
    leading_zero_bits(&hasher.finalize())
}

/// Whether `nonce` solves `challenge` at `difficulty` bits.
pub fn solves(challenge: &str, nonce: u64, difficulty: u8) -> bool {
    solution_bits(challenge, nonce) >= u32::from(difficulty)
}

/// Leading zero bits of a digest, from the first byte's most significant bit.
pub fn leading_zero_bits(digest: &[u8]) -> u32 {
    let mut bits = 0;
    for byte in digest {
        if *byte == 0 {
            bits += 8;
        } else {
            return bits + byte.leading_zeros();
        }
    }
    bits
}

/// Searches nonces `start..start + count` for a solution, reusing the hashed challenge prefix
/// (callers that must yield, like the page, search in slices). `None` when none is in range.
pub fn solve_range(challenge: &str, difficulty: u8, start: u64, count: u64) -> Option<u64> {
    let mut prefix = Sha256::new();
    prefix.update(challenge.as_bytes());
    let wanted = u32::from(difficulty);
    (start..start.saturating_add(count)).find(|nonce| {
        let mut hasher = prefix.clone();
        hasher.update(nonce.to_be_bytes());
        leading_zero_bits(&hasher.finalize()) >= wanted
    })
}

/// The first solution from nonce 0 (a reference solver; expected 2^difficulty hashes).
pub fn solve(challenge: &str, difficulty: u8) -> u64 {
    solve_range(challenge, difficulty, 0, u64::MAX).unwrap_or(u64::MAX)
}

/// One client address and its joins (`GET /api/v1/admin/rooms/{room}/top-clients`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClientJoins {
    /// The client as the join limit counts it: an IPv4 address, or an IPv6 /64 as
    /// `2001:db8:1:2::/64`. Example: `"203.0.113.7"`.
    pub client: String,
    /// Joins this replica answered for it in the last 60 s (refused ones included).
    /// Example: `412`.
    pub joins: u64,
}

/// The clients that joined most in the last minute, most first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TopClients {
    /// Room slug. Example: `"main"`.
    pub room: String,
    /// Counted by this replica only (`"replica"`): ask each replica. Example: `"replica"`.
    pub scope: String,
    /// At most `limit` clients, most joins first.
    pub clients: Vec<ClientJoins>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_solver_meets_the_difficulty_and_the_check_agrees() {
        let challenge = "main.1767225600000.12.abc.def";
        let nonce = solve(challenge, 12);
        // The Python solver in docs/bots.md (hashlib, struct.pack(">Q", n)) finds this nonce too.
        assert_eq!(nonce, 1976);
        assert!(solution_bits(challenge, nonce) >= 12);
        assert!(solves(challenge, nonce, 12));
        assert_eq!(leading_zero_bits(&[0, 0x0f, 0xff]), 12);
        assert_eq!(leading_zero_bits(&[0x80]), 0);
        assert_eq!(leading_zero_bits(&[0, 0]), 16);
    }

    #[test]
    fn the_byte_layout_is_the_documented_one() {
        // SHA-256("ab" ‖ 00 00 00 00 00 00 01 00), computed independently of solution_bits.
        let digest = Sha256::digest([b'a', b'b', 0, 0, 0, 0, 0, 0, 1, 0]);
        assert_eq!(solution_bits("ab", 256), leading_zero_bits(&digest));
    }
}
