//! `GET /api/v1/admin/events`: every room's live figures once a second, as Server-Sent Events
//! (the operator console's feed; bearer admin token).
//!
//! One [`FigureReader`] per process reads the figures once a second while anyone watches (one
//! `counts` store call per room, as the `/metrics` room gauges) and publishes them on a `watch`
//! channel that every stream of this process reads: a thousand open consoles cost the store what
//! one does. Nobody watching: nothing is read (the reader stops and starts again with the next
//! stream).

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
use vestibule_shared::admin_events::{AdminEvent, ADMIN_EVENT_NAME};
use vestibule_shared::ErrorBody;

use super::admin::authorize;
use super::openapi::EdgeErrors;
use crate::error::ApiError;
use crate::state::AppState;
use vestibule_room::figures::FigureReader;

/// How often the figures are read and sent.
pub const FIGURES_EVERY: Duration = Duration::from_secs(1);

/// Seconds without an event before a keep-alive comment (figures normally come every second;
/// this keeps a stream alive through a store outage, when rooms are left out but events still
/// go out, and through a stalled reader).
const KEEP_ALIVE_SECS: u64 = 10;

type Latest = watch::Receiver<Option<Arc<AdminEvent>>>;
type Publisher = Arc<watch::Sender<Option<Arc<AdminEvent>>>>;

/// The process's one feed of figures, shared by every admin stream ([`AppState::admin_feed`]).
#[derive(Default)]
pub struct AdminFeed {
    /// The running reader's channel; `None` while nobody watches.
    publisher: Mutex<Option<Publisher>>,
}

impl AdminFeed {
    /// The latest figures (`None` until the first read), starting the reader if it is stopped.
    pub fn subscribe(&self, state: &AppState) -> Latest {
        let mut publisher = self.lock();
        if let Some(running) = publisher.as_ref() {
            return running.subscribe();
        }
        let (sender, receiver) = watch::channel(None);
        let sender = Arc::new(sender);
        *publisher = Some(sender.clone());
        tokio::spawn(read_every_second(state.clone(), sender));
        receiver
    }

    /// Forgets `sender` if it is the running one and nobody reads it; true when it did.
    fn stop_if_unwatched(&self, sender: &Publisher) -> bool {
        let mut publisher = self.lock();
        if sender.receiver_count() > 0 {
            return false;
        }
        if publisher
            .as_ref()
            .is_some_and(|running| Arc::ptr_eq(running, sender))
        {
            *publisher = None;
        }
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Publisher>> {
        self.publisher
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The reader: reads and publishes every [`FIGURES_EVERY`] until nobody watches or the server
/// stops.
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
        if *shutdown.borrow() || state.admin_feed.stop_if_unwatched(&sender) {
            state.admin_feed.stop_if_unwatched(&sender);
            return;
        }
        let event = reader
            .read(&state.rooms, &*state.store, &state.room_options)
            .await;
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
        `data: <AdminEvent JSON>`, every running room's figures as this replica sees them. \
        Waiting, active users, the configured rate and the state are read from the store (the \
        same through any replica); joins, polls, SSE streams and tokens used per second count \
        this replica's answers; admitted and expired per second are counted by the room's \
        leader (`leader` is set when the answering replica leads). The figures are read once \
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
