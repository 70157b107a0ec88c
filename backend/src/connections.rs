//! The accept loop: every client connection, HTTP/1.1 or HTTP/2 (h2c by prior knowledge), with a
//! bound on every wait on the client (docs/DESIGN.md "Every wait has a bound").
//!
//! - HTTP/1.1: hyper's header read timeout bounds a client that sends its headers slowly and a
//!   kept-alive connection that sends nothing (the timer runs while hyper waits for the next
//!   request).
//! - HTTP/2: no request in flight for the same time closes the connection with `GOAWAY`
//!   ([`IdleWatch`]): hyper has no idle timeout for HTTP/2, and a peer that answers pings would
//!   otherwise hold its socket for ever. Pings find a peer that vanished without a FIN.
//! - Both: a write blocked for `--write-timeout-secs` closes the connection (`tokio-io-timeout`:
//!   a client that stops reading holds no memory), and shutdown gives open connections
//!   `--shutdown-grace-secs` and then closes them.

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::FutureExt as _;
use tokio::time::Instant;

use axum::body::{Body, HttpBody};
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::ServiceExt as _;

/// How often an HTTP/2 connection is pinged to find a peer that vanished without closing it.
const HTTP2_PING_INTERVAL: Duration = Duration::from_secs(30);
/// How long a ping may go unanswered before the HTTP/2 connection is closed.
const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(20);
/// Header bytes the protocol layers accept (HTTP/1.1: the read buffer, hyper's default ~400 KB;
/// HTTP/2: the header list, hyper's default 16 KiB), twice the application's limit
/// ([`crate::http::error::MAX_HEADER_BYTES`]): a request between the two gets the same JSON 431
/// over either protocol; past this one the protocol layer answers 431 itself, without a body.
const PROTOCOL_MAX_HEADER_BYTES: usize = 2 * crate::http::error::MAX_HEADER_BYTES;
/// What an HTTP/2 connection opens with (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

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
}

/// Serves HTTP/1.1 and HTTP/2 (h2c, prior knowledge) on `listener` until `signal` resolves, then
/// lets open connections finish for up to the shutdown grace and closes the rest.
///
/// Like `axum::serve`, plus what it does not expose, so that every wait on a client has a bound
/// (see the module's documentation). Each request carries the peer address as
/// `ConnectInfo<SocketAddr>`.
///
/// # Errors
/// None today (accept errors are logged and retried); the `Result` is the server's seam.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    signal: impl std::future::Future<Output = ()> + Send + 'static,
    limits: ConnectionLimits,
) -> std::io::Result<()> {
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
        .keep_alive_interval(Some(HTTP2_PING_INTERVAL))
        .keep_alive_timeout(HTTP2_PING_TIMEOUT);
    let builder = Arc::new(builder);
    let (stop, stopping) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut signal = pin!(signal);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut signal => break,
        };
        while connections.try_join_next().is_some() {}
        connections.spawn(serve_connection(
            stream,
            peer,
            builder.clone(),
            app.clone(),
            stopping.clone(),
            limits,
        ));
    }
    drop(listener);
    let _ = stop.send(true);
    let drained = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(limits.shutdown_grace, drained)
        .await
        .is_err()
    {
        tracing::warn!(
            open = connections.len(),
            grace_secs = limits.shutdown_grace.as_secs(),
            "connections still open after the shutdown grace: closing them"
        );
    }
    connections.shutdown().await;
    Ok(())
}

/// One client connection, from its first byte to its close.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    builder: Arc<Builder<TokioExecutor>>,
    app: axum::Router,
    mut stopping: watch::Receiver<bool>,
    limits: ConnectionLimits,
) {
    let _ = stream.set_nodelay(true);
    // Which protocol, from the first bytes (hyper reads them again): HTTP/2 connections get the
    // idle watch. A client that sends nothing at all is closed after the header read timeout.
    let http2 = tokio::select! {
        opening = tokio::time::timeout(limits.header_read_timeout, opens_http2(&stream)) => {
            match opening {
                Ok(Ok(http2)) => http2,
                Ok(Err(_)) | Err(_) => return,
            }
        }
        _ = stopping.wait_for(|stopping| *stopping) => return,
    };
    let mut stream = tokio_io_timeout::TimeoutStream::new(stream);
    stream.set_write_timeout(Some(limits.write_timeout));
    let io = TokioIo::new(Box::pin(stream));
    let service = app.map_request(
        move |mut request: axum::extract::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            request.map(Body::new)
        },
    );
    let ended = if http2 {
        let watch = Arc::new(IdleWatch::new());
        let counting = watch.clone();
        // A request is in flight from its headers until its answer's body ends or is dropped (an
        // SSE stream is in flight while it streams; a stream the client resets is dropped).
        let service = tower::service_fn(move |request| {
            let guard = InFlight::new(&counting);
            service.clone().oneshot(request).map(move |answer| {
                answer.map(|response| {
                    response.map(|body| {
                        Body::new(Counted {
                            body,
                            _guard: guard,
                        })
                    })
                })
            })
        });
        let idle = async move {
            watch.idle_for(limits.header_read_timeout).await;
            tracing::debug!(%peer, "idle HTTP/2 connection closed");
        };
        run(
            &builder,
            io,
            service,
            &mut stopping,
            idle,
            limits.header_read_timeout,
        )
        .await
    } else {
        let idle = std::future::pending();
        run(
            &builder,
            io,
            service,
            &mut stopping,
            idle,
            limits.header_read_timeout,
        )
        .await
    };
    if let Err(error) = ended {
        tracing::debug!(%error, "connection ended with an error");
    }
}

/// Serves one connection until it ends, or until shutdown or `idle` resolves: then it is closed
/// gracefully (HTTP/2: `GOAWAY`, streams in flight finish; HTTP/1.1: closed once the answer in
/// flight is written; the shutdown grace bounds what remains). An idle connection gets `linger`
/// to finish closing (HTTP/2's two-step `GOAWAY` waits for the peer's ping answer), then it is
/// dropped.
async fn run<S>(
    builder: &Builder<TokioExecutor>,
    io: TokioIo<std::pin::Pin<Box<tokio_io_timeout::TimeoutStream<TcpStream>>>>,
    service: S,
    stopping: &mut watch::Receiver<bool>,
    idle: impl std::future::Future<Output = ()>,
    linger: Duration,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    S: tower::Service<
            axum::extract::Request<hyper::body::Incoming>,
            Response = axum::response::Response,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let connection = builder
        .serve_connection_with_upgrades(io, TowerToHyperService::new(service))
        .into_owned();
    let mut connection = pin!(connection);
    let idle = tokio::select! {
        ended = connection.as_mut() => return ended,
        _ = stopping.wait_for(|stopping| *stopping) => false,
        () = idle => true,
    };
    connection.as_mut().graceful_shutdown();
    if !idle {
        return connection.await;
    }
    tokio::time::timeout(linger, connection)
        .await
        .unwrap_or(Ok(()))
}

/// Whether the client opened with the HTTP/2 preface: peeks (reads nothing) until the bytes
/// received either differ from the preface or hold all of it.
///
/// # Errors
/// The socket's, or `UnexpectedEof` when the client closes before sending a byte.
async fn opens_http2(stream: &TcpStream) -> std::io::Result<bool> {
    let mut buffer = [0_u8; H2_PREFACE.len()];
    // A peek returns at once while any byte waits unread, so a client that dribbles the preface
    // is looked at again after a growing pause (1 ms up to 64 ms), never in a busy loop.
    let mut pause = Duration::from_millis(1);
    loop {
        let seen = stream.peek(&mut buffer).await?;
        if seen == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if buffer[..seen] != H2_PREFACE[..seen] {
            return Ok(false);
        }
        if seen == H2_PREFACE.len() {
            return Ok(true);
        }
        // A prefix of the preface: wait for more bytes than these.
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(64));
    }
}

/// Requests in flight on one HTTP/2 connection and since when there has been none.
#[derive(Debug)]
struct IdleWatch {
    /// Requests whose answer has not ended (headers read, handler running, or body streaming).
    in_flight: AtomicUsize,
    /// Milliseconds after `start` when `in_flight` last fell to zero.
    idle_since_ms: AtomicU64,
    start: Instant,
}

impl IdleWatch {
    fn new() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
            start: Instant::now(),
        }
    }

    fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
    }

    fn request_ended(&self) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle_since_ms
                .store(self.elapsed_ms(), Ordering::Release);
        }
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Resolves once nothing has been in flight for `limit`.
    async fn idle_for(&self, limit: Duration) {
        let limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        loop {
            let wait_ms = if self.in_flight.load(Ordering::Acquire) > 0 {
                limit_ms
            } else {
                let idle_ms = self
                    .elapsed_ms()
                    .saturating_sub(self.idle_since_ms.load(Ordering::Acquire));
                if idle_ms >= limit_ms {
                    // Checked again: a request may have started since the read above.
                    if self.in_flight.load(Ordering::Acquire) == 0 {
                        return;
                    }
                    limit_ms
                } else {
                    limit_ms - idle_ms
                }
            };
            tokio::time::sleep(Duration::from_millis(wait_ms.max(1))).await;
        }
    }
}

/// One request in flight on a watched connection, for as long as it lives.
struct InFlight(Arc<IdleWatch>);

impl InFlight {
    fn new(watch: &Arc<IdleWatch>) -> Self {
        watch.request_started();
        Self(watch.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

/// An answer's body that keeps its request in flight until it ends or is dropped.
struct Counted {
    body: Body,
    _guard: InFlight,
}

impl HttpBody for Counted {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(context)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_with_nothing_in_flight_for_the_whole_limit() {
        let watch = IdleWatch::new();
        watch.request_started();
        let limit = Duration::from_secs(10);
        // A stream open for longer than the limit keeps the connection.
        assert!(
            tokio::time::timeout(Duration::from_secs(25), watch.idle_for(limit))
                .await
                .is_err()
        );
        watch.request_ended();
        let ended_at = tokio::time::Instant::now();
        watch.idle_for(limit).await;
        assert!(ended_at.elapsed() >= limit, "{:?}", ended_at.elapsed());
        assert!(ended_at.elapsed() < limit + Duration::from_secs(1));
    }
}
