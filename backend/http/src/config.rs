//! What the HTTP layer takes from the configuration: [`HttpConfig`], made once by the server
//! from its flags (the binary's `Config::http_config`).

use std::num::NonZeroU32;
use std::path::PathBuf;

use secrecy::SecretString;

use crate::client_ip::ClientIpSource;
use vestibule_room::outage::OutagePolicies;
use vestibule_store::Settings;

/// The configuration the routes, the edge layers and the token layer read.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// The seeded rooms (`--rooms`); the first is the room of a protected prefix naming none.
    pub rooms: Vec<String>,
    /// A room's settings before any operator change (its checkout: `RoomOptions`).
    pub default_settings: Settings,
    /// Storefront origins that may call the API and frame the page (`--cors-origins`).
    pub cors_origins: Vec<String>,
    /// The secret of signed user assertions (`--user-assertion-secret`).
    pub user_assertion_secret: Option<SecretString>,
    /// The storefront's key for the entry endpoints (`--origin-api-key`).
    pub origin_api_key: Option<String>,
    /// Paths that need an entry token, `{room}` marking the room's segment
    /// (`--protected-prefix`).
    pub protected_prefixes: Vec<String>,
    /// What protected paths do while the store is down (`--outage-policy`).
    pub outage_policy: OutagePolicies,
    /// Joins per client IP per minute (`--joins-per-ip-per-minute`; none = no limit).
    pub joins_per_ip_per_minute: Option<NonZeroU32>,
    /// How long a proof-of-work challenge is good for, seconds (`--challenge-ttl-secs`).
    pub challenge_ttl_secs: u64,
    /// The header naming the client behind trusted proxies (`--client-ip-header`).
    pub client_ip_header: Option<String>,
    /// Proxies in front of Vestibule whose entries of that header are trusted
    /// (`--trusted-proxy-hops`).
    pub trusted_proxy_hops: usize,
    /// `Retry-After` of a 503, seconds (`--retry-after-secs`).
    pub retry_after_secs: u64,
    /// The largest request body, bytes (`--max-body-bytes`).
    pub max_body_bytes: usize,
    /// A request's bound from its arrival, seconds (`--request-timeout-secs`).
    pub request_timeout_secs: u64,
    /// The built page (`--static-dir`).
    pub static_dir: PathBuf,
    /// Where the API is served when not at `/` (gate mode's mount prefix), for the OpenAPI
    /// document's server; `None` = at `/`.
    pub api_prefix: Option<String>,
}

impl HttpConfig {
    /// Where a request's client address comes from.
    pub fn client_ip_source(&self) -> ClientIpSource<'_> {
        ClientIpSource {
            header: self.client_ip_header.as_deref(),
            trusted_hops: self.trusted_proxy_hops,
        }
    }
}
