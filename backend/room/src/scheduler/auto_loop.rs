//! The closed loop in the room's scheduler leader (docs/DESIGN.md "Closed-loop admission"): on
//! each new reading (once a second), while the room's `autoRate` is on, the controller
//! ([`crate::auto_rate`]) reads the origin's signals merged from every replica and moves the
//! admission rate. A change is written as a settings change, so every replica admits, shows and
//! estimates by the same rate and a new leader starts from it, with an audit entry that names
//! the reason.

use vestibule_shared::auto_rate::{AutoRateChange, AutoRateReason};
use vestibule_store::{AuditRecord, SettingsPatch, SettingsUpdate, Store};

use crate::auto_rate::Controller;
use crate::options::replica_id;
use crate::RoomRuntime;

/// The loop steps on each new reading of the origin's signals, at the scheduler's first tick
/// after it lands (the figures reader merges them once a second), but not within this long (ms)
/// of the step before. A step on a fixed second of its own would read signals up to a second
/// older than they need be, and every reaction would wait for it.
pub const MIN_STEP_MS: u64 = 500;
/// Without a new reading the loop steps this long (ms) after the step before, so signals that
/// went stale or were lost are acted on.
pub const NO_READING_STEP_MS: u64 = 1_500;
/// Changes under this share of the rate (or 0.1/s) are not written: holding costs nothing, a
/// write is a store call and an audit entry. Under the slowest rise (1.5% a second), or the loop
/// would propose it every second, write nothing, and start again from the same rate.
const MIN_CHANGE: f64 = 0.01;

/// How many of the newest audit entries a new leader looks through for the loop's last move.
const AUDIT_LOOKBACK: usize = 50;

/// The loop's state in the leader; dropped with the leadership (a new leader starts afresh).
/// What the console shows of it goes to the room's [`crate::auto_rate::shown::LoopShown`].
#[derive(Debug, Default)]
pub struct AutoLoop {
    controller: Controller,
    last_step_ms: Option<u64>,
    /// When the reading the last step judged was taken.
    last_reading_ms: Option<u64>,
    /// The reason of the last step, whether or not it changed the rate.
    pub last_reason: Option<AutoRateReason>,
    /// The audit log was read for the last move (once per leadership).
    audit_read: bool,
}

/// The loop's move an audit entry records (`replica · autoRate REASON`), if it is one.
pub fn change_of(entry: &AuditRecord) -> Option<AutoRateChange> {
    if entry.field != "admissionRatePerSec" {
        return None;
    }
    let (_, reason) = entry.replica.rsplit_once(" · autoRate ")?;
    Some(AutoRateChange {
        reason: serde_json::from_value(serde_json::json!(reason)).ok()?,
        from: entry.old.as_f64()?,
        to: entry.new.as_f64()?,
        at_ms: entry.at_ms,
        p95_ms: None,
        error_rate: None,
    })
}

impl AutoLoop {
    /// Whether a step is due at `now_ms`, the room's latest reading taken at `reading_at_ms`:
    /// the first step; a new reading ([`MIN_STEP_MS`] or more after the last step); or none
    /// for [`NO_READING_STEP_MS`].
    fn due(&self, reading_at_ms: Option<u64>, now_ms: u64) -> bool {
        let new_reading = reading_at_ms.is_some_and(|at| self.last_reading_ms != Some(at));
        self.last_step_ms.is_none_or(|then| {
            let since = now_ms.saturating_sub(then);
            (new_reading && since >= MIN_STEP_MS) || since >= NO_READING_STEP_MS
        })
    }

    /// The loop stops here (off, or no longer leading): forgotten, no longer shown, and its
    /// health URL no longer polled.
    pub fn reset(&mut self, room: &RoomRuntime) {
        *self = Self::default();
        room.auto_loop.clear();
        room.health.want(None);
    }

    /// One step when one is [`Self::due`] and the loop is on; writes the rate when it moves.
    pub async fn step(&mut self, store: &dyn Store, room: &RoomRuntime, now_ms: u64) {
        let versioned = room.versioned_settings();
        let Some(auto) = &versioned.settings.auto_rate else {
            if self.last_step_ms.is_some() || self.audit_read {
                self.reset(room);
            }
            return;
        };
        // Every tick, so a changed or removed URL is followed within one (only a change wakes
        // the poller, `auto_rate::health`).
        room.health.want(auto.health_url.as_deref());
        let reading = room.origin.room_reading();
        if !self.due(reading.map(|r| r.at_ms), now_ms) {
            return;
        }
        self.last_step_ms = Some(now_ms);
        self.last_reading_ms = reading.map(|r| r.at_ms);
        if !std::mem::replace(&mut self.audit_read, true) {
            // A new leader shows the loop's last move until it makes one of its own.
            match store.audit(&room.name, AUDIT_LOOKBACK).await {
                Ok(entries) => {
                    if let Some(change) = entries.iter().find_map(change_of) {
                        room.auto_loop.changed(change);
                    }
                }
                Err(error) => {
                    tracing::debug!(room = %room.name, %error, "autoRate's last move not read");
                }
            }
        }
        let rate = versioned.settings.admission_rate_per_sec;
        let decision = self.controller.step(auto, rate, reading.as_ref(), now_ms);
        self.last_reason = Some(decision.reason);
        tracing::debug!(
            room = %room.name,
            rate,
            to = decision.rate,
            reason = decision.reason.as_str(),
            reading = ?reading,
            "autoRate stepped"
        );
        room.auto_loop.stepped(decision.reason);
        let new = (decision.rate * 10.0).round() / 10.0;
        let to_bound = new != rate && (new == auto.min || new == auto.max);
        // Compared in whole tenths (the rate's resolution): as decimals, 11.2 − 11.1 is 0.0999…
        // and a rise of one tenth would never be written.
        let change_tenths = ((new - rate) * 10.0).round().abs();
        if change_tenths < (rate * MIN_CHANGE * 10.0).max(1.0) && !to_bound {
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
                // The signals the step judged by (none when it moved for their absence).
                let judged = !matches!(
                    decision.reason,
                    AutoRateReason::SignalsStale | AutoRateReason::SignalsLost
                );
                let read = reading.filter(|_| judged).map(|reading| reading.signals);
                room.auto_loop.changed(AutoRateChange {
                    reason: decision.reason,
                    from: rate,
                    to: new,
                    at_ms: now_ms,
                    p95_ms: read.map(|signals| signals.p95_ms),
                    error_rate: read.map(|signals| signals.error_rate),
                });
                let signals = reading.map(|r| r.signals);
                tracing::info!(
                    room = %room.name,
                    from = rate,
                    to = new,
                    reason = decision.reason.as_str(),
                    p95_ms = signals.map(|s| s.p95_ms),
                    requests = signals.map(|s| s.requests),
                    sent = signals.and_then(|s| s.sent),
                    in_flight = signals.map(|s| s.in_flight),
                    reading_at_ms = reading.map(|r| r.at_ms),
                    error_rate = signals.map(|s| s.error_rate),
                    trouble_points = ?self.controller.trouble_points(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(field: &str, replica: &str) -> AuditRecord {
        AuditRecord {
            id: "1-0".into(),
            at_ms: 1_000,
            field: field.into(),
            old: serde_json::json!(20.0),
            new: serde_json::json!(11.1),
            replica: replica.into(),
        }
    }

    #[test]
    fn a_step_follows_each_new_reading_and_goes_on_without_one() {
        let mut auto = AutoLoop::default();
        assert!(auto.due(None, 10_000), "the first step");
        auto.last_step_ms = Some(10_000);
        auto.last_reading_ms = Some(9_950);
        // The same reading: no step until 1.5 s have passed.
        assert!(!auto.due(Some(9_950), 11_000));
        assert!(auto.due(Some(9_950), 11_500));
        // A new reading: a step at the next tick, but not within 0.5 s of the last.
        assert!(!auto.due(Some(10_300), 10_400));
        assert!(auto.due(Some(10_950), 10_600));
        // No reading at all: the stale or lost signals are still judged.
        assert!(!auto.due(None, 11_000));
        assert!(auto.due(None, 11_500));
    }

    #[test]
    fn the_loops_moves_are_read_back_from_the_audit_log() {
        let change = change_of(&entry(
            "admissionRatePerSec",
            "web-1 · autoRate LATENCY_HIGH",
        ));
        assert_eq!(
            change,
            Some(AutoRateChange {
                reason: AutoRateReason::LatencyHigh,
                from: 20.0,
                to: 11.1,
                at_ms: 1_000,
                p95_ms: None,
                error_rate: None,
            })
        );
        // An operator's change, another field, an unknown reason: not the loop's.
        assert_eq!(change_of(&entry("admissionRatePerSec", "web-1")), None);
        assert_eq!(
            change_of(&entry("tokenTtlSecs", "web-1 · autoRate HEADROOM")),
            None
        );
        assert_eq!(
            change_of(&entry("admissionRatePerSec", "web-1 · autoRate LATER")),
            None
        );
    }
}
