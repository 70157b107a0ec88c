//! The console's figures as a test reads them: the admin event stream's first `figures` event,
//! and one room's figures in it.

use vestibule_shared::admin_events::{AdminEvent, RoomFigures};
use vestibule_shared::paths;

use crate::{TestApp, ADMIN_TOKEN};

impl TestApp {
    /// The first `figures` event of the admin event stream (every room's figures, `origin` and
    /// `autoRate` included).
    ///
    /// # Panics
    /// When the stream cannot be opened or ends before an event.
    pub async fn admin_event(&self) -> AdminEvent {
        self.admin_event_under("/").await
    }

    /// [`TestApp::admin_event`] with Vestibule's own paths under `prefix` (gate mode's
    /// `/_vestibule/`).
    ///
    /// # Panics
    /// As [`TestApp::admin_event`].
    pub async fn admin_event_under(&self, prefix: &str) -> AdminEvent {
        let path = format!("{}{}", prefix.trim_end_matches('/'), paths::ADMIN_EVENTS);
        let mut response = self
            .client
            .get(self.url(&path))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("stream");
        let mut text = String::new();
        while let Some(chunk) = response.chunk().await.expect("chunk") {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(data) = text.split("\n\n").find_map(|block| {
                block
                    .lines()
                    .find_map(|line| line.strip_prefix("data:"))
                    .filter(|_| block.ends_with('}'))
            }) {
                return serde_json::from_str(data.trim()).expect("AdminEvent JSON");
            }
        }
        panic!("the stream ended before an event");
    }

    /// `room`'s figures in the next [`TestApp::admin_event`].
    ///
    /// # Panics
    /// As [`TestApp::admin_event`], and when the event has no such room.
    pub async fn room_figures(&self, room: &str) -> RoomFigures {
        self.admin_event()
            .await
            .rooms
            .into_iter()
            .find(|figures| figures.room == room)
            .unwrap_or_else(|| panic!("{room} in the figures"))
    }
}
