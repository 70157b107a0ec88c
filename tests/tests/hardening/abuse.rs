//! Abuse (docs/guarantees.md): one client cannot flood a room with tickets, and refused joins
//! do not count against it.

use std::time::Duration;

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::{json, Value};
use vestibule_shared::paths;
use vestibule_tests::{both_stores, metric_value, Backend, TestApp};

both_stores!(a_client_that_hammers_past_the_join_limit_gets_in_after_its_retry_after);

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

/// An unkeyed join; its status code and `Retry-After` (seconds) when present.
async fn plain_join(app: &TestApp) -> (u16, Option<u64>) {
    let response = app
        .client
        .post(app.url(&paths::tickets("main")))
        .send()
        .await
        .expect("join");
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.trim().parse().ok());
    (response.status().as_u16(), retry_after)
}

/// Refused joins are not counted: a client that hammers past the join limit and then waits the
/// `Retry-After` it was given is let in.
// Report: sourcegraph/sourcegraph-public-snapshot#51899 (a limiter that kept counting refusals).
async fn a_client_that_hammers_past_the_join_limit_gets_in_after_its_retry_after(backend: Backend) {
    // 20 a minute: one new join every 3 s once the allowance is spent.
    let app = TestApp::spawn(backend, &["--joins-per-ip-per-minute", "20"]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let mut accepted = 0;
    loop {
        let (status, _) = plain_join(&app).await;
        if status == 429 {
            break;
        }
        assert_eq!(status, 201);
        accepted += 1;
        assert!(accepted <= 20, "the limit never refused");
    }
    let hammered = join_all((0..60).map(|_| plain_join(&app))).await;
    let statuses: Vec<u16> = hammered.iter().map(|(s, _)| *s).collect();
    assert!(
        statuses.iter().all(|s| *s == 429),
        "the limit let a hammering client through: {statuses:?}"
    );
    let retry_after = hammered.last().and_then(|(_, r)| *r).expect("Retry-After");
    println!("{accepted} accepted, then 60 refused; Retry-After {retry_after} s");
    assert!(
        retry_after <= 4,
        "refused joins pushed the wait to {retry_after} s"
    );
    tokio::time::sleep(Duration::from_millis(retry_after * 1000 + 200)).await;
    let (status, _) = plain_join(&app).await;
    assert_eq!(status, 201, "refused after waiting its Retry-After");
}
