//! The optional per-client-IP join limit (abuse protection, off by default).
//!
//! A keyed token bucket (the `governor` crate): `--joins-per-ip-per-minute` joins as a burst,
//! refilled evenly over the minute. Over it, a join answers 429 with `Retry-After`. The client
//! IP is the TCP peer, or the last address of `--client-ip-header` behind a trusted proxy.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::ConnectInfo;
use axum::http::{Extensions, HeaderMap};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// Checks between sweeps of idle buckets (keeps memory bounded under many IPs).
const SWEEP_EVERY: u64 = 10_000;

/// Per-IP join buckets.
pub struct JoinLimiter {
    limiter: DefaultKeyedRateLimiter<IpAddr>,
    checks: AtomicU64,
}

impl JoinLimiter {
    /// `per_minute` joins per IP per minute.
    pub fn new(per_minute: NonZeroU32) -> Self {
        Self {
            limiter: RateLimiter::keyed(Quota::per_minute(per_minute)),
            checks: AtomicU64::new(0),
        }
    }

    /// `Ok` when `ip` may join now, else the whole seconds to wait (at least 1).
    pub fn check(&self, ip: IpAddr) -> Result<(), u64> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.limiter.retain_recent();
        }
        self.limiter.check_key(&ip).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
        })
    }
}

/// The client's IP: the last address in the trusted proxy header when one is configured and
/// present and parses, else the TCP peer.
pub fn client_ip(
    headers: &HeaderMap,
    extensions: &Extensions,
    trusted_header: Option<&str>,
) -> Option<IpAddr> {
    let from_header = trusted_header
        .and_then(|name| headers.get(name))
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.rsplit(',').next())
        .and_then(|last| last.trim().parse::<IpAddr>().ok());
    from_header.or_else(|| {
        extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(peer)| peer.ip())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ip_gets_its_own_burst() {
        let limiter = JoinLimiter::new(NonZeroU32::new(3).unwrap());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..3 {
            assert!(limiter.check(a).is_ok());
        }
        let wait = limiter.check(a).unwrap_err();
        assert!((1..=20).contains(&wait), "{wait}");
        assert!(limiter.check(b).is_ok());
    }

    #[test]
    fn the_trusted_header_wins_only_when_configured() {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", "1.2.3.4, 5.6.7.8".parse().unwrap());
        let mut extensions = Extensions::new();
        extensions.insert(ConnectInfo::<SocketAddr>("127.0.0.1:9".parse().unwrap()));
        assert_eq!(
            client_ip(&headers, &extensions, Some("x-forwarded-for")),
            Some("5.6.7.8".parse().unwrap())
        );
        assert_eq!(
            client_ip(&headers, &extensions, None),
            Some("127.0.0.1".parse().unwrap())
        );
    }
}
