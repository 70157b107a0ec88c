//! `/healthz` (liveness), `/readyz` (store reachable) and `/metrics` (Prometheus text).

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::openapi::StoreReadErrors;
use crate::error::{ApiError, Json};
use crate::state::AppState;
use vestibule_store::StoreSafety;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics_text))
}

/// The body of `/healthz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Liveness {
    /// Always `"ok"` while the process serves.
    #[schema(example = "ok")]
    pub status: &'static str,
}

/// The body of `/readyz` when the store answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    /// Always `"ready"`.
    #[schema(example = "ready")]
    pub status: &'static str,
    /// `"redis"` or `"memory"`.
    #[schema(example = "redis")]
    pub store: &'static str,
    /// Redis only: its settings that can lose queue state, as last checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis: Option<StoreSafety>,
    /// Redis only: one sentence per risk found in those settings (empty = none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
}

/// Always 200 while the process serves.
#[utoipa::path(get, path = "/healthz", tag = "health", operation_id = "healthz",
    responses((status = 200, description = "Alive", body = Liveness)))]
pub async fn healthz() -> Json<Liveness> {
    Json(Liveness { status: "ok" })
}

/// 200 when the store answers on every connection of this process, 503 + `Retry-After` when
/// one does not.
///
/// On Redis the body also reports the settings that can lose queue state (as last checked) and
/// a warning for each risk. Such risks do not make the process unready.
#[utoipa::path(get, path = "/readyz", tag = "health", operation_id = "readyz",
    responses((status = 200, description = "The store answers", body = Readiness), StoreReadErrors))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Readiness>, ApiError> {
    // Every connection of this process: after a Redis restart each reconnects on its own, and a
    // process whose other threads cannot reach the store yet is not ready.
    let stores = state.stores();
    let pings = stores.iter().map(|store| store.ping());
    futures_util::future::try_join_all(pings).await?;
    let safety = state
        .store_safety
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    Ok(Json(Readiness {
        status: "ready",
        store: state.store.kind(),
        warnings: safety.as_ref().map(StoreSafety::warnings),
        redis: safety,
    }))
}

/// Prometheus text exposition: this process's counters and gauges, then the room gauges read
/// from the store now, the same on every replica (aggregate them with `max`; written by
/// `http::observe`).
#[utoipa::path(get, path = "/metrics", tag = "health", operation_id = "metrics",
    responses((status = 200, description = "Prometheus text format 0.0.4", content_type = "text/plain", body = String)))]
pub async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    let mut text = state.metrics.render();
    text.push_str(&super::observe::room_gauges(&state).await);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        text,
    )
}
