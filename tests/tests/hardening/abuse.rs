//! Abuse (README "Guarantees"): one client cannot flood a room with tickets.

use reqwest::StatusCode;
use serde_json::{json, Value};
use vestibule_shared::paths;
use vestibule_tests::{metric_value, Backend, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_flood_a_room_with_tickets() {
    let app = TestApp::spawn(
        Backend::Memory,
        &[
            "--joins-per-ip-per-minute",
            "5",
            "--client-ip-header",
            "X-Forwarded-For",
        ],
    )
    .await;
    app.patch_room("main", json!({"paused": true})).await;
    let join_from = |ip: &'static str| {
        app.client
            .post(app.url(&paths::tickets("main")))
            .header("X-Forwarded-For", format!("203.0.113.9, {ip}"))
            .send()
    };
    for _ in 0..5 {
        assert_eq!(
            join_from("198.51.100.1").await.unwrap().status(),
            StatusCode::CREATED
        );
    }
    let refused = join_from("198.51.100.1").await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "rate_limited");
    // Another client is unaffected; polls are never limited.
    assert_eq!(
        join_from("198.51.100.2").await.unwrap().status(),
        StatusCode::CREATED
    );
    let info = app.get_json(&paths::room("main")).await.1;
    assert_eq!(info["waiting"], 6);
    assert!(
        metric_value(
            &app.metrics().await,
            "vestibule_joins_rate_limited_total{room=\"main\"}"
        ) >= 1.0
    );
    // Off by default.
    let open = TestApp::spawn(Backend::Memory, &[]).await;
    for _ in 0..20 {
        assert_eq!(open.join("main", None).await.0, StatusCode::CREATED);
    }
}
