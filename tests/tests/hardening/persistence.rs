//! Persistence (docs/guarantees.md): an AOF Redis restarted mid-sale keeps every ticket and
//! token.

use reqwest::StatusCode;
use serde_json::json;
use std::time::{Duration, Instant};
use vestibule_shared::{paths, TicketState, TicketStatus};
use vestibule_tests::{RedisServer, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aof_redis_restarted_mid_sale_keeps_every_ticket_and_token() {
    let mut redis = RedisServer::start_with(&[
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]);
    let app = TestApp::spawn_with_url(Some(&redis.url()), &["--admission-rate", "100"]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let mut tickets = Vec::new();
    for _ in 0..60 {
        tickets.push(app.join("main", None).await.1);
    }
    app.patch_room("main", json!({"paused": false})).await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    app.patch_room("main", json!({"paused": true})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = poll_all(&app, &tickets).await;
    let issued = before
        .iter()
        .filter(|t| t.status == TicketState::TokenIssued)
        .count();
    assert!(issued > 0 && issued < 60, "mid-sale: {issued} issued");

    redis.restart(); // SIGKILL, then start again: the AOF is replayed.
    let deadline = Instant::now() + Duration::from_secs(5);
    while app.get_json(paths::READYZ).await.0 != StatusCode::OK {
        assert!(Instant::now() < deadline, "not ready after the restart");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = poll_all(&app, &tickets).await;
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(
            (b.status, b.position, &b.entry_token),
            (a.status, a.position, &a.entry_token)
        );
    }
    let token = after.iter().find_map(|t| t.entry_token.clone()).unwrap();
    assert_eq!(app.order("main", Some(&token)).await.0, StatusCode::CREATED);
    println!(
        "{issued} issued tokens and {} waiting tickets survived the restart",
        60 - issued
    );
}

async fn poll_all(app: &TestApp, tickets: &[TicketStatus]) -> Vec<TicketStatus> {
    let mut out = Vec::new();
    for ticket in tickets {
        out.push(app.poll("main", &ticket.ticket_id).await);
    }
    out
}
