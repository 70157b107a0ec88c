//! [`Config::validate`]: every check of the flags, in one place, as named steps. It is called
//! once, by `Application::build`, which fails with [`InvalidConfig`] (the binary exits with
//! code 2 on it).

use secrecy::ExposeSecret;
use vestibule_shared::{is_valid_room_slug, settings};

use super::{embed, redact_url_password, Config, RedisTarget};

/// A configuration [`Config::validate`] refused, with its one-line reason naming the flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidConfig(pub String);

impl std::fmt::Display for InvalidConfig {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for InvalidConfig {}

impl Config {
    /// Checks every field's range and form.
    ///
    /// # Errors
    /// A one-line reason naming the flag, e.g. `--tick-ms must be 10–10000, got 0`.
    pub fn validate(&self) -> Result<(), String> {
        self.tokens.validate()?;
        self.embed.validate(&self.cors_origins)?;
        self.check_redis_target()?;
        self.check_rooms()?;
        self.check_room_defaults()?;
        self.check_secrets()?;
        self.check_outage_policy()?;
        self.check_request_sources()?;
        self.check_room_timings()?;
        self.check_serving()?;
        self.gate.validate(&self.rooms)?;
        self.check_data_dir()
    }

    /// `--redis-url` or `--redis-cluster`, not both; a cluster's seeds are `redis://` URLs.
    fn check_redis_target(&self) -> Result<(), String> {
        if self.redis_url.is_some() && self.redis_cluster.is_some() {
            return Err(
                "--redis-url and --redis-cluster (VESTIBULE_REDIS_URL, VESTIBULE_REDIS_CLUSTER) \
                 exclude each other: give one Redis, or the seed nodes of one cluster"
                    .into(),
            );
        }
        if let Some(RedisTarget::Cluster(urls)) = self.redis_target() {
            if urls.is_empty() {
                return Err("--redis-cluster needs at least one redis:// URL".into());
            }
            for url in urls {
                if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                    return Err(format!(
                        "--redis-cluster: {:?} is not a redis:// or rediss:// URL (a cluster is \
                         reached over TCP)",
                        redact_url_password(url)
                    ));
                }
            }
        }
        Ok(())
    }

    /// `--rooms`: at least one, each a room slug, none twice.
    fn check_rooms(&self) -> Result<(), String> {
        if self.rooms.is_empty() {
            return Err("--rooms needs at least one room".into());
        }
        for (i, room) in self.rooms.iter().enumerate() {
            if !is_valid_room_slug(room) {
                return Err(format!(
                    "--rooms: {room:?} is not a room slug [a-z0-9-]{{1,64}}"
                ));
            }
            if self.rooms[..i].contains(room) {
                return Err(format!("--rooms names {room:?} twice"));
            }
        }
        Ok(())
    }

    /// What a new room starts with (`--admission-rate`, `--token-ttl-secs`,
    /// `--max-active-users`), the scheduler tick and the ETA margin.
    fn check_room_defaults(&self) -> Result<(), String> {
        // The room settings' bounds live with their type (`vestibule_shared::settings`).
        settings::check_admission_rate(self.admission_rate).map_err(|bounds| {
            format!(
                "--admission-rate must be {bounds}, got {}",
                self.admission_rate
            )
        })?;
        settings::check_token_ttl_secs(self.token_ttl_secs).map_err(|bounds| {
            format!(
                "--token-ttl-secs must be {bounds}, got {}",
                self.token_ttl_secs
            )
        })?;
        settings::check_max_active_users(self.max_active_users).map_err(|bounds| {
            format!(
                "--max-active-users must be {bounds}, got {:?}",
                self.max_active_users
            )
        })?;
        if !(10..=10_000).contains(&self.tick_ms) {
            return Err(format!("--tick-ms must be 10–10000, got {}", self.tick_ms));
        }
        if !(self.eta_margin.is_finite() && (0.0..=10.0).contains(&self.eta_margin)) {
            return Err(format!(
                "--eta-margin must be 0–10, got {}",
                self.eta_margin
            ));
        }
        Ok(())
    }

    /// The admin token and the user-assertion secret are long enough.
    fn check_secrets(&self) -> Result<(), String> {
        if let Some(token) = &self.admin_token {
            let token = token.expose_secret();
            if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err("--admin-token must be at least 16 printable ASCII characters".into());
            }
        }
        if let Some(secret) = &self.user_assertion_secret {
            if secret.expose_secret().len() < 16 {
                return Err("--user-assertion-secret must be at least 16 bytes".into());
            }
        }
        Ok(())
    }

    /// `--outage-policy` names only rooms of `--rooms`.
    fn check_outage_policy(&self) -> Result<(), String> {
        for (room, _) in &self.outage_policy.rooms {
            if !self.rooms.contains(room) {
                return Err(format!(
                    "--outage-policy names {room:?}, which is not in --rooms"
                ));
            }
        }
        Ok(())
    }

    /// Where requests come from and what they reach: the client-IP header, the protected
    /// prefixes, the storefront origins.
    fn check_request_sources(&self) -> Result<(), String> {
        if let Some(header) = &self.client_ip_header {
            if axum::http::HeaderName::from_bytes(header.as_bytes()).is_err() {
                return Err(format!(
                    "--client-ip-header {header:?} is not a header name"
                ));
            }
        }
        for prefix in &self.protected_prefixes {
            if !prefix.starts_with('/') {
                return Err(format!(
                    "--protected-prefixes: {prefix:?} must start with /"
                ));
            }
        }
        for origin in &self.cors_origins {
            embed::check_origin(origin)?;
        }
        Ok(())
    }

    /// The lease, the store timeout and the SSE refresh period, against the tick and each other.
    fn check_room_timings(&self) -> Result<(), String> {
        if self.lease_ms < 2 * self.tick_ms {
            return Err(format!(
                "--lease-ms must be at least two ticks ({} ms), got {}",
                2 * self.tick_ms,
                self.lease_ms
            ));
        }
        if !(50..=30_000).contains(&self.limits.store_timeout_ms) {
            return Err(format!(
                "--store-timeout-ms must be 50–30000, got {}",
                self.limits.store_timeout_ms
            ));
        }
        if !(50..=60_000).contains(&self.sse_refresh_ms) {
            return Err(format!(
                "--sse-refresh-ms must be 50–60000, got {}",
                self.sse_refresh_ms
            ));
        }
        Ok(())
    }

    /// The bounds of serving: body size, timeouts, proxy hops, shutdown grace, threads and their
    /// priority, HTTP/2 streams, the Redis safety check's period.
    fn check_serving(&self) -> Result<(), String> {
        if self.limits.max_body_bytes < 256 {
            return Err("--max-body-bytes must be at least 256".into());
        }
        if self.limits.header_read_timeout_secs == 0 {
            return Err("--header-read-timeout-secs must be at least 1".into());
        }
        if !(1..=16).contains(&self.trusted_proxy_hops) {
            return Err(format!(
                "--trusted-proxy-hops must be 1–16, got {}",
                self.trusted_proxy_hops
            ));
        }
        if self.limits.shutdown_grace_secs > 3600 {
            return Err(format!(
                "--shutdown-grace-secs must be 0–3600, got {}",
                self.limits.shutdown_grace_secs
            ));
        }
        if !(-20..=19).contains(&self.scheduler_nice) {
            return Err(format!(
                "--scheduler-nice must be -20–19, got {}",
                self.scheduler_nice
            ));
        }
        if self.serving_threads > 256 {
            return Err(format!(
                "--serving-threads must be 0–256 (0: one per CPU core), got {}",
                self.serving_threads
            ));
        }
        if !(1..=100_000).contains(&self.limits.http2_max_streams) {
            return Err(format!(
                "--http2-max-streams must be 1–100000, got {}",
                self.limits.http2_max_streams
            ));
        }
        if !(1..=3600).contains(&self.limits.write_timeout_secs) {
            return Err(format!(
                "--write-timeout-secs must be 1–3600, got {}",
                self.limits.write_timeout_secs
            ));
        }
        if !(1..=86_400).contains(&self.redis_safety_check_secs) {
            return Err(format!(
                "--redis-safety-check-secs must be 1–86400, got {}",
                self.redis_safety_check_secs
            ));
        }
        if self.limits.request_timeout_secs == 0 {
            return Err("--request-timeout-secs must be at least 1".into());
        }
        Ok(())
    }

    /// `--data-dir` is a folder (or `none`).
    fn check_data_dir(&self) -> Result<(), String> {
        if let Some(dir) = &self.data_dir.0 {
            if dir.as_os_str().is_empty() {
                return Err("--data-dir must be a folder or none".into());
            }
            if dir.exists() && !dir.is_dir() {
                return Err(format!(
                    "--data-dir {} exists and is not a folder",
                    dir.display()
                ));
            }
        }
        Ok(())
    }
}
