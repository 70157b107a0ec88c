//! Redis settings that silently lose queue state: an evicting policy reported at start, in
//! `/readyz` and in metrics, refused with `--require-safe-redis`; a full noeviction Redis refuses
//! new work and loses nothing.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use vestibule_shared::{paths, TicketState};
use vestibule_tests::{vestibule_command, RedisServer, TestApp};

fn evicting_redis() -> RedisServer {
    RedisServer::with_8mb_limit("volatile-lru", &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_may_evict_keys_is_reported_at_start_in_readyz_and_in_metrics() {
    let redis = evicting_redis();
    let app =
        TestApp::spawn_with_url(Some(&redis.url()), &["--redis-safety-check-secs", "1"]).await;
    assert!(
        app.log().contains("maxmemory-policy is \"volatile-lru\""),
        "no warning at start:\n{}",
        app.log()
    );
    let (status, ready) = app.get_json(paths::READYZ).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ready["redis"]["maxmemoryPolicy"], "volatile-lru", "{ready}");
    assert_eq!(ready["redis"]["maxmemoryBytes"], 8 * 1024 * 1024);
    let warnings = ready["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("noeviction")),
        "{ready}"
    );
    assert_eq!(app.metric("vestibule_store_may_evict").await, 1.0);
    assert_eq!(app.metric("vestibule_store_persistent").await, 0.0);

    // An operator fixes Redis at run time: the next check sees it.
    redis.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    redis.cli(&["CONFIG", "SET", "appendonly", "yes"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, ready) = app.get_json(paths::READYZ).await;
        if ready["warnings"].as_array().is_some_and(Vec::is_empty) {
            assert_eq!(ready["redis"]["maxmemoryPolicy"], "noeviction");
            break;
        }
        assert!(Instant::now() < deadline, "still warned: {ready}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(app.metric("vestibule_store_may_evict").await, 0.0);
    assert_eq!(app.metric("vestibule_store_persistent").await, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_safe_redis_refuses_to_start_on_an_evicting_redis() {
    let redis = evicting_redis();
    let output = tokio::task::spawn_blocking(move || {
        let mut command = vestibule_command(Some(&redis.url()), &["--require-safe-redis"], "info");
        let output = command.output().expect("vestibule runs");
        drop(redis);
        output
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "started anyway");
    assert!(
        stderr.contains("maxmemory-policy") && stderr.contains("noeviction"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_noeviction_redis_refuses_new_work_with_503_and_loses_nothing() {
    let redis = RedisServer::with_8mb_limit("noeviction", &[]);
    let app = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let (_, admitted) = app.join("main", None).await;
    let token = app
        .poll_until("main", &admitted.ticket_id, Duration::from_secs(5), |t| {
            t.status == TicketState::TokenIssued
        })
        .await
        .entry_token
        .expect("admitted");
    app.patch_room("main", json!({"paused": true})).await;
    let (_, waiting) = app.join("main", Some("waiting-1")).await;
    // Fill Redis to its limit with data of no TTL (another tenant, a leak …).
    let filled = redis.fill_to_limit();
    let response = app
        .client
        .post(app.url(&paths::tickets("main")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().contains_key("retry-after"));
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"],
        "store_unavailable"
    );
    // Everything already there is intact.
    assert_eq!(app.poll("main", &waiting.ticket_id).await.position, Some(1));
    redis.unfill(filled);
    // Room again: the token issued before the pressure still buys its order.
    let (status, body) = app.order("main", Some(&token)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}
