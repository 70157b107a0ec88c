//! The closed loop reading the origin's health from a URL the operator names
//! (`autoRate.healthUrl`, docs/DESIGN.md "Closed-loop admission"): the room's leader `GET`s it
//! once a second and takes a 2xx answer's signals as a report, so the rate rises on headroom,
//! is cut on latency over the target, and holds then falls to `min` once the URL answers 500;
//! the admin figures show the polled signals; of two replicas only the leader reads; a bad URL
//! is a clear 400, never a 500.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode as AxumStatus;
use axum::response::{IntoResponse, Response};
use reqwest::StatusCode;
use serde_json::{json, Value};
use vestibule_shared::admin_events::RoomFigures;
use vestibule_shared::paths;
use vestibule_tests::origin_model::serve_locally;
use vestibule_tests::{both_stores, Backend, RedisServer, TestApp, ADMIN_TOKEN};

use crate::rooms::create;

/// What the health endpoint answers now.
#[derive(Debug, Clone)]
enum Health {
    /// 200 with these signals.
    Signals(Value),
    /// This status, no signals.
    Status(u16),
}

/// A storefront's health endpoint at `/health` whose answer the test sets; counts its reads.
struct HealthEndpoint {
    answer: Arc<Mutex<Health>>,
    reads: Arc<AtomicU64>,
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl HealthEndpoint {
    async fn start(first: Health) -> Self {
        let answer = Arc::new(Mutex::new(first));
        let reads = Arc::new(AtomicU64::new(0));
        let (shared, counted) = (answer.clone(), reads.clone());
        let app = axum::Router::new().route(
            "/health",
            axum::routing::get(move || {
                let now = shared.lock().unwrap().clone();
                counted.fetch_add(1, Ordering::Relaxed);
                async move {
                    match now {
                        Health::Signals(body) => axum::Json(body).into_response(),
                        Health::Status(code) => {
                            let status = AxumStatus::from_u16(code).unwrap();
                            Response::builder()
                                .status(status)
                                .body(axum::body::Body::from("down"))
                                .unwrap()
                        }
                    }
                }
            }),
        );
        let (address, task) = serve_locally(app).await;
        Self {
            answer,
            reads,
            url: format!("http://{address}/health"),
            task,
        }
    }

    fn set(&self, health: Health) {
        *self.answer.lock().unwrap() = health;
    }

    fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

impl Drop for HealthEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn signals(p95_ms: f64) -> Value {
    json!({"requests": 400, "p50Ms": p95_ms / 2.0, "p95Ms": p95_ms, "errorRate": 0.0,
           "inFlight": 12, "sent": 400})
}

async fn rate(app: &TestApp) -> f64 {
    let (_, settings) = app.admin_get(&paths::admin_room("main")).await;
    settings["admissionRatePerSec"].as_f64().expect("a rate")
}

/// Waits (checking every 250 ms) until the rate satisfies `ok` or `within` passes.
async fn rate_until(app: &TestApp, within: Duration, ok: impl Fn(f64) -> bool) -> f64 {
    let deadline = Instant::now() + within;
    loop {
        let now = rate(app).await;
        if ok(now) || Instant::now() > deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `main`'s figures once they satisfy `ok`, or the last seen after 5 s (a record is shared and
/// merged once a second).
async fn figures_until(app: &TestApp, ok: impl Fn(&RoomFigures) -> bool) -> RoomFigures {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let figures = app.room_figures("main").await;
        if ok(&figures) || Instant::now() > deadline {
            return figures;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

both_stores!(the_loop_follows_a_polled_health_url_and_falls_when_it_fails);

async fn the_loop_follows_a_polled_health_url_and_falls_when_it_fails(backend: Backend) {
    let health = HealthEndpoint::start(Health::Signals(signals(50.0))).await;
    // No origin key: the signals can only come from the health URL.
    let app = TestApp::spawn(backend, &["--admission-rate", "20"]).await;
    let auto = json!({"min": 5, "max": 40, "targetP95Ms": 300, "maxErrorRate": 0.01,
                      "healthUrl": health.url});
    let settings = app.patch_room("main", json!({ "autoRate": auto })).await;
    assert_eq!(settings["autoRate"]["healthUrl"], health.url.as_str());

    // Healthy, p95 far under the target: the rate rises to max.
    let risen = rate_until(&app, Duration::from_secs(20), |r| r >= 40.0).await;
    assert_eq!(risen, 40.0, "rose to max on polled headroom");
    let figures = figures_until(&app, |f| f.origin.is_some_and(|o| o.p95_ms == 50.0)).await;
    let origin = figures.origin.expect("the polled signals in the figures");
    assert_eq!(
        (origin.requests, origin.p95_ms, origin.sent),
        (400, 50.0, Some(400))
    );
    assert_eq!(
        figures.auto_rate.expect("the loop").setting.health_url,
        Some(health.url.clone())
    );
    // Once a second, not more.
    let per_sec = reads_per_sec(&health, Duration::from_secs(4)).await;
    assert!((0.6..=1.3).contains(&per_sec), "{per_sec} reads a second");

    // p95 far over the target: the loop cuts on the polled p95.
    health.set(Health::Signals(signals(900.0)));
    let cut = rate_until(&app, Duration::from_secs(6), |r| r < 40.0).await;
    assert!(cut <= 40.0 * 0.85 + 0.1, "cut in proportion: {cut}");
    // Then close to the target (the rate holds), so the cut stays far above min.
    health.set(Health::Signals(signals(250.0)));
    let last_change =
        |figures: &RoomFigures| figures.auto_rate.as_ref().and_then(|auto| auto.last_change);
    let figures = figures_until(&app, |f| last_change(f).is_some_and(|c| c.to == cut)).await;
    let change = last_change(&figures).expect("the cut, shown");
    assert_eq!((change.to, change.p95_ms), (cut, Some(900.0)));
    let figures = figures_until(&app, |f| f.origin.is_some_and(|o| o.p95_ms == 250.0)).await;
    assert_eq!(figures.origin.map(|origin| origin.p95_ms), Some(250.0));

    // The URL answers 500: nothing is reported, the rate holds, then falls to min; never rises.
    health.set(Health::Status(500));
    let started = Instant::now();
    let mut last = rate(&app).await;
    assert!(last > 5.0, "held above min before the failures: {last}");
    while last > 5.0 && started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = rate(&app).await;
        assert!(now <= last, "rose without signals: {last} → {now}");
        last = now;
    }
    assert_eq!(last, 5.0, "fell to min once the signals were lost");
    let lost_after = started.elapsed();
    assert!(
        lost_after >= Duration::from_secs(6),
        "held first: fell after {lost_after:?}"
    );
    let (_, audit) = app.admin_get(&paths::admin_room_audit("main")).await;
    let text = audit.to_string();
    for reason in ["HEADROOM", "LATENCY_HIGH", "SIGNALS_LOST"] {
        assert!(
            text.contains(&format!("autoRate {reason}")),
            "{reason} not audited: {text}"
        );
    }
    // Each failed read is logged at warn, at most once per 10 s.
    let warned = app
        .log()
        .matches("autoRate's health URL gave no signals")
        .count();
    let most = 1 + lost_after.as_secs() / 10;
    assert!(
        (1..=most as usize).contains(&warned),
        "{warned} warnings in {lost_after:?}"
    );
    assert!(app.log().contains("HTTP 500"), "{}", app.log());

    // The URL removed: the leader reads it no more.
    health.set(Health::Signals(signals(50.0)));
    let auto = json!({"min": 5, "max": 40, "targetP95Ms": 300, "maxErrorRate": 0.01});
    let settings = app.patch_room("main", json!({ "autoRate": auto })).await;
    assert!(
        settings["autoRate"].get("healthUrl").is_none(),
        "{settings}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let reads = health.reads();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(health.reads(), reads, "no reads without a health URL");
}

/// Reads of `health` a second over `over`.
async fn reads_per_sec(health: &HealthEndpoint, over: Duration) -> f64 {
    let (reads, started) = (health.reads(), Instant::now());
    tokio::time::sleep(over).await;
    (health.reads() - reads) as f64 / started.elapsed().as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_reads_and_every_replica_shows_what_it_read() {
    let health = HealthEndpoint::start(Health::Signals(signals(120.0))).await;
    let redis = RedisServer::start();
    let a = TestApp::spawn_with_url(Some(&redis.url()), &["--admission-rate", "20"]).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &["--admission-rate", "20"]).await;
    let auto = json!({"min": 5, "max": 40, "targetP95Ms": 300, "maxErrorRate": 0.01,
                      "healthUrl": health.url});
    b.patch_room("main", json!({ "autoRate": auto })).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let per_sec = reads_per_sec(&health, Duration::from_secs(5)).await;
    assert!(
        (0.6..=1.3).contains(&per_sec),
        "two replicas, one reader: {per_sec} reads a second"
    );
    for app in [&a, &b] {
        let figures = figures_until(app, |f| f.origin.is_some()).await;
        let origin = figures
            .origin
            .expect("the leader's reads, through every replica");
        assert_eq!((origin.p95_ms, origin.requests), (120.0, 400));
    }
}

#[tokio::test]
async fn a_bad_health_url_is_a_clear_400() {
    let app = TestApp::spawn(Backend::Memory, &[]).await;
    let auto = |url: Value| {
        json!({"autoRate": {"min": 5, "max": 40, "targetP95Ms": 300, "maxErrorRate": 0.01,
                            "healthUrl": url}})
    };
    let long = format!("https://shop.example/{}", "a".repeat(2048));
    for (url, code) in [
        (json!("ftp://shop.example/health"), "invalid_field"),
        (json!("shop.example/health"), "invalid_field"),
        (json!("https://user:pw@shop.example/"), "invalid_field"),
        (json!("https://shop example/"), "invalid_field"),
        (json!("http://127.0.0.1:99999/health"), "invalid_field"),
        (json!("https://-a-/health"), "invalid_field"),
        (json!(long), "invalid_field"),
        (json!(7), "bad_request"),
    ] {
        let response = app
            .client
            .patch(app.url(&paths::admin_room("main")))
            .bearer_auth(ADMIN_TOKEN)
            .json(&auto(url.clone()))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body: Value = response.json().await.expect("a JSON error");
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::BAD_REQUEST, Some(code)),
            "PATCH {url} → {body}"
        );
        if code == "invalid_field" {
            let message = body["message"].as_str().unwrap_or_default();
            assert!(message.contains("autoRate.healthUrl"), "{body}");
        }
        let mut room = auto(url.clone());
        room["room"] = json!("drop-7");
        let (status, _, body) = create(&app, room).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::BAD_REQUEST, Some(code)),
            "POST {url} → {body}"
        );
    }
    // Nothing was changed or created; a good URL is taken.
    let (_, settings) = app.admin_get(&paths::admin_room("main")).await;
    assert_eq!(settings["autoRate"], Value::Null);
    let settings = app
        .patch_room("main", auto(json!("http://127.0.0.1:9/health")))
        .await;
    assert_eq!(
        settings["autoRate"]["healthUrl"],
        "http://127.0.0.1:9/health"
    );
    // The document carries the bounds the fuzzer tries.
    let (_, document) = app.get_json(paths::OPENAPI).await;
    let property = &document["components"]["schemas"]["AutoRate"]["properties"]["healthUrl"];
    assert_eq!(property["maxLength"], 2048, "{property}");
    assert_eq!(
        property["pattern"],
        vestibule_shared::auto_rate::HEALTH_URL_PATTERN
    );
}
