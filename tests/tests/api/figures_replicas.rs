//! The console's figures across replicas, their history and the sale summary: two replicas on
//! one Redis show the same room figures whichever answers (joins and polls sent to both are
//! summed, one leader, one admitted rate, one wait at the back); the history route returns the
//! points taken since start (a console reload sees them); the summary counts a small sale on
//! both stores.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use vestibule_shared::admin_events::{AdminEvent, FigureHistory, RoomFigures, SaleSummary};
use vestibule_shared::paths;
use vestibule_tests::{both_stores, Backend, RedisServer, TestApp, ADMIN_TOKEN};

use crate::paused_app;

both_stores!(the_summary_counts_a_small_sale);

/// `main`'s figures as `app`'s admin stream shows them.
pub(crate) async fn main_figures(app: &TestApp) -> RoomFigures {
    let event = next_event(app).await;
    event
        .rooms
        .into_iter()
        .find(|room| room.room == "main")
        .expect("main in the figures")
}

/// The first `figures` event of the admin stream of `app`.
pub(crate) async fn next_event(app: &TestApp) -> AdminEvent {
    let response = app
        .client
        .get(app.url(paths::ADMIN_EVENTS))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("stream");
    let mut response = response;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_show_the_same_figures_and_keep_a_history() {
    let redis = RedisServer::start();
    let a = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    // A slow room with a line, so the wait at the back is long and steady.
    a.patch_room("main", json!({"admissionRatePerSec": 2}))
        .await;
    let mut tickets = Vec::new();
    for n in 0..40 {
        let app = if n % 2 == 0 { &a } else { &b };
        tickets.push(app.join("main", None).await.1.ticket_id);
    }
    // Steady joins and polls through both for 4 s (about 10 joins/s and 20 polls/s on each).
    let started = std::time::Instant::now();
    let mut seen = Vec::new();
    while started.elapsed() < Duration::from_secs(4) {
        for app in [&a, &b] {
            app.join("main", None).await;
            for ticket in tickets.iter().take(2) {
                app.poll("main", ticket).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        if started.elapsed() > Duration::from_secs(3) && seen.is_empty() {
            seen.push((next_event(&a).await, next_event(&b).await));
        }
    }
    let (through_a, through_b) = seen.pop().expect("events read");
    let room = |event: &AdminEvent| event.rooms.iter().find(|r| r.room == "main").cloned();
    let (fa, fb) = (
        room(&through_a).expect("main"),
        room(&through_b).expect("main"),
    );
    eprintln!("through A: {fa:?}\nthrough B: {fb:?}");
    assert!(fa.leader.is_some(), "a leader is shown through A");
    assert_eq!(fa.leader, fb.leader, "one leader through both");
    assert_eq!(
        fa.admitted_per_sec, fb.admitted_per_sec,
        "the leader's admitted rate"
    );
    // Both replicas' joins are summed: each sent about 10/s.
    for figures in [&fa, &fb] {
        assert!(
            figures.joins_per_sec > 12.0,
            "joins through both summed: {}",
            figures.joins_per_sec
        );
    }
    let (ja, jb) = (fa.joins_per_sec, fb.joins_per_sec);
    assert!((ja - jb).abs() <= 0.35 * ja.max(jb), "joins/s {ja} vs {jb}");
    let (ea, eb) = (
        fa.eta_back_of_line_secs.expect("a line") as f64,
        fb.eta_back_of_line_secs.expect("a line") as f64,
    );
    // Within one refresh: the two events may be a second apart, and in a second the back of a
    // line growing by `joins` a second at 2 admitted a second moves by joins ÷ 2 seconds.
    let one_refresh = ja.max(jb) / 2.0;
    assert!(
        (ea - eb).abs() <= 0.1 * ea.max(eb) + one_refresh,
        "wait at the back {ea} vs {eb} (one refresh moves it {one_refresh:.1} s)"
    );
    // The history: points since start, through either replica (a console reload reads it).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (status, body) = b.admin_get(&paths::admin_room_history("main")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let history: FigureHistory = serde_json::from_value(body).expect("FigureHistory");
    assert!(
        history.points.len() >= 2,
        "points: {}",
        history.points.len()
    );
    assert!(history.points.windows(2).all(|w| w[0].at_ms < w[1].at_ms));
    let (status, body) = a.admin_get(&paths::admin_room_history("nope")).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("room_not_found"))
    );
}

async fn the_summary_counts_a_small_sale(backend: Backend) {
    let app = paused_app(backend, &["--token-ttl-secs", "2"]).await;
    let mut tickets = Vec::new();
    for _ in 0..5 {
        tickets.push(app.join("main", None).await.1.ticket_id);
    }
    // Seen by the figures (peak line), then 3 admitted: 1 orders, 2 let their tokens expire.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    app.patch_room(
        "main",
        json!({"paused": false, "admissionRatePerSec": 100, "maxActiveUsers": 3}),
    )
    .await;
    let first = app
        .poll_until("main", &tickets[0], Duration::from_secs(5), |t| {
            t.entry_token.is_some()
        })
        .await;
    let (status, _) = app.order("main", first.entry_token.as_deref()).await;
    assert!(status.is_success(), "{status}");
    app.patch_room("main", json!({"paused": true})).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (status, body) = app.admin_get(&paths::admin_room_summary("main")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let summary: SaleSummary = serde_json::from_value(body).expect("SaleSummary");
    eprintln!("{summary:?}");
    assert_eq!(summary.joined, 5);
    assert!(summary.admitted >= 3, "{summary:?}");
    assert_eq!(summary.ordered, 1);
    assert_eq!(summary.expired_unused, summary.admitted - 1, "{summary:?}");
    assert_eq!(summary.peak_waiting, 5);
    assert!(summary.longest_wait_secs >= 1, "{summary:?}");
    assert_eq!(summary.sold_out_at_ms, None);
    let (status, body) = app.admin_get(&paths::admin_room_summary("nope")).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("room_not_found"))
    );
}
