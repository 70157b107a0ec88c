//! A lean SSE client, over HTTP/1.1 or HTTP/2.
//!
//! - [`SseStream::open`]: one TCP connection per stream (optionally from a chosen 127.0.0.x
//!   source address, so tens of thousands of streams do not run out of ephemeral ports),
//!   HTTP/1.1 chunked decoding.
//! - [`H2Connection`]: one HTTP/2 (h2c, prior knowledge) connection carrying many streams, as a
//!   CDN or proxy in front would; [`H2Connection::open_stream`] opens one more.
//!
//! Either way `event: status` events are parsed into [`TicketStatus`]. Written small on purpose:
//! the SSE run holds 50,000 of these in one process.

use std::net::{IpAddr, SocketAddr};

use anyhow::{bail, Context as _};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Incoming;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};
use vestibule_shared::TicketStatus;

/// An open event stream.
pub struct SseStream {
    transport: Transport,
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
            transport: Transport::Http1(stream),
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
        match &mut self.transport {
            Transport::Http1(stream) => {
                let mut buffer = [0u8; 2048];
                let n = stream.read(&mut buffer).await?;
                self.raw.extend_from_slice(&buffer[..n]);
                Ok(n > 0)
            }
            Transport::Http2(body) => loop {
                match body.frame().await {
                    None => return Ok(false),
                    Some(frame) => {
                        if let Ok(data) = frame.context("HTTP/2 stream")?.into_data() {
                            self.raw.extend_from_slice(&data);
                            return Ok(true);
                        }
                    }
                }
            },
        }
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

/// Where an open stream's bytes come from.
enum Transport {
    /// Its own TCP connection; the body is HTTP/1.1 framed (chunked or not).
    Http1(TcpStream),
    /// One stream of a shared HTTP/2 connection; the body arrives as DATA frames.
    Http2(Incoming),
}

/// An HTTP/2 connection (h2c, prior knowledge) that carries many SSE streams.
#[derive(Clone)]
pub struct H2Connection {
    sender: http2::SendRequest<Empty<Bytes>>,
    authority: String,
}

impl H2Connection {
    /// Connects (from `source` when given) and completes the HTTP/2 handshake; the connection
    /// is driven by a task of its own until every clone of it is dropped.
    ///
    /// # Errors
    /// A connection or handshake error.
    pub async fn connect(server: SocketAddr, source: Option<IpAddr>) -> anyhow::Result<Self> {
        let socket = TcpSocket::new_v4()?;
        if let Some(ip) = source {
            socket
                .bind(SocketAddr::new(ip, 0))
                .with_context(|| format!("binding source address {ip}"))?;
        }
        let stream = socket.connect(server).await.context("connecting")?;
        stream.set_nodelay(true)?;
        let (sender, connection) = http2::Builder::new(TokioExecutor::new())
            .handshake(TokioIo::new(stream))
            .await
            .context("HTTP/2 handshake")?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Self {
            sender,
            authority: server.to_string(),
        })
    }

    /// Opens one more event stream on this connection: `GET path`, checked for a 200 answer.
    ///
    /// # Errors
    /// The connection is gone, the stream was refused, or the answer is not 200.
    pub async fn open_stream(&self, path: &str) -> anyhow::Result<SseStream> {
        let mut sender = self.sender.clone();
        sender.ready().await.context("HTTP/2 connection")?;
        let request = hyper::Request::get(format!("http://{}{path}", self.authority))
            .header(hyper::header::ACCEPT, "text/event-stream")
            .body(Empty::new())?;
        let response = sender
            .send_request(request)
            .await
            .context("HTTP/2 stream")?;
        if response.status() != hyper::StatusCode::OK {
            bail!("answered {}", response.status());
        }
        Ok(SseStream {
            transport: Transport::Http2(response.into_body()),
            raw: Vec::new(),
            decoded: Vec::new(),
            chunked: false,
            chunk_left: 0,
            need_crlf: false,
            ended: false,
        })
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
