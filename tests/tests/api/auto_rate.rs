//! The closed loop through the API (docs/DESIGN.md "Closed-loop admission"): a storefront
//! reports its origin's health at `POST …/signals`; with `autoRate` on, the room's leader moves
//! the admission rate within [min, max] (up on headroom, down on latency over the target, to
//! `min` once the reports stop), every move is a settings change with an audit entry naming its
//! reason, and bad reports get a clear 4xx. The admin figures of every replica show the origin's
//! merged signals and the leader's loop (its last step and move), as the console draws them.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use vestibule_shared::auto_rate::AutoRateReason;
use vestibule_tests::{both_stores, Backend, RedisServer, TestApp, ADMIN_TOKEN};

const ORIGIN_KEY: &str = "origin-key-for-the-loop-0123456789";

async fn report(app: &TestApp, body: Value, key: Option<&str>) -> (StatusCode, Value) {
    let mut request = app.client.post(app.url("/api/v1/rooms/main/signals"));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.json(&body).send().await.expect("POST signals");
    let status = response.status();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body)
}

fn signals(p95_ms: f64, error_rate: f64) -> Value {
    json!({"requests": 400, "p50Ms": p95_ms / 2.0, "p95Ms": p95_ms, "errorRate": error_rate,
           "inFlight": 12})
}

async fn rate(app: &TestApp) -> f64 {
    let (_, settings) = app.admin_get("/api/v1/admin/rooms/main").await;
    settings["admissionRatePerSec"].as_f64().expect("a rate")
}

/// Reports `body` every 300 ms until the rate satisfies `ok` (or `within` passes).
async fn report_until(
    app: &TestApp,
    body: Value,
    within: Duration,
    ok: impl Fn(f64) -> bool,
) -> f64 {
    let deadline = Instant::now() + within;
    loop {
        report(app, body.clone(), Some(ORIGIN_KEY)).await;
        let now = rate(app).await;
        if ok(now) || Instant::now() > deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

both_stores!(the_rate_follows_reported_signals_within_its_bounds_and_falls_when_they_stop,);

async fn the_rate_follows_reported_signals_within_its_bounds_and_falls_when_they_stop(
    backend: Backend,
) {
    let app = TestApp::spawn(
        backend,
        &["--origin-api-key", ORIGIN_KEY, "--admission-rate", "20"],
    )
    .await;
    app.patch_room(
        "main",
        json!({"autoRate": {"min": 5, "max": 40, "targetP95Ms": 300, "maxErrorRate": 0.01}}),
    )
    .await;
    // Headroom: p95 well under the target → the rate rises, never past max.
    let risen = report_until(&app, signals(50.0, 0.0), Duration::from_secs(20), |r| {
        r >= 40.0
    })
    .await;
    assert_eq!(risen, 40.0, "rose to max");
    // Latency over the target → cut at once (within two loop steps).
    let cut = report_until(&app, signals(900.0, 0.0), Duration::from_secs(4), |r| {
        r < 40.0
    })
    .await;
    assert!(cut <= 40.0 * 0.85 + 0.1, "cut in proportion: {cut}");
    // Errors over maxErrorRate → cut by 30% after the settling time.
    let before = rate(&app).await;
    let after_errors = report_until(&app, signals(100.0, 0.2), Duration::from_secs(6), |r| {
        r < before
    })
    .await;
    assert!(after_errors < before, "{before} → {after_errors}");
    // Reports stop: the rate holds, then falls to min; it never rises.
    let held = rate(&app).await;
    let started = Instant::now();
    let mut last = held;
    while rate(&app).await > 5.0 && started.elapsed() < Duration::from_secs(16) {
        let now = rate(&app).await;
        assert!(now <= last, "rose without signals: {last} → {now}");
        last = now;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        rate(&app).await,
        5.0,
        "fell to min once the signals were lost"
    );
    let lost_after = started.elapsed();
    assert!(
        lost_after >= Duration::from_secs(6),
        "held first: fell after {lost_after:?}"
    );
    // Every move is in the audit log with its reason.
    let (_, audit) = app.admin_get("/api/v1/admin/rooms/main/audit").await;
    let text = audit.to_string();
    for reason in ["HEADROOM", "LATENCY_HIGH", "ERRORS_HIGH", "SIGNALS_LOST"] {
        assert!(
            text.contains(&format!("autoRate {reason}")),
            "{reason} not audited: {text}"
        );
    }
}

#[tokio::test]
async fn bad_reports_get_a_clear_4xx() {
    let app = TestApp::spawn(Backend::Memory, &["--origin-api-key", ORIGIN_KEY]).await;
    let (status, body) = report(&app, signals(50.0, 0.0), None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );
    let (status, _) = report(&app, signals(50.0, 0.0), Some("wrong-key")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let mut too_many_sent = signals(50.0, 0.0);
    too_many_sent["sent"] = json!(2_000_000_000_u64);
    let (mut no_span, mut too_long) = (signals(50.0, 0.0), signals(50.0, 0.0));
    no_span["windowSecs"] = json!(0);
    too_long["windowSecs"] = json!(61);
    for wrong in [
        signals(-1.0, 0.0),
        signals(50.0, 1.5),
        signals(1e9, 0.0),
        too_many_sent,
        no_span,
        too_long,
    ] {
        let (status, body) = report(&app, wrong.clone(), Some(ORIGIN_KEY)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{wrong} → {body}");
        assert_eq!(body["error"], "invalid_field");
    }
    let (status, body) = report(&app, json!({"p95Ms": "slow"}), Some(ORIGIN_KEY)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request"))
    );
    let response = app
        .client
        .post(app.url("/api/v1/rooms/nowhere/signals"))
        .bearer_auth(ORIGIN_KEY)
        .json(&signals(50.0, 0.0))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let (status, _) = report(&app, signals(50.0, 0.0), Some(ORIGIN_KEY)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // Whole numbers may be written 3.0 (JSON Schema's integer).
    let mut floats = signals(50.0, 0.0);
    floats["inFlight"] = json!(12.0);
    assert_eq!(
        report(&app, floats, Some(ORIGIN_KEY)).await.0,
        StatusCode::NO_CONTENT
    );
    // min above max: two valid values that disagree, 409 as the opening times.
    let response = app
        .client
        .patch(app.url("/api/v1/admin/rooms/main"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"autoRate": {"min": 50, "max": 10, "targetP95Ms": 500, "maxErrorRate": 0}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CONFLICT);
}

#[tokio::test]
async fn a_rate_set_by_hand_stays_within_the_loops_bounds() {
    let app = TestApp::spawn(Backend::Memory, &["--admission-rate", "20"]).await;
    let patch = |body: Value| {
        let app = &app;
        async move {
            let response = app
                .client
                .patch(app.url("/api/v1/admin/rooms/main"))
                .bearer_auth(ADMIN_TOKEN)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = response.status();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let auto = json!({"min": 10, "max": 100, "targetP95Ms": 500, "maxErrorRate": 0.01});
    // Bounds that leave the rate outside are taken: the loop brings it within.
    assert_eq!(patch(json!({"autoRate": auto})).await.0, StatusCode::OK);
    for outside in [1000.0, 1.0] {
        let (status, body) = patch(json!({"admissionRatePerSec": outside})).await;
        assert_eq!(status, StatusCode::CONFLICT, "{outside} → {body}");
        assert_eq!(body["error"], "conflict");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains("autoRate"), "{message}");
    }
    let (status, body) = patch(json!({"admissionRatePerSec": 50})).await;
    assert_eq!(
        (status, body["admissionRatePerSec"].as_f64()),
        (StatusCode::OK, Some(50.0))
    );
    // With the loop turned off in the same change, or new bounds around it, any rate is taken.
    let wide = json!({"min": 10, "max": 2000, "targetP95Ms": 500, "maxErrorRate": 0.01});
    let (status, _) = patch(json!({"admissionRatePerSec": 1000, "autoRate": wide})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = patch(json!({"admissionRatePerSec": 3000, "autoRate": null})).await;
    assert_eq!(
        (status, body["admissionRatePerSec"].as_f64()),
        (StatusCode::OK, Some(3000.0))
    );
    // A room created with the loop on follows the same rule.
    let response = app
        .client
        .post(app.url("/api/v1/admin/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"room": "drop-7", "admissionRatePerSec": 500, "autoRate": auto}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CONFLICT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_shows_the_origin_and_the_leaders_last_move() {
    let redis = RedisServer::start();
    let args = ["--origin-api-key", ORIGIN_KEY, "--admission-rate", "20"];
    let a = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
    // Off: no loop in the figures; no signals: no origin.
    let figures = a.room_figures("main").await;
    assert_eq!((figures.auto_rate, figures.origin), (None, None));
    a.patch_room(
        "main",
        json!({"autoRate": {"min": 5, "max": 40, "targetP95Ms": 500, "maxErrorRate": 0.01}}),
    )
    .await;
    // Reported to one replica only: the leader (whichever it is) hears it and cuts.
    let cut = report_until(&b, signals(900.0, 0.0), Duration::from_secs(6), |r| {
        r < 20.0
    })
    .await;
    assert!(cut < 20.0, "cut: {cut}");
    // Then close to the target: the loop holds (once the leader hears it: a record is shared
    // and read once a second), and every replica's figures settle on its last move.
    for _ in 0..12 {
        report(&b, signals(450.0, 0.0), Some(ORIGIN_KEY)).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let (through_a, through_b) = tokio::join!(a.room_figures("main"), b.room_figures("main"));
    eprintln!("through A: {through_a:?}\nthrough B: {through_b:?}");
    for figures in [&through_a, &through_b] {
        let origin = figures.origin.expect("the origin's signals, merged");
        assert_eq!((origin.p95_ms, origin.requests), (450.0, 400));
        let auto = figures.auto_rate.as_ref().expect("the loop");
        assert_eq!(auto.setting.target_p95_ms, 500);
        assert!(auto.reason.is_some(), "the last step's reason");
        let change = auto.last_change.expect("the last move");
        assert_eq!(change.reason, AutoRateReason::LatencyHigh);
        assert!(change.to < change.from && change.from <= 20.0, "{change:?}");
        assert_eq!(change.p95_ms, Some(900.0));
    }
    assert_eq!(
        through_a.auto_rate.and_then(|auto| auto.last_change),
        through_b.auto_rate.and_then(|auto| auto.last_change),
        "one move, the leader's, through both"
    );
    // Off again: the loop leaves the figures, the signals stay while reported.
    a.patch_room("main", json!({"autoRate": null})).await;
    report(&a, signals(900.0, 0.0), Some(ORIGIN_KEY)).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let figures = a.room_figures("main").await;
    assert_eq!(figures.auto_rate, None);
    assert!(figures.origin.is_some());
}
