//! The last hour of every room's figures, kept by each process for the console's charts
//! (`GET /api/v1/admin/rooms/{room}/history`): one point every [`HISTORY_EVERY_SECS`] taken
//! from the figures read each second, at most [`HISTORY_POINTS`] per room.
//!
//! **Memory bound**: [`HISTORY_POINTS`] (720) points per running room, each one `RoomFigures`
//! (about 250 bytes with its room name), so about 180 KB per room; a room that stops running is
//! forgotten. The figures are the room's (shared through the store), so every replica keeps
//! the same history, from when it started.

use std::collections::{HashMap, VecDeque};

use vestibule_shared::admin_events::{AdminEvent, FigureHistory, FigurePoint};

/// Seconds between two points of the history.
pub const HISTORY_EVERY_SECS: u64 = 5;
/// Points kept per room: one hour.
pub const HISTORY_POINTS: usize = 720;

/// Every running room's last hour of figures.
#[derive(Debug, Default)]
pub struct History {
    rooms: HashMap<String, VecDeque<FigurePoint>>,
}

impl History {
    /// Takes a point of each room in `event` whose last point is [`HISTORY_EVERY_SECS`] old (or
    /// that has none), and forgets the rooms not in `running`.
    pub fn record(&mut self, event: &AdminEvent, running: &[String]) {
        self.rooms.retain(|room, _| running.contains(room));
        for figures in &event.rooms {
            let points = self.rooms.entry(figures.room.clone()).or_default();
            let due = points
                .back()
                .is_none_or(|last| event.at_ms >= last.at_ms + HISTORY_EVERY_SECS * 1000 - 500);
            if due {
                if points.len() == HISTORY_POINTS {
                    points.pop_front();
                }
                points.push_back(FigurePoint {
                    at_ms: event.at_ms,
                    figures: figures.clone(),
                });
            }
        }
    }

    /// `room`'s history, oldest first (empty when none was taken yet).
    pub fn of(&self, room: &str) -> FigureHistory {
        FigureHistory {
            room: room.to_owned(),
            every_secs: HISTORY_EVERY_SECS,
            points: self
                .rooms
                .get(room)
                .map(|points| points.iter().cloned().collect())
                .unwrap_or_default(),
        }
    }
}
