//! The serving threads and the accept loop: one single-threaded runtime per core serves the
//! connections handed to it ([`serve`]); every client connection, HTTP/1.1 or HTTP/2 (h2c by prior
//! knowledge), has a bound on every wait on the client (docs/DESIGN.md "Every wait has a bound").
//!
//! - HTTP/1.1: hyper's header read timeout bounds a client that sends its headers slowly and a
//!   kept-alive connection that sends nothing (the timer runs while hyper waits for the next
//!   request).
//! - HTTP/2 ([`ConnectionWatch`]): no request in flight and no byte written for the same time
//!   closes the connection with `GOAWAY` (hyper has no idle timeout for HTTP/2, and a peer that answers pings would
//!   otherwise hold its socket for ever); a request in flight while the connection writes nothing
//!   for the stall limit (a peer that never opens its flow-control window, which no socket write
//!   timeout sees) drops it. Pings find a peer that vanished without a FIN.
//! - Both: a write blocked for `--write-timeout-secs` closes the connection (`tokio-io-timeout`:
//!   a client that stops reading holds no memory), and shutdown gives open connections
//!   `--shutdown-grace-secs` and then closes them.

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use futures_util::FutureExt as _;
use tokio::time::Instant;

use axum::body::{Body, HttpBody};
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tower::ServiceExt as _;

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

/// How a serving thread builds the application it serves, on its own runtime (so that the store
/// connection and the origin client it makes live there). Called once per serving thread.
pub type MakeApp = Arc<
    dyn Fn() -> futures_util::future::BoxFuture<'static, anyhow::Result<crate::http::App>>
        + Send
        + Sync,
>;

/// A connection accepted and on its way to a serving thread.
type Handed = (std::net::TcpStream, SocketAddr);

/// One serving thread as the accept loop sees it.
struct ServingThread {
    arrivals: mpsc::UnboundedSender<Handed>,
    /// Connections it serves now (the accept loop hands each new one to the least busy).
    open: Arc<OpenCount>,
    /// Ends once the thread's connections are all done (after its channel closes).
    thread: std::thread::JoinHandle<()>,
}

/// Serves HTTP/1.1 and HTTP/2 (h2c, prior knowledge) on `listener` until `signal` resolves, then
/// lets open connections finish for up to the shutdown grace and closes the rest.
///
/// Like `axum::serve`, plus what it does not expose, so that every wait on a client has a bound
/// (see the module's documentation). Each request carries the peer address as
/// `ConnectInfo<SocketAddr>`.
///
/// Thread per core: `threads` threads each run a single-threaded runtime with the application
/// `make_app` builds there. This task accepts, and hands each connection to the thread serving
/// the fewest; the connection's requests, their tasks and their store and origin round trips then
/// never wake another thread (with one multi-threaded runtime, a proxied request crossed threads
/// at each of its three tasks: BENCHMARKS.md "Thread per core").
///
/// # Errors
/// A serving thread could not start, or `make_app` failed on it. Accept errors are logged and
/// retried.
pub async fn serve(
    listener: TcpListener,
    make_app: MakeApp,
    threads: usize,
    signal: impl std::future::Future<Output = ()> + Send + 'static,
    limits: ConnectionLimits,
) -> anyhow::Result<()> {
    let builder = Arc::new(protocols(limits));
    let mut serving = Vec::with_capacity(threads);
    let mut readiness = Vec::with_capacity(threads);
    for index in 0..threads.max(1) {
        let (thread, ready) =
            start_serving_thread(index, make_app.clone(), builder.clone(), limits)?;
        serving.push(thread);
        readiness.push(ready);
    }
    // All threads build their application at once; a failure stops the start (the threads
    // started end when their channels close).
    for (index, ready) in readiness.into_iter().enumerate() {
        match ready.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(error),
            Err(_) => anyhow::bail!("serving thread {index} ended while starting"),
        }
    }
    let mut signal = pin!(signal);
    let mut next = 0_usize;
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
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(error) => {
                tracing::debug!(%peer, %error, "accepted connection lost before its hand-off");
                continue;
            }
        };
        // The least busy thread; ties go round the threads.
        next = next.wrapping_add(1);
        let count = serving.len();
        let chosen = (0..count)
            .map(|offset| (next + offset) % count)
            .min_by_key(|&index| serving[index].open.now())
            .unwrap_or(0);
        serving[chosen].open.opened();
        if serving[chosen].arrivals.send((stream, peer)).is_err() {
            serving[chosen].open.closed();
            tracing::error!(
                thread = chosen,
                "a serving thread has stopped; connection dropped"
            );
        }
    }
    drop(listener);
    // Each thread sees its channel close, tells its connections to finish and waits for them
    // for up to the shutdown grace; all of them at once.
    let ended: Vec<_> = serving
        .into_iter()
        .map(|serving| {
            drop(serving.arrivals);
            serving.thread
        })
        .collect();
    tokio::task::spawn_blocking(move || {
        for thread in ended {
            let _ = thread.join();
        }
    })
    .await
    .map_err(|error| anyhow::anyhow!("joining the serving threads: {error}"))?;
    Ok(())
}

/// The protocol settings every connection is served with.
fn protocols(limits: ConnectionLimits) -> Builder<TokioExecutor> {
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

/// Starts serving thread `index`; the receiver says once its application is built (or why not).
fn start_serving_thread(
    index: usize,
    make_app: MakeApp,
    builder: Arc<Builder<TokioExecutor>>,
    limits: ConnectionLimits,
) -> anyhow::Result<(ServingThread, oneshot::Receiver<anyhow::Result<()>>)> {
    let (arrivals, arriving) = mpsc::unbounded_channel();
    let (ready, readiness) = oneshot::channel();
    let open = Arc::new(OpenCount::new(index));
    let counted = open.clone();
    let thread = std::thread::Builder::new()
        .name(format!("vestibule-serve-{index}"))
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    let _ = ready.send(Err(anyhow::Error::new(error)
                        .context(format!("starting the runtime of serving thread {index}"))));
                    return;
                }
            };
            runtime.block_on(async move {
                let app = match make_app().await {
                    Ok(app) => app,
                    Err(error) => {
                        let _ = ready.send(Err(error));
                        return;
                    }
                };
                let _ = ready.send(Ok(()));
                serve_handed(arriving, app, builder, counted, limits).await;
            });
        })
        .with_context(|| format!("starting serving thread {index}"))?;
    Ok((
        ServingThread {
            arrivals,
            open,
            thread,
        },
        readiness,
    ))
}

/// A serving thread's loop: serves each connection handed to it until the accept loop closes the
/// channel, then lets them finish for up to the shutdown grace and closes the rest.
async fn serve_handed(
    mut arrivals: mpsc::UnboundedReceiver<Handed>,
    app: crate::http::App,
    builder: Arc<Builder<TokioExecutor>>,
    open: Arc<OpenCount>,
    limits: ConnectionLimits,
) {
    let (stop, stopping) = watch::channel(false);
    let mut connections = JoinSet::new();
    while let Some((stream, peer)) = arrivals.recv().await {
        while connections.try_join_next().is_some() {}
        let counted = OpenConnection(open.clone());
        let stream = match TcpStream::from_std(stream) {
            Ok(stream) => stream,
            Err(error) => {
                tracing::warn!(%peer, %error, "cannot serve a handed connection");
                continue;
            }
        };
        let serving = serve_connection(
            stream,
            peer,
            builder.clone(),
            app.clone(),
            stopping.clone(),
            limits,
        );
        connections.spawn(async move {
            serving.await;
            drop(counted);
        });
    }
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
}

/// The connections one serving thread serves now, also shown as the gauge
/// `vestibule_connections_open{thread}`.
struct OpenCount {
    count: AtomicUsize,
    gauge: metrics::Gauge,
}

impl OpenCount {
    fn new(thread: usize) -> Self {
        let gauge = metrics::gauge!("vestibule_connections_open", "thread" => thread.to_string());
        gauge.set(0.0);
        Self {
            count: AtomicUsize::new(0),
            gauge,
        }
    }

    fn now(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    fn opened(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.gauge.increment(1.0);
    }

    fn closed(&self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
        self.gauge.decrement(1.0);
    }
}

/// One connection in a serving thread's count, until dropped.
struct OpenConnection(Arc<OpenCount>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.closed();
    }
}

/// One client connection, from its first byte to its close.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    builder: Arc<Builder<TokioExecutor>>,
    app: crate::http::App,
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
    let stream = Box::pin(stream);
    let service = app.map_request(
        move |mut request: axum::extract::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            request.map(Body::new)
        },
    );
    let ended = if http2 {
        let watch = Arc::new(ConnectionWatch::new());
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
        let io = TokioIo::new(WriteClock::new(stream, watch.clone()));
        run(&builder, io, service, &mut stopping, Some(&watch), limits).await
    } else {
        let io = TokioIo::new(stream);
        run(&builder, io, service, &mut stopping, None, limits).await
    };
    if let Err(error) = ended {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}

/// How a connection's service ended.
type ServeResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A client socket hyper can serve.
trait Socket: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static {}

impl<T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static> Socket for T {}

/// The application as one connection serves it.
trait AppService:
    tower::Service<
        axum::extract::Request<hyper::body::Incoming>,
        Response = axum::response::Response,
        Future: Send + 'static,
        Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    > + Clone
    + Send
    + 'static
{
}

impl<S> AppService for S where
    S: tower::Service<
            axum::extract::Request<hyper::body::Incoming>,
            Response = axum::response::Response,
            Future: Send + 'static,
            Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        > + Clone
        + Send
        + 'static
{
}

/// One connection until it ends, or until:
/// - shutdown: HTTP/2 `GOAWAY`, the streams in flight finish; HTTP/1.1 closes once the answer in
///   flight is written (the shutdown grace bounds both).
///
/// And over HTTP/2 (`watch` is `Some`; hyper's header timer closes an idle HTTP/1.1 connection):
/// - idle (nothing in flight and no response bytes written for the header read timeout):
///   `GOAWAY`, then the streams still leaving finish (an answer handed over whole may still be
///   waiting for a slow reader's window), and the connection is dropped once it writes no
///   response bytes for the stall limit (a peer that never answers the closing ping, or stopped
///   reading);
/// - stalled (something in flight, nothing written for the stall limit: the peer takes no
///   data, e.g. a flow-control window it never opens): dropped at once.
async fn run<I, S>(
    builder: &Builder<TokioExecutor>,
    io: I,
    service: S,
    stopping: &mut watch::Receiver<bool>,
    watch: Option<&ConnectionWatch>,
    limits: ConnectionLimits,
) -> ServeResult
where
    I: Socket,
    S: AppService,
{
    let connection = builder
        .serve_connection_with_upgrades(io, TowerToHyperService::new(service))
        .into_owned();
    let mut connection = pin!(connection);
    let close = tokio::select! {
        ended = connection.as_mut() => return ended,
        _ = stopping.wait_for(|stopping| *stopping) => None,
        close = async {
            match watch {
                Some(watch) => {
                    watch.idle_or_stalled(limits.header_read_timeout, limits.http2_stall).await
                }
                None => std::future::pending().await,
            }
        } => Some(close),
    };
    match close {
        None => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
        Some(Close::Stalled) => {
            tracing::debug!("HTTP/2 connection closed: its peer took no data");
            Ok(())
        }
        Some(Close::Idle) => {
            // Only a watch says idle.
            let Some(watch) = watch else {
                return Ok(());
            };
            tracing::debug!("idle HTTP/2 connection closed");
            connection.as_mut().graceful_shutdown();
            // The drain's silence counts from the GOAWAY, not from the last write before it.
            watch.active();
            tokio::select! {
                ended = connection.as_mut() => ended,
                () = watch.silent_for(limits.http2_stall) => Ok(()),
            }
        }
    }
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

/// Why an HTTP/2 connection is closed by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Close {
    /// Nothing in flight for the header read timeout.
    Idle,
    /// Something in flight, and nothing written for the stall limit.
    Stalled,
}

/// What one HTTP/2 connection is doing: requests in flight, since when none has been, and when
/// it last wrote (or began a request).
#[derive(Debug)]
struct ConnectionWatch {
    /// Requests whose answer has not ended (headers read, handler running, or body streaming).
    in_flight: AtomicUsize,
    /// Milliseconds after `start` when `in_flight` last fell to zero.
    idle_since_ms: AtomicU64,
    /// Milliseconds after `start` of the last response bytes written or the last request begun.
    active_at_ms: AtomicU64,
    start: Instant,
}

impl ConnectionWatch {
    fn new() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
            active_at_ms: AtomicU64::new(0),
            start: Instant::now(),
        }
    }

    fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.active();
    }

    fn request_ended(&self) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle_since_ms
                .store(self.elapsed_ms(), Ordering::Release);
        }
    }

    /// Something was written to the peer (or a request began).
    fn active(&self) {
        self.active_at_ms
            .store(self.elapsed_ms(), Ordering::Release);
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Milliseconds since `mark` (milliseconds after `start`).
    fn since_ms(&self, mark: &AtomicU64) -> u64 {
        self.elapsed_ms()
            .saturating_sub(mark.load(Ordering::Acquire))
    }

    /// Resolves once nothing has been in flight nor written for `idle`, or something has been in
    /// flight and nothing was written for `stall`.
    async fn idle_or_stalled(&self, idle: Duration, stall: Duration) -> Close {
        let idle_ms = millis(idle);
        let stall_ms = millis(stall);
        loop {
            let wait_ms = if self.in_flight.load(Ordering::Acquire) > 0 {
                let quiet_ms = self.since_ms(&self.active_at_ms);
                if quiet_ms >= stall_ms {
                    return Close::Stalled;
                }
                stall_ms - quiet_ms
            } else {
                // Idle: nothing in flight and nothing written, so an answer still leaving a
                // slow peer's window after its body was handed over is not cut short.
                let idle_for_ms = self
                    .since_ms(&self.idle_since_ms)
                    .min(self.since_ms(&self.active_at_ms));
                if idle_for_ms >= idle_ms {
                    // Checked again: a request may have started since the read above.
                    if self.in_flight.load(Ordering::Acquire) == 0 {
                        return Close::Idle;
                    }
                    continue;
                }
                idle_ms - idle_for_ms
            };
            tokio::time::sleep(Duration::from_millis(wait_ms.max(1))).await;
        }
    }

    /// Resolves once nothing has been written for `limit`.
    async fn silent_for(&self, limit: Duration) {
        let limit_ms = millis(limit);
        loop {
            let quiet_ms = self.since_ms(&self.active_at_ms);
            if quiet_ms >= limit_ms {
                return;
            }
            tokio::time::sleep(Duration::from_millis((limit_ms - quiet_ms).max(1))).await;
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The socket of a watched connection: a write that carries a response's `HEADERS` or `DATA`
/// marks it active. The server's answers to the peer's control frames (PING and SETTINGS acks,
/// RST_STREAM, WINDOW_UPDATE) and its own pings are not progress: a peer that pings all day, or
/// keeps poking a stalled stream, must not hold the connection open.
struct WriteClock<S> {
    inner: S,
    watch: Arc<ConnectionWatch>,
    frames: FrameScanner,
}

impl<S> WriteClock<S> {
    fn new(inner: S, watch: Arc<ConnectionWatch>) -> Self {
        Self {
            inner,
            watch,
            frames: FrameScanner::default(),
        }
    }

    /// Reads the first `written` bytes of `slices` as HTTP/2 frames.
    fn wrote<'a>(&mut self, slices: impl IntoIterator<Item = &'a [u8]>, mut written: usize) {
        let mut progress = false;
        for slice in slices {
            if written == 0 {
                break;
            }
            let taken = slice.len().min(written);
            progress |= self.frames.scan(&slice[..taken]);
            written -= taken;
        }
        if progress {
            self.watch.active();
        }
    }
}

/// Where the server's HTTP/2 frame stream is (RFC 9113 §4.1: a 9-byte header, then `length`
/// bytes of payload), across writes cut anywhere.
#[derive(Debug, Default)]
struct FrameScanner {
    /// The current frame header's bytes seen so far (up to 9).
    header: [u8; 9],
    header_len: usize,
    /// Payload bytes of the current frame still to come.
    payload_left: usize,
}

impl FrameScanner {
    /// Consumes `bytes`; true when a `DATA` (0x0), `HEADERS` (0x1) or `CONTINUATION` (0x9) frame
    /// began in them.
    fn scan(&mut self, mut bytes: &[u8]) -> bool {
        let mut progress = false;
        while !bytes.is_empty() {
            if self.payload_left > 0 {
                let skipped = self.payload_left.min(bytes.len());
                self.payload_left -= skipped;
                bytes = &bytes[skipped..];
                continue;
            }
            let wanted = (9 - self.header_len).min(bytes.len());
            self.header[self.header_len..self.header_len + wanted]
                .copy_from_slice(&bytes[..wanted]);
            self.header_len += wanted;
            bytes = &bytes[wanted..];
            if self.header_len == 9 {
                self.header_len = 0;
                self.payload_left = usize::from(self.header[0]) << 16
                    | usize::from(self.header[1]) << 8
                    | usize::from(self.header[2]);
                progress |= matches!(self.header[3], 0x0 | 0x1 | 0x9);
            }
        }
        progress
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for WriteClock<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(context, buffer)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for WriteClock<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let written = std::pin::Pin::new(&mut self.inner).poll_write(context, bytes);
        if let Poll::Ready(Ok(n)) = written {
            self.wrote([bytes], n);
        }
        written
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut Context<'_>,
        buffers: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let written = std::pin::Pin::new(&mut self.inner).poll_write_vectored(context, buffers);
        if let Poll::Ready(Ok(n)) = written {
            self.wrote(buffers.iter().map(|buffer| &**buffer), n);
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(context)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(context)
    }
}

/// One request in flight on a watched connection, for as long as it lives.
struct InFlight(Arc<ConnectionWatch>);

impl InFlight {
    fn new(watch: &Arc<ConnectionWatch>) -> Self {
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
        let watch = ConnectionWatch::new();
        let idle = Duration::from_secs(10);
        let stall = Duration::from_secs(30);
        watch.request_started();
        // A stream that writes now and then keeps its connection however long it lasts.
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_secs(20)).await;
            watch.active();
        }
        assert!(
            tokio::time::timeout(Duration::from_secs(25), watch.idle_or_stalled(idle, stall))
                .await
                .is_err()
        );
        watch.request_ended();
        let ended_at = tokio::time::Instant::now();
        assert_eq!(watch.idle_or_stalled(idle, stall).await, Close::Idle);
        assert!(ended_at.elapsed() >= idle, "{:?}", ended_at.elapsed());
        assert!(ended_at.elapsed() < idle + Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_that_writes_nothing_for_the_stall_limit_stalls() {
        let watch = ConnectionWatch::new();
        let stall = Duration::from_secs(30);
        tokio::time::sleep(Duration::from_secs(100)).await;
        // The limit counts from the request's start, not from the last write before it.
        watch.request_started();
        let started = tokio::time::Instant::now();
        assert_eq!(
            watch.idle_or_stalled(Duration::from_secs(10), stall).await,
            Close::Stalled
        );
        assert!(started.elapsed() >= stall && started.elapsed() < stall + Duration::from_secs(1));
        let silent = tokio::time::Instant::now();
        watch.silent_for(stall).await;
        assert!(
            silent.elapsed() < Duration::from_secs(1),
            "already silent that long"
        );
    }

    #[test]
    fn only_response_frames_count_as_progress_wherever_writes_cut_them() {
        let frame = |kind: u8, payload: usize| {
            let mut bytes = vec![0, (payload >> 8) as u8, payload as u8, kind, 0, 0, 0, 0, 1];
            bytes.resize(9 + payload, 0xAA);
            bytes
        };
        let ping_ack = frame(0x6, 8);
        let settings_ack = frame(0x4, 0);
        let reset = frame(0x3, 4);
        let data = frame(0x0, 300);
        let mut scanner = FrameScanner::default();
        assert!(!scanner.scan(&[ping_ack.clone(), settings_ack, reset].concat()));
        // A 17-byte ping, then a DATA frame whose header (bytes 17–25) is cut over three writes.
        let stream = [ping_ack, data.clone()].concat();
        assert!(!scanner.scan(&stream[..20]));
        assert!(!scanner.scan(&stream[20..23]));
        assert!(scanner.scan(&stream[23..200]));
        assert!(!scanner.scan(&stream[200..]));
        // In step again: the next frame's header is read as one.
        assert!(scanner.scan(&data));
    }
}
