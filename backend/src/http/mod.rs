//! The HTTP edge: routes (one module per resource, merged by [`router`]) and what every route shares.
//!
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
pub mod admin_rooms;
pub mod audit;
pub mod bots;
pub mod client_ip;
pub mod draw;
pub mod entries;
pub mod error;
pub mod events;
pub mod health;
pub mod idempotency;
pub mod observe;
pub mod openapi;
pub mod orders;
pub mod page;
pub mod rooms;
pub mod tickets;
pub mod token_layer;
pub mod user_assertion;
pub mod widget;

use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;

use crate::http::error::{json_error_bodies, log_errors, retry_after, ApiError};
use crate::http::token_layer::require_entry_token;
use crate::state::AppState;

/// The whole application's router, without a socket (tests can `oneshot` it).
pub fn router(state: AppState) -> Router {
    let config = state.config.clone();
    let (api, mut document) = documented_routes();
    if config.gate.enabled() {
        // Gate mode serves the API under the mount prefix: clients built from the document
        // must call it there, not at the storefront's root.
        let prefix = config.gate.prefix();
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
            axum::routing::any(crate::http::error::unknown_endpoint),
        )
        .method_not_allowed_fallback(method_not_allowed);
    let mut app = api
        .merge(page::router(&config.static_dir))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            require_entry_token,
        ))
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .layer(middleware::from_fn_with_state(
            config.max_body_bytes,
            read_whole_body,
        ))
        .layer(middleware::from_fn(no_store_for_api));
    if !config.cors_origins.is_empty() {
        app = app.layer(cors(&config.cors_origins));
    }
    app.layer(middleware::from_fn(frame_ancestors(&config.cors_origins)))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_secs(config.request_timeout_secs),
        ))
        .layer(middleware::from_fn(json_error_bodies))
        .layer(middleware::from_fn_with_state(
            config.retry_after_secs,
            retry_after,
        ))
        .layer(middleware::from_fn(log_errors))
        .layer(middleware::from_fn(observe::count_answers))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|request: &Request| {
                    tracing::info_span!(
                        "request",
                        method = %request.method(),
                        path = %redacted_path(request.uri().path()),
                    )
                })
                // Every error answer is logged once, with its cause, by `log_errors`.
                .on_failure(()),
        )
        .with_state(state)
}

/// Every documented route and the OpenAPI document made from the same declarations.
pub fn documented_routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(tickets::router())
        .merge(events::router())
        .merge(rooms::router())
        .merge(draw::router())
        .merge(orders::router())
        .merge(entries::router())
        .merge(crate::tokens::jwks::router())
        .merge(admin::router())
        .merge(admin_rooms::router())
        .merge(audit::router())
        .merge(admin_events::router())
        .merge(bots::router())
        .merge(health::router())
        .merge(crate::gate::session::router())
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
        ])
        .expose_headers([header::RETRY_AFTER, header::LOCATION])
        .max_age(Duration::from_secs(600))
}

/// Reads every request body (up to the limit) before routing, so an early answer (404, 403, …)
/// never leaves unread bytes on the connection: the client always gets its answer and keeps its
/// connection. Over the limit: 413, and the connection closes.
async fn read_whole_body(
    axum::extract::State(limit): axum::extract::State<usize>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Err(_) => ApiError::PayloadTooLarge.into_response(),
    }
}

/// API answers carry tickets and tokens: never cache them anywhere.
async fn no_store_for_api(request: Request, next: Next) -> Response {
    let is_api = request.uri().path().starts_with("/api/");
    let mut response = next.run(request).await;
    if is_api {
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// Who may frame the page: the page itself and the configured storefront origins.
fn frame_ancestors(
    origins: &[String],
) -> impl Fn(Request, Next) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>>
       + Clone
       + Send
       + Sync
       + 'static {
    let policy = std::iter::once("'self'".to_owned())
        .chain(origins.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let value = HeaderValue::from_str(&format!("frame-ancestors {policy}"))
        .unwrap_or_else(|_| HeaderValue::from_static("frame-ancestors 'self'"));
    move |request: Request, next: Next| {
        let value = value.clone();
        Box::pin(async move {
            let mut response = next.run(request).await;
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_SECURITY_POLICY, value);
            headers.insert(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            );
            headers.insert(
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            );
            response
        })
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
