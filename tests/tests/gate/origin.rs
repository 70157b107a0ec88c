//! The origin: a storefront stand-in in the test process. An axum server that echoes what it
//! received as JSON, plus streaming, slow, upload, upgrade and hop-by-hop routes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode as OriginStatus};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use futures_util::StreamExt as _;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;
use vestibule_tests::Served;

#[derive(Clone, Default)]
pub struct Seen {
    /// Paths the origin received, in order.
    paths: Arc<Mutex<Vec<String>>>,
    /// Released by the test once it read the first chunk of `/stream`.
    pub release_stream: Arc<Notify>,
    /// Signalled by the origin when the first chunk of an `/upload` arrived.
    pub upload_started: Arc<Notify>,
}

pub struct Origin {
    server: Served,
    /// What the origin received, and the signals the streaming tests wait on.
    pub seen: Seen,
}

impl Origin {
    /// Serves on a free port of 127.0.0.1 until [`Origin::stop`] or the end of the test.
    pub async fn start() -> Self {
        let seen = Seen::default();
        let app = Router::new()
            .route("/stream", get(stream))
            .route("/slow", get(slow))
            .route("/upload", any(upload))
            .route("/ws", get(upgrade))
            .route("/hop", get(hop))
            .fallback(echo)
            .with_state(seen.clone());
        Self {
            server: Served::start(app).await,
            seen,
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Paths the origin received, in order.
    pub fn paths(&self) -> Vec<String> {
        self.seen.paths.lock().unwrap().clone()
    }

    /// Stops serving and closes the port (connections refused from now on).
    pub async fn stop(&mut self) {
        self.server.stop().await;
    }
}

/// Answers what it received: method, path, query, every header (all values), body.
async fn echo(State(seen): State<Seen>, request: Request) -> Json<Value> {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    seen.paths.lock().unwrap().push(parts.uri.path().to_owned());
    let mut headers = serde_json::Map::new();
    for (name, value) in &parts.headers {
        let values = headers.entry(name.as_str()).or_insert_with(|| json!([]));
        values
            .as_array_mut()
            .unwrap()
            .push(json!(value.to_str().unwrap_or("<bytes>")));
    }
    Json(json!({
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "query": parts.uri.query(),
        "headers": headers,
        "body": String::from_utf8_lossy(&body),
    }))
}

/// Sends `first`, then `second` only once the test has read `first` (a buffering proxy would
/// never deliver `first`).
async fn stream(State(seen): State<Seen>) -> Response {
    let release = seen.release_stream.clone();
    let first =
        futures_util::stream::once(async { Ok::<_, std::io::Error>(Bytes::from("first;")) });
    let second = futures_util::stream::once(async move {
        release.notified().await;
        Ok(Bytes::from("second"))
    });
    Body::from_stream(first.chain(second)).into_response()
}

async fn slow() -> &'static str {
    tokio::time::sleep(Duration::from_secs(30)).await;
    "too late"
}

/// Counts the body's bytes, telling the test when the first chunk arrived.
async fn upload(State(seen): State<Seen>, request: Request) -> Json<Value> {
    let mut body = request.into_body().into_data_stream();
    let mut total = 0;
    let mut first = true;
    while let Some(Ok(chunk)) = body.next().await {
        total += chunk.len();
        if first {
            seen.upload_started.notify_one();
            first = false;
        }
    }
    Json(json!({"bytes": total}))
}

/// Switches to a byte echo protocol (what a WebSocket server does after its handshake).
async fn upgrade(mut request: Request) -> Response {
    let upgraded = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        let Ok(upgraded) = upgraded.await else { return };
        let mut io = hyper_util::rt::TokioIo::new(upgraded);
        let mut buffer = [0u8; 256];
        while let Ok(n) = io.read(&mut buffer).await {
            if n == 0 || io.write_all(&buffer[..n]).await.is_err() {
                return;
            }
        }
    });
    Response::builder()
        .status(OriginStatus::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "upgrade")
        .header(header::UPGRADE, "websocket")
        .body(Body::empty())
        .unwrap()
}

/// Answers with a hop-by-hop header named in `Connection`.
async fn hop() -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONNECTION, "x-origin-hop".parse().unwrap());
    headers.insert("x-origin-hop", "1".parse().unwrap());
    headers.insert("x-end-to-end", "kept".parse().unwrap());
    (headers, "hop").into_response()
}
