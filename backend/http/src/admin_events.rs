//! `GET /api/v1/admin/events`: every room's live figures once a second, as Server-Sent Events
//! (the operator console's feed; bearer admin token).
//!
//! One [`FigureReader`] per process reads the figures once a second from start to shutdown (two
//! store calls per room: `counts` and `share_figures`, which shares this replica's second and
//! reads the others') and publishes them on a `watch` channel that every stream of this
//! process reads: a thousand open consoles cost the store what one does. It also keeps the
//! last hour of them ([`History`]) for `GET /api/v1/admin/rooms/{room}/history`.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use vestibule_shared::admin_events::{AdminEvent, FigureHistory, ADMIN_EVENT_NAME};
use vestibule_shared::ErrorBody;

use super::admin::authorize;
use super::openapi::EdgeErrors;
use crate::error::ApiError;
use crate::state::AppState;
use vestibule_room::figures::FigureReader;
use vestibule_room::history::History;

/// How often the figures are read and sent.
pub const FIGURES_EVERY: Duration = Duration::from_secs(1);

/// Seconds without an event before a keep-alive comment (figures normally come every second;
/// this keeps a stream alive through a store outage, when rooms are left out but events still
/// go out, and through a stalled reader).
const KEEP_ALIVE_SECS: u64 = 10;

type Latest = watch::Receiver<Option<Arc<AdminEvent>>>;
type Publisher = Arc<watch::Sender<Option<Arc<AdminEvent>>>>;

/// The process's one feed of figures, shared by every admin stream ([`AppState::admin_feed`]),
/// and the history it keeps. The reader starts with the server ([`AdminFeed::start`]) or at
/// the first stream, and runs until shutdown whether or not anyone watches: every replica must
/// share its figures for the others to show the room's, and the history must be there before a
/// console opens.
pub struct AdminFeed {
    publisher: Publisher,
    started: std::sync::atomic::AtomicBool,
    history: Mutex<History>,
}

impl Default for AdminFeed {
    fn default() -> Self {
        Self {
            publisher: Arc::new(watch::channel(None).0),
            started: std::sync::atomic::AtomicBool::new(false),
            history: Mutex::default(),
        }
    }
}

impl AdminFeed {
    /// Starts the reader once (later calls do nothing).
    pub fn start(&self, state: &AppState) {
        if !self.started.swap(true, std::sync::atomic::Ordering::SeqCst) {
            tokio::spawn(read_every_second(state.clone(), self.publisher.clone()));
        }
    }

    /// The latest figures (`None` until the first read), starting the reader if it is stopped.
    pub fn subscribe(&self, state: &AppState) -> Latest {
        self.start(state);
        self.publisher.subscribe()
    }

    /// `room`'s last hour of figures.
    pub fn history(&self, room: &str) -> FigureHistory {
        self.lock_history().of(room)
    }

    fn lock_history(&self) -> std::sync::MutexGuard<'_, History> {
        self.history
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The reader: reads, records and publishes every [`FIGURES_EVERY`] until the server stops.
async fn read_every_second(state: AppState, sender: Publisher) {
    let mut reader = FigureReader::default();
    let mut every = tokio::time::interval(FIGURES_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shutdown = state.shutdown.clone();
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            return;
        }
        let event = reader
            .read(&state.rooms, &*state.store, &state.room_options)
            .await;
        let running: Vec<String> = state
            .rooms
            .list()
            .iter()
            .map(|room| room.name.clone())
            .collect();
        state.admin_feed.lock_history().record(&event, &running);
        sender.send_replace(Some(Arc::new(event)));
    }
}

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(admin_events))
}

/// Streams every room's figures once a second.
#[utoipa::path(
    get,
    path = "/api/v1/admin/events",
    tag = "admin",
    operation_id = "admin_events",
    description = "Server-Sent Events (`text/event-stream`): once a second `event: figures` with \
        `data: <AdminEvent JSON>`, every running room's figures, the same through any replica \
        (within a second): waiting, active users, the configured rate and the state are read \
        from the store; joins, polls, SSE streams and tokens used per second are the sum of \
        every live replica's last second, shared through the store; admitted and expired per \
        second, the wait at the back and `leader` are what the room's leader shared. The figures are read once \
        per second per process however many streams are open. A comment keeps a quiet stream \
        alive every 10 s. Browsers' EventSource cannot send the bearer header: read it with \
        `fetch` and a streaming body (the console does).",
    security(("admin_token" = [])),
    responses(
        (status = 200, description = "The stream of `figures` events", content_type = "text/event-stream", body = String,
            example = "event: figures\ndata: {\"atMs\":1764530000000,\"replica\":\"web-1-a8Xk2p\",\"rooms\":[{\"room\":\"main\",\"state\":\"OPEN\",\"waiting\":1200,…}]}\n\n"),
        (status = 401, description = "No bearer token (`unauthorized`)", body = ErrorBody),
        (status = 403, description = "Wrong token, or the admin API is off (`forbidden`)", body = ErrorBody),
        EdgeErrors,
    )
)]
pub async fn admin_events(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    authorize(&state, &headers)?;
    let latest = state.admin_feed.subscribe(&state);
    let mut shutdown = state.shutdown.clone();
    let stopped = async move {
        let _ = shutdown.wait_for(|stopping| *stopping).await;
    };
    let events = WatchStream::new(latest)
        .filter_map(|event| async move { event })
        .take_until(stopped)
        .map(|event| {
            let json = serde_json::to_string(&*event).unwrap_or_default();
            Ok::<_, Infallible>(Event::default().event(ADMIN_EVENT_NAME).data(json))
        });
    let sse = Sse::new(events).keep_alive(
        KeepAlive::new()
            .interval(Duration::from_secs(KEEP_ALIVE_SECS))
            .text("keepalive"),
    );
    Ok((
        [
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (
                HeaderName::from_static("x-accel-buffering"),
                HeaderValue::from_static("no"),
            ),
        ],
        sse,
    ))
}

/// Writes the shape of one event into the finished OpenAPI document (as
/// `openapi::finished` does for the ticket stream): its `data` is [`AdminEvent`] JSON.
pub fn describe_stream(json: &mut Value) {
    let stream = &mut json["paths"]["/api/v1/admin/events"]["get"]["responses"]["200"]["content"]
        ["text/event-stream"];
    if stream.is_object() {
        stream["schema"] = json!({
            "type": "object",
            "description": "One event of the stream: every room's figures, once a second.",
            "required": ["event", "data"],
            "properties": {
                "event": {"type": "string", "enum": [ADMIN_EVENT_NAME]},
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": {"$ref": "#/components/schemas/AdminEvent"},
                },
            },
        });
    }
}
