//! Vestibule's HTTP layer: the routes (one module per resource, merged by [`router`]), the
//! edge's layers and what every route shares. It depends on the domain (`vestibule-room`) and
//! the store (`vestibule-store`), never on the gate or the server above it.
//!
//! - [`state`]: [`state::AppState`], the handles every handler gets; [`config`]: [`config::HttpConfig`],
//!   what this layer takes from the configuration.
//! - [`entry_cookie`]: where a request carries an entry token (header or session cookie).
//! - [`jwks`]: `GET /.well-known/jwks.json`.
//! - [`error`]: the edge's error type, its JSON body and extractors.
//! - [`token_layer`]: the entry-token middleware on protected prefixes.
//! - [`client_ip`]: the client's address, from the peer or trusted forwarding headers.
//! - [`user_assertion`]: storefront-signed user ids (HMAC-SHA256).
//! - [`tickets`]: join, poll, leave.
//! - [`events`]: a ticket's SSE stream.
//! - [`idempotency`]: the `Idempotency-Key` header of joins and orders.
//! - [`rooms`]: public room info. [`draw`]: a room's draw (`GET …/draw`).
//! - [`orders`]: the demo checkout behind the entry-token layer.
//! - [`entries`]: the storefront's consume and release of entry tokens (origin API key).
//! - [`admin`]: live room settings (bearer token); [`admin_rooms`]: rooms created, listed and
//!   deleted at run time, and who is waiting; [`audit`]: the audit log of admin changes;
//!   [`admin_events`]: every room's figures once a second (SSE, the operator console's feed).
//! - [`bots`]: proof-of-work challenges, a join's bot checks, top clients (admin).
//! - [`health`]: `/healthz`, `/readyz`, `/metrics`.
//! - [`openapi`]: the generated OpenAPI document.
//! - [`page`]: the built WASM page and its assets.

pub mod admin;
pub mod admin_events;
pub mod admin_figures;
pub mod admin_rooms;
pub mod audit;
pub mod bots;
pub mod client_ip;
pub mod config;
pub mod draw;
mod edge;
pub mod entries;
pub mod entry_cookie;
pub mod error;
pub mod events;
pub mod health;
pub mod idempotency;
pub mod jwks;
pub mod observe;
pub mod openapi;
pub mod orders;
pub mod page;
pub mod rooms;
pub mod signals;
pub mod state;
pub mod tickets;
pub mod token_layer;
pub mod user_assertion;
pub mod widget;

use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{header, HeaderName, HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tower_http::cors::{AllowOrigin, CorsLayer};

use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;

use crate::error::{add_retry_after, json_error_body, log_error_answer, ApiError};
use crate::state::AppState;
use crate::token_layer::require_entry_token;

/// The whole application's router, without a socket (tests can `oneshot` it): [`edge`] as the
/// one service of a router.
pub fn router(state: AppState, extra: OpenApiRouter<AppState>) -> Router {
    Router::new().fallback_service(edge(state, extra))
}

/// The routes behind the layers every request passes, outermost first (`edge::Answers`).
pub type Edge =
    edge::Answers<tower::util::Either<tower_http::cors::Cors<edge::Intake>, edge::Intake>>;

/// The whole application as a service of its own: served as it is (no router around it, which
/// would box and clone it on every request: [`App::Own`]), or wrapped by [`router`].
pub fn edge(state: AppState, extra: OpenApiRouter<AppState>) -> Edge {
    let config = state.config.clone();
    let (api, mut document) = documented_routes_with(extra);
    if let Some(prefix) = &config.api_prefix {
        // Gate mode serves the API under the mount prefix: clients built from the document
        // must call it there, not at the storefront's root.
        document.servers = Some(vec![utoipa::openapi::Server::new(
            prefix.trim_end_matches('/'),
        )]);
    }
    let api = api
        .merge(openapi::router(
            &document,
            &config.cors_origins,
            config.user_assertion_secret.is_some(),
        ))
        .route(
            "/api/{*rest}",
            axum::routing::any(crate::error::unknown_endpoint),
        )
        .method_not_allowed_fallback(method_not_allowed);
    let routes = api
        .merge(page::router(&config.static_dir))
        .with_state(state.clone());
    let answers = std::sync::Arc::new(AnswerPolicy {
        retry_after_secs: config.retry_after_secs,
        frame_ancestors: frame_ancestors(&config.cors_origins),
    });
    // The layers wrap the routed app once, outermost first, and the result is the one service
    // of a router of its own. (Added with `Router::layer` they wrapped every route, each layer
    // boxed: every request cloned that nested stack of boxes once per middleware, ~7% of a
    // join's instructions.)
    // A request with a body, or under a protected prefix, goes through the body and entry-token
    // middleware; the rest goes straight to the routes (`edge::Intake`).
    let slow = Router::new().fallback_service(
        tower::ServiceBuilder::new()
            .layer(middleware::from_fn_with_state(
                config.max_body_bytes,
                read_whole_body,
            ))
            .layer(DefaultBodyLimit::max(config.max_body_bytes))
            .layer(middleware::from_fn_with_state(
                state.clone(),
                require_entry_token,
            ))
            .service(routes.clone()),
    );
    let layered: Edge = tower::ServiceBuilder::new()
        // The request span (at `debug` only: a span formatted for every request was ~8% of a
        // join's instructions at the default level), the request timeout and what every answer
        // gets. Error lines name the request themselves (`error::log_error_answer`).
        .layer(edge::AnswerLayer {
            policy: answers,
            timeout: Duration::from_secs(config.request_timeout_secs),
        })
        .option_layer((!config.cors_origins.is_empty()).then(|| cors(&config.cors_origins)))
        .layer(edge::IntakeLayer {
            slow,
            protected: crate::token_layer::Prefixes::new(&config.protected_prefixes),
            state: state.clone(),
        })
        .service(routes);
    layered
}

/// What a serving thread serves: Vestibule's own [`Edge`], or gate mode's router around it.
///
/// Cloned for every request (hyper-util's service glue does); a boxed [`Edge`] would make that
/// clone an allocation, hence the variants' unequal sizes.
#[derive(Clone)]
#[allow(clippy::large_enum_variant)]
pub enum App {
    /// The routes behind their layers, with nothing around them.
    Own(Edge),
    /// Any router (gate mode's).
    Routed(Router),
}

impl tower::Service<Request> for App {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures_util::future::Either<
        <Edge as tower::Service<Request>>::Future,
        <Router as tower::Service<Request>>::Future,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        match self {
            Self::Own(edge) => edge.poll_ready(cx),
            Self::Routed(router) => tower::Service::<Request>::poll_ready(router, cx),
        }
    }

    fn call(&mut self, request: Request) -> Self::Future {
        match self {
            Self::Own(edge) => futures_util::future::Either::Left(edge.call(request)),
            Self::Routed(router) => futures_util::future::Either::Right(router.call(request)),
        }
    }
}

/// Every documented route of this layer and the OpenAPI document made from the same
/// declarations.
pub fn documented_routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    documented_routes_with(OpenApiRouter::new())
}

/// [`documented_routes`] with the `extra` routes of a layer above (the gate's session
/// endpoints), documented in the same document.
pub fn documented_routes_with(
    extra: OpenApiRouter<AppState>,
) -> (Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(tickets::router())
        .merge(events::router())
        .merge(rooms::router())
        .merge(draw::router())
        .merge(orders::router())
        .merge(entries::router())
        .merge(signals::router())
        .merge(jwks::router())
        .merge(admin::router())
        .merge(admin_rooms::router())
        .merge(audit::router())
        .merge(admin_events::router())
        .merge(admin_figures::router())
        .merge(bots::router())
        .merge(health::router())
        .merge(extra)
        .split_for_parts()
}

/// A path safe to log: ticket ids (bearer secrets) replaced by `:id`.
pub fn redacted_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut previous = "";
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if previous == "tickets" && !segment.is_empty() {
            out.push_str(":id");
        } else {
            out.push_str(&segment.chars().take(80).collect::<String>());
        }
        previous = segment;
    }
    out
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// CORS for the configured storefront origins only.
fn cors(origins: &[String]) -> CorsLayer {
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|origin| HeaderValue::from_str(origin).ok())
        .collect();
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::PATCH])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            HeaderName::from_static("idempotency-key"),
            HeaderName::from_static("x-entry-token"),
            HeaderName::from_static("x-user-assertion"),
            HeaderName::from_static("x-proof-of-work"),
            // A fetch-based event-stream client resends these when it reconnects.
            HeaderName::from_static("last-event-id"),
            header::CACHE_CONTROL,
        ])
        .expose_headers([header::RETRY_AFTER, header::LOCATION])
        .max_age(Duration::from_secs(600))
}

/// Reads every request body (up to the limit) before routing, so an early answer (404, 403, …)
/// never leaves unread bytes on the connection: the client always gets its answer and keeps its
/// connection. Over the limit: 413, and the connection closes. A body known to be empty (a GET
/// without one) has nothing to read and goes on as it is (`edge::Intake` sends such a request
/// here only under a protected prefix).
async fn read_whole_body(
    axum::extract::State(limit): axum::extract::State<usize>,
    request: Request,
    next: Next,
) -> Response {
    use axum::body::HttpBody as _;
    let is_api = request.uri().path().starts_with("/api/");
    if request.body().size_hint().exact() == Some(0) {
        next.run(request).await
    } else {
        let (parts, body) = request.into_parts();
        match axum::body::to_bytes(body, limit).await {
            Ok(bytes) if is_api && !is_json_if_it_says_so(&parts.headers, &bytes) => {
                ApiError::BadRequest(
                    "the request body is not valid JSON (send JSON, or no body where the endpoint takes none)"
                        .into(),
                )
                .into_response()
            }
            Ok(bytes) => {
                next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                    .await
            }
            Err(_) => ApiError::PayloadTooLarge.into_response(),
        }
    }
}

/// Whether an API request's `body` is well-formed JSON (RFC 8259: UTF-8, no lone surrogates)
/// unless the request declares one other media type: true for a body of whitespace only, and for
/// a body sent with exactly one `Content-Type` that names a type other than JSON
/// (`application/json`, `…+json`; the endpoint answers 415 if it reads a body). No
/// `Content-Type`, an empty or malformed one, or several (which a proxy may read differently)
/// count as JSON.
///
/// Checked for every API request, before routing, so that an endpoint that takes no body (a join,
/// a leave) refuses a malformed one with 400 instead of acting on the request and ignoring it: a
/// client whose serializer broke learns it before it holds a ticket it did not mean to ask for.
fn is_json_if_it_says_so(headers: &axum::http::HeaderMap, body: &[u8]) -> bool {
    let mut types = headers.get_all(header::CONTENT_TYPE).iter();
    let declares_another_type = match (types.next(), types.next()) {
        (Some(value), None) => value
            .to_str()
            .ok()
            .and_then(media_type)
            .is_some_and(|essence| essence != "application/json" && !essence.ends_with("+json")),
        _ => false,
    };
    declares_another_type
        || body.iter().all(u8::is_ascii_whitespace)
        || serde_json::from_slice::<serde_json::Value>(body).is_ok()
}

/// The lowercase `type/subtype` of a `Content-Type` value, if it is well formed (RFC 9110
/// §8.3.1: two tokens around one `/`, parameters after `;`).
fn media_type(value: &str) -> Option<String> {
    let essence = value.split(';').next()?.trim();
    let (kind, subtype) = essence.split_once('/')?;
    let token = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
    };
    (token(kind) && token(subtype)).then(|| essence.to_ascii_lowercase())
}

/// What [`finish_answer`] adds to answers.
struct AnswerPolicy {
    /// `Retry-After` of a 503/504 that has none.
    retry_after_secs: u64,
    /// The `Content-Security-Policy` that says who may frame the page.
    frame_ancestors: HeaderValue,
}

/// Every answer, as five separate layers did before, in their order (one layer instead of five:
/// each layer is a future of its own on every request). The answer layer ([`edge::Answers`])
/// answers a request with too many or too large header fields 431 itself, without going further
/// ([`error::check_header_size`]: the same limit over HTTP/1.1 and HTTP/2). Then every answer
/// gets:
/// 1. an error without a JSON body gets one ([`json_error_body`]), which keeps only
///    `Retry-After` and `Allow` of the answer it replaces;
/// 2. the page's framing, sniffing and referrer headers ([`add_frame_headers`]), and under
///    `/api/` `Cache-Control: no-store`, whichever layer made the answer (a 408 of the request
///    timeout, a 405 of the page's routes, a 431, a CORS preflight);
/// 3. a 503/504 gets `Retry-After` ([`add_retry_after`]);
/// 4. an error is logged once ([`log_error_answer`]) and every answer is counted
///    ([`observe::count_answer`]);
/// 5. an answer to `HEAD` loses its body ([`without_body`]).
fn finish_answer(
    response: Response,
    method: &Method,
    path: &str,
    policy: &AnswerPolicy,
) -> Response {
    let mut response = json_error_body(response);
    add_frame_headers(&mut response, &policy.frame_ancestors);
    if path.starts_with("/api/") {
        edge::no_store(&mut response);
    }
    add_retry_after(&mut response, policy.retry_after_secs);
    log_error_answer(&response, method, path);
    observe::count_answer(&response);
    if method == Method::HEAD {
        return without_body(response);
    }
    response
}

/// An answer to `HEAD` as it would be to `GET` but without its body (RFC 9110 §9.3.2): its
/// `Content-Length` kept, or set from the body's exact size. The routes' own answers to `HEAD`
/// come without one (axum) and pass as they are (no length invented for a stream), but one made
/// by a layer in front of them (the token check's 403, a 413, 431 or 408) came with its JSON
/// body, which HTTP/1.1 drops and HTTP/2 sends as `DATA`: a protocol error to the client (curl:
/// "stream was not closed cleanly", no status).
fn without_body(response: Response) -> Response {
    use axum::body::HttpBody as _;
    if response.body().size_hint().exact() == Some(0) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    if !parts.headers.contains_key(header::CONTENT_LENGTH) {
        if let Some(length) = body.size_hint().exact() {
            parts
                .headers
                .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        }
    }
    Response::from_parts(parts, axum::body::Body::empty())
}

/// Who may frame the page: the page itself and the configured storefront origins.
fn frame_ancestors(origins: &[String]) -> HeaderValue {
    let policy = std::iter::once("'self'".to_owned())
        .chain(origins.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    HeaderValue::from_str(&format!("frame-ancestors {policy}"))
        .unwrap_or_else(|_| HeaderValue::from_static("frame-ancestors 'self'"))
}

/// The page's framing policy, no MIME sniffing, no referrer.
fn add_frame_headers(response: &mut Response, frame_ancestors: &HeaderValue) {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, frame_ancestors.clone());
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
}

/// Runs `call` on the runtime of `room`. When the store answers that the runtime's generation is
/// gone (the room was deleted, or deleted and created again, through another replica since this
/// one last read its document; the store changed nothing), the room's document is read at once
/// and, if a later generation is live, `call` runs once more on its runtime: a request never
/// waits for the next sync to reach the room created again.
///
/// # Errors
/// `call`'s; 404 or 410 when the room does not run here.
pub(crate) async fn on_live_room<T, F, Fut>(
    state: &AppState,
    room: &str,
    mut call: F,
) -> Result<T, ApiError>
where
    F: FnMut(std::sync::Arc<vestibule_room::RoomRuntime>) -> Fut,
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    let runtime = state.room(room)?;
    let generation = runtime.generation;
    match call(runtime).await {
        Err(ApiError::RoomDeleted(_)) => {
            state
                .rooms
                .refresh(&*state.store, &state.tokens, room)
                .await;
            match state.rooms.get(room) {
                Some(fresh) if fresh.generation > generation => call(fresh).await,
                _ => Err(ApiError::RoomDeleted(room.chars().take(64).collect())),
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn logged_paths_never_carry_ticket_ids() {
        assert_eq!(
            super::redacted_path("/api/v1/rooms/main/tickets/Zb3n0W6m1q8VqL2pX9cT4A/events"),
            "/api/v1/rooms/main/tickets/:id/events"
        );
        assert_eq!(
            super::redacted_path("/api/v1/rooms/main/tickets"),
            "/api/v1/rooms/main/tickets"
        );
    }
}
