//! Shared application state: cheap handles cloned into every request.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;
use vestibule_shared::{RoomState, TicketState, TicketStatus};

use crate::config::Config;
use crate::error::ApiError;
use crate::eta;
use crate::sse_hub::SseHub;
use crate::store::{RoomConfig, Store, TicketRecord, VersionedConfig};

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

    /// The public status of a ticket: position, ETA and poll hint by docs/DESIGN.md's formulas.
    pub fn ticket_status(&self, room: &RoomRuntime, record: &TicketRecord) -> TicketStatus {
        let config = room.config();
        let room_state = if config.paused {
            RoomState::Paused
        } else {
            RoomState::Open
        };
        let (eta_seconds, next_poll_after_ms) = match (record.state, record.position) {
            (TicketState::Waiting, Some(position)) => {
                let exact = eta::eta_with_cap(
                    position,
                    config.admission_rate_per_sec,
                    self.config.eta_margin,
                    config.paused,
                    config
                        .max_active_users
                        .map(|cap| (cap, room.active_users())),
                    config.token_ttl_ms as f64 / 1000.0,
                );
                (
                    exact.map(eta::eta_display_secs),
                    eta::next_poll_after_ms(position, exact, &self.config.poll_tiers),
                )
            }
            _ => (None, self.config.poll_tiers.after_ms(u64::MAX)),
        };
        let issued = record.state == TicketState::TokenIssued;
        TicketStatus {
            ticket_id: record.id.clone(),
            room: room.name.clone(),
            status: record.state,
            position: record
                .position
                .filter(|_| record.state == TicketState::Waiting),
            eta_seconds,
            next_poll_after_ms,
            entry_token: record.entry_token.clone().filter(|_| issued),
            token_expires_at: record
                .token_expires_at_ms
                .filter(|_| issued)
                .map(rfc3339_from_ms),
            checkout_url: issued.then(|| format!("/checkout?room={}", room.name)),
            room_state,
        }
    }
}

/// Unix milliseconds as RFC 3339 UTC, e.g. `2026-11-27T09:00:00.250Z`.
pub fn rfc3339_from_ms(ms: u64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|at| {
            at.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_times_are_rfc3339_utc() {
        assert_eq!(rfc3339_from_ms(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339_from_ms(1_795_000_000_250),
            "2026-11-18T11:06:40.25Z"
        );
    }
}
