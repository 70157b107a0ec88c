//! The built waiting-room page (trunk's `dist/`): `/`, `/checkout` and static assets; and the
//! operator console (`dist/console/`, a second app) at `/console/` (`/console` redirects there,
//! so its relative asset and API URLs resolve under any mount prefix).
//!
//! Files go out precompressed when the browser accepts it: `scripts/build-page.sh` writes a
//! brotli (`.br`) and a gzip (`.gz`) copy next to each, and the file services pick the best one
//! by `Accept-Encoding` (with `Vary: Accept-Encoding`). Assets (trunk puts a content hash in
//! every name) are cached for a year; HTML is `no-cache`: a browser may keep it but asks again
//! every time (a cheap 304), because it names the current asset hashes and must never be stale
//! for a shopper mid-sale.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Router;
use tower::ServiceBuilder;
use tower_http::services::{ServeDir, ServeFile};
use tower_http::set_header::SetResponseHeaderLayer;

use crate::state::AppState;

/// Routes of this module: the page when `static_dir` holds one (any other path outside `/api/`
/// is a static asset, or the page itself so client-side routes survive a reload), else a hint
/// how to build it and JSON 404s.
pub fn router(static_dir: &std::path::Path) -> Router<AppState> {
    let index = static_dir.join("index.html");
    if !index.is_file() {
        return Router::new()
            .route("/", axum::routing::get(not_built))
            .route("/checkout", axum::routing::get(not_built))
            .route("/console", axum::routing::get(not_built))
            .route("/console/", axum::routing::get(not_built))
            .fallback(crate::error::unknown_endpoint);
    }
    let vary = HeaderValue::from_static("accept-encoding");
    let html = ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::VARY,
            vary.clone(),
        ))
        .service(
            ServeFile::new(&index)
                .precompressed_br()
                .precompressed_gzip(),
        );
    // Unknown paths get the page (and its `no-cache`), never a year-long cache of it.
    let assets = ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=31536000, immutable"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(header::VARY, vary))
        .service(
            ServeDir::new(static_dir)
                .precompressed_br()
                .precompressed_gzip()
                .fallback(html.clone()),
        );
    let index_html = std::fs::read_to_string(&index).unwrap_or_default();
    let console_index = static_dir.join("console").join("index.html");
    let console: Router<AppState> = if console_index.is_file() {
        let console_html = ServiceBuilder::new()
            .layer(SetResponseHeaderLayer::overriding(
                header::CACHE_CONTROL,
                HeaderValue::from_static("no-cache"),
            ))
            .layer(SetResponseHeaderLayer::overriding(
                header::VARY,
                HeaderValue::from_static("accept-encoding"),
            ))
            .service(
                ServeFile::new(&console_index)
                    .precompressed_br()
                    .precompressed_gzip(),
            );
        Router::new()
            .route_service("/console/", console_html.clone())
            .route_service("/console/index.html", console_html)
    } else {
        Router::new().route("/console/", axum::routing::get(not_built))
    };
    Router::new()
        .merge(super::widget::router(&index_html))
        .merge(console)
        // Relative: `/_vestibule/console` → `/_vestibule/console/` under a mount prefix too.
        .route(
            "/console",
            axum::routing::get(|| async { axum::response::Redirect::to("console/") }),
        )
        .route_service("/", html.clone())
        .route_service("/index.html", html.clone())
        .route_service("/checkout", html)
        .fallback_service(assets)
}

async fn not_built() -> Response {
    (
        StatusCode::OK,
        [(header::CACHE_CONTROL, "no-store")],
        Html("<!doctype html><title>Vestibule</title><p>The page (or the operator console) is not built. Run <code>scripts/run.sh</code> (or <code>scripts/build-page.sh</code>) and restart; the JSON API is at <code>/api/v1/</code>.</p>"),
    )
        .into_response()
}
