//! What each layer takes from the configuration: a new room's settings, the HTTP layer's
//! [`HttpConfig`](crate::http::config::HttpConfig), a room's [`RoomOptions`](crate::room::RoomOptions).

use std::time::Duration;

use secrecy::ExposeSecret;

use super::{redact_url_password, Config, RedisTarget};

impl Config {
    /// The settings a new room `room` starts with: [`Config::default_settings`], with the
    /// checkout in gate mode at the room's first gated path unless `--checkout-url` names one.
    pub fn default_settings_for(&self, room: &str) -> crate::store::Settings {
        let mut settings = self.default_settings();
        if settings.checkout_url.is_none() {
            settings.checkout_url = self.gate.default_checkout(room);
        }
        settings
    }

    /// A room's settings before any operator change.
    pub fn default_settings(&self) -> crate::store::Settings {
        crate::store::Settings {
            abandon_after_ms: crate::store::default_abandon_after_ms(),
            hold_place_ms: crate::store::default_hold_place_ms(),
            expected_checkout_ms: self.expected_checkout_secs.map(|secs| secs * 1000),
            sale: Default::default(),
            labels: Default::default(),
            queueing_method: Default::default(),
            auto_rate: None,
            pow_difficulty: 0,
            pow_auto_joins_per_sec: None,
            require_user_assertion: false,
            admission_rate_per_sec: self.admission_rate,
            paused: false,
            token_ttl_ms: self.token_ttl_secs * 1000,
            max_active_users: self.max_active_users,
            checkout_url: self.embed.checkout_url.clone(),
            share_token_with_embedder: self.embed.share_token_with_embedder,
            opens_at_ms: None,
            prequeue_opens_at_ms: None,
        }
    }

    /// What the HTTP layer takes from this configuration.
    pub fn http_config(&self) -> crate::http::config::HttpConfig {
        crate::http::config::HttpConfig {
            rooms: self.rooms.clone(),
            default_settings: self.default_settings(),
            cors_origins: self.cors_origins.clone(),
            user_assertion_secret: self.user_assertion_secret.clone(),
            origin_api_key: self.tokens.origin_api_key.clone(),
            protected_prefixes: self.protected_prefixes.clone(),
            outage_policy: self.outage_policy.clone(),
            joins_per_ip_per_minute: self.joins_per_ip_per_minute,
            challenge_ttl_secs: self.challenge_ttl_secs,
            client_ip_header: self.client_ip_header.clone(),
            trusted_proxy_hops: self.trusted_proxy_hops,
            retry_after_secs: self.limits.retry_after_secs,
            max_body_bytes: self.limits.max_body_bytes,
            request_timeout_secs: self.limits.request_timeout_secs,
            static_dir: self.static_dir.clone(),
            api_prefix: self.gate.enabled().then(|| self.gate.prefix()),
        }
    }

    /// What every store call takes from this configuration: the lease and how long ended
    /// tickets are kept.
    pub fn store_options(&self) -> crate::store::StoreOptions {
        crate::store::StoreOptions {
            lease_ms: self.lease_ms,
            keep_ms: self.limits.terminal_ticket_ttl_secs * 1000,
        }
    }

    /// What a room's tasks and a ticket's status take from this configuration.
    pub fn room_options(&self) -> crate::room::RoomOptions {
        let gate = self.gate.clone();
        crate::room::RoomOptions {
            tick: self.tick(),
            sse_refresh_ms: self.sse_refresh_ms,
            poll_tiers: self.poll_tiers.clone(),
            eta_margin: self.eta_margin,
            cors_origins: self.cors_origins.clone(),
            page_base: self.gate.page_base(),
            default_checkout: std::sync::Arc::new(move |room: &str| gate.default_checkout(room)),
        }
    }
}

impl Config {
    /// The scheduler tick.
    pub fn tick(&self) -> Duration {
        Duration::from_millis(self.tick_ms)
    }

    /// How long shutdown waits for open connections.
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.limits.shutdown_grace_secs)
    }

    /// How long a write to a client may stay blocked.
    pub fn write_timeout(&self) -> Duration {
        Duration::from_secs(self.limits.write_timeout_secs)
    }

    /// How many threads serve connections: `--serving-threads`, or one per CPU core for 0.
    pub fn serving_threads(&self) -> usize {
        match self.serving_threads {
            0 => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            threads => threads,
        }
    }

    /// The bound on each store call.
    pub fn store_timeout(&self) -> Duration {
        Duration::from_millis(self.limits.store_timeout_ms)
    }

    /// The Redis URL (or the cluster's seed URLs) with any password replaced by `***`, safe to
    /// log.
    pub fn redis_url_for_logs(&self) -> Option<String> {
        match self.redis_target()? {
            RedisTarget::Single(url) => Some(redact_url_password(url)),
            RedisTarget::Cluster(urls) => Some(
                urls.iter()
                    .map(|url| redact_url_password(url))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        }
    }

    /// Where the Redis store lives: `--redis-url`, `--redis-cluster`, or neither (embedded).
    /// [`Config::validate`] refuses both at once; here `--redis-url` would win.
    pub fn redis_target(&self) -> Option<RedisTarget<'_>> {
        if let Some(url) = &self.redis_url {
            return Some(RedisTarget::Single(url.expose_secret()));
        }
        let seeds = self.redis_cluster.as_ref()?.expose_secret();
        Some(RedisTarget::Cluster(
            seeds
                .split(',')
                .map(str::trim)
                .filter(|url| !url.is_empty())
                .collect(),
        ))
    }
}
