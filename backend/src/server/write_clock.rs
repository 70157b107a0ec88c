//! The socket of a watched HTTP/2 connection: the response frames written through it count as
//! the connection's progress, control frames do not.

use std::sync::Arc;
use std::task::{Context, Poll};

use super::http2_watch::ConnectionWatch;

/// The socket of a watched connection: a write that carries a response's `HEADERS` or `DATA`
/// marks it active. The server's answers to the peer's control frames (PING and SETTINGS acks,
/// RST_STREAM, WINDOW_UPDATE) and its own pings are not progress: a peer that pings all day, or
/// keeps poking a stalled stream, must not hold the connection open.
pub(super) struct WriteClock<S> {
    inner: S,
    watch: Arc<ConnectionWatch>,
    frames: FrameScanner,
}

impl<S> WriteClock<S> {
    pub(super) fn new(inner: S, watch: Arc<ConnectionWatch>) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;

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
