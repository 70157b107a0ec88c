//! The bounds on every client connection, and the protocol settings built from them.

use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto::Builder;

/// How often, at least, an HTTP/2 connection is pinged to find a peer that vanished without
/// closing it ([`ConnectionLimits::http2_ping_interval`]).
const HTTP2_PING_INTERVAL: Duration = Duration::from_secs(30);
/// How long a ping may go unanswered before the HTTP/2 connection is closed.
const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(20);
/// Header bytes the protocol layers accept (HTTP/1.1: the read buffer, hyper's default ~400 KB;
/// HTTP/2: the header list, hyper's default 16 KiB), twice the application's limit
/// ([`crate::http::error::MAX_HEADER_BYTES`]): a request between the two gets the same JSON 431
/// over either protocol; past this one the protocol layer answers 431 itself, without a body.
const PROTOCOL_MAX_HEADER_BYTES: usize = 2 * crate::http::error::MAX_HEADER_BYTES;

/// The bounds on every client connection.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// How long a client may take to send a request's headers, and how long a connection may sit
    /// with no request in flight (HTTP/1.1: until the next request's headers; HTTP/2: no stream
    /// open).
    pub header_read_timeout: Duration,
    /// How long a write to a client may stay blocked before the connection is closed.
    pub write_timeout: Duration,
    /// How long shutdown waits for open connections before closing them.
    pub shutdown_grace: Duration,
    /// Most concurrent streams on one HTTP/2 connection.
    pub http2_max_streams: u32,
    /// How long an HTTP/2 connection with a request in flight (or closing) may write nothing
    /// before it is dropped: its peer takes no data. Above the write timeout, the request and
    /// upstream timeouts and two SSE keep-alives, so that a handler at work, an origin thinking
    /// or a quiet stream is never cut ([`ConnectionLimits::http2_stall_for`]).
    pub http2_stall: Duration,
}

impl ConnectionLimits {
    /// 30 s, or longer than the idle and stall limits: a ping is a write, and the idle and stall
    /// watches read writes as progress, so no ping may come before either could act.
    fn http2_ping_interval(&self) -> Duration {
        let after = Duration::from_secs(1);
        HTTP2_PING_INTERVAL
            .max(self.header_read_timeout + after)
            .max(self.http2_stall + after)
    }

    /// The stall limit for these bounds: the longest of the write timeout, the request and
    /// upstream timeouts plus 5 s (their own answers are writes), and twice the SSE keep-alive.
    pub fn http2_stall_for(
        write_timeout: Duration,
        request_timeout: Duration,
        upstream_timeout: Duration,
        sse_keep_alive: Duration,
    ) -> Duration {
        let margin = Duration::from_secs(5);
        write_timeout
            .max(request_timeout + margin)
            .max(upstream_timeout + margin)
            .max(sse_keep_alive * 2)
    }
}
/// The protocol settings every connection is served with.
pub(super) fn protocols(limits: ConnectionLimits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(PROTOCOL_MAX_HEADER_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.http2_max_streams)
        .max_header_list_size(PROTOCOL_MAX_HEADER_BYTES as u32)
        .keep_alive_interval(Some(limits.http2_ping_interval()))
        .keep_alive_timeout(HTTP2_PING_TIMEOUT);
    builder
}
