//! Typed configuration from CLI flags and `VESTIBULE_*` environment variables.
//!
//! Every flag has an environment twin; every default works with no setup (docs/DESIGN.md
//! "Configuration"). [`Config::validate`] rejects an invalid configuration with a one-line reason.

pub use crate::store::redis::RedisTarget;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use secrecy::SecretString;

pub use crate::room::eta::{PollTier, PollTiers};
pub use crate::room::outage::{OutagePolicies, OutagePolicy};
pub use embed::EmbedArgs;
use vestibule_shared::settings;

/// Default protected prefix: the demo checkout's order endpoint.
pub const DEFAULT_PROTECTED_PREFIX: &str = "/api/v1/rooms/{room}/orders";

pub mod heading;

/// The server's configuration: every flag of `vestibule [serve]` and `vestibule demo`.
///
/// The binary parses it through [`crate::cli::Cli`]; `Config::try_parse_from` reads the flags
/// alone (tests). It says no `about`: flattened into a command, it leaves that to the command.
#[derive(Debug, Clone, Parser)]
#[command(name = "vestibule", about = None, long_about = None)]
pub struct Config {
    // Serving.
    /// Address to listen on (port 0 = any free port).
    ///
    /// With port 0 the bound address is printed.
    #[arg(
        long,
        env = "VESTIBULE_BIND",
        default_value = "127.0.0.1:8080",
        value_name = "ADDR",
        help_heading = heading::SERVING
    )]
    pub bind: SocketAddr,

    /// Folder with the built page, served at `/`.
    ///
    /// Trunk's `dist/`, relative to the working folder; served at `/` when present (a warning at
    /// start names the folder when it has no `index.html`).
    #[arg(
        long,
        env = "VESTIBULE_STATIC_DIR",
        default_value = "dist",
        value_name = "DIR",
        help_heading = heading::SERVING
    )]
    pub static_dir: PathBuf,

    /// Storefront origins allowed by CORS and to frame the page.
    ///
    /// Comma-separated, each spelled as browsers send `Origin` (`https://shop.example`); none by
    /// default.
    #[arg(
        long,
        env = "VESTIBULE_CORS_ORIGINS",
        value_delimiter = ',',
        value_name = "ORIGINS",
        help_heading = heading::SERVING
    )]
    pub cors_origins: Vec<String>,

    /// Path prefixes that need an entry token (`X-Entry-Token`).
    ///
    /// Comma-separated; `{room}` matches a room slug.
    #[arg(
        long,
        env = "VESTIBULE_PROTECTED_PREFIXES",
        default_value = DEFAULT_PROTECTED_PREFIX,
        value_delimiter = ',',
        value_name = "PREFIXES",
        help_heading = heading::SERVING
    )]
    pub protected_prefixes: Vec<String>,

    /// Header with the client's IP, set by trusted proxies.
    ///
    /// `X-Forwarded-For`, or `Forwarded` per RFC 7239. All its lines are read as one list and
    /// the address `--trusted-proxy-hops` from the end is used; anything malformed falls back to
    /// the TCP peer. Unset = the TCP peer address.
    #[arg(
        long,
        env = "VESTIBULE_CLIENT_IP_HEADER",
        value_name = "HEADER",
        help_heading = heading::SERVING
    )]
    pub client_ip_header: Option<String>,

    /// Trusted proxies that append to `--client-ip-header`, 1–16.
    ///
    /// The client's address is that many entries from the end of the header's list.
    #[arg(
        long,
        env = "VESTIBULE_TRUSTED_PROXY_HOPS",
        default_value_t = 1,
        value_name = "N",
        help_heading = heading::SERVING
    )]
    pub trusted_proxy_hops: usize,

    // Store.
    /// Redis URL; unset = the embedded store.
    ///
    /// `redis://host:port/db` or `redis+unix:///path.sock`. May hold a password, so it is a
    /// secret: `Debug` prints `[REDACTED]`.
    #[arg(
        long,
        env = "VESTIBULE_REDIS_URL",
        hide_env_values = true,
        value_name = "URL",
        help_heading = heading::STORE
    )]
    pub redis_url: Option<SecretString>,

    /// Redis Cluster seed node URLs, comma-separated.
    ///
    /// `redis://host:port,redis://host2:port`: one reachable node is enough, the rest of the
    /// cluster is discovered (docs/operating.md "Redis Cluster"); unset = no cluster. Excludes
    /// `--redis-url`. May hold passwords, so it is a secret like the URL.
    #[arg(
        long,
        env = "VESTIBULE_REDIS_CLUSTER",
        hide_env_values = true,
        value_name = "URLS",
        help_heading = heading::STORE
    )]
    pub redis_cluster: Option<SecretString>,

    /// The embedded store's folder; `none` = memory only.
    ///
    /// Where the embedded store keeps its snapshot and journal, so a restart keeps every ticket
    /// (a folder, created if missing; relative to the working folder); `none` keeps nothing
    /// (pure memory, for tests). Ignored with `--redis-url` or `--redis-cluster`.
    #[arg(
        long,
        env = "VESTIBULE_DATA_DIR",
        default_value = "vestibule-data",
        value_name = "DIR",
        help_heading = heading::STORE
    )]
    pub data_dir: DataDir,

    /// When the journal reaches the disk: always, everysec, never.
    ///
    /// `always` (fsync before each answer: a power loss loses nothing answered), `everysec` (at
    /// most about 1 s lost on power loss) or `never` (left to the kernel). A killed process
    /// loses nothing answered in every mode (docs/operating.md "Restarts").
    #[arg(
        long,
        env = "VESTIBULE_DATA_FSYNC",
        default_value = "everysec",
        value_name = "MODE",
        help_heading = heading::STORE
    )]
    pub data_fsync: crate::store::durable::FsyncPolicy,

    /// Refuse to start on a Redis that may evict keys.
    ///
    /// A `maxmemory-policy` other than `noeviction` would silently lose tickets and tokens.
    #[arg(
        long,
        env = "VESTIBULE_REQUIRE_SAFE_REDIS",
        default_value_t = false,
        help_heading = heading::STORE
    )]
    pub require_safe_redis: bool,

    /// Protected paths while the store is down: reject or pass.
    ///
    /// `reject` (503) or `pass` for every room, optionally followed by per-room exceptions,
    /// e.g. `reject,flash=pass`.
    #[arg(
        long,
        env = "VESTIBULE_OUTAGE_POLICY",
        default_value = "reject",
        value_name = "POLICY",
        help_heading = heading::STORE
    )]
    pub outage_policy: OutagePolicies,

    // Rooms.
    /// Rooms created at start if missing, comma-separated.
    ///
    /// Room slugs, each `[a-z0-9-]{1,64}`; more are created at run time through the admin API.
    #[arg(
        long,
        env = "VESTIBULE_ROOMS",
        default_value = "main",
        value_delimiter = ',',
        value_name = "SLUGS",
        help_heading = heading::ROOMS
    )]
    pub rooms: Vec<String>,

    /// Shoppers admitted per second per room, 0–100000.
    ///
    /// A room setting (`admissionRatePerSec`): on Redis, only a room's first start writes it
    /// (later starts keep the live value); change it with the admin API.
    #[arg(
        long,
        env = "VESTIBULE_ADMISSION_RATE",
        default_value_t = 175.0,
        allow_negative_numbers = true,
        value_parser = admission_rate,
        value_name = "PER_SEC",
        help_heading = heading::ROOMS
    )]
    pub admission_rate: f64,

    /// Entry token lifetime in seconds, 1–86400.
    ///
    /// A room setting (`tokenTtlSecs`) like `--admission-rate`.
    #[arg(
        long,
        env = "VESTIBULE_TOKEN_TTL_SECS",
        default_value_t = 300,
        value_parser = clap::value_parser!(u64).range(settings::TOKEN_TTL_SECS),
        value_name = "SECS",
        help_heading = heading::ROOMS
    )]
    pub token_ttl_secs: u64,

    /// Cap on entry tokens outstanding per room; unset = no cap.
    ///
    /// Active users, 1–10000000. A room setting (`maxActiveUsers`) like `--admission-rate`.
    #[arg(
        long,
        env = "VESTIBULE_MAX_ACTIVE_USERS",
        value_parser = clap::value_parser!(u64).range(settings::MAX_ACTIVE_USERS),
        value_name = "N",
        help_heading = heading::ROOMS
    )]
    pub max_active_users: Option<u64>,

    /// Seconds a shopper is expected to hold a token; unset = TTL ÷ 3.
    ///
    /// 1–86400. Under a cap on active users, the ETA's pace until checkouts are measured. A
    /// room setting (`expectedCheckoutSecs`) like `--admission-rate`.
    #[arg(
        long,
        env = "VESTIBULE_EXPECTED_CHECKOUT_SECS",
        value_parser = clap::value_parser!(u64).range(settings::EXPECTED_CHECKOUT_SECS),
        value_name = "SECS",
        hide_short_help = true,
        help_heading = heading::ROOMS
    )]
    pub expected_checkout_secs: Option<u64>,

    // Tokens and admin.
    /// Admin API bearer token; unset = generated, printed once.
    ///
    /// At least 16 printable ASCII characters. A secret: `Debug` prints `[REDACTED]`.
    #[arg(
        long,
        env = "VESTIBULE_ADMIN_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        help_heading = heading::TOKENS
    )]
    pub admin_token: Option<SecretString>,

    /// Turn the admin API off (every admin request gets 403).
    #[arg(
        long,
        env = "VESTIBULE_DISABLE_ADMIN",
        default_value_t = false,
        help_heading = heading::TOKENS
    )]
    pub disable_admin: bool,

    /// Signed entry tokens: keys, issuer, audience, origin API key (`tokens::TokenArgs`).
    #[command(flatten, next_help_heading = heading::TOKENS)]
    pub tokens: crate::tokens::TokenArgs,

    // Bots and abuse.
    /// HMAC secret for storefront-signed user ids; unset = off.
    ///
    /// At least 16 bytes; storefront-signed user assertions (HMAC-SHA256, docs/bots.md).
    /// `Debug` prints `[REDACTED]`.
    #[arg(
        long,
        env = "VESTIBULE_USER_ASSERTION_SECRET",
        hide_env_values = true,
        value_name = "SECRET",
        help_heading = heading::BOTS
    )]
    pub user_assertion_secret: Option<SecretString>,

    /// New tickets per client IP per room per minute; unset = any.
    ///
    /// Joins that create a ticket, as a burst of that size refilled evenly, counted in the store
    /// so every replica shares it. Over it a join gets 429 + `Retry-After`; a retried join that
    /// finds its ticket (same `Idempotency-Key`) is never counted nor refused.
    #[arg(
        long,
        env = "VESTIBULE_JOINS_PER_IP_PER_MINUTE",
        value_name = "N",
        help_heading = heading::BOTS
    )]
    pub joins_per_ip_per_minute: Option<std::num::NonZeroU32>,

    /// Seconds a proof-of-work challenge is accepted, 1–3600.
    ///
    /// Long enough for the highest difficulty on a slow phone (docs/bots.md).
    #[arg(
        long,
        env = "VESTIBULE_CHALLENGE_TTL_SECS",
        default_value_t = 120,
        value_parser = clap::value_parser!(u64).range(1..=3600),
        value_name = "SECS",
        help_heading = heading::BOTS
    )]
    pub challenge_ttl_secs: u64,

    /// Gate mode: the storefront behind Vestibule, its gated paths, the metrics address.
    #[command(flatten, next_help_heading = heading::GATE)]
    pub gate: crate::gate::GateConfig,

    /// The checkout and token sharing a new room starts with.
    #[command(flatten, next_help_heading = heading::ROOMS)]
    pub embed: EmbedArgs,

    // Limits and timeouts.
    #[command(flatten)]
    pub limits: Limits,

    // Tuning.
    /// Scheduler tick in milliseconds, 10–10000.
    ///
    /// Ticks run on a fixed grid of this period (a tick that overruns skips the grid points it
    /// missed).
    #[arg(
        long,
        env = "VESTIBULE_TICK_MS",
        default_value_t = 100,
        value_name = "MS",
        help_heading = heading::TUNING
    )]
    pub tick_ms: u64,

    /// Nice value of the scheduler thread on Linux, −20–19.
    ///
    /// Lower is more CPU priority. The default, −10, keeps ticks on time while request handling,
    /// Redis and whatever else share the cores: a tick that wakes late is owed more than one
    /// tick's quota, which the cap of ⌈rate × tick⌉ cannot pay at once, so its 1-s window falls
    /// short (BENCHMARKS.md "Admission windows"). Below 0 needs `CAP_SYS_NICE` (root, or a
    /// container's `--cap-add SYS_NICE`); without it the thread keeps the process's priority and
    /// the log says so once. 0 leaves the thread as it is. The gauge `vestibule_scheduler_nice`
    /// shows what it got.
    #[arg(
        long,
        env = "VESTIBULE_SCHEDULER_NICE",
        default_value_t = -10,
        allow_negative_numbers = true,
        value_name = "NICE",
        help_heading = heading::TUNING
    )]
    pub scheduler_nice: i32,

    /// ETA safety margin as a fraction, 0–10.
    ///
    /// ETA = position ÷ rate × (1 + margin).
    #[arg(
        long,
        env = "VESTIBULE_ETA_MARGIN",
        default_value_t = 0.2,
        allow_negative_numbers = true,
        value_name = "FRACTION",
        help_heading = heading::TUNING
    )]
    pub eta_margin: f64,

    /// Poll hint per position tier, `maxPosition:ms,…,*:ms`.
    ///
    /// Ascending: the first tier whose position is ≥ the shopper's gives the hint (never above
    /// half the ETA, never under 1000 ms).
    #[arg(
        long,
        env = "VESTIBULE_POLL_TIERS",
        default_value = "10:3000,100:10000,*:30000",
        value_name = "TIERS",
        help_heading = heading::TUNING
    )]
    pub poll_tiers: PollTiers,

    /// Scheduler leader lease in milliseconds (≥ 2 ticks).
    ///
    /// A new leader may take over this long after the old one stops renewing.
    #[arg(
        long,
        env = "VESTIBULE_LEASE_MS",
        default_value_t = 1000,
        value_name = "MS",
        help_heading = heading::TUNING
    )]
    pub lease_ms: u64,

    /// How often SSE streams re-read their tickets, ms (50–60000).
    ///
    /// One batched store call per room per process, however many streams are open.
    #[arg(
        long,
        env = "VESTIBULE_SSE_REFRESH_MS",
        default_value_t = 500,
        value_name = "MS",
        help_heading = heading::TUNING
    )]
    pub sse_refresh_ms: u64,

    /// Threads that serve connections, 0–256; 0 = one per core.
    ///
    /// Each has a single-threaded runtime of its own, and on Redis its own store connection (in
    /// gate mode its own origin connections): a connection is handed to the thread serving the
    /// fewest when it is accepted, and every request on it, with its store and origin round
    /// trips, stays on that thread (BENCHMARKS.md "Thread per core"). Background work (SSE
    /// hubs, room upkeep) runs beside them and the schedulers on a thread of their own.
    #[arg(
        long,
        env = "VESTIBULE_SERVING_THREADS",
        default_value_t = 0,
        value_name = "N",
        help_heading = heading::TUNING
    )]
    pub serving_threads: usize,

    /// Seconds between checks of Redis's safety settings, 1–86400.
    ///
    /// Its eviction and persistence settings, warned in the log, shown in `/readyz` and as
    /// metrics.
    #[arg(
        long,
        env = "VESTIBULE_REDIS_SAFETY_CHECK_SECS",
        default_value_t = 60,
        value_name = "SECS",
        help_heading = heading::TUNING
    )]
    pub redis_safety_check_secs: u64,
}

mod embed;
mod layers;
mod limits;
mod validate;
mod values;

pub use limits::Limits;
use values::admission_rate;
pub use values::{redact_url_password, DataDir};

pub use validate::InvalidConfig;

#[cfg(test)]
mod tests;
