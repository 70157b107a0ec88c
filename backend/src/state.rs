//! Shared application state: cheap handles cloned into every request.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;

use crate::config::Config;
use crate::error::ApiError;
use crate::sse_hub::SseHub;
use crate::store::{RoomConfig, Store, VersionedConfig};

/// State handed to every handler.
#[derive(Clone)]
pub struct AppState {
    /// The queue store (Redis or embedded).
    pub store: Arc<dyn Store>,
    /// The validated configuration.
    pub config: Arc<Config>,
    /// The configured rooms by slug.
    pub rooms: Arc<HashMap<String, Arc<RoomRuntime>>>,
    /// The admin bearer token; `None` when the admin API is off.
    pub admin_token: Option<Arc<str>>,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// Flips to `true` when the server starts shutting down (ends SSE streams).
    pub shutdown: watch::Receiver<bool>,
    /// How the store is set up where that can lose queue state (Redis), as last checked.
    pub store_safety: Arc<RwLock<Option<crate::store::StoreSafety>>>,
}

/// One room's in-process view: its settings as last read from the store, and its SSE hub.
pub struct RoomRuntime {
    /// Room slug.
    pub name: String,
    config: RwLock<VersionedConfig>,
    /// Fan-out of ticket updates to this process's SSE streams.
    pub hub: SseHub,
    /// Active users as of this process's last scheduler tick (for the ETA under a cap).
    active_users: std::sync::atomic::AtomicU64,
}

impl RoomRuntime {
    /// A room with its settings in force.
    pub fn new(name: String, config: VersionedConfig) -> Self {
        Self {
            name,
            config: RwLock::new(config),
            hub: SseHub::default(),
            active_users: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The settings last read from the store (refreshed every scheduler tick).
    pub fn config(&self) -> RoomConfig {
        self.config
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .config
            .clone()
    }

    /// Active users as of the last scheduler tick.
    pub fn active_users(&self) -> u64 {
        self.active_users.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records the active users a scheduler tick saw.
    pub fn set_active_users(&self, active: u64) {
        self.active_users
            .store(active, std::sync::atomic::Ordering::Relaxed);
    }

    /// Replaces the cached settings, unless they are older than the ones held: a scheduler tick
    /// that read the store before an admin change must not undo it here when it answers after.
    pub fn set_config(&self, config: VersionedConfig) {
        let mut held = self
            .config
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if config.version >= held.version {
            *held = config;
        }
    }
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
    pub fn default_room_config(&self) -> RoomConfig {
        self.config.default_room_config()
    }

    /// How long finished tickets stay queryable, in milliseconds.
    pub fn keep_ms(&self) -> u64 {
        self.config.terminal_ticket_ttl_secs * 1000
    }
}
