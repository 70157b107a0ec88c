//! A lean SSE client: one TCP connection per stream (optionally from a chosen 127.0.0.x source
//! address, so tens of thousands of streams do not run out of ephemeral ports), HTTP/1.1 chunked
//! decoding and `event: status` parsing into [`TicketStatus`].
//!
//! Written small on purpose: the SSE run holds 50,000 of these in one process.

use std::net::{IpAddr, SocketAddr};

use anyhow::{bail, Context as _};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};
use vestibule_shared::TicketStatus;

/// An open event stream.
pub struct SseStream {
    stream: TcpStream,
    raw: Vec<u8>,
    decoded: Vec<u8>,
    chunked: bool,
    chunk_left: usize,
    need_crlf: bool,
    ended: bool,
}

impl SseStream {
    /// Connects (from `source` when given) and sends `GET path`; checks for a 200 answer.
    ///
    /// # Errors
    /// A connection error or a non-200 answer.
    pub async fn open(
        server: SocketAddr,
        source: Option<IpAddr>,
        path: &str,
    ) -> anyhow::Result<Self> {
        let socket = TcpSocket::new_v4()?;
        if let Some(ip) = source {
            socket
                .bind(SocketAddr::new(ip, 0))
                .with_context(|| format!("binding source address {ip}"))?;
        }
        let mut stream = socket.connect(server).await.context("connecting")?;
        stream.set_nodelay(true)?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {server}\r\nAccept: text/event-stream\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut sse = Self {
            stream,
            raw: Vec::with_capacity(1024),
            decoded: Vec::new(),
            chunked: false,
            chunk_left: 0,
            need_crlf: false,
            ended: false,
        };
        let head_end = loop {
            if let Some(at) = find(&sse.raw, b"\r\n\r\n") {
                break at;
            }
            if sse.raw.len() > 16 * 1024 || !sse.fill().await? {
                bail!("no HTTP head in the answer");
            }
        };
        let head = String::from_utf8_lossy(&sse.raw[..head_end]).to_ascii_lowercase();
        if !head.starts_with("http/1.1 200") {
            let status_line = head.lines().next().unwrap_or_default().to_owned();
            bail!("answered {status_line}");
        }
        sse.chunked = head.contains("transfer-encoding: chunked");
        sse.raw.drain(..head_end + 4);
        sse.decode();
        sse.raw.shrink_to(1024);
        Ok(sse)
    }

    /// Reads more bytes; false at end of stream.
    async fn fill(&mut self) -> anyhow::Result<bool> {
        let mut buffer = [0u8; 2048];
        let n = self.stream.read(&mut buffer).await?;
        self.raw.extend_from_slice(&buffer[..n]);
        Ok(n > 0)
    }

    /// Moves body bytes from `raw` to `decoded`, removing the chunked framing.
    fn decode(&mut self) {
        if !self.chunked {
            self.decoded.append(&mut self.raw);
            return;
        }
        loop {
            if self.chunk_left > 0 {
                let n = self.chunk_left.min(self.raw.len());
                self.decoded.extend(self.raw.drain(..n));
                self.chunk_left -= n;
                if self.chunk_left > 0 {
                    return;
                }
                self.need_crlf = true;
            }
            if self.need_crlf {
                if self.raw.len() < 2 {
                    return;
                }
                self.raw.drain(..2);
                self.need_crlf = false;
            }
            let Some(line_end) = find(&self.raw, b"\r\n") else {
                return;
            };
            let size_text = String::from_utf8_lossy(&self.raw[..line_end]);
            let size_text = size_text.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16).unwrap_or(0);
            self.raw.drain(..line_end + 2);
            if size == 0 {
                self.ended = true;
                return;
            }
            self.chunk_left = size;
        }
    }

    /// The next `status` event, or `None` when the stream ends.
    ///
    /// # Errors
    /// A connection error or an event whose data is not a TicketStatus.
    pub async fn next_status(&mut self) -> anyhow::Result<Option<TicketStatus>> {
        loop {
            while let Some(end) = find(&self.decoded, b"\n\n") {
                let event: Vec<u8> = self.decoded.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&event);
                let mut name = "message";
                let mut data = String::new();
                for line in text.lines() {
                    if let Some(value) = line.strip_prefix("event:") {
                        name = value.trim();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push_str(value.strip_prefix(' ').unwrap_or(value));
                    }
                }
                if name == "status" {
                    let status = serde_json::from_str(&data)
                        .with_context(|| format!("status event data {data:?}"))?;
                    return Ok(Some(status));
                }
            }
            if self.ended || !self.fill().await? {
                return Ok(None);
            }
            self.decode();
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
