//! Ticket ids, entry tokens and order ids: 128 random bits from a CSPRNG (the thread's ChaCha
//! generator, seeded and reseeded from the OS), URL-safe base64.
//!
//! An entry token is `{room}.{secret}`: the room prefix lets the token layer tell a token of
//! another room from a made-up one; only the 22-char secret is looked up.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

/// Length of an encoded 128-bit id: 22 URL-safe base64 characters.
pub const ID_LEN: usize = 22;

/// A fresh 128-bit random id, 22 URL-safe base64 characters.
///
/// From `rand`'s thread-local CSPRNG (ChaCha12, seeded from the OS and reseeded from it every
/// 64 KiB of output), not a system call per id: a join made two ids (the ticket's and the
/// entry token an instant admission would carry), and the two `getrandom` calls were 3.8% of
/// the server's time per join in a profile.
///
/// # Panics
/// If the operating system's random source fails when the generator is seeded, which leaves no
/// safe way to make secrets.
pub fn random_id() -> String {
    use rand::RngCore as _;
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The ticket id a dedup key gets on its first join in a room: the first 128 bits of
/// HMAC-SHA256(`room_secret`, `dedup_key`), 22 URL-safe base64 characters like [`random_id`].
///
/// A retried join recomputes it instead of looking it up, so a waiting shopper costs no dedup
/// entry in the store. Without the room's secret (server-side, never sent to a client) the id
/// of a key cannot be computed, and the key itself cannot be read back from the id.
pub fn derived_id(room_secret: &[u8], dedup_key: &str) -> String {
    use hmac::{Hmac, Mac};
    let mut mac =
        Hmac::<sha2::Sha256>::new_from_slice(room_secret).expect("HMAC takes keys of any length");
    mac.update(dedup_key.as_bytes());
    URL_SAFE_NO_PAD.encode(&mac.finalize().into_bytes()[..16])
}

/// A fresh entry token for `room`.
pub fn entry_token(room: &str) -> String {
    format!("{room}.{}", random_id())
}

/// Whether `id` has the form of a ticket id (it may still be unknown).
pub fn is_well_formed_id(id: &str) -> bool {
    id.len() == ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A short, non-secret tag of a ticket id for logs: the first 12 hex digits of its SHA-256.
///
/// Lets an operator (or a test) follow one ticket's requests in the log without the log ever
/// holding the bearer secret itself.
pub fn log_tag(ticket_id: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(ticket_id.as_bytes())
        .iter()
        .take(6)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Splits a token into (room, secret) when it has the form `{room}.{22-char secret}`.
pub fn split_token(token: &str) -> Option<(&str, &str)> {
    let (room, secret) = token.rsplit_once('.')?;
    (vestibule_shared::is_valid_room_slug(room) && is_well_formed_id(secret))
        .then_some((room, secret))
}

/// The secret part of a token (the whole string when it has no room prefix).
pub fn token_secret(token: &str) -> &str {
    token.rsplit_once('.').map_or(token, |(_, secret)| secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_128_bit_url_safe_and_distinct() {
        let a = random_id();
        let b = random_id();
        assert!(is_well_formed_id(&a));
        assert_ne!(a, b);
        assert_eq!(URL_SAFE_NO_PAD.decode(&a).unwrap().len(), 16);
    }

    #[test]
    fn log_tags_are_short_stable_and_not_the_id() {
        let id = random_id();
        assert_eq!(log_tag(&id), log_tag(&id));
        assert_eq!(log_tag(&id).len(), 12);
        assert!(!id.contains(&log_tag(&id)));
        assert_eq!(log_tag("abc"), "ba7816bf8f01");
    }

    #[test]
    fn derived_ids_are_well_formed_stable_and_depend_on_secret_and_key() {
        let secret = [7u8; 32];
        let id = derived_id(&secret, "k:abc");
        assert!(is_well_formed_id(&id));
        assert_eq!(URL_SAFE_NO_PAD.decode(&id).unwrap().len(), 16);
        assert_eq!(id, derived_id(&secret, "k:abc"));
        assert_ne!(id, derived_id(&secret, "k:abd"));
        assert_ne!(id, derived_id(&secret, "u:abc"));
        assert_ne!(id, derived_id(&[8u8; 32], "k:abc"));
        // RFC 4231 test case 2: HMAC-SHA256("Jefe", "what do ya want for nothing?") begins
        // 5bdcc146bf60754e6a042426089575c7.
        let expected = URL_SAFE_NO_PAD.encode([
            0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95,
            0x75, 0xc7,
        ]);
        assert_eq!(
            derived_id(b"Jefe", "what do ya want for nothing?"),
            expected
        );
    }

    #[test]
    fn tokens_carry_their_room() {
        let token = entry_token("black-friday");
        let (room, secret) = split_token(&token).unwrap();
        assert_eq!(room, "black-friday");
        assert_eq!(token_secret(&token), secret);
        assert!(split_token("nope").is_none());
        assert!(split_token("main.short").is_none());
        assert!(split_token("Main.AAAAAAAAAAAAAAAAAAAAAA").is_none());
    }
}
