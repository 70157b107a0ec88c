//! The bounds of a room's settings — the operator's live knobs: admission rate, token TTL,
//! active-users cap, abandon time and place-holding time — in one place.
//!
//! The server checks them at start (`--admission-rate`, `--token-ttl-secs`,
//! `--max-active-users`; clap's ranges come from these consts) and on every admin `PATCH`
//! ([`RoomSettingsPatch::validate`]). Units are in the names: `_PER_SEC` shoppers per second,
//! `_SECS` seconds. The bounds are the ones documented in docs/configuration.md and in the
//! OpenAPI schema of [`RoomSettings`](crate::RoomSettings) (a backend test keeps them equal).

use std::fmt;
use std::ops::RangeInclusive;

use crate::RoomSettingsPatch;

/// Lowest admission rate, shoppers per second (0 admits nobody, like a pause).
pub const ADMISSION_RATE_PER_SEC_MIN: f64 = 0.0;
/// Highest admission rate, shoppers per second.
pub const ADMISSION_RATE_PER_SEC_MAX: f64 = 100_000.0;
/// Shortest entry token TTL, seconds.
pub const TOKEN_TTL_SECS_MIN: u64 = 1;
/// Longest entry token TTL, seconds (one day).
pub const TOKEN_TTL_SECS_MAX: u64 = 86_400;
/// Smallest active-users cap (no cap is written as none/`null`, never 0; pause to stop admission).
pub const MAX_ACTIVE_USERS_MIN: u64 = 1;
/// Largest active-users cap.
pub const MAX_ACTIVE_USERS_MAX: u64 = 10_000_000;

/// Shortest abandon time, seconds (the server never applies less than 3× its longest poll hint).
pub const ABANDON_AFTER_SECS_MIN: u64 = 1;
/// Longest abandon time, seconds (one day).
pub const ABANDON_AFTER_SECS_MAX: u64 = 86_400;
/// Default abandon time, seconds.
pub const ABANDON_AFTER_SECS_DEFAULT: u64 = 300;
/// Shortest place-holding time, seconds (0: a skipped ticket expires at once).
pub const HOLD_PLACE_SECS_MIN: u64 = 0;
/// Longest place-holding time, seconds (one day).
pub const HOLD_PLACE_SECS_MAX: u64 = 86_400;
/// Default place-holding time, seconds.
pub const HOLD_PLACE_SECS_DEFAULT: u64 = 1_800;
/// Smallest expected checkout time, seconds.
pub const EXPECTED_CHECKOUT_SECS_MIN: u64 = 1;
/// Largest expected checkout time, seconds (the longest token TTL).
pub const EXPECTED_CHECKOUT_SECS_MAX: u64 = 86_400;

/// Most units of stock a room can have (`stock`; null = unlimited).
pub const STOCK_MAX: u64 = 1_000_000_000;
/// Longest sold-out message, characters (each language).
pub const SOLD_OUT_MESSAGE_MAX_CHARS: usize = 500;
/// Longest display name of a room, characters (each language).
pub const DISPLAY_NAME_MAX_CHARS: usize = 100;
/// Longest message to waiters, characters (each language).
pub const WAITER_MESSAGE_MAX_CHARS: usize = 280;
/// Highest proof-of-work difficulty, leading zero bits (2^26 hashes: about a minute on a phone;
/// docs/bots.md).
pub const PROOF_OF_WORK_DIFFICULTY_MAX: u8 = 26;
/// Lowest and highest auto-rise threshold, joins per second.
pub const PROOF_OF_WORK_AUTO_JOINS_PER_SEC: RangeInclusive<u64> = 1..=1_000_000;

/// Checks a proof-of-work difficulty in leading zero bits.
///
/// # Errors
/// [`SettingOutOfRange::ProofOfWorkDifficulty`].
pub fn check_proof_of_work_difficulty(bits: u8) -> Result<(), SettingOutOfRange> {
    if bits <= PROOF_OF_WORK_DIFFICULTY_MAX {
        Ok(())
    } else {
        Err(SettingOutOfRange::ProofOfWorkDifficulty)
    }
}

/// The token TTL's bounds in seconds (for clap's `value_parser!(u64).range(..)`).
pub const TOKEN_TTL_SECS: RangeInclusive<u64> = TOKEN_TTL_SECS_MIN..=TOKEN_TTL_SECS_MAX;
/// The active-users cap's bounds (for clap's `value_parser!(u64).range(..)`).
pub const MAX_ACTIVE_USERS: RangeInclusive<u64> = MAX_ACTIVE_USERS_MIN..=MAX_ACTIVE_USERS_MAX;
/// [`EXPECTED_CHECKOUT_SECS_MIN`]..=[`EXPECTED_CHECKOUT_SECS_MAX`].
pub const EXPECTED_CHECKOUT_SECS: RangeInclusive<u64> =
    EXPECTED_CHECKOUT_SECS_MIN..=EXPECTED_CHECKOUT_SECS_MAX;

/// Which room setting is out of its bounds; `Display` gives the bounds with their unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingOutOfRange {
    /// The admission rate is not a number in 0–100000 shoppers/s.
    AdmissionRate,
    /// The token TTL is not 1–86400 s.
    TokenTtl,
    /// The active-users cap is not 1–10000000.
    MaxActiveUsers,
    /// The checkout URL is not a path on this server nor an http(s) URL on a storefront origin
    /// of `--cors-origins` ([`check_checkout_url`]).
    CheckoutUrl,
    /// The abandon time is not 1–86400 s.
    AbandonAfter,
    /// The place-holding time is not 0–86400 s.
    HoldPlace,
    /// The stock is not 0–1000000000 units.
    Stock,
    /// The expected checkout time is not 1–86400 s.
    ExpectedCheckout,
    /// The English sold-out message is empty, too long or has control characters.
    SoldOutMessageEn,
    /// The Korean sold-out message is empty, too long or has control characters.
    SoldOutMessageKo,
    /// The proof-of-work difficulty is not 0–26 bits.
    ProofOfWorkDifficulty,
    /// The auto-rise threshold is not 1–1000000 joins/s.
    ProofOfWorkAuto,
    /// The English display name is empty, too long or has control characters.
    DisplayNameEn,
    /// The Korean display name is empty, too long or has control characters.
    DisplayNameKo,
    /// The English message to waiters is empty, too long or has control characters.
    MessageEn,
    /// The Korean message to waiters is empty, too long or has control characters.
    MessageKo,
    /// `autoRate` is out of its bounds ([`crate::auto_rate::AutoRate::validate`]).
    AutoRate,
    /// `autoRate.healthUrl` is not an absolute http(s) URL within
    /// [`crate::auto_rate::check_health_url`]'s rule.
    AutoRateHealthUrl,
}

impl SettingOutOfRange {
    /// The field's name in the admin API (camelCase JSON), e.g. `tokenTtlSecs`.
    pub fn api_field(self) -> &'static str {
        match self {
            Self::AdmissionRate => "admissionRatePerSec",
            Self::TokenTtl => "tokenTtlSecs",
            Self::MaxActiveUsers => "maxActiveUsers",
            Self::CheckoutUrl => "checkoutUrl",
            Self::AbandonAfter => "abandonAfterSecs",
            Self::HoldPlace => "holdPlaceSecs",
            Self::Stock => "stock",
            Self::ExpectedCheckout => "expectedCheckoutSecs",
            Self::SoldOutMessageEn => "soldOutMessageEn",
            Self::SoldOutMessageKo => "soldOutMessageKo",
            Self::ProofOfWorkDifficulty => "proofOfWorkDifficulty",
            Self::ProofOfWorkAuto => "proofOfWorkAutoJoinsPerSec",
            Self::DisplayNameEn => "displayNameEn",
            Self::DisplayNameKo => "displayNameKo",
            Self::MessageEn => "messageEn",
            Self::MessageKo => "messageKo",
            Self::AutoRate => "autoRate",
            Self::AutoRateHealthUrl => "autoRate.healthUrl",
        }
    }
}

impl fmt::Display for SettingOutOfRange {
    /// The bounds, e.g. `1–86400 s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AdmissionRate => write!(
                f,
                "{ADMISSION_RATE_PER_SEC_MIN}–{ADMISSION_RATE_PER_SEC_MAX} shoppers/s"
            ),
            Self::TokenTtl => write!(f, "{TOKEN_TTL_SECS_MIN}–{TOKEN_TTL_SECS_MAX} s"),
            Self::MaxActiveUsers => write!(f, "{MAX_ACTIVE_USERS_MIN}–{MAX_ACTIVE_USERS_MAX}"),
            Self::CheckoutUrl => write!(
                f,
                "a path on this server (/…) or an http(s) URL on an origin of --cors-origins, \
                 at most {CHECKOUT_URL_MAX_CHARS} characters without spaces or control characters"
            ),
            Self::AbandonAfter => {
                write!(f, "{ABANDON_AFTER_SECS_MIN}–{ABANDON_AFTER_SECS_MAX} s")
            }
            Self::HoldPlace => write!(f, "{HOLD_PLACE_SECS_MIN}–{HOLD_PLACE_SECS_MAX} s"),
            Self::Stock => write!(f, "0–{STOCK_MAX} units, or null for unlimited"),
            Self::ExpectedCheckout => write!(
                f,
                "{EXPECTED_CHECKOUT_SECS_MIN}–{EXPECTED_CHECKOUT_SECS_MAX} s, or null for a third \
                 of the token TTL"
            ),
            Self::SoldOutMessageEn | Self::SoldOutMessageKo => write!(
                f,
                "1–{SOLD_OUT_MESSAGE_MAX_CHARS} characters without control characters, or null"
            ),
            Self::ProofOfWorkDifficulty => write!(f, "0–{PROOF_OF_WORK_DIFFICULTY_MAX} bits"),
            Self::DisplayNameEn | Self::DisplayNameKo => write!(
                f,
                "1–{DISPLAY_NAME_MAX_CHARS} characters without control characters, or null"
            ),
            Self::MessageEn | Self::MessageKo => write!(
                f,
                "1–{WAITER_MESSAGE_MAX_CHARS} characters without control characters, or null"
            ),
            Self::AutoRate => write!(
                f,
                "{{min, max, targetP95Ms, maxErrorRate, healthUrl?}} with 0 ≤ min ≤ max ≤ \
                 {ADMISSION_RATE_PER_SEC_MAX} shoppers/s, targetP95Ms {}–{} ms and \
                 maxErrorRate 0–{}, or null",
                crate::auto_rate::TARGET_P95_MS_MIN,
                crate::auto_rate::TARGET_P95_MS_MAX,
                crate::auto_rate::MAX_ERROR_RATE_MAX
            ),
            Self::AutoRateHealthUrl => write!(
                f,
                "an absolute http:// or https:// URL of at most {} characters: a host of \
                 letters, digits, dots and hyphens or a bracketed IPv6 address, an optional \
                 port, no user info, spaces or control characters",
                crate::auto_rate::HEALTH_URL_MAX_CHARS
            ),
            Self::ProofOfWorkAuto => write!(
                f,
                "{}–{} joins/s, or null",
                PROOF_OF_WORK_AUTO_JOINS_PER_SEC.start(),
                PROOF_OF_WORK_AUTO_JOINS_PER_SEC.end()
            ),
        }
    }
}

/// Checks an admission rate (shoppers per second): finite and within the bounds.
///
/// # Errors
/// [`SettingOutOfRange::AdmissionRate`].
pub fn check_admission_rate(per_sec: f64) -> Result<(), SettingOutOfRange> {
    let bounds = ADMISSION_RATE_PER_SEC_MIN..=ADMISSION_RATE_PER_SEC_MAX;
    if per_sec.is_finite() && bounds.contains(&per_sec) {
        Ok(())
    } else {
        Err(SettingOutOfRange::AdmissionRate)
    }
}

/// Checks an entry token TTL in seconds.
///
/// # Errors
/// [`SettingOutOfRange::TokenTtl`].
pub fn check_token_ttl_secs(secs: u64) -> Result<(), SettingOutOfRange> {
    if TOKEN_TTL_SECS.contains(&secs) {
        Ok(())
    } else {
        Err(SettingOutOfRange::TokenTtl)
    }
}

/// Checks an active-users cap (`None` = no cap, always valid).
///
/// # Errors
/// [`SettingOutOfRange::MaxActiveUsers`].
pub fn check_max_active_users(cap: Option<u64>) -> Result<(), SettingOutOfRange> {
    match cap {
        Some(cap) if !MAX_ACTIVE_USERS.contains(&cap) => Err(SettingOutOfRange::MaxActiveUsers),
        _ => Ok(()),
    }
}

/// Longest checkout URL, characters.
pub const CHECKOUT_URL_MAX_CHARS: usize = 2048;

/// The origin (`scheme://host[:port]`, lowercased) of an absolute `http://` or `https://` URL;
/// `None` for anything else, and for URLs with user info (`https://a@b`), a backslash, or no host.
pub fn url_origin(url: &str) -> Option<String> {
    // The scheme ends at the first ':' and "//" follows (as splitting at the first "://", which
    // costs the page a string search).
    let (scheme, rest) = url.split_once(':')?;
    let rest = rest.strip_prefix("//")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || authority.contains(['@', '\\']) {
        return None;
    }
    Some(format!("{scheme}://{}", authority.to_ascii_lowercase()))
}

/// Checks a room's checkout URL (where the page sends an admitted shopper): a path on
/// this server (one leading `/`, not `//` or `/\`) or a URL that starts with one of
/// `allowed_origins` (`--cors-origins`, the storefronts, spelled as configured) followed by
/// nothing, `/`, `?` or `#`; at most [`CHECKOUT_URL_MAX_CHARS`], no whitespace or control
/// characters (browsers drop some of them, which could turn `/\t/evil` into `//evil`). The same
/// rule as a regular expression: [`checkout_url_pattern`].
///
/// # Errors
/// [`SettingOutOfRange::CheckoutUrl`].
pub fn check_checkout_url(url: &str, allowed_origins: &[String]) -> Result<(), SettingOutOfRange> {
    let clean = !url.is_empty()
        && url.chars().count() <= CHECKOUT_URL_MAX_CHARS
        && !url.chars().any(|c| c.is_control() || c.is_whitespace());
    let path = url.starts_with('/') && !url[1..].starts_with(['/', '\\']);
    let on_storefront = || {
        allowed_origins.iter().any(|origin| {
            url.strip_prefix(origin.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['/', '?', '#']))
        })
    };
    if clean && (path || on_storefront()) {
        Ok(())
    } else {
        Err(SettingOutOfRange::CheckoutUrl)
    }
}

/// [`check_checkout_url`]'s rule (without the length, which is `maxLength`) as an ECMA-262
/// regular expression: the OpenAPI `pattern` of `checkoutUrl`, written with this server's
/// `--cors-origins`.
pub fn checkout_url_pattern(allowed_origins: &[String]) -> String {
    const CHAR: &str = r"[^\s\x00-\x1f\x7f-\x9f]";
    let mut pattern = format!(r"^(/([^/\\\s\x00-\x1f\x7f-\x9f]{CHAR}*)?");
    let origins: Vec<String> = allowed_origins
        .iter()
        .map(|origin| {
            origin
                .chars()
                .flat_map(|c| {
                    let special = "\\^$.|?*+()[]{}".contains(c);
                    special.then_some('\\').into_iter().chain([c])
                })
                .collect()
        })
        .collect();
    if !origins.is_empty() {
        pattern.push_str(&format!("|({})([/?#]{CHAR}*)?", origins.join("|")));
    }
    pattern.push_str(")$");
    pattern
}

/// Checks an abandon time in seconds (docs/DESIGN.md "Presence").
///
/// # Errors
/// [`SettingOutOfRange::AbandonAfter`].
pub fn check_abandon_after_secs(secs: u64) -> Result<(), SettingOutOfRange> {
    if (ABANDON_AFTER_SECS_MIN..=ABANDON_AFTER_SECS_MAX).contains(&secs) {
        Ok(())
    } else {
        Err(SettingOutOfRange::AbandonAfter)
    }
}

/// Checks a place-holding time in seconds.
///
/// # Errors
/// [`SettingOutOfRange::HoldPlace`].
pub fn check_hold_place_secs(secs: u64) -> Result<(), SettingOutOfRange> {
    if (HOLD_PLACE_SECS_MIN..=HOLD_PLACE_SECS_MAX).contains(&secs) {
        Ok(())
    } else {
        Err(SettingOutOfRange::HoldPlace)
    }
}

/// Checks a room's expected checkout time (seconds; `None` = a third of the token TTL, always
/// valid).
///
/// # Errors
/// [`SettingOutOfRange::ExpectedCheckout`].
pub fn check_expected_checkout_secs(secs: Option<u64>) -> Result<(), SettingOutOfRange> {
    match secs {
        Some(secs)
            if !(EXPECTED_CHECKOUT_SECS_MIN..=EXPECTED_CHECKOUT_SECS_MAX).contains(&secs) =>
        {
            Err(SettingOutOfRange::ExpectedCheckout)
        }
        _ => Ok(()),
    }
}

/// Checks a room's stock (units left; `None` = unlimited, always valid).
///
/// # Errors
/// [`SettingOutOfRange::Stock`].
pub fn check_stock(stock: Option<u64>) -> Result<(), SettingOutOfRange> {
    match stock {
        Some(units) if units > STOCK_MAX => Err(SettingOutOfRange::Stock),
        _ => Ok(()),
    }
}

/// [`is_valid_sold_out_message`]'s rule as an ECMA-262 regular expression (the OpenAPI `pattern`
/// of `soldOutMessageEn`/`Ko`; the length is `maxLength`): no control character, at least one
/// that is not white space.
pub const SOLD_OUT_MESSAGE_PATTERN: &str =
    r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$";

/// White space as a regular expression's `\s` knows it, so the server and
/// [`SOLD_OUT_MESSAGE_PATTERN`] agree (ECMA-262 also counts U+FEFF, Python's `re` does not: the
/// server accepts it, the stricter reading).
fn is_pattern_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// Whether a sold-out message is 1–[`SOLD_OUT_MESSAGE_MAX_CHARS`] characters with no control
/// characters (line breaks included: the page shows one paragraph) and not only white space.
pub fn is_valid_sold_out_message(text: &str) -> bool {
    is_valid_text(text, SOLD_OUT_MESSAGE_MAX_CHARS)
}

/// Whether `text` is 1–`max_chars` characters with no control characters and not only white
/// space ([`SOLD_OUT_MESSAGE_PATTERN`]'s rule): sold-out messages, display names, messages to
/// waiters.
pub fn is_valid_text(text: &str, max_chars: usize) -> bool {
    text.chars().any(|c| !is_pattern_space(c))
        && text.chars().count() <= max_chars
        && !text.chars().any(char::is_control)
}

impl RoomSettingsPatch {
    /// Checks every field present against the bounds of this module (absent fields pass).
    ///
    /// # Errors
    /// The first field out of its bounds, in the order rate, TTL, cap.
    pub fn validate(&self) -> Result<(), SettingOutOfRange> {
        if let Some(rate) = self.admission_rate_per_sec {
            check_admission_rate(rate)?;
        }
        if let Some(ttl) = self.token_ttl_secs {
            check_token_ttl_secs(ttl)?;
        }
        if let Some(cap) = self.max_active_users {
            check_max_active_users(cap)?;
        }
        if let Some(secs) = self.abandon_after_secs {
            check_abandon_after_secs(secs)?;
        }
        if let Some(secs) = self.hold_place_secs {
            check_hold_place_secs(secs)?;
        }
        if let Some(stock) = self.stock {
            check_stock(stock)?;
        }
        if let Some(secs) = self.expected_checkout_secs {
            check_expected_checkout_secs(secs)?;
        }
        let message_ok = |text: &Option<Option<String>>| {
            text.as_ref()
                .and_then(Option::as_deref)
                .is_none_or(is_valid_sold_out_message)
        };
        if !message_ok(&self.sold_out_message_en) {
            return Err(SettingOutOfRange::SoldOutMessageEn);
        }
        if !message_ok(&self.sold_out_message_ko) {
            return Err(SettingOutOfRange::SoldOutMessageKo);
        }
        let text_ok = |text: &Option<Option<String>>, max: usize| {
            text.as_ref()
                .and_then(Option::as_deref)
                .is_none_or(|text| is_valid_text(text, max))
        };
        for (text, max, error) in [
            (
                &self.display_name_en,
                DISPLAY_NAME_MAX_CHARS,
                SettingOutOfRange::DisplayNameEn,
            ),
            (
                &self.display_name_ko,
                DISPLAY_NAME_MAX_CHARS,
                SettingOutOfRange::DisplayNameKo,
            ),
            (
                &self.message_en,
                WAITER_MESSAGE_MAX_CHARS,
                SettingOutOfRange::MessageEn,
            ),
            (
                &self.message_ko,
                WAITER_MESSAGE_MAX_CHARS,
                SettingOutOfRange::MessageKo,
            ),
        ] {
            if !text_ok(text, max) {
                return Err(error);
            }
        }
        if let Some(bits) = self.proof_of_work_difficulty {
            check_proof_of_work_difficulty(bits)?;
        }
        if let Some(Some(auto_rate)) = &self.auto_rate {
            auto_rate.validate()?;
        }
        if let Some(Some(per_sec)) = self.proof_of_work_auto_joins_per_sec {
            if !PROOF_OF_WORK_AUTO_JOINS_PER_SEC.contains(&per_sec) {
                return Err(SettingOutOfRange::ProofOfWorkAuto);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
