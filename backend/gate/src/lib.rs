//! Gate mode: Vestibule as a reverse proxy in front of a storefront (the origin), so that a
//! store's checkout needs admission without a line of its code changed (docs/DESIGN.md "Gate
//! mode").
//!
//! With `--upstream`, [`router`] serves Vestibule's page, API and OpenAPI under the mount prefix
//! (`/_vestibule/`; `/_vestibule` redirects there), `/healthz`, `/readyz` and `/metrics` at the
//! root, and sends everything else to the origin. A path matched by a `--gate` rule needs
//! admission to the rule's room: the room's session cookie or `X-Entry-Token`, verified by
//! [`entry::verify_entry`]; without it a browser is sent to the waiting room (303) and anything
//! else gets 403 JSON with a `joinUrl`.
//!
//! - [`config`]: the flags. [`rules`]: gate rules, the path view they match, `return` paths.
//! - [`entry`]: the one verification seam and its claims. [`session`]: token → cookie.
//! - [`proxy`]: the HTTP client to the origin. [`forwarding`]: `X-Forwarded-*`.
//! - [`answers`]: refusals and faults the gate answers itself.

pub mod answers;
pub mod config;
pub mod entry;
pub mod forwarding;
pub mod origin_connection;
pub mod proxy;
pub mod rules;
pub mod session;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Router;
use vestibule_shared::error_code;

pub use config::GateConfig;
pub use entry::{verify_entry, EntryClaims};

use entry::{
    request_tokens, TokenSource, ENTRY_CLAIMS_HEADER, ENTRY_TOKEN_FORWARD_HEADER,
    VESTIBULE_HEADER_PREFIX,
};
use rules::{gated_room, is_navigation, join_url, GateRule};
use vestibule_http::config::HttpConfig;
use vestibule_http::error::ApiError;
use vestibule_http::state::AppState;
use vestibule_room::outage::OutagePolicy;

/// What the gate needs per request.
struct Gate {
    state: AppState,
    rules: Vec<GateRule>,
    prefix: String,
    proxy: proxy::Proxy,
}

/// The router of gate mode around Vestibule's own `app` (its routes at `/`, with their layers).
///
/// # Errors
/// An `--upstream` that cannot be used (validated at start already).
pub fn router(state: AppState, gate_config: &GateConfig, app: Router) -> anyhow::Result<Router> {
    let prefix = gate_config.prefix();
    let gate = Arc::new(Gate {
        rules: gate_config.rules(),
        proxy: proxy::Proxy::new(gate_config).map_err(anyhow::Error::msg)?,
        prefix: prefix.clone(),
        state,
    });
    // On the storefront's own domain the metrics (room names, rates, queue lengths) are for the
    // operator only: the admin token opens them.
    let metrics_state = gate.state.clone();
    let metrics_under_prefix = format!("{prefix}metrics");
    let mut router = Router::new();
    for path in config::ROOT_PATHS {
        router = router.route_service(path, app.clone());
    }
    let bare = prefix.trim_end_matches('/').to_owned();
    let to_prefix = prefix.clone();
    let located: Arc<str> = prefix.trim_end_matches('/').into();
    Ok(router
        .route(
            &bare,
            axum::routing::any(move |request: Request| async move {
                let query = request
                    .uri()
                    .query()
                    .map(|query| format!("?{query}"))
                    .unwrap_or_default();
                Redirect::permanent(&format!("{to_prefix}{query}"))
            }),
        )
        .nest_service(
            &prefix,
            app.layer(axum::middleware::map_response(move |response| {
                under_prefix(response, located.clone())
            })),
        )
        .fallback(pass)
        .with_state(gate)
        .layer(axum::middleware::from_fn(
            move |request: Request, next: axum::middleware::Next| {
                let state = metrics_state.clone();
                let metrics_under_prefix = metrics_under_prefix.clone();
                async move {
                    let path = request.uri().path();
                    if path == "/metrics" || path == metrics_under_prefix.as_str() {
                        if let Err(refused) =
                            vestibule_http::admin::authorize(&state, request.headers())
                        {
                            return refused.into_response();
                        }
                    }
                    next.run(request).await
                }
            },
        )))
}

/// Marks an answer whose `Location` is already a path of the storefront (the hand-off's `return`,
/// or the waiting room with the prefix written in): [`under_prefix`] leaves it as it is.
#[derive(Debug, Clone, Copy)]
pub struct StorefrontLocation;

/// An answer of Vestibule's own app with its `Location` (a path of the app, which believes it
/// is at `/`) moved under the mount prefix `prefix` (no trailing `/`): a new ticket's
/// `/api/v1/rooms/main/tickets/…` is `/_vestibule/api/v1/…` to the client (RFC 9110 §10.2.2:
/// resolved against the request's URI), not a path of the storefront.
async fn under_prefix(mut response: Response, prefix: Arc<str>) -> Response {
    if response.extensions().get::<StorefrontLocation>().is_some() {
        return response;
    }
    let moved = response
        .headers()
        .get(header::LOCATION)
        .and_then(|location| location.to_str().ok())
        .filter(|location| location.starts_with('/') && !location.starts_with("//"))
        .and_then(|location| HeaderValue::from_str(&format!("{prefix}{location}")).ok());
    if let Some(location) = moved {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// Every request outside the mount prefix: stripped of `X-Vestibule-*`, admitted when a rule
/// gates its path, then proxied.
async fn pass(State(gate): State<Arc<Gate>>, mut request: Request) -> Response {
    strip_vestibule_headers(request.headers_mut());
    let navigation = is_navigation(request.method(), request.headers());
    let config = &gate.state.config;
    if request.method() == Method::CONNECT {
        return ApiError::MethodNotAllowed.into_response();
    }
    if vestibule_http::error::check_header_size(request.headers()).is_err() {
        let answer = answers::fault(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            error_code::HEADERS_TOO_LARGE,
            "the request's header fields are too large (at most 80 fields and 32 KiB)",
            navigation,
            config.retry_after_secs,
        );
        return drained(request, answer, config).await;
    }
    if let Some((status, reason)) = refused_shape(&request) {
        let answer = answers::fault(
            status,
            error_code::BAD_REQUEST,
            reason,
            navigation,
            config.retry_after_secs,
        );
        return drained(request, answer, config).await;
    }
    let gated = gated_room(&gate.rules, request.uri().path())
        .filter(|_| !is_bare_preflight(request.method(), request.headers()));
    // A gated path's answers are the closed loop's view of the origin (docs/DESIGN.md
    // "Closed-loop admission").
    let measured = gated.as_ref().and_then(|room| gate.state.rooms.get(room));
    if let Some(room) = gated {
        // The way back to this very path. Leading slashes collapse to one: `//checkout` (gated
        // like `/checkout`) must come back to `/checkout`, not to `/` as a protocol-relative
        // `return` would be refused.
        let back = format!(
            "/{}",
            request
                .uri()
                .path_and_query()
                .map_or("/", |path| path.as_str())
                .trim_start_matches('/')
        );
        match gate
            .admit(&room, request.headers(), &back, navigation)
            .await
        {
            Ok(Some((claims, token))) => {
                let json = serde_json::to_string(&claims).unwrap_or_default();
                if let Ok(value) = HeaderValue::from_str(&json) {
                    request.headers_mut().insert(ENTRY_CLAIMS_HEADER, value);
                }
                // The verified token itself, for an origin that checks it with the JWKS (one
                // that other clients can reach without passing through the gate).
                if let Ok(value) = HeaderValue::from_str(&token) {
                    request
                        .headers_mut()
                        .insert(ENTRY_TOKEN_FORWARD_HEADER, value);
                }
            }
            Ok(None) => {}
            Err(refused) => return drained(request, refused, config).await,
        }
    }
    let Some(runtime) = measured else {
        return gate.proxy.forward(request, config, navigation).await;
    };
    // Dropped with this future when the client goes away first: then no longer in flight.
    let forwarded = runtime.origin.forwarded(vestibule_store::now_ms());
    let sent = std::time::Instant::now();
    let response = gate.proxy.forward(request, config, navigation).await;
    let latency_ms = sent.elapsed().as_secs_f64() * 1000.0;
    let error = response.status().is_server_error();
    forwarded.finished(vestibule_store::now_ms(), latency_ms, error);
    response
}

/// Whether a request is a CORS preflight the gate may pass ungated: `OPTIONS` with `Origin` and
/// `Access-Control-Request-Method`, and nothing a preflight never carries (Fetch standard: no
/// credentials, no body). A preflight cannot show admission, and refusing it would keep a
/// storefront on another origin from ever sending `X-Entry-Token`; but many origins run the
/// same handler for every method, so an `OPTIONS` with a cookie, `Authorization`, an entry token
/// or a body is gated like any other request.
pub fn is_bare_preflight(method: &Method, headers: &HeaderMap) -> bool {
    let no_body = headers
        .get(header::CONTENT_LENGTH)
        .is_none_or(|length| length.as_bytes() == b"0")
        && !headers.contains_key(header::TRANSFER_ENCODING);
    method == Method::OPTIONS
        && headers.contains_key(header::ORIGIN)
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
        && !headers.contains_key(header::COOKIE)
        && !headers.contains_key(header::AUTHORIZATION)
        && !headers.contains_key(vestibule_shared::ENTRY_TOKEN_HEADER)
        && no_body
}

/// `answer` once the refused request's body is read (up to `--max-body-bytes`, within
/// `--request-timeout-secs`): a keep-alive client then always gets the answer, never a reset
/// for bytes left unread. A larger or slower body closes the connection after the answer.
async fn drained(request: Request, mut answer: Response, config: &HttpConfig) -> Response {
    if request.headers().contains_key(header::EXPECT) {
        // The client waits for `100 Continue` before sending its body: reading the body would
        // ask for it. The answer goes out at once, and the connection closes (the client may
        // send the body anyway after its wait, RFC 9110 §10.1.1).
        answer.headers_mut().insert(
            axum::http::header::CONNECTION,
            HeaderValue::from_static("close"),
        );
        return answer;
    }
    let read = axum::body::to_bytes(request.into_body(), config.max_body_bytes);
    let limit = std::time::Duration::from_secs(config.request_timeout_secs);
    if !matches!(tokio::time::timeout(limit, read).await, Ok(Ok(_))) {
        answer.headers_mut().insert(
            axum::http::header::CONNECTION,
            HeaderValue::from_static("close"),
        );
    }
    answer
}

/// Why a request is refused before any rule is checked, if it is, and with which status: a path
/// the origin could read as another path than the gate does ([`rules::is_ambiguous_path`]),
/// more than one `Host`, none over HTTP/1.1 (RFC 9112 §3.2), one that is no `uri-host[:port]`
/// ([`is_host`]) or differs from HTTP/2's `:authority`, the asterisk form with another method
/// than `OPTIONS` (all 400), or a transfer coding other than `chunked` (501).
fn refused_shape(request: &Request) -> Option<(StatusCode, &'static str)> {
    let bad = |reason| Some((StatusCode::BAD_REQUEST, reason));
    if rules::is_ambiguous_path(request.uri().path()) {
        return bad("this path has dot segments, segments an origin may trim, control characters, escapes that are not UTF-8, or double escapes");
    }
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return bad("this request names more than one host");
    }
    if request.version() == axum::http::Version::HTTP_11 && host.is_none() {
        return bad("an HTTP/1.1 request must name its host (RFC 9112 §3.2)");
    }
    // The origin builds links from the host (and the gate copies it into X-Forwarded-Host): an
    // empty one, a list (`a.example, b.example`) or one with a path or user part is no host
    // (RFC 9110 §7.2: uri-host [":" port]); nginx answers 400 too.
    if host.is_some_and(|host| !is_host(host.as_bytes())) {
        return bad("the Host field is not a host name or address with an optional port");
    }
    // Over HTTP/2 the host is `:authority`; a `Host` field that says otherwise would reach the
    // origin as the host (RFC 9113 §8.3.1: a mismatch is malformed; nginx answers 400 too).
    if let (Some(authority), Some(host)) = (request.uri().authority(), host) {
        if !host
            .as_bytes()
            .eq_ignore_ascii_case(authority.as_str().as_bytes())
        {
            return bad("the Host field and :authority name different hosts");
        }
    }
    // The asterisk form is for OPTIONS only (RFC 9112 §3.2.4).
    if request.uri().path() == "*" && request.method() != Method::OPTIONS {
        return bad("only OPTIONS may ask for *");
    }
    // hyper reads a chunked body whatever codings come before `chunked`, and the origin would
    // get their bytes (gzip, say) with no word of them: a coding the gate cannot pass on is 501
    // (RFC 9112 §6.1), as nginx answers.
    let mut codings = request
        .headers()
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|line| line.as_bytes().split(|byte| *byte == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|coding| !coding.is_empty());
    if codings.any(|coding| !coding.eq_ignore_ascii_case(b"chunked")) {
        return Some((
            StatusCode::NOT_IMPLEMENTED,
            "this request's transfer coding cannot be passed on (only chunked)",
        ));
    }
    None
}

/// Whether `value` is `uri-host [":" port]` (RFC 9110 §7.2, RFC 3986 §3.2.2): a non-empty
/// registered name (unreserved, sub-delims but `,`, escapes) or IPv4 address, or an IP literal
/// in brackets, and digits after a `:`. No list, no user part, no path, no white space.
fn is_host(value: &[u8]) -> bool {
    let (name, port) = match value.strip_prefix(b"[") {
        Some(literal) => {
            let Some(end) = literal.iter().position(|byte| *byte == b']') else {
                return false;
            };
            let inside = &literal[..end];
            if inside.is_empty()
                || !inside
                    .iter()
                    .all(|byte| byte.is_ascii_hexdigit() || b":.vV".contains(byte))
            {
                return false;
            }
            (&value[..end + 2], &literal[end + 1..])
        }
        None => match value.iter().position(|byte| *byte == b':') {
            Some(colon) => (&value[..colon], &value[colon..]),
            None => (value, &b""[..]),
        },
    };
    let port_ok = match port.strip_prefix(b":") {
        Some(digits) => digits.len() <= 5 && digits.iter().all(u8::is_ascii_digit),
        None => port.is_empty(),
    };
    let name_ok = name.starts_with(b"[")
        || (!name.is_empty()
            && name
                .iter()
                .all(|byte| byte.is_ascii_alphanumeric() || b"-._~!$&'()*+;=%".contains(byte)));
    name_ok && port_ok
}

/// Headers some frameworks take as the request's path instead of the request line (Symfony and
/// Zend read `X-Original-URL` / `X-Rewrite-URL`: CVE-2018-14773): a gated path asked for under
/// an ungated one. No client may send them through the gate.
const PATH_OVERRIDES: [&str; 3] = ["x-original-url", "x-rewrite-url", "x-original-uri"];

/// Removes every client-sent header starting with `X-Vestibule-` (only the gate sets them) and
/// every header with `_` in its name, as nginx does by default: CGI-style origins (WSGI, PHP)
/// read `X_Vestibule_Entry` as `X-Vestibule-Entry`, so an underscore spelling would smuggle a
/// forged claim or forwarding header past the checks. Also the [`PATH_OVERRIDES`].
fn strip_vestibule_headers(headers: &mut HeaderMap) {
    let names: Vec<_> = headers
        .keys()
        .filter(|name| {
            name.as_str().starts_with(VESTIBULE_HEADER_PREFIX)
                || name.as_str().contains('_')
                || PATH_OVERRIDES.contains(&name.as_str())
        })
        .cloned()
        .collect();
    for name in names {
        headers.remove(name);
    }
}

impl Gate {
    /// Admission to `room` for a gated request (its `headers`, and `back`, its path and query):
    /// its claims (from the offline check alone when the store is down and the room's outage
    /// policy is `pass`); else the answer that refuses it.
    async fn admit(
        &self,
        room: &str,
        headers: &HeaderMap,
        back: &str,
        navigation: bool,
    ) -> Result<Option<(EntryClaims, String)>, Response> {
        let config = &self.state.config;
        if !self.state.rooms.contains(room) {
            let message = format!(
                "no room named {:?}",
                room.chars().take(64).collect::<String>()
            );
            return Err(answers::fault(
                StatusCode::NOT_FOUND,
                error_code::ROOM_NOT_FOUND,
                &message,
                navigation,
                config.retry_after_secs,
            ));
        }
        let join = join_url(&self.prefix, room, back);
        let refuse = |code: &str, message: &str, clear_cookie: bool| {
            metrics::counter!("vestibule_gate_refusals_total", "room" => room.to_owned())
                .increment(1);
            answers::refusal(room, code, message, &join, navigation, clear_cookie)
        };
        let candidates = request_tokens(headers, room);
        if candidates.is_empty() {
            return Err(refuse(
                error_code::TOKEN_MISSING,
                "this page needs admission: join the waiting room at joinUrl, then send the \
                 entry token in X-Entry-Token (or open a session)",
                false,
            ));
        }
        // The first candidate that verifies admits; a refused one only moves to the next.
        let mut refused = None;
        for (token, source) in candidates {
            match verify_entry(&self.state, room, &token).await {
                Ok(claims) => return Ok(Some((claims, token))),
                Err(ApiError::EntryToken { code, message }) => {
                    let clear_cookie = source == TokenSource::Cookie
                        || refused.as_ref().is_some_and(|(_, _, clear)| *clear);
                    refused = Some((code, message, clear_cookie));
                }
                Err(error) => return self.unverifiable(room, &token, error, navigation),
            }
        }
        let (code, message, clear_cookie) = refused.unwrap_or_default();
        Err(refuse(code, &message, clear_cookie))
    }

    /// A token the store could not be asked about: passed on the offline check alone under the
    /// room's `pass` outage policy, else 503 (or the error's own 4xx).
    // The refusal is the response itself (as `admit` returns it): boxing only moves it.
    #[allow(clippy::result_large_err)]
    fn unverifiable(
        &self,
        room: &str,
        token: &str,
        error: ApiError,
        navigation: bool,
    ) -> Result<Option<(EntryClaims, String)>, Response> {
        let config = &self.state.config;
        match error {
            ApiError::StoreUnavailable { source } | ApiError::StoreTimeout { source }
                if config.outage_policy.for_room(room) == OutagePolicy::Pass =>
            {
                // The store error came after the offline check passed: the signature, expiry and
                // room still hold; only "used or released" cannot be asked.
                tracing::warn!(%room, reason = %source, "store down: gated path passed on the offline check alone (outage policy = pass)");
                metrics::counter!("vestibule_outage_passes_total", "room" => room.to_owned())
                    .increment(1);
                Ok((self.state.tokens.verify(token, room))
                    .ok()
                    .map(|claims| (EntryClaims::from(claims), token.to_owned())))
            }
            error => {
                let status = match error.status() {
                    StatusCode::GATEWAY_TIMEOUT => StatusCode::SERVICE_UNAVAILABLE,
                    status => status,
                };
                let code = match status {
                    StatusCode::SERVICE_UNAVAILABLE => error_code::STORE_UNAVAILABLE,
                    _ => error.code(),
                };
                let mut response = answers::fault(
                    status,
                    code,
                    "the waiting room cannot check admission right now; retry shortly",
                    navigation,
                    config.retry_after_secs,
                );
                if status.is_client_error() {
                    response = error.into_response();
                }
                Err(response)
            }
        }
    }
}

#[cfg(test)]
mod tests;
