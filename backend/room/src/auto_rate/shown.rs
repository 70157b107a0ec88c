//! The closed loop's state as the console shows it: the room's scheduler leader notes here the
//! reason of each step and its last move of the rate ([`LoopShown`], on the room's runtime), the
//! figures reader puts them in the leader's figures record ([`LoopRecord`]), and every replica's
//! admin stream shows the leader's (`RoomFigures.autoRate`).

use serde::{Deserialize, Serialize};
use vestibule_shared::auto_rate::{AutoRateChange, AutoRateReason};

/// What the leader shares of its loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoopRecord {
    /// The reason of the last step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<AutoRateReason>,
    /// The last move of the rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_change: Option<AutoRateChange>,
}

/// The loop's state in this process, written by the scheduler's thread and read by the
/// figures reader; `None` while this process does not run the loop.
#[derive(Debug, Default)]
pub struct LoopShown(std::sync::Mutex<Option<LoopRecord>>);

impl LoopShown {
    fn with<T>(&self, f: impl FnOnce(&mut Option<LoopRecord>) -> T) -> T {
        f(&mut self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// A step's reason.
    pub fn stepped(&self, reason: AutoRateReason) {
        self.with(|shown| shown.get_or_insert_with(LoopRecord::default).reason = Some(reason));
    }

    /// A move of the rate (made now, or the last one found in the audit log by a new leader).
    pub fn changed(&self, change: AutoRateChange) {
        self.with(|shown| shown.get_or_insert_with(LoopRecord::default).last_change = Some(change));
    }

    /// The loop stopped here (turned off, or this process no longer leads).
    pub fn clear(&self) {
        self.with(|shown| *shown = None);
    }

    /// What to share, if the loop runs here.
    pub fn record(&self) -> Option<LoopRecord> {
        self.with(|shown| *shown)
    }
}
