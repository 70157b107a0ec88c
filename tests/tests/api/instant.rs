//! No wait when there is no line (docs/DESIGN.md): a join into an empty room is admitted in the
//! same step, and instant admissions spend the same quota as the scheduler's ticks.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use vestibule_shared::TicketState;
use vestibule_tests::{both_stores, on_redis_cluster_too, Backend, TestApp};

both_stores!(
    an_empty_room_admits_a_new_shopper_in_one_request,
    instant_joins_in_one_second_never_exceed_the_rate,
);

// The same flows on a Redis Cluster (tests/tests/cluster.rs: the cluster's own tests).
on_redis_cluster_too!(an_empty_room_admits_a_new_shopper_in_one_request,);

async fn an_empty_room_admits_a_new_shopper_in_one_request(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    // A few ticks with nobody waiting fill the bank of unused quota.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (code, ticket) = app.join("main", Some("first-shopper")).await;
    assert_eq!(code, StatusCode::CREATED);
    assert_eq!(ticket.status, TicketState::TokenIssued, "{ticket:?}");
    assert_eq!(ticket.position, None);
    assert!(ticket.checkout_url.is_some());
    let token = ticket.entry_token.clone().expect("a signed entry token");
    // A retry of the same join finds the same admitted ticket, and its token works once.
    let (code, again) = app.join("main", Some("first-shopper")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(again.ticket_id, ticket.ticket_id);
    assert_eq!(again.entry_token.as_deref(), Some(token.as_str()));
    let (code, receipt) = app.order("main", Some(&token)).await;
    assert_eq!(code, StatusCode::CREATED, "{receipt}");
    // A rate set to 0 stops instant admission at once, although the bank still holds quota
    // of the old rate: joins right after the PATCH wait.
    app.patch_room("main", json!({"admissionRatePerSec": 0}))
        .await;
    let (_, stopped) = app.join("main", None).await;
    assert_eq!(stopped.status, TicketState::Waiting, "{stopped:?}");
    app.leave("main", &stopped.ticket_id).await;
    // A paused room admits nobody at once.
    app.patch_room("main", json!({"admissionRatePerSec": 100, "paused": true}))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, paused) = app.join("main", None).await;
    assert_eq!(paused.status, TicketState::Waiting);
}

async fn instant_joins_in_one_second_never_exceed_the_rate(backend: Backend) {
    const RATE: f64 = 10.0;
    let app = TestApp::spawn(backend, &["--admission-rate", "10"]).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let started = Instant::now();
    let mut tickets = Vec::new();
    let mut instant = 0;
    while started.elapsed() < Duration::from_secs(1) {
        let (_, ticket) = app.join("main", None).await;
        if ticket.status == TicketState::TokenIssued {
            instant += 1;
        }
        tickets.push(ticket.ticket_id);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    app.patch_room("main", json!({"paused": true})).await;
    let window = started.elapsed().as_secs_f64();
    let mut admitted = 0;
    for id in &tickets {
        let status = app.poll("main", id).await;
        if status.status == TicketState::TokenIssued {
            admitted += 1;
        }
    }
    assert!(tickets.len() >= 40, "{} joins in a second", tickets.len());
    assert!(
        instant >= 1,
        "the first join into the idle room is admitted at once"
    );
    // The rate over the window plus what one tick may bank (⌈10 × 0.1⌉ = 1) and one tick's
    // quota ceiling (2): the scheduler's own bound, shared by instant joins.
    let bound = (RATE * window).ceil() as usize + 1 + 2;
    assert!(
        admitted <= bound,
        "{admitted} admitted in {window:.2} s at 10/s (bound {bound}; {instant} at once)"
    );
    assert!(
        admitted as f64 >= RATE * window * 0.6,
        "the rate is used: {admitted} admitted in {window:.2} s"
    );
}
