//! The core promises of Vestibule, each proven against the real binary on both stores.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::json;
use vestibule_shared::{TicketState, TicketStatus};
use vestibule_tests::{both_stores, metric_value, Backend, RedisServer, TestApp};

both_stores!(
    joins_get_positions_in_arrival_order_and_rejoins_keep_their_place,
    concurrent_joins_get_every_position_exactly_once,
    admission_follows_the_rate_in_arrival_order_without_bursts,
    tokens_work_once_and_every_bad_token_gets_a_json_403,
    leaving_moves_everyone_behind_up_by_one,
    eta_and_poll_hints_follow_the_design_formulas,
    bad_input_gets_only_json_4xx_and_leaves_the_queue_unchanged,
    sse_streams_status_until_admission,
    sse_positions_follow_leaves_admissions_and_pauses_exactly,
);

async fn paused_app(backend: Backend, extra: &[&str]) -> TestApp {
    let app = TestApp::spawn(backend, extra).await;
    app.patch_room("main", json!({"paused": true})).await;
    app
}

async fn joins_get_positions_in_arrival_order_and_rejoins_keep_their_place(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    let mut tickets = Vec::new();
    for i in 0..30 {
        let (status, ticket) = app.join("main", Some(&format!("key-{i}"))).await;
        assert_eq!(status, StatusCode::CREATED);
        assert_eq!(ticket.position, Some(i + 1));
        assert_eq!(ticket.status, TicketState::Waiting);
        tickets.push(ticket);
    }
    let (status, again) = app.join("main", Some("key-7")).await;
    assert_eq!(status, StatusCode::OK, "a retried join is not a new ticket");
    assert_eq!(again.ticket_id, tickets[7].ticket_id);
    assert_eq!(again.position, Some(8));
    // Polls agree with the join answers.
    for ticket in tickets.iter().step_by(7) {
        let polled = app.poll("main", &ticket.ticket_id).await;
        assert_eq!(polled.position, ticket.position);
    }
    // A join without a key is always a new shopper.
    let (status, fresh) = app.join("main", None).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(fresh.position, Some(31));
}

async fn concurrent_joins_get_every_position_exactly_once(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    let joins = (0..500).map(|i| {
        let app = &app;
        async move { app.join("main", Some(&format!("c-{i}"))).await.1 }
    });
    let tickets: Vec<TicketStatus> = join_all(joins).await;
    let mut positions: Vec<u64> = tickets.iter().map(|t| t.position.unwrap()).collect();
    positions.sort_unstable();
    assert_eq!(positions, (1..=500).collect::<Vec<_>>());
    let ids: HashSet<_> = tickets.iter().map(|t| t.ticket_id.clone()).collect();
    assert_eq!(ids.len(), 500);
    let info = app.get_json("/api/v1/rooms/main").await.1;
    assert_eq!(info["waiting"], 500);
}

async fn admission_follows_the_rate_in_arrival_order_without_bursts(backend: Backend) {
    const RATE: f64 = 50.0;
    const TICK_SECS: f64 = 0.1;
    let app = paused_app(backend, &["--admission-rate", "50"]).await;
    let mut tickets = Vec::new();
    for _ in 0..400 {
        tickets.push(app.join("main", None).await.1);
    }
    app.patch_room("main", json!({"paused": false})).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let series = "vestibule_admissions_total{room=\"main\"}";
    let start = Instant::now();
    let before = app.metric(series).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = app.metric(series).await;
    let window = start.elapsed().as_secs_f64();
    let admitted = after - before;
    let expected = RATE * window;
    let one_tick = (RATE * TICK_SECS).ceil() + 1.0;
    println!(
        "admitted {admitted} in {window:.3} s, expected {expected:.1} ± {}",
        one_tick + 1.0
    );
    assert!(
        (admitted - expected).abs() <= one_tick + 1.0,
        "admitted {admitted} in {window:.3} s at {RATE}/s"
    );
    let largest = app
        .metric("vestibule_largest_tick_admissions{room=\"main\"}")
        .await;
    assert!(
        largest <= one_tick,
        "a tick admitted {largest} > ⌈R·tick⌉ + 1 = {one_tick}"
    );

    // Admission order equals arrival order: polling from the back, once an admitted ticket is
    // seen every earlier one must be admitted too (they were admitted no later).
    let mut seen_admitted = false;
    let mut admitted_count = 0;
    for ticket in tickets.iter().rev() {
        let status = app.poll("main", &ticket.ticket_id).await;
        let is_admitted = status.status != TicketState::Waiting;
        if seen_admitted {
            assert!(
                is_admitted,
                "ticket at place {:?} waits behind a later admitted one",
                ticket.position
            );
        }
        seen_admitted |= is_admitted;
        admitted_count += u32::from(is_admitted);
    }
    assert!(admitted_count > 150, "only {admitted_count} admitted");
}

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

async fn leaving_moves_everyone_behind_up_by_one(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    let mut tickets = Vec::new();
    for _ in 0..6 {
        tickets.push(app.join("main", None).await.1);
    }
    assert_eq!(
        app.leave("main", &tickets[1].ticket_id).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.poll("main", &tickets[0].ticket_id).await.position,
        Some(1)
    );
    for (i, ticket) in tickets.iter().enumerate().skip(2) {
        assert_eq!(
            app.poll("main", &ticket.ticket_id).await.position,
            Some(i as u64)
        );
    }
    let left = app.poll("main", &tickets[1].ticket_id).await;
    assert_eq!(left.status, TicketState::Left);
    assert_eq!(left.position, None);
    // Leaving twice is fine; an unknown ticket is 404.
    assert_eq!(
        app.leave("main", &tickets[1].ticket_id).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.leave("main", "AAAAAAAAAAAAAAAAAAAAAA").await,
        StatusCode::NOT_FOUND
    );
}

/// docs/DESIGN.md: ETA = ⌈position ÷ rate × 1.2⌉; hint = max(1 s, min(tier, ½ ETA)).
fn expected_hint(position: u64, rate: f64) -> u64 {
    let tier = match position {
        0..=10 => 3000,
        11..=100 => 10_000,
        _ => 30_000,
    };
    let half_eta_ms = (position as f64 / rate * 1.2 * 1000.0 / 2.0) as u64;
    tier.min(half_eta_ms).max(1000)
}

async fn eta_and_poll_hints_follow_the_design_formulas(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    let mut tickets = Vec::new();
    for _ in 0..102 {
        tickets.push(app.join("main", None).await.1);
    }
    // Paused: ETA null, hint by tier alone.
    let paused = app.poll("main", &tickets[50].ticket_id).await;
    assert_eq!(paused.eta_seconds, None);
    assert_eq!(paused.next_poll_after_ms, 10_000);

    // Slow rate: the tier dominates at the edges 10/11 and 100/101.
    app.patch_room(
        "main",
        json!({"paused": false, "admissionRatePerSec": 0.01}),
    )
    .await;
    for place in [10usize, 11, 100, 101] {
        let status = app.poll("main", &tickets[place - 1].ticket_id).await;
        let position = status.position.expect("still waiting");
        assert_eq!(
            status.eta_seconds,
            Some((position as f64 / 0.01 * 1.2).ceil() as u64)
        );
        assert_eq!(
            status.next_poll_after_ms,
            expected_hint(position, 0.01),
            "place {place}"
        );
    }
    let at_10 = app.poll("main", &tickets[9].ticket_id).await;
    let at_11 = app.poll("main", &tickets[10].ticket_id).await;
    let at_101 = app.poll("main", &tickets[100].ticket_id).await;
    assert_eq!(
        (
            at_10.next_poll_after_ms,
            at_11.next_poll_after_ms,
            at_101.next_poll_after_ms
        ),
        (3000, 10_000, 30_000)
    );

    // Faster rate: half the ETA caps the hint (50 at 10/s → ETA 6 s → 3 s).
    app.patch_room("main", json!({"admissionRatePerSec": 10.0, "paused": true}))
        .await;
    let status = app.poll("main", &tickets[60].ticket_id).await;
    let position = status.position.unwrap();
    app.patch_room("main", json!({"paused": false})).await;
    let status = app.poll("main", &tickets[60].ticket_id).await;
    let position_now = status.position.unwrap();
    assert!(position_now <= position);
    assert_eq!(
        status.eta_seconds,
        Some((position_now as f64 / 10.0 * 1.2).ceil() as u64)
    );
    assert_eq!(status.next_poll_after_ms, expected_hint(position_now, 10.0));
    assert!(
        status.next_poll_after_ms < 10_000,
        "½ ETA beats the tier here"
    );
}

/// (method, path, one header, JSON body, expected status).
type BadInputCase = (
    &'static str,
    String,
    Option<(&'static str, String)>,
    Option<String>,
    u16,
);

async fn bad_input_gets_only_json_4xx_and_leaves_the_queue_unchanged(backend: Backend) {
    let app = paused_app(backend, &["--max-body-bytes", "1024"]).await;
    let (_, keeper) = app.join("main", Some("keeper")).await;
    let big = "x".repeat(4096);
    let long_room = "a".repeat(10_000);
    let admin = || {
        Some((
            "Authorization",
            format!("Bearer {}", vestibule_tests::ADMIN_TOKEN),
        ))
    };
    let cases: Vec<BadInputCase> = vec![
        ("POST", "/api/v1/rooms/nope/tickets".into(), None, None, 404),
        ("POST", "/api/v1/rooms/MAIN/tickets".into(), None, None, 404),
        (
            "POST",
            format!("/api/v1/rooms/{long_room}/tickets"),
            None,
            None,
            404,
        ),
        (
            "POST",
            "/api/v1/rooms/%E2%9C%93/tickets".into(),
            None,
            None,
            404,
        ),
        (
            "GET",
            "/api/v1/rooms/main/tickets/short".into(),
            None,
            None,
            400,
        ),
        (
            "GET",
            "/api/v1/rooms/main/tickets/AAAAAAAAAAAAAAAAAAAAAA".into(),
            None,
            None,
            404,
        ),
        (
            "GET",
            "/api/v1/rooms/main/tickets/..%2F..%2Fetc".into(),
            None,
            None,
            400,
        ),
        (
            "DELETE",
            "/api/v1/rooms/main/tickets/%00".into(),
            None,
            None,
            400,
        ),
        (
            "POST",
            "/api/v1/rooms/main/tickets".into(),
            Some(("Idempotency-Key", "k".repeat(500))),
            None,
            400,
        ),
        (
            "POST",
            "/api/v1/rooms/main/tickets".into(),
            Some(("Idempotency-Key", "has space".into())),
            None,
            400,
        ),
        (
            "POST",
            "/api/v1/rooms/main/tickets".into(),
            Some(("X-User-Assertion", "u.1.abc".into())),
            None,
            403,
        ),
        (
            "PATCH",
            "/api/v1/admin/rooms/main".into(),
            admin(),
            Some("{not json".into()),
            400,
        ),
        (
            "PATCH",
            "/api/v1/admin/rooms/main".into(),
            admin(),
            Some(r#"{"admissionRatePerSec":"fast"}"#.into()),
            400,
        ),
        (
            "PATCH",
            "/api/v1/admin/rooms/main".into(),
            admin(),
            Some(r#"{"admissionRatePerSec":-5}"#.into()),
            400,
        ),
        (
            "PATCH",
            "/api/v1/admin/rooms/main".into(),
            admin(),
            Some(r#"{"tokenTtlSecs":0}"#.into()),
            400,
        ),
        (
            "PATCH",
            "/api/v1/admin/rooms/main".into(),
            admin(),
            Some(r#"{"bogus":true}"#.into()),
            400,
        ),
        (
            "PATCH",
            "/api/v1/admin/rooms/main".into(),
            admin(),
            Some("[50, true]".into()),
            400,
        ),
        (
            "PATCH",
            "/api/v1/admin/rooms/main".into(),
            admin(),
            Some(r#"{"maxActiveUsers":0}"#.into()),
            400,
        ),
        (
            "PATCH",
            "/api/v1/admin/rooms/main".into(),
            admin(),
            Some(format!(r#"{{"pad":"{big}"}}"#)),
            413,
        ),
        (
            "PATCH",
            "/api/v1/admin/rooms/main".into(),
            None,
            Some("{}".into()),
            401,
        ),
        (
            "PATCH",
            "/api/v1/admin/rooms/main".into(),
            Some(("Authorization", "Bearer wrong-token-wrong-token".into())),
            Some("{}".into()),
            403,
        ),
        (
            "POST",
            "/api/v1/rooms/main/orders".into(),
            Some(("X-Entry-Token", "\u{e9}t\u{e9}".into())),
            None,
            403,
        ),
        (
            "POST",
            "/api/v1/rooms/main/tickets".into(),
            Some(("Idempotency-Key", "cl\u{e9}".into())),
            None,
            400,
        ),
        (
            "POST",
            "/api/v1/rooms/main/orders".into(),
            Some(("X-Entry-Token", big.clone())),
            Some("{}".into()),
            403,
        ),
        ("PUT", "/api/v1/rooms/main/tickets".into(), None, None, 405),
        ("GET", "/api/v1/nothing-here".into(), None, None, 404),
    ];
    for (method, path, header, body, expected) in cases {
        let mut request = app.client.request(method.parse().unwrap(), app.url(&path));
        if let Some((name, value)) = &header {
            // Raw bytes, so non-ASCII (obs-text) values reach the server as a client could send them.
            let value =
                reqwest::header::HeaderValue::from_bytes(&latin1(value)).expect("header bytes");
            request = request.header(*name, value);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let text = response.text().await.unwrap_or_default();
        assert_eq!(
            status,
            expected,
            "{method} {} {header:?} → {status} {text}",
            &path[..path.len().min(60)]
        );
        assert!(
            content_type.starts_with("application/json"),
            "{method} {path}: {content_type}"
        );
        let body: serde_json::Value = serde_json::from_str(&text).expect("JSON error body");
        assert!(
            body["error"].is_string() && body["message"].is_string(),
            "{text}"
        );
    }
    let info = app.get_json("/api/v1/rooms/main").await.1;
    assert_eq!(info["waiting"], 1, "rejected requests changed the queue");
    assert_eq!(app.poll("main", &keeper.ticket_id).await.position, Some(1));
}

/// Encodes chars up to U+00FF as single bytes (how HTTP/1.1 carries obs-text).
fn latin1(text: &str) -> Vec<u8> {
    text.chars().map(|c| c as u32 as u8).collect()
}

async fn sse_streams_status_until_admission(backend: Backend) {
    use futures_util::StreamExt;
    let app = paused_app(backend, &["--sse-refresh-ms", "100"]).await;
    let (_, ticket) = app.join("main", None).await;
    let response = app
        .client
        .get(app.url(&format!(
            "/api/v1/rooms/main/tickets/{}/events",
            ticket.ticket_id
        )))
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("SSE");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    assert_eq!(response.headers()["cache-control"], "no-store");
    assert_eq!(response.headers()["x-accel-buffering"], "no");
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    let mut resumed = false;
    let deadline = Instant::now() + Duration::from_secs(15);
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout_at(deadline.into(), stream.next()).await {
        text.push_str(&String::from_utf8_lossy(&chunk));
        if !resumed && text.contains("\"WAITING\"") {
            app.patch_room("main", json!({"paused": false})).await;
            resumed = true;
        }
    }
    let statuses: Vec<TicketStatus> = text
        .split("\n\n")
        .filter(|block| block.lines().any(|line| line == "event: status"))
        .filter_map(|block| block.lines().find_map(|line| line.strip_prefix("data:")))
        .map(|data| serde_json::from_str(data.trim()).expect("TicketStatus JSON"))
        .collect();
    assert!(text.contains("event: status"), "{text}");
    // 10 s without news: a keep-alive the browser can see (a comment never reaches the page).
    assert!(text.contains("event: keepalive\ndata: {}\n"), "{text}");
    assert!(text.contains("id: 0") && text.contains("id: 1"), "{text}");
    assert_eq!(
        statuses.first().map(|s| s.status),
        Some(TicketState::Waiting)
    );
    assert_eq!(
        statuses.last().map(|s| s.status),
        Some(TicketState::TokenIssued),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_one_redis_admit_at_the_configured_total_rate() {
    const RATE: f64 = 40.0;
    let redis = RedisServer::start();
    let args = ["--admission-rate", "40"];
    let a = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
    a.patch_room("main", json!({"paused": true})).await;
    for i in 0..600 {
        let app = if i % 2 == 0 { &a } else { &b };
        app.join("main", None).await;
    }
    b.patch_room("main", json!({"paused": false})).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let series = "vestibule_admissions_total{room=\"main\"}";
    let total = || async { a.metric(series).await + b.metric(series).await };
    let start = Instant::now();
    let before = total().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = total().await;
    let window = start.elapsed().as_secs_f64();
    let admitted = after - before;
    println!("two processes admitted {admitted} in {window:.3} s at {RATE}/s");
    assert!(
        (admitted - RATE * window).abs() <= (RATE * 0.1).ceil() + 2.0,
        "admitted {admitted} in {window:.3} s"
    );
    let leaders = metric_value(
        &a.metrics().await,
        "vestibule_scheduler_leader{room=\"main\"}",
    ) + metric_value(
        &b.metrics().await,
        "vestibule_scheduler_leader{room=\"main\"}",
    );
    assert_eq!(leaders, 1.0, "exactly one process leads the room");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_answers_503_fast_and_service_resumes_after_it() {
    let mut app = TestApp::spawn(Backend::Redis, &[]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let (_, ticket) = app.join("main", None).await;
    app.redis.as_mut().unwrap().stop();
    for attempt in 0..5 {
        let started = Instant::now();
        let response = app
            .client
            .post(app.url("/api/v1/rooms/main/tickets"))
            .send()
            .await
            .expect("answer during outage");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "join hung {:?}",
            started.elapsed()
        );
        // A join that met the connection as it broke may have reached Redis: 504 says "unknown";
        // once the connection is known down, nothing is sent: 503.
        let status = response.status();
        let expected = if attempt == 0 && status == StatusCode::GATEWAY_TIMEOUT {
            "store_timeout"
        } else {
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "attempt {attempt}");
            "store_unavailable"
        };
        assert!(response.headers().contains_key("retry-after"));
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"], expected);
        let started = Instant::now();
        let (status, _) = app
            .get_json(&format!("/api/v1/rooms/main/tickets/{}", ticket.ticket_id))
            .await;
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    }
    let (status, _) = app.get_json("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    app.redis.as_mut().unwrap().restart();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let response = app
            .client
            .post(app.url("/api/v1/rooms/main/tickets"))
            .send()
            .await
            .unwrap();
        if response.status() == StatusCode::CREATED {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still {} after Redis came back",
            response.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(app.get_json("/readyz").await.0, StatusCode::OK);
    assert!(!app.log().contains("panicked"), "{}", app.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_configuration_is_refused_with_a_one_line_reason() {
    let output = std::process::Command::new(vestibule_tests::vestibule_binary())
        .args(["--rooms", "Bad_Room"])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--rooms"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// Reads `status` events from an open SSE response until `done` or the deadline.
async fn read_events(
    stream: &mut (impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    buffer: &mut String,
    deadline: Instant,
    done: impl Fn(&TicketStatus) -> bool,
) -> Vec<TicketStatus> {
    use futures_util::StreamExt;
    let mut events = Vec::new();
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            // `event: keepalive` blocks carry no status.
            if !block.lines().any(|line| line.trim_end() == "event: status") {
                continue;
            }
            if let Some(data) = block.lines().find_map(|line| line.strip_prefix("data:")) {
                let status: TicketStatus = serde_json::from_str(data.trim()).expect("TicketStatus");
                let finished = done(&status);
                events.push(status);
                if finished {
                    return events;
                }
            }
        }
        match tokio::time::timeout_at(deadline.into(), stream.next()).await {
            Ok(Some(Ok(chunk))) => buffer.push_str(&String::from_utf8_lossy(&chunk)),
            _ => return events,
        }
    }
}

async fn sse_positions_follow_leaves_admissions_and_pauses_exactly(backend: Backend) {
    let app = paused_app(
        backend,
        &["--sse-refresh-ms", "100", "--admission-rate", "4"],
    )
    .await;
    let mut tickets = Vec::new();
    for _ in 0..8 {
        tickets.push(app.join("main", None).await.1);
    }
    let watched = &tickets[7];
    let response = app
        .client
        .get(app.url(&format!(
            "/api/v1/rooms/main/tickets/{}/events",
            watched.ticket_id
        )))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("SSE");
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let deadline = Instant::now() + Duration::from_secs(25);
    let first = read_events(&mut stream, &mut buffer, deadline, |_| true).await;
    assert_eq!(first[0].position, Some(8));
    // Two shoppers ahead leave: the stream says 6 without being polled.
    app.leave("main", &tickets[1].ticket_id).await;
    app.leave("main", &tickets[4].ticket_id).await;
    let after_leaves = read_events(&mut stream, &mut buffer, deadline, |s| {
        s.position == Some(6)
    })
    .await;
    assert_eq!(
        after_leaves.last().and_then(|s| s.position),
        Some(6),
        "{after_leaves:?}"
    );
    // Resume: positions fall one admission at a time to the token, never rising, each exact.
    app.patch_room("main", json!({"paused": false})).await;
    let events = read_events(&mut stream, &mut buffer, deadline, |s| {
        s.status == TicketState::TokenIssued
    })
    .await;
    assert_eq!(
        events.last().map(|s| s.status),
        Some(TicketState::TokenIssued),
        "{events:?}"
    );
    let positions: Vec<u64> = events.iter().filter_map(|s| s.position).collect();
    println!("positions {positions:?}");
    assert!(
        positions.windows(2).all(|w| w[1] < w[0]),
        "positions rose or repeated: {positions:?}"
    );
    assert!(events
        .iter()
        .any(|s| s.room_state == vestibule_shared::RoomState::Open));
    // Another stream of a waiting ticket sees a pause as a change of its ETA and room state.
    let (_, late) = app.join("main", None).await;
    app.patch_room("main", json!({"paused": true, "admissionRatePerSec": 4}))
        .await;
    let response = app
        .client
        .get(app.url(&format!(
            "/api/v1/rooms/main/tickets/{}/events",
            late.ticket_id
        )))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("SSE");
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let deadline = Instant::now() + Duration::from_secs(8);
    let opened = read_events(&mut stream, &mut buffer, deadline, |_| true).await;
    assert_eq!(opened[0].room_state, vestibule_shared::RoomState::Paused);
    app.patch_room(
        "main",
        json!({"paused": false, "admissionRatePerSec": 0.001}),
    )
    .await;
    let resumed = read_events(&mut stream, &mut buffer, deadline, |s| {
        s.room_state == vestibule_shared::RoomState::Open
    })
    .await;
    let last = resumed.last().expect("an event after the resume");
    assert_eq!(last.room_state, vestibule_shared::RoomState::Open);
    assert!(
        last.eta_seconds.is_some(),
        "a resumed room has an ETA again"
    );
}
