//! What the whole console shares ([`Console`], signals handed down by context), and the last 15
//! minutes of each room's figures ([`History`]) that the charts draw.

use std::collections::{HashMap, VecDeque};

use leptos::prelude::*;
use serde_json::Value;
use vestibule_shared::admin_events::{AdminEvent, FigureHistory, RoomFigures};

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
    /// The origin's p95 latency, ms, when it had signals.
    pub p95_ms: Option<f64>,
    /// The origin's error rate (a fraction), when it had signals.
    pub error_rate: Option<f64>,
    /// `autoRate.targetP95Ms` while the loop was on.
    pub target_p95_ms: Option<f64>,
    /// `autoRate.maxErrorRate` while the loop was on.
    pub max_error_rate: Option<f64>,
}

impl Sample {
    /// The sample of one room's figures read at `at_ms`.
    fn of(at_ms: u64, figures: &RoomFigures) -> Self {
        Self {
            at_ms,
            waiting: figures.waiting as f64,
            active: figures.active_users as f64,
            configured: figures.admission_rate_per_sec,
            admitted: figures.admitted_per_sec,
            p95_ms: figures.origin.map(|origin| origin.p95_ms),
            error_rate: figures.origin.map(|origin| origin.error_rate),
            target_p95_ms: figures
                .auto_rate
                .as_ref()
                .map(|auto| auto.setting.target_p95_ms as f64),
            max_error_rate: figures
                .auto_rate
                .as_ref()
                .map(|auto| auto.setting.max_error_rate),
        }
    }
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
            samples.push_back(Sample::of(event.at_ms, figures));
            while samples.front().is_some_and(|sample| sample.at_ms < oldest) {
                samples.pop_front();
            }
        }
    }

    /// Merges a room's history from the server (`GET …/history`, a point every 5 s) into its
    /// samples, which the live stream may have begun meanwhile: a point is taken only where no
    /// sample lies within half its spacing (a stretch the stream covered keeps its one-second
    /// samples: no duplicates), so it fills what came before the stream and any gap in it. Points
    /// older than 15 minutes before the newest sample are left out.
    pub fn merge(&mut self, history: &FigureHistory) {
        let tolerance = history.every_secs.max(1) * 1000 / 2;
        let samples = self.rooms.entry(history.room.clone()).or_default();
        let mut merged: Vec<Sample> = samples.iter().copied().collect();
        for point in &history.points {
            let covered = samples
                .iter()
                .any(|sample| sample.at_ms.abs_diff(point.at_ms) < tolerance);
            if !covered {
                merged.push(Sample::of(point.at_ms, &point.figures));
            }
        }
        merged.sort_by_key(|sample| sample.at_ms);
        let newest = merged.last().map_or(0, |sample| sample.at_ms);
        let oldest = newest.saturating_sub(HISTORY_MS);
        *samples = merged
            .into_iter()
            .filter(|sample| sample.at_ms >= oldest)
            .collect();
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
pub fn sample_figures(room: &str) -> RoomFigures {
    RoomFigures {
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
        origin: None,
        auto_rate: None,
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

    fn server_history(room: &str, at: &[u64]) -> FigureHistory {
        FigureHistory {
            room: room.into(),
            every_secs: 5,
            points: at
                .iter()
                .map(|at_ms| vestibule_shared::admin_events::FigurePoint {
                    at_ms: *at_ms,
                    figures: sample_figures(room),
                })
                .collect(),
        }
    }

    fn times(history: &History, room: &str) -> Vec<u64> {
        history.of(room).iter().map(|sample| sample.at_ms).collect()
    }

    #[test]
    fn history_fills_what_came_before_the_stream_without_duplicates() {
        let mut history = History::default();
        // The stream began at 100 s and heard 100 s, 101 s, 102 s before the history arrived;
        // the server's points (every 5 s) include 100 s and 101.2 s (another replica's second).
        for at_ms in [100_000, 101_000, 102_000] {
            history.record(&event(at_ms, &["main"]));
        }
        history.merge(&server_history(
            "main",
            &[85_000, 90_000, 95_000, 100_000, 101_200],
        ));
        assert_eq!(
            times(&history, "main"),
            [85_000, 90_000, 95_000, 100_000, 101_000, 102_000]
        );
        // Loading it again (the room shown again) adds nothing.
        history.merge(&server_history("main", &[90_000, 95_000, 100_000]));
        assert_eq!(times(&history, "main").len(), 6);
        // The stream goes on after it.
        history.record(&event(103_000, &["main"]));
        assert_eq!(times(&history, "main").last(), Some(&103_000));
    }

    #[test]
    fn history_fills_a_gap_in_the_stream_and_keeps_fifteen_minutes() {
        let mut history = History::default();
        history.record(&event(HISTORY_MS + 10_000, &["main"]));
        // The stream was lost from +10 s to +30 s.
        history.record(&event(HISTORY_MS + 30_000, &["main"]));
        history.merge(&server_history(
            "main",
            &[25_000, 30_000, HISTORY_MS + 15_000, HISTORY_MS + 20_000],
        ));
        // 25 s is more than 15 minutes before the newest sample; 30 s is at the edge (kept).
        assert_eq!(
            times(&history, "main"),
            [
                30_000,
                HISTORY_MS + 10_000,
                HISTORY_MS + 15_000,
                HISTORY_MS + 20_000,
                HISTORY_MS + 30_000
            ]
        );
        // A history of a room the stream has not shown yet is kept as it is.
        history.merge(&server_history("vip", &[1_000, 6_000]));
        assert_eq!(times(&history, "vip"), [1_000, 6_000]);
    }
}
