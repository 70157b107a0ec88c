//! `/healthz` (liveness), `/readyz` (store reachable) and `/metrics` (Prometheus text).

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use serde_json::json;

use crate::error::{ApiError, Json};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
}

/// Always 200 while the process serves.
#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "Alive")))]
pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

/// 200 when the store answers, 503 + `Retry-After` when it does not.
///
/// On Redis the body also reports the settings that can lose queue state (as last checked) and
/// a warning for each risk: `{"status":"ready","store":"redis","redis":{"maxmemoryPolicy":
/// "volatile-lru",…},"warnings":["…"]}`. Such risks do not make the process unready.
#[utoipa::path(get, path = "/readyz", responses((status = 200), (status = 503, body = vestibule_shared::ErrorBody)))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    state.store.ping().await?;
    let safety = state
        .store_safety
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let mut body = json!({ "status": "ready", "store": state.store.kind() });
    if let Some(safety) = safety {
        body["warnings"] = json!(safety.warnings());
        body["redis"] = json!(safety);
    }
    Ok(Json(body))
}

/// Prometheus text exposition.
#[utoipa::path(get, path = "/metrics", responses((status = 200, content_type = "text/plain")))]
pub async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}
