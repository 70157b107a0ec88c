//! Redis settings that silently lose queue state: an evicting policy reported at start, in
//! `/readyz` and in metrics, refused with `--require-safe-redis`; a full noeviction Redis refuses
//! new work and loses nothing; a Redis that hides CONFIG (as managed ones do) is still judged,
//! and its unknown snapshot schedule is not reported as none.

use std::process::Stdio;
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

/// `vestibule --require-safe-redis` on `redis`; whether it started, and its output.
async fn started_with_require_safe_redis(redis: RedisServer) -> (bool, String) {
    let url = redis.url();
    let mut command = vestibule_command(Some(&url), &["--require-safe-redis"], "info");
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("vestibule runs");
    // Started = still running and listening after 3 s; refused = exited.
    let deadline = Instant::now() + Duration::from_secs(3);
    let exited = loop {
        if let Ok(Some(_)) = child.try_wait() {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    if !exited {
        let _ = child.kill();
    }
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .expect("output");
    drop(redis);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (!exited && text.contains("listening on"), text)
}

/// A Redis limited to 8 MB with `policy`, whose CONFIG command is gone.
fn redis_without_config(policy: &str) -> RedisServer {
    RedisServer::with_8mb_limit(policy, &["--rename-command", "CONFIG", ""])
}

/// On a Redis whose CONFIG command is gone (as managed Redis often has it), an evicting policy is
/// still seen (warning, `/readyz`, metric, `--require-safe-redis` refusing), and a safe
/// (noeviction) one still starts with `--require-safe-redis`.
// Report: taskforcesh/bullmq#921 (the eviction check was dropped where CONFIG is hidden).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_config_an_evicting_redis_is_still_reported_and_a_safe_one_still_starts() {
    let redis = redis_without_config("volatile-lru");
    assert!(redis
        .cli(&["CONFIG", "GET", "save"])
        .contains("unknown command"));
    let app = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let (status, ready) = app.get_json(paths::READYZ).await;
    println!("/readyz {status}: {ready}");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ready["redis"]["maxmemoryPolicy"], "volatile-lru", "{ready}");
    assert!(
        ready["warnings"].as_array().is_some_and(|w| w
            .iter()
            .any(|w| w.as_str().unwrap_or("").contains("noeviction"))),
        "{ready}"
    );
    assert_eq!(app.metric("vestibule_store_may_evict").await, 1.0);
    assert_eq!(app.join("main", None).await.0, StatusCode::CREATED);
    drop(app);
    let (started, output) = started_with_require_safe_redis(redis).await;
    assert!(!started, "started on an evicting Redis:\n{output}");
    assert!(output.contains("maxmemory-policy"), "{output}");

    let (started, output) =
        started_with_require_safe_redis(redis_without_config("noeviction")).await;
    assert!(
        started,
        "refused a noeviction Redis that hides CONFIG:\n{output}"
    );
}

/// Redis keeps RDB snapshots (`save 60 1`) but refuses CONFIG, as managed Redis does: `/readyz`
/// shows `rdbSave: null` (unknown), and no warning or log line states as fact that Redis keeps no
/// snapshots and that a restart empties every queue.
// Reports: taskforcesh/bullmq#921, redis/redis#8988, Grokzen/redis-py-cluster#166.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_whose_snapshot_schedule_cannot_be_read_is_not_reported_as_keeping_none() {
    let redis = RedisServer::start_with(&[
        "--save",
        "60 1",
        "--appendonly",
        "no",
        "--rename-command",
        "CONFIG",
        "",
    ]);
    let app = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let (status, ready) = app.get_json(paths::READYZ).await;
    println!("/readyz {status}: {ready}");
    assert_eq!(status, StatusCode::OK);
    assert!(ready["redis"]["rdbSave"].is_null(), "{ready}");
    let warnings: Vec<&str> = ready["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let false_claims: Vec<&&str> = warnings
        .iter()
        .filter(|w| w.contains("no RDB snapshots"))
        .collect();
    assert!(
        false_claims.is_empty(),
        "an unknown snapshot schedule is reported as none: {false_claims:?}"
    );
    assert!(
        !app.log().contains("no RDB snapshots"),
        "the start-up log states it too:\n{}",
        app.log()
    );
}
