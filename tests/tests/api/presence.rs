//! Presence (docs/DESIGN.md "Presence"): tickets nobody hears from are skipped — no admission
//! slot, not in `waiting`, not in others' positions — and keep their place when they come back
//! within the hold time; later they are `EXPIRED`. Both stores, and two replicas on one Redis.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use vestibule_shared::{paths, TicketState, TicketStatus};
use vestibule_tests::{both_stores, on_redis_cluster_too, Backend, RedisServer, TestApp};

use crate::polls::FROM_MEMORY;

/// One poll tier of 1 s: the abandon time in force is then max(abandonAfterSecs, 3 s).
const FAST_POLLS: [&str; 2] = ["--poll-tiers", "*:1000"];
const ABANDON_SECS: u64 = 3;

both_stores!(
    silent_tickets_are_skipped_and_a_returning_one_keeps_its_place,
    a_skipped_ticket_expires_after_its_hold_and_heartbeats_keep_a_place,
);

// The same flows on a Redis Cluster (tests/tests/cluster.rs: the cluster's own tests).
on_redis_cluster_too!(silent_tickets_are_skipped_and_a_returning_one_keeps_its_place,);

/// Polls every ticket of `alive` once (spread over `apps`), so each is heard from.
async fn poll_all(apps: &[&TestApp], alive: &[String]) -> Vec<TicketStatus> {
    let mut statuses = Vec::with_capacity(alive.len());
    for (i, id) in alive.iter().enumerate() {
        statuses.push(apps[i % apps.len()].poll("main", id).await);
    }
    statuses
}

/// Keeps `alive` heard from (a poll each every ~0.5 s) for `period`.
async fn keep_alive_for(apps: &[&TestApp], alive: &[String], period: Duration) {
    let end = Instant::now() + period;
    while Instant::now() < end {
        poll_all(apps, alive).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// 100 joined, 40 stop being heard from: after the abandon time the 60 see positions without
/// the 40, `waiting` is 60, admissions go only to the 60, and a returning one of the 40 (whose
/// place the line has passed) is told its place was kept and is admitted at the next tick.
async fn presence_scenario(apps: &[&TestApp]) {
    let admin = apps[0];
    admin
        .patch_room(
            "main",
            json!({"paused": true, "abandonAfterSecs": ABANDON_SECS, "holdPlaceSecs": 600}),
        )
        .await;
    let mut ids = Vec::new();
    for i in 0..100 {
        ids.push(apps[i % apps.len()].join("main", None).await.1.ticket_id);
    }
    // Ghosts: 2 of every 5, the very first in line among them.
    let is_ghost = |i: usize| matches!(i % 5, 0 | 3);
    let alive: Vec<String> = (0..100)
        .filter(|i| !is_ghost(*i))
        .map(|i| ids[i].clone())
        .collect();
    let ghosts: Vec<String> = (0..100)
        .filter(|i| is_ghost(*i))
        .map(|i| ids[i].clone())
        .collect();
    assert_eq!((alive.len(), ghosts.len()), (60, 40));

    keep_alive_for(apps, &alive, Duration::from_secs(ABANDON_SECS + 3)).await;
    let statuses = poll_all(apps, &alive).await;
    let positions: Vec<u64> = statuses.iter().map(|s| s.position.unwrap_or(0)).collect();
    assert_eq!(
        positions,
        (1..=60).collect::<Vec<u64>>(),
        "the 60 heard from see positions without the 40 silent ones"
    );
    assert!(statuses.iter().all(|s| !s.place_kept));
    let (_, room) = admin.get_json(&paths::room("main")).await;
    assert_eq!(room["waiting"], 60, "{room}");
    let settings = admin.patch_room("main", json!({})).await;
    assert_eq!(settings["waiting"], 60, "{settings}");
    assert_eq!(settings["abandonAfterSecs"], ABANDON_SECS);

    // Admission resumes at 10/s: every token goes to one of the 60.
    admin
        .patch_room("main", json!({"paused": false, "admissionRatePerSec": 10}))
        .await;
    keep_alive_for(apps, &alive, Duration::from_millis(2500)).await;
    admin.patch_room("main", json!({"paused": true})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let series = "vestibule_admissions_total{room=\"main\"}";
    let mut admissions = 0.0;
    for app in apps {
        admissions += app.metric(series).await;
    }
    let statuses = poll_all(apps, &alive).await;
    let admitted_alive = statuses
        .iter()
        .filter(|s| s.status == TicketState::TokenIssued)
        .count();
    assert!(admitted_alive >= 15, "only {admitted_alive} admitted");
    assert_eq!(
        admissions, admitted_alive as f64,
        "every admission slot went to a shopper heard from"
    );
    // The ones still waiting are at exact places.
    let waiting: Vec<u64> = statuses.iter().filter_map(|s| s.position).collect();
    assert_eq!(waiting, (1..=waiting.len() as u64).collect::<Vec<u64>>());

    // The first ghost comes back: the line has passed its place, so it is at the head.
    let back = apps[0].poll("main", &ghosts[0]).await;
    assert_eq!(back.status, TicketState::Waiting, "{back:?}");
    assert!(back.place_kept, "{back:?}");
    assert_eq!(back.position, Some(1), "{back:?}");
    let behind = apps[apps.len() - 1].poll("main", &alive[59]).await;
    assert_eq!(behind.position, Some(60 - admitted_alive as u64 + 1));
    admin.patch_room("main", json!({"paused": false})).await;
    let started = Instant::now();
    let admitted = apps[0]
        .poll_until("main", &ghosts[0], Duration::from_secs(3), |s| {
            s.status == TicketState::TokenIssued
        })
        .await;
    assert_eq!(admitted.status, TicketState::TokenIssued, "{admitted:?}");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "admitted {:?} after the resume",
        started.elapsed()
    );
}

async fn silent_tickets_are_skipped_and_a_returning_one_keeps_its_place(backend: Backend) {
    let app = TestApp::spawn(backend, &FAST_POLLS).await;
    presence_scenario(&[&app]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_redis_skip_silent_tickets_alike() {
    let redis = RedisServer::start();
    let a = TestApp::spawn_with_url(Some(&redis.url()), &FAST_POLLS).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &FAST_POLLS).await;
    presence_scenario(&[&a, &b]).await;
}

async fn heartbeat(app: &TestApp, id: &str) -> StatusCode {
    app.client
        .post(app.url(&paths::heartbeat("main", id)))
        .send()
        .await
        .expect("heartbeat")
        .status()
}

/// A ticket kept alive by heartbeats alone keeps its place; one silent past its hold is
/// `EXPIRED` (a heartbeat says 409) and its key joins again at the back.
async fn a_skipped_ticket_expires_after_its_hold_and_heartbeats_keep_a_place(backend: Backend) {
    let app = TestApp::spawn(backend, &FAST_POLLS).await;
    app.patch_room(
        "main",
        json!({"paused": true, "abandonAfterSecs": 1, "holdPlaceSecs": 1}),
    )
    .await;
    let (_, silent) = app.join("main", Some("silent-key")).await;
    let (_, beating) = app.join("main", None).await;
    let deadline = Instant::now() + Duration::from_secs(ABANDON_SECS + 5);
    while Instant::now() < deadline {
        assert_eq!(
            heartbeat(&app, &beating.ticket_id).await,
            StatusCode::NO_CONTENT
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let kept = app.poll("main", &beating.ticket_id).await;
    assert_eq!(kept.position, Some(1), "{kept:?}");
    assert!(!kept.place_kept, "never skipped: {kept:?}");
    assert!(kept
        .heartbeat_after_ms
        .is_some_and(|ms| (1000..ABANDON_SECS * 1000).contains(&ms)));
    let expired = app.poll("main", &silent.ticket_id).await;
    assert_eq!(expired.status, TicketState::Expired, "{expired:?}");
    assert_eq!(
        heartbeat(&app, &silent.ticket_id).await,
        StatusCode::CONFLICT
    );
    assert_eq!(
        heartbeat(&app, "AAAAAAAAAAAAAAAAAAAAAA").await,
        StatusCode::NOT_FOUND
    );
    let (status, again) = app.join("main", Some("silent-key")).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_ne!(again.ticket_id, silent.ticket_id);
    assert_eq!(again.position, Some(2));
    let (status, body) = app
        .client
        .patch(app.url(&paths::admin_room("main")))
        .bearer_auth(vestibule_tests::ADMIN_TOKEN)
        .json(&json!({"abandonAfterSecs": 0}))
        .send()
        .await
        .map(|r| (r.status(), r))
        .expect("PATCH");
    let body: serde_json::Value = body.json().await.unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"], "invalid_field");
}

/// `main`'s key `name` of its first generation (`vestibule:{main}:g1:`).
fn main_key(name: &str) -> String {
    format!("vestibule:{{main}}:g1:{name}")
}

/// The `seen:` slot (Unix seconds) of `ticket` in `main`, read from Redis.
fn seen_slot_of(redis: &RedisServer, ticket: &str) -> u64 {
    let seq: u64 = redis
        .cli(&["ZSCORE", &main_key("queue"), ticket])
        .parse()
        .expect("a waiting ticket's seq");
    let chunk = main_key(&format!("seen:{}", seq / 65_536));
    let slot = format!("#{}", seq % 65_536);
    redis
        .cli(&["BITFIELD", &chunk, "GET", "u32", &slot])
        .parse()
        .expect("a slot")
}

fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

/// docs/DESIGN.md "Polls answered from memory": the batch that records the polls answered from
/// memory writes each ticket's `seen:` slot (here, a second after its last store read), and a
/// ticket that left right after its answer stays `LEFT` (the batch names slots, not tickets).
#[tokio::test]
async fn polls_answered_from_memory_write_their_slots_and_bring_back_nobody() {
    let app = TestApp::spawn(
        Backend::Redis,
        &["--sse-refresh-ms", "100", FAST_POLLS[0], FAST_POLLS[1]],
    )
    .await;
    app.patch_room(
        "main",
        json!({"paused": true, "admissionRatePerSec": 1, "abandonAfterSecs": 4}),
    )
    .await;
    let redis = app.redis.as_ref().expect("a Redis app");
    let mut ids = Vec::new();
    for _ in 0..12 {
        ids.push(app.join("main", None).await.1.ticket_id);
    }
    for id in &ids {
        app.poll("main", id).await;
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let before = app.metric(FROM_MEMORY).await;
    let polled_at = unix_secs();
    for id in &ids {
        assert_eq!(app.poll("main", id).await.status, TicketState::Waiting);
    }
    let leaver = ids.pop().expect("twelve");
    assert_eq!(app.leave("main", &leaver).await, StatusCode::NO_CONTENT);
    assert!(
        app.metric(FROM_MEMORY).await - before >= 8.0,
        "the second polls were answered from memory"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    for id in &ids {
        let seen = seen_slot_of(redis, id);
        assert!(
            (polled_at..=unix_secs()).contains(&seen),
            "{id} heard at {seen}, polled from memory at {polled_at}"
        );
    }
    assert_eq!(app.poll("main", &leaver).await.status, TicketState::Left);
    let (_, room) = app.get_json(&paths::room("main")).await;
    assert_eq!(room["waiting"], 11, "{room}");
}
