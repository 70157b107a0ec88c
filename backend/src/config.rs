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

/// The `--help` headings of the server's flags, in the order `--help` shows them.
///
/// Every flag names one (a test checks); the flags of the flattened structs from other crates
/// get theirs where they are flattened, or spell one of these.
pub mod heading {
    /// Where and how Vestibule serves.
    pub const SERVING: &str = "Serving";
    /// Redis or the embedded store.
    pub const STORE: &str = "Store";
    /// The rooms at start and the settings a new room starts with.
    pub const ROOMS: &str = "Rooms";
    /// Entry tokens, their keys, and the admin API.
    pub const TOKENS: &str = "Tokens and admin";
    /// Bots at the door and abuse limits.
    pub const BOTS: &str = "Bots and abuse";
    /// Gate mode (Vestibule in front of a storefront).
    pub const GATE: &str = "Gate mode";
    /// Bounds on requests, connections and store calls.
    pub const LIMITS: &str = "Limits and timeouts";
    /// Knobs whose defaults suit almost every deployment.
    pub const TUNING: &str = "Tuning";
    /// Every heading, in order.
    pub const ALL: [&str; 8] = [SERVING, STORE, ROOMS, TOKENS, BOTS, GATE, LIMITS, TUNING];
    /// The headings `-h` leaves to `--help` (to fit one screen).
    pub const LONG_HELP_ONLY: [&str; 2] = [LIMITS, TUNING];
}

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
    /// Bound on every store call in milliseconds.
    ///
    /// Past it the call fails as an outage. 50–30000.
    #[arg(
        long,
        env = "VESTIBULE_STORE_TIMEOUT_MS",
        default_value_t = 1000,
        value_name = "MS",
        help_heading = heading::LIMITS
    )]
    pub store_timeout_ms: u64,

    /// `Retry-After` seconds sent with 503 and 504.
    ///
    /// When the store is unreachable (503) or did not confirm a change in time (504).
    #[arg(
        long,
        env = "VESTIBULE_RETRY_AFTER_SECS",
        default_value_t = 2,
        value_name = "SECS",
        help_heading = heading::LIMITS
    )]
    pub retry_after_secs: u64,

    /// Largest request body in bytes.
    ///
    /// At least 256.
    #[arg(
        long,
        env = "VESTIBULE_MAX_BODY_BYTES",
        default_value_t = 16 * 1024,
        value_name = "BYTES",
        help_heading = heading::LIMITS
    )]
    pub max_body_bytes: usize,

    /// Seconds a client may take to send a request's headers.
    ///
    /// Then the connection is closed (slowloris protection); also how long an idle keep-alive
    /// connection waits for its next request's headers, and an HTTP/2 connection with no
    /// request in flight for its next one.
    #[arg(
        long,
        env = "VESTIBULE_HEADER_READ_TIMEOUT_SECS",
        default_value_t = 10,
        value_name = "SECS",
        help_heading = heading::LIMITS
    )]
    pub header_read_timeout_secs: u64,

    /// Seconds a request may take before it gets 408.
    ///
    /// SSE streams are exempt.
    #[arg(
        long,
        env = "VESTIBULE_REQUEST_TIMEOUT_SECS",
        default_value_t = 10,
        value_name = "SECS",
        help_heading = heading::LIMITS
    )]
    pub request_timeout_secs: u64,

    /// Seconds a write to a client may stay blocked, 1–3600.
    ///
    /// Then the connection is closed (the client does not read); bounds what a stalled reader,
    /// e.g. an SSE stream or a pipelining client, can hold.
    #[arg(
        long,
        env = "VESTIBULE_WRITE_TIMEOUT_SECS",
        default_value_t = 20,
        value_name = "SECS",
        help_heading = heading::LIMITS
    )]
    pub write_timeout_secs: u64,

    /// Seconds connections may finish after SIGTERM, 0–3600.
    ///
    /// On SIGTERM or Ctrl-C, scheduler leases are released first; past this the remaining
    /// connections are closed.
    #[arg(
        long,
        env = "VESTIBULE_SHUTDOWN_GRACE_SECS",
        default_value_t = 10,
        value_name = "SECS",
        help_heading = heading::LIMITS
    )]
    pub shutdown_grace_secs: u64,

    /// Concurrent streams per HTTP/2 connection, 1–100000.
    ///
    /// Requests, SSE streams among them. HTTP/2 comes as cleartext prior knowledge (h2c) on the
    /// same port as HTTP/1.1; a proxy or CDN in front multiplexes many shoppers' SSE streams
    /// over few connections, and each stream then costs no socket or connection buffers of its
    /// own. Past the limit the client waits (RFC 9113 §5.1.2) or opens another connection.
    #[arg(
        long,
        env = "VESTIBULE_HTTP2_MAX_STREAMS",
        default_value_t = 1000,
        value_name = "N",
        help_heading = heading::LIMITS
    )]
    pub http2_max_streams: u32,

    /// Seconds a finished ticket stays queryable.
    ///
    /// Completed, expired or left.
    #[arg(
        long,
        env = "VESTIBULE_TERMINAL_TICKET_TTL_SECS",
        default_value_t = 3600,
        value_name = "SECS",
        help_heading = heading::LIMITS
    )]
    pub terminal_ticket_ttl_secs: u64,

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
