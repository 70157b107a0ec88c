//! The closed loop in the room's scheduler leader (docs/DESIGN.md "Closed-loop admission"): once
//! a second, while the room's `autoRate` is on, the controller ([`crate::auto_rate`]) reads the
//! origin's signals merged from every replica and moves the admission rate. A change is written
//! as a settings change, so every replica admits, shows and estimates by the same rate and a new
//! leader starts from it, with an audit entry that names the reason.

use vestibule_shared::auto_rate::AutoRateReason;
use vestibule_store::{AuditRecord, SettingsPatch, SettingsUpdate, Store};

use crate::auto_rate::Controller;
use crate::options::replica_id;
use crate::RoomRuntime;

/// How often the loop steps, ms.
pub const STEP_MS: u64 = 1_000;
/// Changes under this share of the rate (or 0.1/s) are not written: holding costs nothing, a
/// write is a store call and an audit entry.
const MIN_CHANGE: f64 = 0.02;

/// The loop's state in the leader; dropped with the leadership (a new leader starts afresh).
#[derive(Debug, Default)]
pub struct AutoLoop {
    controller: Controller,
    last_step_ms: Option<u64>,
    /// The reason of the last step, whether or not it changed the rate.
    pub last_reason: Option<AutoRateReason>,
}

impl AutoLoop {
    /// One step if a second has passed and the loop is on; writes the rate when it moves.
    pub async fn step(&mut self, store: &dyn Store, room: &RoomRuntime, now_ms: u64) {
        let versioned = room.versioned_settings();
        let Some(auto) = versioned.settings.auto_rate else {
            *self = Self::default();
            return;
        };
        if self
            .last_step_ms
            .is_some_and(|then| now_ms.saturating_sub(then) < STEP_MS)
        {
            return;
        }
        self.last_step_ms = Some(now_ms);
        let rate = versioned.settings.admission_rate_per_sec;
        let reading = room.origin.room_reading();
        let decision = self.controller.step(&auto, rate, reading.as_ref(), now_ms);
        self.last_reason = Some(decision.reason);
        let new = (decision.rate * 10.0).round() / 10.0;
        let to_bound = new != rate && (new == auto.min || new == auto.max);
        if (new - rate).abs() < (rate * MIN_CHANGE).max(0.1) && !to_bound {
            return;
        }
        let patch = SettingsPatch {
            admission_rate_per_sec: Some(new),
            ..SettingsPatch::default()
        };
        match store.update_room(room.id(), &versioned, &patch, None).await {
            Ok(SettingsUpdate::Applied(in_force)) => {
                room.set_settings(in_force);
                let entry = AuditRecord {
                    id: String::new(),
                    at_ms: now_ms,
                    field: "admissionRatePerSec".into(),
                    old: serde_json::json!(rate),
                    new: serde_json::json!(new),
                    replica: format!("{} · autoRate {}", replica_id(), decision.reason.as_str()),
                };
                if let Err(error) = store.append_audit(&room.name, &[entry]).await {
                    tracing::warn!(room = %room.name, %error, "autoRate change not audited");
                }
                let signals = reading.map(|r| r.signals);
                tracing::info!(
                    room = %room.name,
                    from = rate,
                    to = new,
                    reason = decision.reason.as_str(),
                    p95_ms = signals.map(|s| s.p95_ms),
                    requests = signals.map(|s| s.requests),
                    sent = signals.and_then(|s| s.sent),
                    error_rate = signals.map(|s| s.error_rate),
                    "autoRate moved the admission rate"
                );
            }
            // Someone changed the room meanwhile: the next step starts from what is in force.
            Ok(SettingsUpdate::VersionMismatch(in_force)) => room.set_settings(in_force),
            Err(error) => {
                tracing::debug!(room = %room.name, %error, "autoRate change not written");
            }
        }
    }
}
