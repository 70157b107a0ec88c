//! Store outage policy (docs/guarantees.md): fast 503s under load, service back within 2 s,
//! and the `pass` policy.

use reqwest::StatusCode;
use serde_json::json;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vestibule_shared::paths;
use vestibule_tests::{Backend, RedisServer, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_under_load_gives_fast_503s_and_service_resumes_within_2_s() {
    let mut redis = RedisServer::start();
    let app = TestApp::spawn_with_url(Some(&redis.url()), &["--store-timeout-ms", "500"]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let (_, keeper) = app.join("main", None).await;
    let app = Arc::new(app);
    let stop = Arc::new(AtomicBool::new(false));
    let slowest_ms = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for _ in 0..8 {
        let (app, stop, slowest_ms) = (app.clone(), stop.clone(), slowest_ms.clone());
        let keeper = keeper.ticket_id.clone();
        workers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let status = match app
                    .client
                    .get(app.url(&paths::ticket("main", &keeper)))
                    .send()
                    .await
                {
                    Ok(response) => {
                        let status = response.status();
                        if status == StatusCode::SERVICE_UNAVAILABLE {
                            assert!(response.headers().contains_key("retry-after"));
                        }
                        status
                    }
                    Err(error) => panic!("no answer during the outage: {error}"),
                };
                slowest_ms.fetch_max(started.elapsed().as_millis() as u64, Ordering::Relaxed);
                seen.push(status);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            seen
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    redis.stop(); // SIGKILL
    tokio::time::sleep(Duration::from_secs(2)).await;
    // A made-up token is refused offline, store or not.
    let (status, body) = app.order("main", Some("main.AAAAAAAAAAAAAAAAAAAAAA")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"], "entry_token_unknown");
    // Bring Redis back on the same socket (no persistence: it comes back empty).
    redis.restart();
    let back = Instant::now();
    let resumed_after = loop {
        let (status, _) = app.get_json(paths::READYZ).await;
        let joined = app
            .client
            .post(app.url(&paths::tickets("main")))
            .send()
            .await
            .unwrap()
            .status();
        if status == StatusCode::OK && joined == StatusCode::CREATED {
            break back.elapsed();
        }
        assert!(
            back.elapsed() < Duration::from_secs(5),
            "not serving 5 s after Redis came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    stop.store(true, Ordering::Relaxed);
    let mut statuses = HashSet::new();
    for worker in workers {
        statuses.extend(worker.await.unwrap());
    }
    println!(
        "outage statuses {statuses:?}; slowest {} ms; resumed after {resumed_after:?}",
        slowest_ms.load(Ordering::Relaxed)
    );
    assert!(statuses.contains(&StatusCode::SERVICE_UNAVAILABLE));
    assert!(
        statuses
            .iter()
            .all(|s| s.as_u16() < 500 || *s == StatusCode::SERVICE_UNAVAILABLE),
        "{statuses:?}"
    );
    assert!(
        slowest_ms.load(Ordering::Relaxed) < 2000,
        "an answer took {} ms",
        slowest_ms.load(Ordering::Relaxed)
    );
    assert!(
        resumed_after < Duration::from_secs(2),
        "resumed after {resumed_after:?}"
    );
    assert!(!app.log().contains("panicked"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pass_policy_keeps_checkout_open_while_the_store_is_down() {
    let mut app = TestApp::spawn(
        Backend::Redis,
        &[
            "--rooms",
            "main,flash",
            "--outage-policy",
            "reject,flash=pass",
            "--store-timeout-ms",
            "300",
        ],
    )
    .await;
    let (_, flash_token) = app.admitted("flash").await;
    let (_, main_token) = app.admitted("main").await;
    // While the store is up a made-up token is refused everywhere.
    assert_eq!(
        app.order("flash", Some("flash.AAAAAAAAAAAAAAAAAAAAAA"))
            .await
            .0,
        StatusCode::FORBIDDEN
    );
    app.redis.as_mut().unwrap().stop();
    // The pass room takes a token that verifies offline (signature, expiry, room) …
    let (status, body) = app.order("flash", Some(&flash_token)).await;
    assert_eq!(status, StatusCode::CREATED, "pass room: {body}");
    // … and still refuses a made-up one: the signature check needs no store.
    let (status, body) = app
        .order("flash", Some("flash.AAAAAAAAAAAAAAAAAAAAAA"))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "pass room, forged: {body}");
    // The reject room refuses: 503, or 504 while the connection that just broke is in doubt.
    let (status, body) = app.order("main", Some(&main_token)).await;
    assert!(
        matches!(
            (status.as_u16(), body["error"].as_str()),
            (503, Some("store_unavailable")) | (504, Some("store_timeout"))
        ),
        "reject room: {status} {body}"
    );
}

/// Joins sent together (docs/DESIGN.md "Joins sent together") while Redis is down: a call meets
/// the connection's reconnect and its retries (up to ~0.6 s) before it is refused; were the joins
/// waiting behind it to meet the same, call after call, those still out at their deadline (each
/// join's wait is bounded by the store timeout) would answer 504 although nothing was sent.
/// Every one of 400 joins at once answers 503 `store_unavailable` with
/// `Retry-After`, within the store timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_at_once_while_redis_is_down_all_answer_503_within_the_store_timeout() {
    let mut redis = RedisServer::start();
    let app = TestApp::spawn_with_url(
        Some(&redis.url()),
        &["--store-timeout-ms", "1000", "--serving-threads", "1"],
    )
    .await;
    app.patch_room("main", json!({"paused": true})).await;
    assert_eq!(app.join("main", Some("warm")).await.0, StatusCode::CREATED);
    redis.stop();
    // The first call on the connection meets it cut and may have been sent: 503 or 504
    // (docs/DESIGN.md "Thread per core"). From then on the connection knows.
    let first = app.join_request("main").send().await.unwrap().status();
    assert!(
        matches!(first.as_u16(), 503 | 504),
        "first join after the stop: {first}"
    );
    let joins = (0..400).map(|i| {
        let mut request = app.join_request("main");
        if i % 2 == 0 {
            request = request.header("Idempotency-Key", format!("down-{i}"));
        }
        async move {
            let started = Instant::now();
            let answer = request.send().await.expect("an answer while Redis is down");
            let waited = started.elapsed();
            let status = answer.status();
            let retry_after = answer.headers().contains_key("retry-after");
            let body: serde_json::Value = answer.json().await.unwrap_or_default();
            (status, retry_after, body, waited)
        }
    });
    let answers = futures_util::future::join_all(joins).await;
    for (i, (status, retry_after, body, waited)) in answers.iter().enumerate() {
        assert_eq!(
            (status.as_u16(), body["error"].as_str()),
            (503, Some("store_unavailable")),
            "join {i}: {body}"
        );
        assert!(retry_after, "join {i}: 503 without Retry-After");
        assert!(
            *waited < Duration::from_millis(1_500),
            "join {i} waited {waited:?} with a store timeout of 1 s"
        );
    }
}
