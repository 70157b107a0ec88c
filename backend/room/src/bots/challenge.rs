//! Proof-of-work challenges: issued signed, verified without the store (docs/bots.md,
//! "Proof of work"; the puzzle's byte layout in `vestibule_shared::bots`).
//!
//! A challenge is `{room}.{expiresAtMs}.{difficulty}.{id}.{mac}`: `id` 128 random bits
//! (22 URL-safe base64 characters), `mac` the URL-safe base64 HMAC-SHA256 of everything before
//! it with the key every replica shares. Verifying costs the HMAC, one SHA-256 of the solution
//! and, if both pass, one store write that marks `id` used.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use vestibule_shared::bots::solution_bits;
use vestibule_shared::error_code;

type HmacSha256 = Hmac<Sha256>;

/// The longest challenge text accepted (room 64 + expiry 13 + bits 2 + id 22 + mac 43 + dots).
const CHALLENGE_MAX_CHARS: usize = 200;

/// The HMAC key of challenges (32 bytes): Redis `vestibule:pow-key` shared by every replica, or
/// per process on the embedded store.
#[derive(Clone)]
pub struct ChallengeKey([u8; 32]);

impl std::fmt::Debug for ChallengeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChallengeKey([REDACTED])")
    }
}

impl ChallengeKey {
    /// A key from its bytes.
    pub fn new(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    fn mac(&self, text: &str) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(text.as_bytes());
        mac
    }

    /// A challenge for `room` at `difficulty` bits with the random `id`, accepted until
    /// `expires_at_ms`: its text.
    pub fn issue(&self, room: &str, difficulty: u8, id: &str, expires_at_ms: u64) -> String {
        let body = format!("{room}.{expires_at_ms}.{difficulty}.{id}");
        let mac = URL_SAFE_NO_PAD.encode(self.mac(&body).finalize().into_bytes());
        format!("{body}.{mac}")
    }

    /// Checks the `X-Proof-Of-Work` header value `{challenge}:{nonce}` of a join in `room` at
    /// `now_ms`, against the room's difficulty in force `min_difficulty` (a challenge issued at
    /// a lower one since raised is refused as expired). Does not mark it used.
    ///
    /// # Errors
    /// [`Refusal`] saying what is wrong, in this order: malformed, forged, other room, expired,
    /// too few zero bits.
    pub fn verify(
        &self,
        room: &str,
        header: &str,
        now_ms: u64,
        min_difficulty: u8,
    ) -> Result<Verified, Refusal> {
        let (challenge, nonce) = header.rsplit_once(':').ok_or(Refusal::Malformed)?;
        // Decimal digits only, as the document's pattern says (`u64::from_str` would also take
        // a leading `+`, as in `+185`).
        // At most 20 of them (u64's width), also with leading zeros.
        if nonce.is_empty() || nonce.len() > 20 || !nonce.bytes().all(|byte| byte.is_ascii_digit())
        {
            return Err(Refusal::Malformed);
        }
        let nonce: u64 = nonce.parse().map_err(|_| Refusal::Malformed)?;
        if challenge.len() > CHALLENGE_MAX_CHARS {
            return Err(Refusal::Malformed);
        }
        let (body, mac) = challenge.rsplit_once('.').ok_or(Refusal::Malformed)?;
        let mac = URL_SAFE_NO_PAD
            .decode(mac)
            .map_err(|_| Refusal::Malformed)?;
        // verify_slice compares in constant time.
        self.mac(body)
            .verify_slice(&mac)
            .map_err(|_| Refusal::Forged)?;
        let mut parts = body.splitn(4, '.');
        let (Some(issued_room), Some(expires), Some(bits), Some(id)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Refusal::Malformed);
        };
        let expires_at_ms: u64 = expires.parse().map_err(|_| Refusal::Malformed)?;
        let difficulty: u8 = bits.parse().map_err(|_| Refusal::Malformed)?;
        if issued_room != room {
            return Err(Refusal::WrongRoom);
        }
        if expires_at_ms <= now_ms || difficulty < min_difficulty {
            return Err(Refusal::Expired);
        }
        if solution_bits(challenge, nonce) < u32::from(difficulty) {
            return Err(Refusal::Wrong);
        }
        Ok(Verified {
            id: id.to_owned(),
            expires_at_ms,
        })
    }
}

/// A solution that verified: the challenge's id (to mark used) and expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The challenge's random id.
    pub id: String,
    /// When it stops verifying, Unix ms.
    pub expires_at_ms: u64,
}

/// Why a join's proof of work was refused; each has its own error code and metrics `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No `X-Proof-Of-Work` header (403 `proof_of_work_required`).
    Missing,
    /// Not `{challenge}:{nonce}` (403 `proof_of_work_malformed`).
    Malformed,
    /// The challenge's MAC does not verify: not issued by this room's servers (403
    /// `proof_of_work_malformed`).
    Forged,
    /// Too few leading zero bits (403 `proof_of_work_wrong`).
    Wrong,
    /// Past its expiry, or issued at a difficulty below the room's now (403 `proof_of_work_expired`).
    Expired,
    /// Issued for another room (403 `proof_of_work_wrong_room`).
    WrongRoom,
    /// Already used by a join (409 `proof_of_work_reused`).
    Reused,
}

impl Refusal {
    /// The metrics label (`vestibule_joins_refused_total{reason="proof_of_work",kind=…}`).
    pub fn kind(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Malformed => "malformed",
            Self::Forged => "forged",
            Self::Wrong => "wrong",
            Self::Expired => "expired",
            Self::WrongRoom => "wrong_room",
            Self::Reused => "reused",
        }
    }

    /// The error code of the JSON answer.
    pub fn code(self) -> &'static str {
        match self {
            Self::Missing => error_code::POW_REQUIRED,
            Self::Malformed | Self::Forged => error_code::POW_MALFORMED,
            Self::Wrong => error_code::POW_WRONG,
            Self::Expired => error_code::POW_EXPIRED,
            Self::WrongRoom => error_code::POW_WRONG_ROOM,
            Self::Reused => error_code::POW_REUSED,
        }
    }

    /// What the client should do, in English.
    pub fn message(self) -> &'static str {
        match self {
            Self::Missing => {
                "this room needs proof of work: GET …/challenge, solve it, join with X-Proof-Of-Work"
            }
            Self::Malformed => "X-Proof-Of-Work is not {challenge}:{nonce in decimal}",
            Self::Forged => "the challenge was not issued by this waiting room",
            Self::Wrong => "the nonce does not give the challenge's leading zero bits",
            Self::Expired => "the challenge has expired or its difficulty is no longer enough: get a new one",
            Self::WrongRoom => "the challenge was issued for another room",
            Self::Reused => "the challenge was already used: get a new one for each join",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vestibule_shared::bots::solve;

    const ID: &str = "q1Zb3n0W6m1q8VqL2pX9cT";
    const TTL_MS: u64 = 120_000;

    fn solved(key: &ChallengeKey, room: &str, bits: u8, now_ms: u64) -> String {
        let challenge = key.issue(room, bits, ID, now_ms + TTL_MS);
        format!("{challenge}:{}", solve(&challenge, bits))
    }

    #[test]
    fn a_solved_challenge_verifies_in_its_room_until_it_expires() {
        let key = ChallengeKey::new([7; 32]);
        let header = solved(&key, "main", 8, 1_000);
        let verified = key.verify("main", &header, 2_000, 8).unwrap();
        assert_eq!(verified.id, ID);
        assert_eq!(verified.expires_at_ms, 1_000 + TTL_MS);
        assert_eq!(
            key.verify("other", &header, 2_000, 8),
            Err(Refusal::WrongRoom)
        );
        assert_eq!(
            key.verify("main", &header, 1_000 + TTL_MS, 8),
            Err(Refusal::Expired)
        );
        assert_eq!(key.verify("main", &header, 2_000, 9), Err(Refusal::Expired));
        let other_key = ChallengeKey::new([8; 32]);
        assert_eq!(
            other_key.verify("main", &header, 2_000, 8),
            Err(Refusal::Forged)
        );
    }

    #[test]
    fn a_wrong_nonce_a_changed_difficulty_or_garbage_is_refused() {
        let key = ChallengeKey::new([7; 32]);
        let challenge = key.issue("main", 16, ID, 1_000 + TTL_MS);
        let nonce = solve(&challenge, 16);
        let wrong = (0..).find(|n| solution_bits(&challenge, *n) < 16).unwrap();
        assert_eq!(
            key.verify("main", &format!("{challenge}:{wrong}"), 2_000, 0),
            Err(Refusal::Wrong)
        );
        // Lowering the difficulty written in the challenge breaks its MAC.
        let easier = challenge.replacen(".16.", ".1.", 1);
        assert_eq!(
            key.verify("main", &format!("{easier}:{nonce}"), 2_000, 0),
            Err(Refusal::Forged)
        );
        for garbage in [
            "",
            ":",
            "abc",
            "a.b:1",
            &format!("{challenge}:-1"),
            &format!("{challenge}:x"),
            // `u64::from_str` takes a leading `+`; the document's pattern does not.
            &format!("{challenge}:+{nonce}"),
        ] {
            assert_eq!(
                key.verify("main", garbage, 2_000, 0),
                Err(Refusal::Malformed),
                "{garbage}"
            );
        }
    }
}
