//! One client connection, from its first byte to its close: HTTP/1.1 or HTTP/2 (h2c by prior
//! knowledge, told apart by peeking at the first bytes), each wait on the client bounded.

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use futures_util::FutureExt as _;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tower::ServiceExt as _;

use super::http2_watch::{Close, ConnectionWatch, Counted, InFlight};
use super::limits::ConnectionLimits;
use super::write_clock::WriteClock;

/// What an HTTP/2 connection opens with (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// One client connection, from its first byte to its close.
pub(super) async fn serve_connection(
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
