//! The built waiting-room page (trunk's `dist/`): `/`, `/checkout` and static assets.
//!
//! Hashed assets are cached for a year; HTML is `no-store` (it names the current asset hashes and
//! must never be served stale to a shopper mid-sale).

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
            .fallback(super::unknown_endpoint);
    }
    let html = ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
        .service(ServeFile::new(&index));
    let assets = ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=31536000, immutable"),
        ))
        .service(ServeDir::new(static_dir).fallback(ServeFile::new(&index)));
    Router::new()
        .route_service("/", html.clone())
        .route_service("/index.html", html.clone())
        .route_service("/checkout", html)
        .fallback_service(assets)
}

async fn not_built() -> Response {
    (
        StatusCode::OK,
        [(header::CACHE_CONTROL, "no-store")],
        Html("<!doctype html><title>Vestibule</title><p>The page is not built. Run <code>scripts/run.sh</code> (or <code>scripts/build-page.sh</code>) and restart; the JSON API is at <code>/api/v1/</code>.</p>"),
    )
        .into_response()
}
