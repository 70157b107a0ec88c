//! The gate's connections to the origin, each knowing whether it has answered before.
//!
//! When the origin drops a connection without answering, the gate sends a bodyless idempotent
//! request once more (`proxy.rs`, `Proxy::send`), but only if that connection had answered an
//! earlier request: that is the keep-alive race (an origin closing a kept-alive connection just
//! as a request goes out on it), which sending again on another connection cures. A connection
//! that drops the very first request sent on it is an origin failing on that request (crashing
//! on it, refusing it), and sending it again would only make it fail twice. nginx draws the same
//! line: it retries on a cached keep-alive connection only.
//!
//! hyper-util's pool does not say whether it lent a connection that was used before, so the
//! connector marks each connection it makes ([`Answered`], one flag per connection, carried in
//! the connection's `Connected` extras): the pool hands the flag to every answer's extensions
//! and to every error's connection info.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::http::{Extensions, Uri};
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tower::Service;

/// Whether a connection to the origin has answered a request (shared by every copy of its
/// `Connected` extras).
#[derive(Clone, Debug, Default)]
pub struct Answered(Arc<AtomicBool>);

impl Answered {
    /// Notes an answer on the connection of `extensions` (an answer's extensions).
    pub fn note(extensions: &Extensions) {
        if let Some(answered) = extensions.get::<Self>() {
            // A load first: the flag is written once per connection, not once per answer.
            if !answered.0.load(Ordering::Relaxed) {
                answered.0.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Whether the connection described by `connected` (an error's connection info) had
    /// answered before. `false` when unknown.
    pub fn before(connected: Option<&Connected>) -> bool {
        let Some(connected) = connected else {
            return false;
        };
        let mut extras = Extensions::new();
        connected.get_extras(&mut extras);
        extras
            .get::<Self>()
            .is_some_and(|answered| answered.0.load(Ordering::Relaxed))
    }
}

/// hyper-util's `HttpConnector`, each connection it makes marked with a fresh [`Answered`].
#[derive(Clone)]
pub struct MarkingConnector(pub HttpConnector);

impl Service<Uri> for MarkingConnector {
    type Response = MarkedConnection;
    type Error = <HttpConnector as Service<Uri>>::Error;
    type Future =
        Pin<Box<dyn Future<Output = Result<MarkedConnection, Self::Error>> + Send + 'static>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move {
            Ok(MarkedConnection {
                io: connecting.await?,
                answered: Answered::default(),
            })
        })
    }
}

/// A TCP connection to the origin and its [`Answered`] mark; reads and writes go straight
/// through.
pub struct MarkedConnection {
    io: TokioIo<TcpStream>,
    answered: Answered,
}

impl Connection for MarkedConnection {
    fn connected(&self) -> Connected {
        self.io.connected().extra(self.answered.clone())
    }
}

impl Read for MarkedConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for MarkedConnection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_has_answered_before_only_once_an_answer_was_noted() {
        let answered = Answered::default();
        let connected = Connected::new().extra(answered.clone());
        assert!(!Answered::before(Some(&connected)), "a fresh connection");
        let mut extensions = Extensions::new();
        connected.get_extras(&mut extensions);
        Answered::note(&extensions);
        assert!(Answered::before(Some(&connected)), "after its first answer");
        assert!(!Answered::before(None), "unknown: not sent again");
        assert!(
            !Answered::before(Some(&Connected::new())),
            "unmarked: not sent again"
        );
    }
}
