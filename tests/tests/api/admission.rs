//! Admission: the configured rate in arrival order, without bursts, also shared by two replicas.

use crate::paused_app;
use serde_json::json;
use std::time::{Duration, Instant};
use vestibule_shared::TicketState;
use vestibule_tests::{both_stores, metric_value, Backend, RedisServer, TestApp};

both_stores!(admission_follows_the_rate_in_arrival_order_without_bursts,);

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
    let one_tick = (RATE * TICK_SECS).ceil();
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
        "a tick admitted {largest} > ⌈R·tick⌉ = {one_tick}"
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
