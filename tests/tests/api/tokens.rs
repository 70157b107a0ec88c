//! Entry tokens: used once, and every bad token answered with a JSON 403 naming what is wrong.

use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;
use vestibule_shared::TicketState;
use vestibule_tests::{both_stores, on_redis_cluster_too, Backend, TestApp};

both_stores!(tokens_work_once_and_every_bad_token_gets_a_json_403,);

// The same flows on a Redis Cluster (tests/tests/cluster.rs: the cluster's own tests).
on_redis_cluster_too!(tokens_work_once_and_every_bad_token_gets_a_json_403,);

async fn tokens_work_once_and_every_bad_token_gets_a_json_403(backend: Backend) {
    let app = TestApp::spawn(backend, &["--rooms", "main,other"]).await;
    let (_, ticket) = app.join("main", None).await;
    let issued = app
        .poll_until("main", &ticket.ticket_id, Duration::from_secs(5), |t| {
            t.status == TicketState::TokenIssued
        })
        .await;
    assert_eq!(issued.status, TicketState::TokenIssued);
    let token = issued
        .entry_token
        .clone()
        .expect("TOKEN_ISSUED carries a token");
    assert!(issued.token_expires_at.is_some());
    assert_eq!(issued.checkout_url.as_deref(), Some("/checkout?room=main"));

    let (status, receipt) = app.order("main", Some(&token)).await;
    assert_eq!(status, StatusCode::CREATED, "{receipt}");
    assert!(receipt["orderId"].as_str().unwrap().starts_with("ord_"));

    let (_, other_ticket) = app.join("other", None).await;
    let other = app
        .poll_until(
            "other",
            &other_ticket.ticket_id,
            Duration::from_secs(5),
            |t| t.status == TicketState::TokenIssued,
        )
        .await;
    let other_token = other.entry_token.expect("other room's token");

    for (token, code) in [
        (Some(token.as_str()), "entry_token_used"),
        (None, "entry_token_missing"),
        (Some("main.AAAAAAAAAAAAAAAAAAAAAA"), "entry_token_unknown"),
        (Some("garbage"), "entry_token_unknown"),
        (Some(other_token.as_str()), "entry_token_wrong_room"),
    ] {
        let (status, body) = app.order("main", token).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{token:?}: {body}");
        assert_eq!(body["error"], code, "{token:?}");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    assert_eq!(
        app.poll("main", &ticket.ticket_id).await.status,
        TicketState::Completed
    );

    // Expiry: TTL 1 s.
    app.patch_room("main", json!({"tokenTtlSecs": 1})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, late) = app.join("main", None).await;
    let late_issued = app
        .poll_until("main", &late.ticket_id, Duration::from_secs(5), |t| {
            t.status == TicketState::TokenIssued
        })
        .await;
    let late_token = late_issued.entry_token.expect("token");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let (status, body) = app.order("main", Some(&late_token)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"], "entry_token_expired");
    assert_eq!(
        app.poll("main", &late.ticket_id).await.status,
        TicketState::Expired
    );
    // The scheduler counts it as expired.
    let expired = app
        .poll_until("main", &late.ticket_id, Duration::from_secs(2), |_| true)
        .await;
    assert_eq!(
        expired.entry_token, None,
        "an expired ticket no longer shows its token"
    );
}
