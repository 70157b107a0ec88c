//! Metrics every replica can stand behind: the rooms' figures from the store, answers counted
//! by status and error code.

use reqwest::StatusCode;
use serde_json::json;
use vestibule_shared::paths;
use vestibule_tests::{RedisServer, TestApp};

/// With two replicas, a follower's `/metrics` has the waiting and active-users figures too, and a
/// replica that lost leadership does not keep its last ones (summing replicas must not
/// double-count): room gauges come from the store at scrape time (the same on every replica, at
/// once). Every answer is counted by status and error code, so 429s are told from 503s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_reports_the_rooms_figures_from_the_store_and_counts_answers_by_code() {
    let redis = RedisServer::start();
    let args = ["--joins-per-ip-per-minute", "3"];
    let a = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
    a.patch_room("main", json!({"paused": true})).await;
    let mut tickets = Vec::new();
    for key in ["k1", "k2", "k3"] {
        tickets.push(a.join("main", Some(key)).await.1);
    }
    let refused = b
        .client
        .post(b.url(&paths::tickets("main")))
        .header("Idempotency-Key", "k4")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);

    let waiting = "vestibule_waiting{room=\"main\"}";
    for app in [&a, &b] {
        let text = app.metrics().await;
        assert!(
            text.lines().any(|line| line == format!("{waiting} 3")),
            "every replica reports the room's 3 waiting:\n{text}"
        );
        assert!(
            text.contains("vestibule_active_users{room=\"main\"} 0\n"),
            "{text}"
        );
        assert_eq!(
            text.matches("# TYPE vestibule_waiting gauge").count(),
            1,
            "one family, no duplicate from the recorder:\n{text}"
        );
    }
    // A leave through A shows on B's next scrape, whoever leads and whenever it ticks.
    assert_eq!(
        a.leave("main", &tickets[0].ticket_id).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(b.metric(waiting).await, 2.0);

    let limited = "vestibule_http_responses_total{status=\"429\",code=\"rate_limited\"}";
    assert_eq!(b.metric(limited).await, 1.0, "{}", b.metrics().await);
    assert_eq!(a.metric(limited).await, 0.0, "counters are per process");
    let unknown_room = a
        .client
        .get(a.url(&paths::room("nope")))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown_room.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        a.metric("vestibule_http_responses_total{status=\"404\",code=\"room_not_found\"}")
            .await,
        1.0
    );
    assert!(
        a.metric("vestibule_http_responses_total{status=\"201\",code=\"none\"}")
            .await
            >= 3.0,
        "successful joins are counted too"
    );
}
