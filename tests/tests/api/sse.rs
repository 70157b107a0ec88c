//! Server-sent events: a ticket's stream follows leaves, admissions and pauses exactly, and
//! reaches a client at once through a buffering proxy and over h2c.

use crate::paused_app;
use reqwest::StatusCode;
use serde_json::json;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use vestibule_shared::{paths, TicketState, TicketStatus};
use vestibule_tests::{both_stores, on_redis_cluster_too, Backend};

both_stores!(
    sse_streams_status_until_admission,
    sse_positions_follow_leaves_admissions_and_pauses_exactly,
    a_finished_tickets_stream_ends_with_its_final_id_and_a_reconnect_gets_204,
    a_standard_eventsource_client_stops_asking_once_the_ticket_is_finished,
);

// The same flows on a Redis Cluster (tests/tests/cluster.rs: the cluster's own tests).
on_redis_cluster_too!(sse_streams_status_until_admission,);

async fn sse_streams_status_until_admission(backend: Backend) {
    use futures_util::StreamExt;
    let app = paused_app(backend, &["--sse-refresh-ms", "100"]).await;
    let (_, ticket) = app.join("main", None).await;
    let response = app
        .client
        .get(app.url(&paths::events("main", &ticket.ticket_id)))
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("SSE");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    assert_eq!(response.headers()["cache-control"], "no-store");
    assert_eq!(response.headers()["x-accel-buffering"], "no");
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    let mut resumed = false;
    let deadline = Instant::now() + Duration::from_secs(15);
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout_at(deadline.into(), stream.next()).await {
        text.push_str(&String::from_utf8_lossy(&chunk));
        if !resumed && text.contains("\"WAITING\"") {
            app.patch_room("main", json!({"paused": false})).await;
            resumed = true;
        }
    }
    let statuses: Vec<TicketStatus> = text
        .split("\n\n")
        .filter(|block| block.lines().any(|line| line == "event: status"))
        .filter_map(|block| block.lines().find_map(|line| line.strip_prefix("data:")))
        .map(|data| serde_json::from_str(data.trim()).expect("TicketStatus JSON"))
        .collect();
    assert!(text.contains("event: status"), "{text}");
    // 10 s without news: a keep-alive the browser can see (a comment never reaches the page).
    assert!(text.contains("event: keepalive\ndata: {}\n"), "{text}");
    assert!(text.contains("id: 0") && text.contains("id: 1"), "{text}");
    assert_eq!(
        statuses.first().map(|s| s.status),
        Some(TicketState::Waiting)
    );
    assert_eq!(
        statuses.last().map(|s| s.status),
        Some(TicketState::TokenIssued),
        "{text}"
    );
}

/// Reads `status` events from an open SSE response until `done` or the deadline.
async fn read_events(
    stream: &mut (impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    buffer: &mut String,
    deadline: Instant,
    done: impl Fn(&TicketStatus) -> bool,
) -> Vec<TicketStatus> {
    use futures_util::StreamExt;
    let mut events = Vec::new();
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            // `event: keepalive` blocks carry no status.
            if !block.lines().any(|line| line.trim_end() == "event: status") {
                continue;
            }
            if let Some(data) = block.lines().find_map(|line| line.strip_prefix("data:")) {
                let status: TicketStatus = serde_json::from_str(data.trim()).expect("TicketStatus");
                let finished = done(&status);
                events.push(status);
                if finished {
                    return events;
                }
            }
        }
        match tokio::time::timeout_at(deadline.into(), stream.next()).await {
            Ok(Some(Ok(chunk))) => buffer.push_str(&String::from_utf8_lossy(&chunk)),
            _ => return events,
        }
    }
}

async fn sse_positions_follow_leaves_admissions_and_pauses_exactly(backend: Backend) {
    let app = paused_app(
        backend,
        &["--sse-refresh-ms", "100", "--admission-rate", "4"],
    )
    .await;
    let mut tickets = Vec::new();
    for _ in 0..8 {
        tickets.push(app.join("main", None).await.1);
    }
    let watched = &tickets[7];
    let response = app
        .client
        .get(app.url(&paths::events("main", &watched.ticket_id)))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("SSE");
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let deadline = Instant::now() + Duration::from_secs(25);
    let first = read_events(&mut stream, &mut buffer, deadline, |_| true).await;
    assert_eq!(first[0].position, Some(8));
    // Two shoppers ahead leave: the stream says 6 without being polled.
    app.leave("main", &tickets[1].ticket_id).await;
    app.leave("main", &tickets[4].ticket_id).await;
    let after_leaves = read_events(&mut stream, &mut buffer, deadline, |s| {
        s.position == Some(6)
    })
    .await;
    assert_eq!(
        after_leaves.last().and_then(|s| s.position),
        Some(6),
        "{after_leaves:?}"
    );
    // Resume: positions fall one admission at a time to the token, never rising, each exact.
    app.patch_room("main", json!({"paused": false})).await;
    let events = read_events(&mut stream, &mut buffer, deadline, |s| {
        s.status == TicketState::TokenIssued
    })
    .await;
    assert_eq!(
        events.last().map(|s| s.status),
        Some(TicketState::TokenIssued),
        "{events:?}"
    );
    let positions: Vec<u64> = events.iter().filter_map(|s| s.position).collect();
    println!("positions {positions:?}");
    assert!(
        positions.windows(2).all(|w| w[1] < w[0]),
        "positions rose or repeated: {positions:?}"
    );
    assert!(events
        .iter()
        .any(|s| s.room_state == vestibule_shared::RoomState::Open));
    // Another stream of a waiting ticket sees a pause as a change of its ETA and room state.
    let (_, late) = app.join("main", None).await;
    app.patch_room("main", json!({"paused": true, "admissionRatePerSec": 4}))
        .await;
    let response = app
        .client
        .get(app.url(&paths::events("main", &late.ticket_id)))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("SSE");
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let deadline = Instant::now() + Duration::from_secs(8);
    let opened = read_events(&mut stream, &mut buffer, deadline, |_| true).await;
    assert_eq!(opened[0].room_state, vestibule_shared::RoomState::Paused);
    app.patch_room(
        "main",
        json!({"paused": false, "admissionRatePerSec": 0.001}),
    )
    .await;
    let resumed = read_events(&mut stream, &mut buffer, deadline, |s| {
        s.room_state == vestibule_shared::RoomState::Open
    })
    .await;
    let last = resumed.last().expect("an event after the resume");
    assert_eq!(last.room_state, vestibule_shared::RoomState::Open);
    assert!(
        last.eta_seconds.is_some(),
        "a resumed room has an ETA again"
    );
}

/// A `curl -N` follower of an event stream; what it has read so far.
struct CurlFollower {
    name: &'static str,
    child: tokio::process::Child,
    seen: std::sync::Arc<std::sync::Mutex<String>>,
}

impl CurlFollower {
    fn start(name: &'static str, url: String, http2: bool) -> Self {
        let mut command = tokio::process::Command::new("curl");
        command.args(["-sN", "-H", "Accept: text/event-stream"]);
        if http2 {
            command.arg("--http2-prior-knowledge");
        }
        let mut child = command
            .arg(url)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("curl runs (scripts/setup-tools.sh --test installs it)");
        let mut stdout = child.stdout.take().expect("curl's stdout");
        let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = seen.clone();
        tokio::spawn(async move {
            let mut buffer = vec![0u8; 4096];
            while let Ok(n) = stdout.read(&mut buffer).await {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        Self { name, child, seen }
    }

    /// Waits up to `within` for a `status` event whose data contains `needle`; how long it took.
    async fn wait_for(&self, needle: &str, within: Duration) -> Option<Duration> {
        let started = Instant::now();
        while started.elapsed() < within {
            if self.seen.lock().unwrap().contains(needle) {
                return Some(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }
}

/// Vestibule answers SSE with `X-Accel-Buffering: no`: behind Debian's nginx with its default
/// buffering (over HTTP/1.1 and over h2c), and straight over h2c (many streams per connection,
/// as a CDN sends them), curl reads the first event at once and a position change within one
/// refresh of it.
// Reports: nginx/nginx#1505 (buffering breaks event streams), django-eventstream#37 and kin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_in_front_passes_every_event_at_once_over_http1_and_http2() {
    use vestibule_tests::nginx::Nginx;
    let app = paused_app(Backend::Memory, &["--sse-refresh-ms", "200"]).await;
    let (_, ahead) = app.join("main", None).await;
    let (_, follower) = app.join("main", None).await;
    let upstream = app.url("");
    let upstream = upstream.trim_end_matches('/');
    let plain = Nginx::start(upstream, false).expect("nginx starts");
    let h2c = Nginx::start(upstream, true).expect("nginx starts with h2c");
    let path = paths::events("main", &follower.ticket_id);
    let followers = [
        CurlFollower::start("nginx, HTTP/1.1", format!("{}{path}", plain.base()), false),
        CurlFollower::start("nginx, h2c", format!("{}{path}", h2c.base()), true),
        CurlFollower::start("Vestibule, h2c", app.url(&path), true),
    ];
    for follower in &followers {
        let took = follower
            .wait_for("\"position\":2", Duration::from_secs(5))
            .await;
        println!("{}: first event after {took:?}", follower.name);
        assert!(
            took.is_some(),
            "{}: no first event within 5 s: {:?}",
            follower.name,
            follower.seen.lock().unwrap()
        );
    }
    assert_eq!(
        app.leave("main", &ahead.ticket_id).await,
        StatusCode::NO_CONTENT
    );
    for follower in &followers {
        // The hub moves positions every 200 ms; 2 s leaves room for a busy box, far less than
        // any proxy buffer would take to fill with one stream's events.
        let took = follower
            .wait_for("\"position\":1", Duration::from_secs(2))
            .await;
        println!("{}: position 1 after {took:?}", follower.name);
        assert!(
            took.is_some(),
            "{}: the move to position 1 did not arrive within 2 s: {:?}",
            follower.name,
            follower.seen.lock().unwrap()
        );
    }
    for mut follower in followers {
        let _ = follower.child.kill().await;
    }
}

/// Reads a whole (finite) SSE answer.
async fn stream_text(
    app: &vestibule_tests::TestApp,
    ticket: &str,
    last_event_id: Option<&str>,
) -> (StatusCode, String) {
    let mut request = app
        .client
        .get(app.url(&paths::events("main", ticket)))
        .timeout(Duration::from_secs(10));
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id);
    }
    let response = request.send().await.expect("SSE");
    let status = response.status();
    (status, response.text().await.expect("the stream ends"))
}

/// The final status goes out once with `id: end` and a long `retry`; a reconnect naming `end` is
/// told 204 (the SSE standard's "stop reconnecting"), any other reconnect still gets the status.
async fn a_finished_tickets_stream_ends_with_its_final_id_and_a_reconnect_gets_204(
    backend: Backend,
) {
    let app = paused_app(backend, &[]).await;
    let (_, ticket) = app.join("main", None).await;
    assert_eq!(
        app.leave("main", &ticket.ticket_id).await,
        StatusCode::NO_CONTENT
    );

    let (status, text) = stream_text(&app, &ticket.ticket_id, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(text.contains("event: status\n"), "{text}");
    assert!(text.contains("\"status\":\"LEFT\""), "{text}");
    assert!(text.contains("id: end\n"), "{text}");
    assert!(text.contains("retry: 60000\n"), "{text}");

    let (status, text) = stream_text(&app, &ticket.ticket_id, Some("end")).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
    assert!(text.is_empty(), "{text}");

    // A client that missed the final status (its last id is a number) still gets it.
    let (status, text) = stream_text(&app, &ticket.ticket_id, Some("0")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        text.contains("\"status\":\"LEFT\"") && text.contains("id: end\n"),
        "{text}"
    );

    // A live ticket's stream is not cut short by an `end` it never sent.
    let (_, live) = app.join("main", None).await;
    let response = app
        .client
        .get(app.url(&paths::events("main", &live.ticket_id)))
        .header("last-event-id", "end")
        .send()
        .await
        .expect("SSE");
    assert_eq!(response.status(), StatusCode::OK);
}

/// A standard EventSource client (npm `eventsource`, the WHATWG algorithm) left on a finished
/// ticket for 30 s: one request, the final status, and no reconnect every 3 s.
async fn a_standard_eventsource_client_stops_asking_once_the_ticket_is_finished(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    let (_, ticket) = app.join("main", None).await;
    assert_eq!(
        app.leave("main", &ticket.ticket_id).await,
        StatusCode::NO_CONTENT
    );
    let root = vestibule_tests::workspace_root();
    let modules = root.join(".tools/node_modules");
    assert!(
        modules.join("eventsource/package.json").exists(),
        "{} has no eventsource: scripts/setup-tools.sh --test installs it",
        modules.display()
    );
    let output = tokio::process::Command::new("node")
        .arg(root.join("tests/interop/eventsource_count.cjs"))
        .arg(app.url(&paths::events("main", &ticket.ticket_id)))
        .arg("30")
        .env("NODE_PATH", &modules)
        .stderr(Stdio::inherit())
        .output()
        .await
        .expect("node runs (scripts/setup-tools.sh --test installs it)");
    assert!(output.status.success());
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("the client's JSON report");
    let requests = report["requests"].as_array().expect("requests");
    assert!(
        !requests.is_empty() && requests.len() <= 2,
        "at most 2 requests in 30 s: {report}"
    );
    assert_eq!(requests[0]["status"], 200, "{report}");
    assert_eq!(
        report["events"],
        json!([{"id": "end", "status": "LEFT"}]),
        "the final status, once: {report}"
    );
    if let Some(second) = requests.get(1) {
        assert_eq!(second["lastEventId"], "end", "{report}");
        assert_eq!(second["status"], 204, "{report}");
    }
}
