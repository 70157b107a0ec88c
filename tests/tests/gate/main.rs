//! Gate mode end to end: the real binary with `--upstream` in front of a small origin run by
//! the test (an axum server that echoes what it received as JSON, plus streaming, slow, upload,
//! upgrade and hop-by-hop routes). JSON clients, curl, cookies, the origin stopped and slow.
//!
//! One test binary (link time), one file per concern: add a test to the file of its concern, or
//! a new `mod` here. The helpers every file uses are below.

mod auto_rate;
mod forwarding;
mod handoff_and_metrics;
mod origin;
mod origin_connections;
mod paths;
mod proxying;
mod raw_origin;
mod rules;
mod session;
mod spellings;
mod tokens;

use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vestibule_shared::TicketState;
use vestibule_tests::{Backend, TestApp};

use origin::Origin;

/// Where gate mode mounts Vestibule's own API and page.
const PREFIX: &str = "/_vestibule/";

/// The gate in front of `origin`: rooms `main` and `flash`, `/checkout` gated for `main` and
/// `/rooms/{room}/pay` for the room its path names, admitting at once, a 2 s origin timeout.
async fn gate_in_front_of(origin: &Origin, backend: Backend, extra: &[&str]) -> TestApp {
    let upstream = origin.url();
    let mut args = vec![
        "--upstream",
        upstream.as_str(),
        "--rooms",
        "main,flash",
        "--gate",
        "/checkout=main",
        "--gate",
        "/rooms/{room}/pay",
        "--admission-rate",
        "1000",
        "--upstream-timeout-secs",
        "2",
    ];
    args.extend_from_slice(extra);
    TestApp::spawn(backend, &args).await
}

/// Joins `room` under the prefix and waits for the entry token.
async fn admitted(app: &TestApp, room: &str) -> String {
    let joined: Value = app
        .client
        .post(app.url(&format!("{PREFIX}api/v1/rooms/{room}/tickets")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = joined["ticketId"].as_str().expect("a ticket").to_owned();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let status: Value = app
            .client
            .get(app.url(&format!("{PREFIX}api/v1/rooms/{room}/tickets/{id}")))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if status["status"] == TicketState::TokenIssued.as_str() {
            // A room's checkout is its first gated path (the page follows it without `return`).
            let first_gated = match room {
                "main" => "/checkout".to_owned(),
                room => format!("/rooms/{room}/pay"),
            };
            assert_eq!(status["checkoutUrl"], first_gated, "{status}");
            return status["entryToken"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "not admitted: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

async fn json_of(response: reqwest::Response) -> (StatusCode, HeaderMap, Value) {
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|_| json!({ "text": text }));
    (status, headers, body)
}

/// All values of `name` the origin saw, as one comma-joined string ("" when none).
fn seen_header(echo: &Value, name: &str) -> String {
    echo["headers"][name]
        .as_array()
        .map(|values| {
            values
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

async fn open_session(app: &TestApp, room: &str, token: &str, extra: Value) -> reqwest::Response {
    let mut body = json!({ "entryToken": token });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    app.client
        .post(app.url(&format!("{PREFIX}api/v1/rooms/{room}/session")))
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// Whole seconds since the Unix epoch.
struct SystemTimeSecs;

impl SystemTimeSecs {
    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }
}

/// A raw `GET path` naming `host`, on a connection that closes after the answer.
fn closing_get(path: &str, host: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

/// One raw request on a fresh connection (`Connection: close` is the caller's); the whole answer.
async fn raw_exchange(app: &TestApp, request: &str) -> String {
    let address = app.base.trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}
