//! Admission that follows the origin's health (`autoRate`, docs/DESIGN.md "Closed-loop
//! admission"): the room setting that turns the loop on, the origin's signals it reads, and why
//! the loop last moved the rate. The controller itself is `vestibule_room::auto_rate`.

use serde::{Deserialize, Serialize};

use crate::settings::SettingOutOfRange;
#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// Lowest `targetP95Ms`, milliseconds.
pub const TARGET_P95_MS_MIN: u64 = 10;
/// Highest `targetP95Ms`, milliseconds (one minute).
pub const TARGET_P95_MS_MAX: u64 = 60_000;
/// Highest `maxErrorRate` (a fraction: 0.5 = half the requests fail).
pub const MAX_ERROR_RATE_MAX: f64 = 0.5;
/// Longest `healthUrl`, characters.
pub const HEALTH_URL_MAX_CHARS: usize = 2048;
/// [`check_health_url`]'s rule (without the length, which is `maxLength`) as an ECMA-262 regular
/// expression: the OpenAPI `pattern` of `healthUrl` (the server writes it into its document).
pub const HEALTH_URL_PATTERN: &str = concat!(
    r"^[hH][tT][tT][pP][sS]?://",
    r"(\[[0-9A-Fa-f:.]+\]",
    r"|[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?)",
    r"(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?",
    r"([/?#][^\s\x00-\x1f\x7f-\x9f]*)?$"
);
/// Most requests a signals report may count (a bound, not a limit on the origin's traffic).
pub const SIGNALS_REQUESTS_MAX: u64 = 1_000_000_000;
/// Longest latency a signals report may give, milliseconds (ten minutes).
pub const SIGNALS_LATENCY_MS_MAX: f64 = 600_000.0;
/// Longest window a signals report may span, seconds (one minute).
pub const SIGNALS_WINDOW_SECS_MAX: u64 = 60;

/// A room's closed loop: each second its scheduler leader moves the admission rate within
/// [`min`, `max`] toward the most the origin takes while its p95 latency stays under
/// `targetP95Ms` and its error rate under `maxErrorRate`, read from gate mode's measurements, a
/// storefront's reports or `healthUrl`. Absent (null) = the rate is the operator's alone (the
/// default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AutoRate {
    /// Lowest admission rate the loop sets, shoppers per second, 0–100000 (also where it falls
    /// when the origin's signals are lost). Example: `10`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 100000, example = 10)
    )]
    pub min: f64,
    /// Highest admission rate the loop sets, shoppers per second, `min`–100000 (below `min` is
    /// 409 `conflict`). Example: `400`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 100000, example = 400)
    )]
    pub max: f64,
    /// The origin's p95 latency to stay under, milliseconds, 10–60000. Example: `500`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 10, maximum = 60000, example = 500)
    )]
    #[serde(deserialize_with = "crate::numbers::required_whole_number")]
    pub target_p95_ms: u64,
    /// The share of the origin's answers that may be 5xx or time out, 0–0.5. Example: `0.01`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 0.5, example = 0.01)
    )]
    pub max_error_rate: f64,
    /// Where the room's scheduler leader reads the origin's health once a second (optional;
    /// absent or null = no polling, the default): an absolute `http://` or `https://` URL, at
    /// most 2048 characters, whose host is dot-separated labels of letters, digits and inner
    /// hyphens (punycode for an international name) or a bracketed IPv6 address, with an
    /// optional port 1–65535, and no user info or spaces ([`check_health_url`]; else 400
    /// `invalid_field`). Each `GET` has 800 ms to answer; a 2xx answer whose body is an
    /// [`OriginSignals`] (the `POST …/signals` body, the same bounds) counts as a report received
    /// then. Any other answer, a timeout or a refused connection counts as nothing, so the
    /// signals go stale (the rate holds, then falls to `min` after 10 s); redirects are not
    /// followed. Example: `"https://shop.example/vestibule-health"`.
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 2048, example = "https://shop.example/vestibule-health")
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_url: Option<String>,
}

impl AutoRate {
    /// Checks each field's bounds: `min` and `max` within the admission rate's, `targetP95Ms` in
    /// 10–60000, `maxErrorRate` in 0–0.5, `healthUrl` by [`check_health_url`]. (`min ≤ max`, a
    /// relation between two valid values, is the admin API's 409 `conflict`.)
    ///
    /// # Errors
    /// [`SettingOutOfRange::AutoRate`]; [`SettingOutOfRange::AutoRateHealthUrl`] for a bad
    /// `healthUrl`.
    pub fn validate(&self) -> Result<(), SettingOutOfRange> {
        if let Some(url) = &self.health_url {
            check_health_url(url)?;
        }
        let rate_max = crate::settings::ADMISSION_RATE_PER_SEC_MAX;
        let rate_ok = |v: f64| v.is_finite() && (0.0..=rate_max).contains(&v);
        let error_ok = self.max_error_rate.is_finite()
            && (0.0..=MAX_ERROR_RATE_MAX).contains(&self.max_error_rate);
        if rate_ok(self.min)
            && rate_ok(self.max)
            && (TARGET_P95_MS_MIN..=TARGET_P95_MS_MAX).contains(&self.target_p95_ms)
            && error_ok
        {
            Ok(())
        } else {
            Err(SettingOutOfRange::AutoRate)
        }
    }
}

/// Checks a health URL ([`AutoRate::health_url`]): at most [`HEALTH_URL_MAX_CHARS`]
/// characters, `http://` or `https://` (any case), a host name of dot-separated labels of ASCII
/// letters, digits and inner hyphens (RFC 1123; a trailing dot allowed) or a bracketed IPv6
/// address (`[` hex digits, `:` and `.` `]`), an optional port 1–65535 (no leading zero), then
/// nothing or `/`, `?` or `#` and anything without whitespace or control characters. The same
/// rule as a regular expression: [`HEALTH_URL_PATTERN`].
///
/// # Errors
/// [`SettingOutOfRange::AutoRateHealthUrl`].
pub fn check_health_url(url: &str) -> Result<(), SettingOutOfRange> {
    let bad = Err(SettingOutOfRange::AutoRateHealthUrl);
    if url.chars().count() > HEALTH_URL_MAX_CHARS {
        return bad;
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return bad;
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return bad;
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (host, port) = match authority.rsplit_once(':') {
        // A colon inside brackets is the IPv6 address's own.
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (authority, None),
    };
    let port_ok = port.is_none_or(|port| {
        port.bytes().all(|b| b.is_ascii_digit())
            && !port.starts_with('0')
            && port.parse::<u16>().is_ok_and(|port| port >= 1)
    });
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(ip) => {
            !ip.is_empty()
                && ip
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        }
        None => {
            let name = host.strip_suffix('.').unwrap_or(host);
            !name.is_empty() && name.split('.').all(host_label_ok)
        }
    };
    let tail_ok = !tail.chars().any(|c| c.is_control() || c.is_whitespace());
    if port_ok && host_ok && tail_ok {
        Ok(())
    } else {
        bad
    }
}

/// One label of a host name (RFC 1123): ASCII letters, digits and hyphens, neither first nor
/// last a hyphen.
fn host_label_ok(label: &str) -> bool {
    !label.is_empty()
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

/// The origin's health over the last few seconds, as the loop reads it (from gate mode's own
/// measurements, a storefront's `POST …/signals`, or a health URL).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct OriginSignals {
    /// Requests the origin answered (or that timed out) in the window, 0–1000000000. Example:
    /// `820`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 1000000000, example = 820)
    )]
    #[serde(deserialize_with = "crate::numbers::required_whole_number")]
    pub requests: u64,
    /// Median latency, milliseconds, 0–600000. Example: `120`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 600000, example = 120)
    )]
    pub p50_ms: f64,
    /// 95th-percentile latency, milliseconds, 0–600000. Example: `310`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 600000, example = 310)
    )]
    pub p95_ms: f64,
    /// Share of the window's requests answered 5xx or timed out, 0–1. Example: `0.002`.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1, example = 0.002))]
    pub error_rate: f64,
    /// Requests in flight to the origin now, 0–1000000000. Example: `35`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 1000000000, example = 35)
    )]
    #[serde(deserialize_with = "crate::numbers::required_whole_number")]
    pub in_flight: u64,
    /// Requests sent to the origin in the same window, 0–1000000000 (optional): with `requests`
    /// and `errorRate`, the share of the offered load the origin got through, from which the
    /// loop reads the origin's capacity when it is overloaded. Example: `900`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 1000000000, example = 900)
    )]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::numbers::whole_number"
    )]
    pub sent: Option<u64>,
    /// Seconds the window spans, 1–60 (optional): the counts are over that many seconds, so
    /// the loop reads them per second. Absent = one second. A window that takes seconds until
    /// it holds enough answers spans several at a trickle, and still holds the slow answers of
    /// a backlog that drained seconds ago; with its length the loop tells those from a wait now.
    /// Example: `1`.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 60, example = 1))]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::numbers::whole_number"
    )]
    pub window_secs: Option<u64>,
}

impl OriginSignals {
    /// Checks a report's numbers (a storefront's `POST …/signals` body or a health URL's
    /// answer): `requests`, `inFlight` and `sent` 0–1000000000, `p50Ms` and `p95Ms` 0–600000 ms,
    /// `errorRate` a fraction 0–1, `windowSecs` 1–60.
    ///
    /// # Errors
    /// What is wrong, in the API's words (e.g. `errorRate must be a fraction 0–1`).
    pub fn check(&self) -> Result<(), String> {
        let latency_ok = |ms: f64| ms.is_finite() && (0.0..=SIGNALS_LATENCY_MS_MAX).contains(&ms);
        let counts = [self.requests, self.in_flight, self.sent.unwrap_or(0)];
        if counts.iter().any(|count| *count > SIGNALS_REQUESTS_MAX) {
            return Err(format!(
                "requests, inFlight and sent must be 0–{SIGNALS_REQUESTS_MAX}"
            ));
        }
        if !latency_ok(self.p50_ms) || !latency_ok(self.p95_ms) {
            return Err(format!(
                "p50Ms and p95Ms must be 0–{SIGNALS_LATENCY_MS_MAX} ms"
            ));
        }
        if !(self.error_rate.is_finite() && (0.0..=1.0).contains(&self.error_rate)) {
            return Err("errorRate must be a fraction 0–1".into());
        }
        if self
            .window_secs
            .is_some_and(|secs| !(1..=SIGNALS_WINDOW_SECS_MAX).contains(&secs))
        {
            return Err(format!(
                "windowSecs must be 1–{SIGNALS_WINDOW_SECS_MAX} seconds"
            ));
        }
        Ok(())
    }
}

/// Why the loop left the admission rate where it is (the audit log's and the console's words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AutoRateReason {
    /// The origin is well under its targets: the rate rises quickly.
    Headroom,
    /// Under the targets near where the origin struggles (the rate near where it last did, or
    /// a p95 from 60% of the target and 1.5× its lowest of the last 10 s): the rate rises
    /// slowly.
    Probing,
    /// Close to the latency target: the rate holds.
    AtTarget,
    /// Under the targets, but the origin got under 90% of what it was sent through over the
    /// last few seconds (a backlog forming before its latency shows it): the rate holds.
    AtCapacity,
    /// p95 latency over the target: the rate falls in proportion.
    LatencyHigh,
    /// p95 latency under the target but rising (by 20% a second, or at all near the target): the
    /// rate is trimmed by 5%.
    LatencyRising,
    /// Errors over `maxErrorRate`: the rate falls by 30%.
    ErrorsHigh,
    /// Just lowered, and the origin's backlog is draining: the rate holds.
    Settling,
    /// Too few requests in the window to judge: the rate holds.
    LittleTraffic,
    /// No fresh signals (for under 10 s): the rate holds at its last safe value.
    SignalsStale,
    /// No fresh signals for 10 s or more: the rate falls to `min`.
    SignalsLost,
    /// At `max`.
    AtMax,
    /// The backlog a cut drained is gone (what is in flight waits under 80% of the target): the
    /// rate returns at once to 85% of what the origin answered a second while draining it (at
    /// most the capacity that cut measured).
    Drained,
}

impl AutoRateReason {
    /// The reason's JSON spelling, e.g. `LATENCY_HIGH`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Headroom => "HEADROOM",
            Self::Probing => "PROBING",
            Self::AtTarget => "AT_TARGET",
            Self::AtCapacity => "AT_CAPACITY",
            Self::LatencyHigh => "LATENCY_HIGH",
            Self::LatencyRising => "LATENCY_RISING",
            Self::ErrorsHigh => "ERRORS_HIGH",
            Self::Settling => "SETTLING",
            Self::LittleTraffic => "LITTLE_TRAFFIC",
            Self::SignalsStale => "SIGNALS_STALE",
            Self::SignalsLost => "SIGNALS_LOST",
            Self::AtMax => "AT_MAX",
            Self::Drained => "DRAINED",
        }
    }
}

/// The closed loop as the admin event stream shows it ([`crate::admin_events::RoomFigures`]):
/// the setting in force, why the loop's last step left the rate where it is, and its last move.
/// The step and the move are the room's scheduler leader's (shared through the store once a
/// second), so every replica shows the same; a new leader starts with no move until it makes
/// one (then it shows the latest `autoRate` entry of the audit log, when there is one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AutoRateFigures {
    /// The room's `autoRate` setting in force (the answering replica's copy, at most a tick old).
    pub setting: AutoRate,
    /// Why the loop's last step (once a second) left the rate where it is, whether or not it
    /// moved it; null until the leader stepped. Example: `"SETTLING"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<AutoRateReason>,
    /// The loop's last move of the admission rate; null until it made one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_change: Option<AutoRateChange>,
}

/// One move of the admission rate by the closed loop (also an audit entry,
/// `replica · autoRate REASON`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AutoRateChange {
    /// Why the loop moved the rate. Example: `"LATENCY_HIGH"`.
    pub reason: AutoRateReason,
    /// The rate before, shoppers per second, 0–100000. Example: `175`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 100000, example = 175)
    )]
    pub from: f64,
    /// The rate after, shoppers per second, 0–100000. Example: `148.8`.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 100000, example = 148.8)
    )]
    pub to: f64,
    /// When, Unix ms, 0–9007199254740991. Example: `1764530000000`.
    #[cfg_attr(
        feature = "openapi",
        schema(
            minimum = 0,
            maximum = 9007199254740991_u64,
            example = 1764530000000_u64
        )
    )]
    pub at_ms: u64,
    /// The origin's p95 latency the loop read for the move, milliseconds, 0–600000; null when
    /// it read none (`SIGNALS_LOST`) or the move came from the audit log. Example: `900`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 600000, example = 900)
    )]
    pub p95_ms: Option<f64>,
    /// The origin's error rate the loop read for the move, 0–1; null as `p95Ms`. Example:
    /// `0.002`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1, example = 0.002))]
    pub error_rate: Option<f64>,
}

#[cfg(test)]
mod tests;
