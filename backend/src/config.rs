//! Typed configuration from CLI flags and `VESTIBULE_*` environment variables.
//!
//! Every flag has an environment twin; every default works with no setup (docs/DESIGN.md
//! "Configuration"). [`Config::validate`] rejects an invalid configuration with a one-line reason.

pub use crate::store::redis::RedisTarget;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::Parser;
use secrecy::{ExposeSecret, SecretString};

pub use crate::room::eta::{PollTier, PollTiers};
pub use crate::room::outage::{OutagePolicies, OutagePolicy};
pub use embed::EmbedArgs;
use vestibule_shared::settings;

/// Default protected prefix: the demo checkout's order endpoint.
pub const DEFAULT_PROTECTED_PREFIX: &str = "/api/v1/rooms/{room}/orders";

/// Vestibule: a virtual waiting room for flash sales.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "vestibule",
    version,
    about,
    long_about = None,
    after_help = "Also: vestibule verify-draw URL|FILE [--tag TAG] recomputes a room's published \
                  draw (see vestibule verify-draw --help)."
)]
pub struct Config {
    /// Address to listen on (use port 0 for any free port; the bound address is printed).
    #[arg(long, env = "VESTIBULE_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,

    /// Redis URL (`redis://host:port/db` or `redis+unix:///path.sock`); unset = embedded store.
    /// May hold a password, so it is a secret: `Debug` prints `[REDACTED]`.
    #[arg(long, env = "VESTIBULE_REDIS_URL", hide_env_values = true)]
    pub redis_url: Option<SecretString>,

    /// Redis Cluster seed nodes, comma-separated (`redis://host:port,redis://host2:port`; one
    /// reachable node is enough, the rest of the cluster is discovered); unset = no cluster.
    /// Excludes `--redis-url`. May hold passwords, so it is a secret like the URL.
    #[arg(long, env = "VESTIBULE_REDIS_CLUSTER", hide_env_values = true)]
    pub redis_cluster: Option<SecretString>,

    /// Where the embedded store keeps its snapshot and journal, so a restart keeps every
    /// ticket (a folder, created if missing; relative to the working folder); `none` keeps
    /// nothing (pure memory, for tests). Ignored with `--redis-url` or `--redis-cluster`.
    #[arg(long, env = "VESTIBULE_DATA_DIR", default_value = "vestibule-data")]
    pub data_dir: DataDir,

    /// When the embedded store's journal reaches the disk: `always` (fsync before each answer:
    /// a power loss loses nothing answered), `everysec` (at most about 1 s lost on power loss)
    /// or `never` (left to the kernel). A killed process loses nothing answered in every mode.
    #[arg(long, env = "VESTIBULE_DATA_FSYNC", default_value = "everysec")]
    pub data_fsync: crate::store::durable::FsyncPolicy,

    /// Comma-separated room slugs, each `[a-z0-9-]{1,64}`.
    #[arg(
        long,
        env = "VESTIBULE_ROOMS",
        default_value = "main",
        value_delimiter = ','
    )]
    pub rooms: Vec<String>,

    /// Shoppers admitted per second per room (0–100000; bounds in `vestibule_shared::settings`).
    /// On Redis, only a room's first start writes it (later starts keep the live value); change
    /// it with the admin API.
    #[arg(
        long,
        env = "VESTIBULE_ADMISSION_RATE",
        default_value_t = 175.0,
        allow_negative_numbers = true,
        value_parser = admission_rate
    )]
    pub admission_rate: f64,

    /// Scheduler tick in milliseconds (10–10000): ticks run on a fixed grid of this period (a
    /// tick that overruns skips the grid points it missed).
    #[arg(long, env = "VESTIBULE_TICK_MS", default_value_t = 100)]
    pub tick_ms: u64,

    /// Nice value (−20–19, lower is more CPU priority) the scheduler thread asks for on Linux.
    /// The default, −10, keeps ticks on time while request handling, Redis and whatever else
    /// share the cores: a tick that wakes late is owed more than one tick's quota, which the cap
    /// of ⌈rate × tick⌉ cannot pay at once, so its 1-s window falls short (BENCHMARKS.md
    /// "Admission windows"). Below 0 needs `CAP_SYS_NICE` (root, or a container's
    /// `--cap-add SYS_NICE`); without it the thread keeps the process's priority and the log
    /// says so once. 0 leaves the thread as it is. The gauge `vestibule_scheduler_nice` shows
    /// what it got.
    #[arg(
        long,
        env = "VESTIBULE_SCHEDULER_NICE",
        default_value_t = -10,
        allow_negative_numbers = true
    )]
    pub scheduler_nice: i32,

    /// Entry token TTL in seconds (1–86400). A room setting like `--admission-rate`.
    #[arg(
        long,
        env = "VESTIBULE_TOKEN_TTL_SECS",
        default_value_t = 300,
        value_parser = clap::value_parser!(u64).range(settings::TOKEN_TTL_SECS)
    )]
    pub token_ttl_secs: u64,

    /// ETA safety margin as a fraction (0–10): ETA = position ÷ rate × (1 + margin).
    #[arg(
        long,
        env = "VESTIBULE_ETA_MARGIN",
        default_value_t = 0.2,
        allow_negative_numbers = true
    )]
    pub eta_margin: f64,

    /// Poll-hint tiers `maxPosition:ms,…,*:ms`, ascending: the first tier whose position is ≥ the
    /// shopper's gives the hint (never above half the ETA, never under 1000 ms).
    #[arg(
        long,
        env = "VESTIBULE_POLL_TIERS",
        default_value = "10:3000,100:10000,*:30000"
    )]
    pub poll_tiers: PollTiers,

    /// Cap on active users (entry tokens outstanding) per room, 1–10000000; unset = no cap. A
    /// room setting like `--admission-rate`.
    #[arg(
        long,
        env = "VESTIBULE_MAX_ACTIVE_USERS",
        value_parser = clap::value_parser!(u64).range(settings::MAX_ACTIVE_USERS)
    )]
    pub max_active_users: Option<u64>,

    /// Bearer token for the admin API (≥ 16 chars); unset = one is generated and printed once.
    /// A secret: `Debug` prints `[REDACTED]`.
    #[arg(long, env = "VESTIBULE_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<SecretString>,

    /// Turn the admin API off entirely (every admin request answers 403).
    #[arg(long, env = "VESTIBULE_DISABLE_ADMIN", default_value_t = false)]
    pub disable_admin: bool,

    /// Signed entry tokens: keys, issuer, audience, origin API key (`tokens::TokenArgs`).
    #[command(flatten)]
    pub tokens: crate::tokens::TokenArgs,

    /// Comma-separated path prefixes that need an entry token; `{room}` matches a room slug.
    #[arg(
        long,
        env = "VESTIBULE_PROTECTED_PREFIXES",
        default_value = DEFAULT_PROTECTED_PREFIX,
        value_delimiter = ','
    )]
    pub protected_prefixes: Vec<String>,

    /// Comma-separated origins allowed by CORS and allowed to frame the page; none by default.
    #[arg(long, env = "VESTIBULE_CORS_ORIGINS", value_delimiter = ',')]
    pub cors_origins: Vec<String>,

    /// Secret (≥ 16 chars) for storefront-signed user assertions (HMAC-SHA256); unset = off.
    /// `Debug` prints `[REDACTED]`.
    #[arg(long, env = "VESTIBULE_USER_ASSERTION_SECRET", hide_env_values = true)]
    pub user_assertion_secret: Option<SecretString>,

    /// Scheduler leader lease in milliseconds (≥ 2 ticks); a new leader may take over this long
    /// after the old one stops renewing.
    #[arg(long, env = "VESTIBULE_LEASE_MS", default_value_t = 1000)]
    pub lease_ms: u64,

    /// Bound on every store call in milliseconds; past it the call fails as an outage.
    #[arg(long, env = "VESTIBULE_STORE_TIMEOUT_MS", default_value_t = 1000)]
    pub store_timeout_ms: u64,

    /// `Retry-After` seconds sent with 503 when the store is unreachable.
    #[arg(long, env = "VESTIBULE_RETRY_AFTER_SECS", default_value_t = 2)]
    pub retry_after_secs: u64,

    /// What protected paths do while the store is unreachable: `reject` or `pass` for every
    /// room, optionally followed by per-room exceptions, e.g. `reject,flash=pass`.
    #[arg(long, env = "VESTIBULE_OUTAGE_POLICY", default_value = "reject")]
    pub outage_policy: OutagePolicies,

    /// Joins that create a ticket allowed per client IP per room per minute (a burst of that
    /// size, refilled evenly), counted in the store so every replica shares it; unset = no
    /// limit. Over it a join gets 429 + `Retry-After`; a retried join that finds its ticket
    /// (same `Idempotency-Key`) is never counted nor refused.
    #[arg(long, env = "VESTIBULE_JOINS_PER_IP_PER_MINUTE")]
    pub joins_per_ip_per_minute: Option<std::num::NonZeroU32>,

    /// How long a proof-of-work challenge is accepted after it is issued, seconds (1–3600): long
    /// enough for the highest difficulty on a slow phone (docs/bots.md).
    #[arg(long, env = "VESTIBULE_CHALLENGE_TTL_SECS", default_value_t = 120,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub challenge_ttl_secs: u64,

    /// Header set by trusted reverse proxies with the client's IP (`X-Forwarded-For`, or
    /// `Forwarded` per RFC 7239). All its lines are read as one list and the address
    /// `--trusted-proxy-hops` from the end is used; anything malformed falls back to the TCP peer.
    /// Unset = the TCP peer address.
    #[arg(long, env = "VESTIBULE_CLIENT_IP_HEADER")]
    pub client_ip_header: Option<String>,

    /// How many trusted proxies in front of Vestibule append to `--client-ip-header` (1–16):
    /// the client's address is that many entries from the end of the header's list.
    #[arg(long, env = "VESTIBULE_TRUSTED_PROXY_HOPS", default_value_t = 1)]
    pub trusted_proxy_hops: usize,

    /// Seconds a finished ticket (completed, expired, left) stays queryable.
    #[arg(
        long,
        env = "VESTIBULE_TERMINAL_TICKET_TTL_SECS",
        default_value_t = 3600
    )]
    pub terminal_ticket_ttl_secs: u64,

    /// How often SSE streams re-read their tickets, in milliseconds (one batched store call per
    /// room per process, however many streams are open).
    #[arg(long, env = "VESTIBULE_SSE_REFRESH_MS", default_value_t = 500)]
    pub sse_refresh_ms: u64,

    /// Largest request body in bytes.
    #[arg(long, env = "VESTIBULE_MAX_BODY_BYTES", default_value_t = 16 * 1024)]
    pub max_body_bytes: usize,

    /// Seconds a client may take to send a request's headers before the connection is closed
    /// (slowloris protection; also how long an idle keep-alive connection waits for its next
    /// request's headers, and an HTTP/2 connection with no request in flight for its next one).
    #[arg(long, env = "VESTIBULE_HEADER_READ_TIMEOUT_SECS", default_value_t = 10)]
    pub header_read_timeout_secs: u64,

    /// Seconds a request may take before it is answered 408 (SSE streams are exempt).
    #[arg(long, env = "VESTIBULE_REQUEST_TIMEOUT_SECS", default_value_t = 10)]
    pub request_timeout_secs: u64,

    /// Seconds shutdown waits for open connections to finish after SIGTERM/Ctrl-C (scheduler
    /// leases are released first); past it the remaining connections are closed.
    #[arg(long, env = "VESTIBULE_SHUTDOWN_GRACE_SECS", default_value_t = 10)]
    pub shutdown_grace_secs: u64,

    /// Seconds a write to a client may stay blocked (the client does not read) before its
    /// connection is closed; bounds what a stalled reader, e.g. an SSE stream, can hold.
    #[arg(long, env = "VESTIBULE_WRITE_TIMEOUT_SECS", default_value_t = 20)]
    pub write_timeout_secs: u64,

    /// Most concurrent streams (requests, SSE streams among them) one HTTP/2 connection may open.
    /// HTTP/2 comes as cleartext prior knowledge (h2c) on the same port as HTTP/1.1; a proxy or
    /// CDN in front multiplexes many shoppers' SSE streams over few connections, and each stream
    /// then costs no socket or connection buffers of its own. Past the limit the client waits
    /// (RFC 9113 §5.1.2) or opens another connection.
    #[arg(long, env = "VESTIBULE_HTTP2_MAX_STREAMS", default_value_t = 1000)]
    pub http2_max_streams: u32,

    /// Threads that serve client connections; 0 (the default) means one per CPU core. Each has a
    /// single-threaded runtime of its own, and on Redis its own store connection (in gate mode its
    /// own origin connections): a connection is handed to the thread serving the fewest when it
    /// is accepted, and every request on it, with its store and origin round trips, stays on that
    /// thread (BENCHMARKS.md "Thread per core"). Background work (SSE hubs, room upkeep) runs
    /// beside them and the schedulers on a thread of their own.
    #[arg(long, env = "VESTIBULE_SERVING_THREADS", default_value_t = 0)]
    pub serving_threads: usize,

    /// Refuse to start on a Redis that may evict keys (`maxmemory-policy` other than
    /// `noeviction`), which would silently lose tickets and tokens.
    #[arg(long, env = "VESTIBULE_REQUIRE_SAFE_REDIS", default_value_t = false)]
    pub require_safe_redis: bool,

    /// Seconds between checks of Redis's eviction and persistence settings (warned in the log,
    /// shown in `/readyz` and as metrics).
    #[arg(long, env = "VESTIBULE_REDIS_SAFETY_CHECK_SECS", default_value_t = 60)]
    pub redis_safety_check_secs: u64,

    /// Folder with the built page (trunk's `dist/`); served at `/` when present.
    #[arg(long, env = "VESTIBULE_STATIC_DIR", default_value = "dist")]
    pub static_dir: PathBuf,
    #[command(flatten)]
    pub gate: crate::gate::GateConfig,
    #[command(flatten)]
    pub embed: EmbedArgs,
}

/// Parses `--admission-rate` within the settings' bounds (clap has no ranged `f64` parser).
fn admission_rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text.trim().parse().map_err(|error| format!("{error}"))?;
    settings::check_admission_rate(rate).map_err(|bounds| format!("must be {bounds}"))?;
    Ok(rate)
}

/// The embedded store's data dir: a folder, or none (`none`: nothing survives a restart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDir(pub Option<PathBuf>);

impl FromStr for DataDir {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(match text {
            "none" => Self(None),
            path => Self(Some(PathBuf::from(path))),
        })
    }
}

impl Config {
    /// The scheduler tick.
    pub fn tick(&self) -> Duration {
        Duration::from_millis(self.tick_ms)
    }

    /// How long shutdown waits for open connections.
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.shutdown_grace_secs)
    }

    /// How long a write to a client may stay blocked.
    pub fn write_timeout(&self) -> Duration {
        Duration::from_secs(self.write_timeout_secs)
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
        Duration::from_millis(self.store_timeout_ms)
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

/// Replaces the password of `scheme://user:password@host` with `***`.
pub fn redact_url_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((credentials, host)) => {
            let user = credentials.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_owned(),
    }
}

mod embed;
mod layers;
mod validate;

pub use validate::InvalidConfig;

#[cfg(test)]
mod tests;
