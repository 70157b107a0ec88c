//! What the whole console shares ([`Console`], signals handed down by context), and the last 15
//! minutes of each room's figures ([`History`]) that the charts draw.

use std::collections::{HashMap, VecDeque};

use leptos::prelude::*;
use serde_json::Value;
use vestibule_shared::admin_events::AdminEvent;

use crate::i18n::Lang;

/// How far back the charts go.
pub const HISTORY_MS: u64 = 15 * 60 * 1000;

/// The stream's link to the server, shown in the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Opening the stream.
    Connecting,
    /// Events arrive.
    Live,
    /// The stream broke; reconnecting after a pause.
    Lost,
}

/// The console's shared signals (all `Copy`).
#[derive(Clone, Copy)]
pub struct Console {
    /// The language shown.
    pub lang: RwSignal<Lang>,
    /// The admin token; `None` shows the sign-in.
    pub token: RwSignal<Option<String>>,
    /// Why the console signed out (a refused token), shown on the sign-in.
    pub refused: RwSignal<bool>,
    /// Grows at every sign-in: a stream loop of an older session stops.
    pub session: RwSignal<u32>,
    /// The stream's link.
    pub link: RwSignal<Link>,
    /// The latest figures.
    pub latest: RwSignal<Option<AdminEvent>>,
    /// The last 15 minutes per room.
    pub history: RwSignal<History>,
    /// The room shown in the room view.
    pub selected: RwSignal<Option<String>>,
    /// Every room's settings by slug ([`crate::catalog`]).
    pub catalog: RwSignal<HashMap<String, Value>>,
}

impl Console {
    /// A console in `lang`, signed in when this tab kept a token.
    pub fn new(lang: Lang, token: Option<String>) -> Self {
        Self {
            lang: RwSignal::new(lang),
            token: RwSignal::new(token),
            refused: RwSignal::new(false),
            session: RwSignal::new(0),
            link: RwSignal::new(Link::Connecting),
            latest: RwSignal::new(None),
            history: RwSignal::new(History::default()),
            selected: RwSignal::new(None),
            catalog: RwSignal::new(HashMap::new()),
        }
    }

    /// Signs out (the token was refused, or the operator asked): back to the sign-in.
    pub fn sign_out(&self, refused: bool) {
        crate::api::store_token(None);
        self.refused.set(refused);
        self.token.set(None);
        self.latest.set(None);
        self.history.set(History::default());
    }

    /// Takes a new event: the latest figures and one sample per room.
    pub fn record(&self, event: AdminEvent) {
        self.history.update(|history| history.record(&event));
        self.latest.set(Some(event));
    }
}

/// One second of one room, as the charts need it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// When, Unix ms.
    pub at_ms: u64,
    /// Shoppers waiting.
    pub waiting: f64,
    /// Active users.
    pub active: f64,
    /// Configured admission rate, per second.
    pub configured: f64,
    /// Admitted per second (actual), when known.
    pub admitted: Option<f64>,
}

/// Samples per room, oldest first, at most [`HISTORY_MS`] old.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    rooms: HashMap<String, VecDeque<Sample>>,
}

impl History {
    /// Adds `event`'s samples and drops those older than 15 minutes (and rooms gone from it).
    pub fn record(&mut self, event: &AdminEvent) {
        let oldest = event.at_ms.saturating_sub(HISTORY_MS);
        self.rooms
            .retain(|room, _| event.rooms.iter().any(|figures| &figures.room == room));
        for figures in &event.rooms {
            let samples = self.rooms.entry(figures.room.clone()).or_default();
            samples.push_back(Sample {
                at_ms: event.at_ms,
                waiting: figures.waiting as f64,
                active: figures.active_users as f64,
                configured: figures.admission_rate_per_sec,
                admitted: figures.admitted_per_sec,
            });
            while samples.front().is_some_and(|sample| sample.at_ms < oldest) {
                samples.pop_front();
            }
        }
    }

    /// A room's samples, oldest first.
    pub fn of(&self, room: &str) -> Vec<Sample> {
        self.rooms
            .get(room)
            .map(|samples| samples.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// One room's figures for tests: open, 3 waiting, 1 active, 5/s configured, 4/s admitted.
#[cfg(test)]
pub fn sample_figures(room: &str) -> vestibule_shared::admin_events::RoomFigures {
    vestibule_shared::admin_events::RoomFigures {
        room: room.into(),
        state: vestibule_shared::RoomState::Open,
        waiting: 3,
        active_users: 1,
        stock_left: None,
        sold: 0,
        admission_rate_per_sec: 5.0,
        admitted_per_sec: Some(4.0),
        joins_per_sec: 0.0,
        polls_per_sec: 0.0,
        sse_streams: 0,
        tokens_used_per_sec: 0.0,
        tokens_expired_per_sec: 0.0,
        eta_back_of_line_secs: None,
        reason: None,
        paused: false,
        closed: false,
        leader: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(at_ms: u64, rooms: &[&str]) -> AdminEvent {
        AdminEvent {
            at_ms,
            replica: "r".into(),
            rooms: rooms.iter().map(|room| sample_figures(room)).collect(),
        }
    }

    #[test]
    fn history_keeps_fifteen_minutes_and_only_running_rooms() {
        let mut history = History::default();
        history.record(&event(1_000, &["main", "vip"]));
        history.record(&event(1_000 + HISTORY_MS, &["main", "vip"]));
        history.record(&event(2_000 + HISTORY_MS, &["main"]));
        assert_eq!(history.of("main").len(), 2);
        assert_eq!(history.of("main")[0].at_ms, 1_000 + HISTORY_MS);
        assert!(history.of("vip").is_empty());
    }
}
