//! Shared application state: cheap handles cloned into every request.

use std::sync::{Arc, RwLock};

use metrics_exporter_prometheus::PrometheusHandle;
use secrecy::SecretString;
use tokio::sync::watch;

use crate::config::HttpConfig;
use crate::error::ApiError;
use vestibule_room::{RoomRuntime, Rooms};
use vestibule_store::{Settings, Store};

/// State handed to every handler: one shared [`AppStateParts`], so the clones every request
/// makes (each middleware's state, the handler's `State`) cost one reference count, not one per
/// field (dropping a ten-field state was 3% of a poll's CPU).
#[derive(Clone)]
pub struct AppState(Arc<AppStateParts>);

impl AppState {
    /// The state made of its parts.
    pub fn new(parts: AppStateParts) -> Self {
        Self(Arc::new(parts))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppStateParts;

    fn deref(&self) -> &AppStateParts {
        &self.0
    }
}

/// What the application state holds.
pub struct AppStateParts {
    /// The queue store (Redis or embedded).
    pub store: Arc<dyn Store>,
    /// What the HTTP layer takes from the configuration.
    pub config: Arc<HttpConfig>,
    /// What rooms take from it.
    pub room_options: Arc<vestibule_room::RoomOptions>,
    /// The rooms running here (kept in line with the store's list every tick).
    pub rooms: Arc<Rooms>,
    /// The admin bearer token; `None` when the admin API is off. `Debug` prints `[REDACTED]`.
    pub admin_token: Option<Arc<SecretString>>,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// Flips to `true` when the server starts shutting down (ends SSE streams).
    pub shutdown: watch::Receiver<bool>,
    /// Signs and verifies entry tokens (JWT); its keys are the JWKS.
    pub tokens: Arc<vestibule_room::tokens::TokenService>,
    /// How the store is set up where that can lose queue state (Redis), as last checked.
    pub store_safety: Arc<RwLock<Option<vestibule_store::StoreSafety>>>,
    /// Bot defences: the challenge key, join rates and top clients (docs/bots.md).
    pub bots: Arc<vestibule_room::bots::Bots>,
    /// The figures of the admin event stream, read once a second for every viewer.
    pub admin_feed: Arc<crate::admin_events::AdminFeed>,
    /// Every store handle of this process: the one it started with, each serving thread's own
    /// Redis connection (added by [`AppState::with_store`]) and the schedulers' (added by
    /// [`AppState::note_store`]). `/readyz` is ready only when all of them answer.
    pub store_handles: Arc<RwLock<Vec<Arc<dyn Store>>>>,
}

impl AppState {
    /// The runtime of a running room.
    ///
    /// # Errors
    /// [`ApiError::RoomDeleted`] (410) for a room deleted while this process ran,
    /// [`ApiError::RoomNotFound`] for any other name.
    pub fn room(&self, room: &str) -> Result<Arc<RoomRuntime>, ApiError> {
        self.rooms.get(room).ok_or_else(|| {
            let shown: String = room.chars().take(64).collect();
            if self.rooms.was_deleted(room) {
                ApiError::RoomDeleted(shown)
            } else {
                ApiError::RoomNotFound(shown)
            }
        })
    }

    /// Every store handle of this process, each once: those noted in `store_handles` and this
    /// state's own (which a state built without [`AppState::with_store`] has not noted).
    pub fn stores(&self) -> Vec<Arc<dyn Store>> {
        let mut stores = self
            .store_handles
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if !stores.iter().any(|store| Arc::ptr_eq(store, &self.store)) {
            stores.push(self.store.clone());
        }
        stores
    }

    /// Notes `store`, a handle of this process other than the shared one, in `store_handles`,
    /// so that `/readyz` asks it too.
    pub fn note_store(&self, store: &Arc<dyn Store>) {
        if !Arc::ptr_eq(store, &self.0.store) {
            self.0
                .store_handles
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(store.clone());
        }
    }

    /// The same state with another store handle: a serving thread's own Redis connection, made on
    /// its runtime (`server::serve`), also noted in `store_handles`. Every other part is
    /// shared.
    pub fn with_store(&self, store: Arc<dyn Store>) -> Self {
        let parts = &self.0;
        self.note_store(&store);
        Self::new(AppStateParts {
            store,
            config: parts.config.clone(),
            room_options: parts.room_options.clone(),
            rooms: parts.rooms.clone(),
            admin_token: parts.admin_token.clone(),
            metrics: parts.metrics.clone(),
            shutdown: parts.shutdown.clone(),
            tokens: parts.tokens.clone(),
            store_safety: parts.store_safety.clone(),
            bots: parts.bots.clone(),
            admin_feed: parts.admin_feed.clone(),
            store_handles: parts.store_handles.clone(),
        })
    }

    /// A room's settings from the configuration (before any operator change).
    pub fn default_settings(&self) -> Settings {
        self.config.default_settings.clone()
    }

    /// `room`'s settings from the configuration: the defaults, with the room's default checkout
    /// (gate mode: its first gated path) when they name none.
    pub fn default_settings_for(&self, room: &str) -> Settings {
        let mut settings = self.default_settings();
        if settings.checkout_url.is_none() {
            settings.checkout_url = (self.room_options.default_checkout)(room);
        }
        settings
    }
}

pub use vestibule_room::replica_id;
