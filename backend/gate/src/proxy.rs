//! The reverse proxy to the origin: hyper-util's pooled HTTP/1.1 client, bodies streamed both
//! ways (nothing buffered), hop-by-hop headers removed (RFC 9110 §7.6.1: the fixed list and
//! every header named in `Connection`), forwarding headers set (`forwarding`), and HTTP/1.1
//! upgrades (WebSocket) tunnelled once the origin answers `101`.
//!
//! The origin gets `--upstream-timeout-secs` to connect and answer a request's headers: past
//! it 504 `upstream_timeout`; an origin that cannot be reached gets 502 `upstream_unavailable`
//! at once. The queue never waits on the origin: proxied requests share nothing with the API.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::body::HttpBody as _;
use axum::extract::Request;
use axum::http::uri::{Authority, PathAndQuery, Scheme};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, Version};
use axum::response::Response;
use http_body_util::BodyExt as _;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use vestibule_shared::error_code;

use super::answers::fault;
use super::forwarding::set_forwarding_headers;
use super::origin_connection::{Answered, MarkingConnector};
use vestibule_http::config::HttpConfig;

use crate::config::GateConfig;

/// Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1, plus the
/// non-standard `Proxy-Connection` and `Keep-Alive`).
/// Names, not strings: a removal by `&str` parses the name again on every request.
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Header lines an origin's answer may have (their bytes are bounded by hyper's read buffer,
/// ~400 KB). Past it the answer is 502 with a message that says it was unreadable.
pub const MAX_RESPONSE_HEADERS: usize = 1_000;

/// The origin and the client that reaches it.
#[derive(Clone)]
pub struct Proxy {
    client: Client<MarkingConnector, Body>,
    authority: Authority,
    timeout: Duration,
}

impl Proxy {
    /// A proxy to the origin `--upstream`.
    ///
    /// # Errors
    /// An upstream URL that [`super::config::upstream_authority`] refuses.
    pub fn new(gate: &GateConfig) -> Result<Self, String> {
        let upstream = gate.upstream.as_deref().unwrap_or_default();
        let authority = super::config::upstream_authority(upstream)?
            .parse::<Authority>()
            .map_err(|error| format!("--upstream {upstream:?}: {error}"))?;
        let timeout = gate.upstream_timeout();
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(timeout));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            // hyper's default is 100 lines: a shop page setting many cookies has more.
            .http1_max_headers(MAX_RESPONSE_HEADERS)
            .build(MarkingConnector(connector));
        Ok(Self {
            client,
            authority,
            timeout,
        })
    }

    /// Sends `request` to the origin and streams its answer back (or answers 502/504 itself;
    /// `navigation` picks HTML over JSON for those).
    pub async fn forward(
        &self,
        mut request: Request,
        config: &HttpConfig,
        navigation: bool,
    ) -> Response {
        let client_version = request.version();
        let upgrade = requested_upgrade(request.headers(), client_version);
        let client_side = upgrade.as_ref().map(|_| hyper::upgrade::on(&mut request));
        let (mut parts, body) = request.into_parts();
        if !parts.headers.contains_key(header::HOST) {
            // HTTP/2 clients name the host in the URI only.
            if let Some(host) = parts
                .uri
                .authority()
                .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
            {
                parts.headers.insert(header::HOST, host);
            }
        }
        // The request's own path and query (a shared buffer, not parsed again).
        let mut target = axum::http::uri::Parts::default();
        target.scheme = Some(Scheme::HTTP);
        target.authority = Some(self.authority.clone());
        target.path_and_query = Some(
            parts
                .uri
                .path_and_query()
                .cloned()
                .unwrap_or_else(|| PathAndQuery::from_static("/")),
        );
        let Ok(uri) = Uri::from_parts(target) else {
            return fault(
                StatusCode::BAD_REQUEST,
                error_code::BAD_REQUEST,
                "this request target cannot be forwarded",
                navigation,
                config.retry_after_secs,
            );
        };
        parts.uri = uri;
        parts.version = Version::HTTP_11;
        remove_hop_by_hop(&mut parts.headers);
        if let Some(protocol) = &upgrade {
            parts
                .headers
                .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
            parts.headers.insert(header::UPGRADE, protocol.clone());
        }
        set_forwarding_headers(
            &mut parts.headers,
            &parts.extensions,
            config.client_ip_source(),
        );
        join_cookie_lines(&mut parts.headers);
        let method = parts.method.clone();
        // What it takes to send the request again (see `send`): only without a body and with a
        // method that means the same when sent twice.
        let replay =
            (upgrade.is_none() && is_idempotent(&method) && body.is_end_stream()).then(|| Replay {
                method: method.clone(),
                uri: parts.uri.clone(),
                headers: parts.headers.clone(),
            });
        // Whether the client's body broke (bad chunking, a hang-up mid-body): then the failure is
        // the client's (400), not the origin's (502), and no origin alert counts it.
        let body_failed = Arc::new(AtomicBool::new(false));
        let body = {
            let body_failed = body_failed.clone();
            Body::new(body.map_err(move |error| {
                body_failed.store(true, Ordering::Relaxed);
                error
            }))
        };
        let outgoing = Request::from_parts(parts, body);
        let answer = tokio::time::timeout(self.timeout, self.send(outgoing, replay)).await;
        let mut response = match answer {
            Ok(Ok(response)) => response,
            Ok(Err(_)) if body_failed.load(Ordering::Relaxed) => {
                return fault(
                    StatusCode::BAD_REQUEST,
                    error_code::BAD_REQUEST,
                    "the request body could not be read (malformed or cut short)",
                    navigation,
                    config.retry_after_secs,
                );
            }
            Ok(Err(error)) if unreadable(&error) => {
                tracing::warn!(%method, error = %error, source = ?std::error::Error::source(&error), "origin answered with a response that cannot be read");
                metrics::counter!("vestibule_gate_upstream_errors_total", "kind" => "invalid")
                    .increment(1);
                return fault(
                    StatusCode::BAD_GATEWAY,
                    error_code::UPSTREAM_UNAVAILABLE,
                    "the shop behind the waiting room answered with a response that cannot be \
                     passed on (malformed, or too many header lines)",
                    navigation,
                    config.retry_after_secs,
                );
            }
            Ok(Err(error)) => {
                tracing::warn!(%method, error = %error, "origin unreachable");
                metrics::counter!("vestibule_gate_upstream_errors_total", "kind" => "unavailable")
                    .increment(1);
                return fault(
                    StatusCode::BAD_GATEWAY,
                    error_code::UPSTREAM_UNAVAILABLE,
                    "the shop behind the waiting room could not be reached; retry shortly",
                    navigation,
                    config.retry_after_secs,
                );
            }
            Err(_) => {
                tracing::warn!(%method, timeout_secs = self.timeout.as_secs(), "origin too slow");
                metrics::counter!("vestibule_gate_upstream_errors_total", "kind" => "timeout")
                    .increment(1);
                return fault(
                    StatusCode::GATEWAY_TIMEOUT,
                    error_code::UPSTREAM_TIMEOUT,
                    "the shop behind the waiting room did not answer in time; retry shortly",
                    navigation,
                    config.retry_after_secs,
                );
            }
        };
        let switching = response.status() == StatusCode::SWITCHING_PROTOCOLS;
        let protocol = response.headers().get(header::UPGRADE).cloned();
        if response.headers().contains_key(header::TRANSFER_ENCODING) {
            // Both: the length is not the body's (RFC 9112 §6.3: an intermediary removes it).
            response.headers_mut().remove(header::CONTENT_LENGTH);
        } else if response
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes().contains(&b','))
        {
            // A repeated length (`3, 3`), which hyper read as one (RFC 9110 §8.6: all agree):
            // the client gets that one, not a list it may refuse.
            if let Some(length) = response.body().size_hint().exact() {
                response
                    .headers_mut()
                    .insert(header::CONTENT_LENGTH, length.into());
            }
        }
        remove_hop_by_hop(response.headers_mut());
        if let (true, Some(client_side), Some(protocol)) = (switching, client_side, protocol) {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
            response.headers_mut().insert(header::UPGRADE, protocol);
            let origin_side = hyper::upgrade::on(&mut response);
            tokio::spawn(tunnel(client_side, origin_side));
        }
        // The answer goes out in the client's version, not the origin's: an HTTP/1.0 origin
        // (Python's http.server, say) must not turn a kept-alive HTTP/1.1 client connection into
        // an HTTP/1.0 one that closes after this answer.
        *response.version_mut() = client_version;
        if method == Method::HEAD && !response.headers().contains_key(header::CONTENT_LENGTH) {
            // The origin named no length: neither may the answer (RFC 9110 §8.6). An empty body
            // of known size would make the server layers write `Content-Length: 0`.
            return response.map(|_| Body::new(NoLength));
        }
        response.map(Body::new)
    }
}

/// The body of an answer to `HEAD` whose length the origin did not give: ends at once, of no
/// stated size.
struct NoLength;

impl hyper::body::Body for NoLength {
    type Data = axum::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::task::Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        true
    }
}

/// Joins a request's `Cookie` lines into one, `; `-separated: an HTTP/2 client sends each cookie
/// on its own line, and an HTTP/1.1 origin reads only one (RFC 9113 §8.2.3, RFC 6265 §5.4).
fn join_cookie_lines(headers: &mut HeaderMap) {
    let mut lines = headers.get_all(header::COOKIE).iter();
    if lines.nth(1).is_none() {
        return;
    }
    let mut joined = Vec::new();
    for line in headers.get_all(header::COOKIE) {
        if !joined.is_empty() {
            joined.extend_from_slice(b"; ");
        }
        joined.extend_from_slice(line.as_bytes());
    }
    if let Ok(value) = HeaderValue::from_bytes(&joined) {
        headers.insert(header::COOKIE, value);
    }
}

/// Whether the origin's answer could not be read (malformed, too many header lines): the
/// origin is up, its answer is the fault.
fn unreadable(error: &hyper_util::client::legacy::Error) -> bool {
    causes(error)
        .filter_map(|cause| cause.downcast_ref::<hyper::Error>())
        .any(hyper::Error::is_parse)
}

/// Whether the origin dropped the connection without an answer (closed or reset it): the
/// keep-alive race, where sending again is right. A malformed answer is not: the origin got the
/// request and answered.
fn dropped_unanswered(error: &hyper_util::client::legacy::Error) -> bool {
    !error.is_connect()
        && causes(error).any(|cause| {
            cause
                .downcast_ref::<hyper::Error>()
                .is_some_and(hyper::Error::is_incomplete_message)
                || cause.downcast_ref::<std::io::Error>().is_some_and(|io| {
                    matches!(
                        io.kind(),
                        std::io::ErrorKind::ConnectionReset
                            | std::io::ErrorKind::BrokenPipe
                            | std::io::ErrorKind::ConnectionAborted
                    )
                })
        })
}

/// The chain of causes under a client error.
fn causes(
    error: &hyper_util::client::legacy::Error,
) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    std::iter::successors(std::error::Error::source(error), |cause| cause.source())
}

/// A bodyless idempotent request, kept to be sent once more.
struct Replay {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
}

impl Proxy {
    /// Sends `outgoing` to the origin; when the origin drops the connection without an answer,
    /// `replay` is given (no body, an idempotent method: RFC 9110 §9.2.2) and that connection
    /// had answered before (`origin_connection.rs`), sends it once more, on another connection.
    ///
    /// That is the keep-alive race: an origin closes a kept-alive connection (its idle timeout:
    /// Node's default is 5 s, the gate keeps connections 60 s) just as the gate sends a request
    /// on it. hyper's pool sends again by itself only a request that was never written; one
    /// written to the closing socket fails with the connection, and without this the shopper
    /// would get a 502 from an origin that is up. nginx retries such requests the same way. A
    /// request with a body, or a `POST`, is never sent twice: the origin may have acted on it;
    /// nor one that a fresh connection dropped: the origin failed on that very request.
    async fn send(
        &self,
        outgoing: Request,
        replay: Option<Replay>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, hyper_util::client::legacy::Error> {
        let answer = match self.client.request(outgoing).await {
            Err(error) if dropped_unanswered(&error) && Answered::before(error.connect_info()) => {
                let Some(Replay {
                    method,
                    uri,
                    headers,
                }) = replay
                else {
                    return Err(error);
                };
                tracing::debug!(%method, %error, "the origin dropped a connection unanswered: sent once more");
                metrics::counter!("vestibule_gate_upstream_retries_total").increment(1);
                let mut again = Request::new(Body::empty());
                *again.method_mut() = method;
                *again.uri_mut() = uri;
                *again.headers_mut() = headers;
                self.client.request(again).await
            }
            answer => answer,
        };
        if let Ok(response) = &answer {
            Answered::note(response.extensions());
        }
        answer
    }
}

/// Whether sending `method` twice means the same as sending it once (RFC 9110 §9.2.2).
fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// Copies bytes both ways between an upgraded client connection and the origin's, until either
/// side closes.
async fn tunnel(client: hyper::upgrade::OnUpgrade, origin: hyper::upgrade::OnUpgrade) {
    let (client, origin) = tokio::join!(client, origin);
    let (Ok(client), Ok(origin)) = (client, origin) else {
        tracing::debug!("an upgrade did not complete");
        return;
    };
    let mut client = TokioIo::new(client);
    let mut origin = TokioIo::new(origin);
    if let Err(error) = tokio::io::copy_bidirectional(&mut client, &mut origin).await {
        tracing::debug!(%error, "upgraded connection ended");
    }
}

/// The protocol an HTTP/1.1 request asks to upgrade to (`Connection: upgrade` + `Upgrade`).
fn requested_upgrade(headers: &HeaderMap, version: Version) -> Option<HeaderValue> {
    let asks = version == Version::HTTP_11
        && connection_tokens(headers)
            .iter()
            .any(|token| token == "upgrade");
    // Only WebSocket: a tunnel to any other protocol (`h2c`, made-up ones) would carry requests
    // the gate never sees.
    asks.then(|| headers.get(header::UPGRADE).cloned())
        .flatten()
        .filter(|protocol| {
            protocol
                .to_str()
                .is_ok_and(|p| p.trim().eq_ignore_ascii_case("websocket"))
        })
}

/// The lowercase tokens of every `Connection` line.
fn connection_tokens(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(','))
        .map(|token| token.trim().to_ascii_lowercase())
        .filter(|token| !token.is_empty())
        .collect()
}

/// Removes the hop-by-hop headers: the fixed list and every header `Connection` names.
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    // One pass over the names present (a handful) instead of a hashed removal of each of the nine:
    // most messages carry none of them, and `Connection` is one of them.
    let present: Vec<HeaderName> = headers
        .keys()
        .filter(|name| HOP_BY_HOP.contains(name))
        .cloned()
        .collect();
    if present.is_empty() {
        return;
    }
    for token in connection_tokens(headers) {
        if let Ok(name) = HeaderName::from_bytes(token.as_bytes()) {
            // A client must not make the gate drop what it sets itself (its admission claims,
            // the host the forwarding headers are built from) by naming it in `Connection`.
            if !is_set_by_the_gate(&name) {
                headers.remove(name);
            }
        }
    }
    for name in present {
        headers.remove(name);
    }
}

/// Headers the gate sets or keeps for the origin, which `Connection` cannot remove.
fn is_set_by_the_gate(name: &HeaderName) -> bool {
    let name = name.as_str();
    name == "host" || name.starts_with("x-vestibule-") || name.starts_with("x-forwarded-")
}

#[cfg(test)]
mod tests;
