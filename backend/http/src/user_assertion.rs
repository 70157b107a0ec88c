//! Storefront-signed user assertions: the only way a join is tied to a user id.
//!
//! Header `X-User-Assertion: {userId}.{expiryUnixSecs}.{hex HMAC-SHA256}` where the MAC is over
//! `"{room}\n{userId}\n{expiry}"` with `--user-assertion-secret` (docs/DESIGN.md "Queue
//! semantics", who is the same user). An unsigned user id is never trusted.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Why an assertion was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssertionError {
    /// Not `userId.expiry.mac`, or a part out of form.
    #[error("the user assertion is not userId.expiryUnixSecs.hexHmac")]
    Malformed,
    /// Past its expiry.
    #[error("the user assertion has expired")]
    Expired,
    /// The MAC does not match (forged, or signed for another room).
    #[error("the user assertion's signature does not match")]
    BadSignature,
    /// No secret is configured, so no assertion can be verified.
    #[error("this server does not accept user assertions")]
    Disabled,
}

/// The MAC of an assertion, lowercase hex (for storefronts and tests).
pub fn sign(secret: &[u8], room: &str, user_id: &str, expiry_unix_secs: u64) -> String {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(format!("{room}\n{user_id}\n{expiry_unix_secs}").as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Verifies an assertion for `room` at `now_unix_secs` and returns its user id.
///
/// # Errors
/// [`AssertionError`] saying what is wrong.
pub fn verify<'a>(
    secret: Option<&[u8]>,
    room: &str,
    assertion: &'a str,
    now_unix_secs: u64,
) -> Result<&'a str, AssertionError> {
    let secret = secret.ok_or(AssertionError::Disabled)?;
    let mut parts = assertion.rsplitn(3, '.');
    let (Some(mac_hex), Some(expiry), Some(user_id)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(AssertionError::Malformed);
    };
    let user_ok = (1..=128).contains(&user_id.len())
        && user_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_@+:".contains(&b));
    let expiry: u64 = expiry.parse().map_err(|_| AssertionError::Malformed)?;
    if !user_ok || mac_hex.len() != 64 {
        return Err(AssertionError::Malformed);
    }
    let mac_bytes: Vec<u8> = (0..64)
        .step_by(2)
        .map(|i| u8::from_str_radix(&mac_hex[i..i + 2], 16))
        .collect::<Result<_, _>>()
        .map_err(|_| AssertionError::Malformed)?;
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(format!("{room}\n{user_id}\n{expiry}").as_bytes());
    // verify_slice compares in constant time.
    mac.verify_slice(&mac_bytes)
        .map_err(|_| AssertionError::BadSignature)?;
    if expiry <= now_unix_secs {
        return Err(AssertionError::Expired);
    }
    Ok(user_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef-secret";

    #[test]
    fn a_signed_assertion_names_its_user_and_nothing_else_passes() {
        let mac = sign(SECRET, "main", "user-7", 2_000);
        let good = format!("user-7.2000.{mac}");
        assert_eq!(verify(Some(SECRET), "main", &good, 1_000), Ok("user-7"));
        assert_eq!(
            verify(Some(SECRET), "other", &good, 1_000),
            Err(AssertionError::BadSignature)
        );
        assert_eq!(
            verify(Some(SECRET), "main", &good, 2_000),
            Err(AssertionError::Expired)
        );
        assert_eq!(
            verify(None, "main", &good, 1_000),
            Err(AssertionError::Disabled)
        );
        let forged = format!("user-8.2000.{mac}");
        assert_eq!(
            verify(Some(SECRET), "main", &forged, 1_000),
            Err(AssertionError::BadSignature)
        );
        assert_eq!(
            verify(Some(SECRET), "main", "user-7", 1_000),
            Err(AssertionError::Malformed)
        );
        assert_eq!(
            verify(Some(SECRET), "main", "a.b.c", 1_000),
            Err(AssertionError::Malformed)
        );
    }
}
