//! Shared application state: cheap handles cloned into every request.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use metrics_exporter_prometheus::PrometheusHandle;
use secrecy::SecretString;
use tokio::sync::watch;

use crate::config::Config;
use crate::http::error::ApiError;
use crate::room::RoomRuntime;
use crate::store::{Settings, Store};

/// State handed to every handler.
#[derive(Clone)]
pub struct AppState {
    /// The queue store (Redis or embedded).
    pub store: Arc<dyn Store>,
    /// The validated configuration.
    pub config: Arc<Config>,
    /// The configured rooms by slug.
    pub rooms: Arc<HashMap<String, Arc<RoomRuntime>>>,
    /// The admin bearer token; `None` when the admin API is off. `Debug` prints `[REDACTED]`.
    pub admin_token: Option<Arc<SecretString>>,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// Flips to `true` when the server starts shutting down (ends SSE streams).
    pub shutdown: watch::Receiver<bool>,
    /// Signs and verifies entry tokens (JWT); its keys are the JWKS.
    pub tokens: Arc<crate::tokens::TokenService>,
    /// How the store is set up where that can lose queue state (Redis), as last checked.
    pub store_safety: Arc<RwLock<Option<crate::store::StoreSafety>>>,
    /// Bot defences: the challenge key, join rates and top clients (README "Bots at the door").
    pub bots: Arc<crate::bots::Bots>,
    /// The figures of the admin event stream, read once a second for every viewer.
    pub admin_feed: Arc<crate::http::admin_events::AdminFeed>,
}

impl AppState {
    /// The runtime of a configured room.
    ///
    /// # Errors
    /// [`ApiError::RoomNotFound`] for any other name.
    pub fn room(&self, room: &str) -> Result<Arc<RoomRuntime>, ApiError> {
        self.rooms.get(room).cloned().ok_or_else(|| {
            let shown: String = room.chars().take(64).collect();
            ApiError::RoomNotFound(shown)
        })
    }

    /// A room's settings from the configuration (before any operator change).
    pub fn default_settings(&self) -> Settings {
        self.config.default_settings()
    }

    /// How long finished tickets stay queryable, in milliseconds.
    pub fn keep_ms(&self) -> u64 {
        self.config.terminal_ticket_ttl_secs * 1000
    }
}
