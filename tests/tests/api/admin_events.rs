//! The admin event stream (`GET /api/v1/admin/events`): every room's figures once a second,
//! read with an independent SSE client (`curl -N`), moving as shoppers join and are admitted;
//! and `vestibule demo`, whose synthetic shoppers make them move by themselves.

use std::collections::HashSet;
use std::process::Stdio;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use vestibule_shared::admin_events::{AdminEvent, ADMIN_EVENT_NAME};
use vestibule_shared::{paths, RoomState};
use vestibule_tests::{
    both_stores, follow_output, vestibule_binary, Backend, ChildGuard, TestApp, ADMIN_TOKEN,
};

use crate::paused_app;

both_stores!(
    admin_events_need_the_token,
    admin_events_show_joins_and_admissions_and_are_read_once_for_every_viewer,
);

async fn admin_events_need_the_token(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    let url = app.url(paths::ADMIN_EVENTS);
    let none = app.client.get(&url).send().await.expect("GET");
    assert_eq!(none.status(), StatusCode::UNAUTHORIZED);
    let wrong = app
        .client
        .get(&url)
        .bearer_auth("not-the-token")
        .send()
        .await
        .expect("GET");
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    let body: serde_json::Value = wrong.json().await.expect("JSON error");
    assert_eq!(body["error"], "forbidden");
}

/// `curl -N` reading the stream for `secs` seconds; its output.
fn curl_stream(app: &TestApp, secs: u64) -> tokio::process::Child {
    tokio::process::Command::new("curl")
        .args(["-N", "-s", "--max-time", &secs.to_string()])
        .args(["-H", &format!("Authorization: Bearer {ADMIN_TOKEN}")])
        .arg(app.url(paths::ADMIN_EVENTS))
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("curl runs")
}

/// The `figures` events of an SSE text.
fn figures(text: &str) -> Vec<AdminEvent> {
    text.split("\n\n")
        .filter(|block| {
            block
                .lines()
                .any(|line| line == format!("event: {ADMIN_EVENT_NAME}"))
        })
        .filter_map(|block| block.lines().find_map(|line| line.strip_prefix("data:")))
        .map(|data| serde_json::from_str(data.trim()).expect("AdminEvent JSON"))
        .collect()
}

async fn admin_events_show_joins_and_admissions_and_are_read_once_for_every_viewer(
    backend: Backend,
) {
    let app = paused_app(backend, &["--rooms", "main,vip"]).await;
    let first = curl_stream(&app, 8);
    let second = curl_stream(&app, 8);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for _ in 0..30 {
        app.join("main", None).await;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    app.patch_room("main", json!({"paused": false, "admissionRatePerSec": 5}))
        .await;
    let first = first.wait_with_output().await.expect("curl output");
    let second = second.wait_with_output().await.expect("curl output");
    let text = String::from_utf8_lossy(&first.stdout);
    let events = figures(&text);
    assert!(events.len() >= 6, "about one event a second: {text}");
    let rooms: Vec<&str> = events[0].rooms.iter().map(|r| r.room.as_str()).collect();
    assert_eq!(rooms, ["main", "vip"], "every room, sorted");
    let main = |event: &AdminEvent| {
        event
            .rooms
            .iter()
            .find(|room| room.room == "main")
            .cloned()
            .expect("main")
    };
    // The first event is the process's latest reading (read each second since start, so it can
    // predate the pause by up to a second); the next one is read after it.
    assert_eq!(main(&events[1]).state, RoomState::Paused, "{text}");
    assert!(
        events
            .iter()
            .any(|e| main(e).waiting == 30 && main(e).joins_per_sec > 0.0),
        "the joins show: {text}"
    );
    let last = main(events.last().expect("events"));
    assert_eq!(last.state, RoomState::Open, "{text}");
    assert_eq!(last.admission_rate_per_sec, 5.0);
    assert!(last.waiting < 30, "admission moves the line: {text}");
    assert!(
        events
            .iter()
            .any(|e| main(e).admitted_per_sec.is_some_and(|rate| rate > 0.0)),
        "admissions show: {text}"
    );
    let leader = last.leader.expect("the only replica leads");
    assert!(leader.epoch >= 1);
    assert_eq!(leader.replica, events[0].replica);
    // Both viewers got the same readings (one read per second for the process, not per viewer).
    let at = |events: &[AdminEvent]| events.iter().map(|e| e.at_ms).collect::<HashSet<u64>>();
    let shared = at(&events)
        .intersection(&at(&figures(&String::from_utf8_lossy(&second.stdout))))
        .count();
    assert!(shared >= events.len() - 1, "{text}");
}

/// `vestibule demo`: within seconds its room has a line, admissions and checkouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_room_moves_by_itself_within_seconds() {
    let mut command = std::process::Command::new(vestibule_binary());
    command
        .args([
            "demo",
            "--bind",
            "127.0.0.1:0",
            "--admin-token",
            ADMIN_TOKEN,
        ])
        .env("RUST_LOG", "warn")
        .env_remove("VESTIBULE_REDIS_URL")
        .env_remove("VESTIBULE_DATA_DIR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("vestibule demo starts");
    let (address, output) = follow_output(&mut child, 200);
    let _guard = ChildGuard::new(child);
    let address =
        tokio::task::spawn_blocking(move || address.recv_timeout(Duration::from_secs(15)))
            .await
            .unwrap()
            .unwrap_or_else(|_| panic!("no listening line: {}", output.text()));
    // Long enough for a checkout whatever the draw: the demo's first shoppers are admitted
    // within about a second and order 2–8 s later (`demo.rs`), and a figure counts the second
    // before it.
    let stream = tokio::process::Command::new("curl")
        .args(["-N", "-s", "--max-time", "12"])
        .args(["-H", &format!("Authorization: Bearer {ADMIN_TOKEN}")])
        .arg(format!("http://{address}{}", paths::ADMIN_EVENTS))
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .expect("curl runs");
    let text = String::from_utf8_lossy(&stream.stdout);
    let demo: Vec<_> = figures(&text)
        .into_iter()
        .filter_map(|event| event.rooms.into_iter().find(|room| room.room == "demo"))
        .collect();
    assert!(demo.len() >= 5, "{text}");
    assert!(demo.iter().any(|room| room.waiting > 0), "a line: {text}");
    assert!(
        demo.iter()
            .any(|room| room.admitted_per_sec.is_some_and(|rate| rate > 0.0)),
        "admissions: {text}"
    );
    assert!(demo.iter().any(|room| room.joins_per_sec > 0.0), "{text}");
    assert!(demo.iter().any(|room| room.polls_per_sec > 0.0), "{text}");
    assert!(
        demo.iter().any(|room| room.tokens_used_per_sec > 0.0),
        "checkouts: {text}"
    );
    let waiting: HashSet<u64> = demo.iter().map(|room| room.waiting).collect();
    assert!(waiting.len() > 2, "the line moves: {waiting:?}");
}
