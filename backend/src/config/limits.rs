//! The flags that bound requests, connections and store calls (`--help`'s "Limits and
//! timeouts"), flattened into [`super::Config`] as `limits`.

use super::heading;

/// Bounds on requests, connections and store calls.
#[derive(Debug, Clone, clap::Args)]
pub struct Limits {
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
}
