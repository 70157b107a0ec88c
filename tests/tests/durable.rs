//! The embedded store's data dir, black-box: the real binary killed with SIGKILL mid-sale and
//! started again on the same `--data-dir` keeps every answered change; a second process on the
//! same dir is refused; rooms created and deleted at run time, and their audit log, survive too.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use vestibule_shared::{paths, TicketState};
use vestibule_tests::{vestibule_command, TestApp, ADMIN_TOKEN};

/// Starts the binary on the data dir `dir` with the admission stopped (rate 0).
async fn start(dir: &Path) -> TestApp {
    let dir = dir.to_str().expect("temp paths are UTF-8");
    TestApp::spawn_with_url(None, &["--data-dir", dir, "--admission-rate", "0"]).await
}

/// Kills the process as a crash would (SIGKILL: no shutdown, no flush).
async fn crash(mut app: TestApp) {
    app.signal("KILL");
    assert!(app.wait_exit(Duration::from_secs(5)).await.is_some());
}

/// The admin settings' `ETag`.
async fn etag(app: &TestApp) -> String {
    let response = app
        .client
        .get(app.url(&paths::admin_room("main")))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("admin GET");
    response.headers()["etag"].to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_process_restarted_on_its_data_dir_keeps_places_tokens_orders_and_settings() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("data");
    let app = start(&dir).await;
    assert_eq!(app.get_json(paths::READYZ).await.1["store"], "durable");
    let mut tickets = Vec::new();
    for i in 0..5 {
        let (status, ticket) = app.join("main", Some(&format!("key-{i}"))).await;
        assert_eq!(status, StatusCode::CREATED);
        tickets.push(ticket.ticket_id);
    }
    // Admit exactly two (the cap), use one token, then stop admission.
    app.patch_room(
        "main",
        json!({"admissionRatePerSec": 1000, "maxActiveUsers": 2}),
    )
    .await;
    let mut tokens = Vec::new();
    for id in &tickets[..2] {
        let issued = app
            .poll_until("main", id, Duration::from_secs(5), |t| {
                t.status == TicketState::TokenIssued
            })
            .await;
        tokens.push(
            issued
                .entry_token
                .expect("an admitted ticket has its token"),
        );
    }
    app.patch_room("main", json!({"paused": true})).await;
    let (status, _) = app.order("main", Some(&tokens[0])).await;
    assert_eq!(status, StatusCode::CREATED);
    let before_etag = etag(&app).await;
    crash(app).await;
    assert!(dir.join("journal.log").is_file() && dir.join("lock").is_file());

    let app = start(&dir).await;
    assert_eq!(
        app.poll("main", &tickets[0]).await.status,
        TicketState::Completed
    );
    let issued = app.poll("main", &tickets[1]).await;
    assert_eq!(issued.status, TicketState::TokenIssued);
    assert_eq!(issued.entry_token.as_deref(), Some(tokens[1].as_str()));
    for (i, id) in tickets[2..].iter().enumerate() {
        let waiting = app.poll("main", id).await;
        assert_eq!(
            (waiting.status, waiting.position),
            (TicketState::Waiting, Some(i as u64 + 1))
        );
    }
    // A keyed re-join finds its ticket and place; settings and their version survived (paused,
    // so nobody was admitted meanwhile).
    let (status, again) = app.join("main", Some("key-3")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (again.ticket_id, again.position),
        (tickets[3].clone(), Some(2))
    );
    assert_eq!(etag(&app).await, before_etag);
    // The used token stays used; the issued one works once.
    let (status, body) = app.order("main", Some(&tokens[0])).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("entry_token_used"))
    );
    let (status, _) = app.order("main", Some(&tokens[1])).await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_a_join_storm_loses_no_answered_join() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("data");
    let app = Arc::new(start(&dir).await);
    let answered: Arc<Mutex<HashMap<String, (String, u64)>>> = Arc::default();
    let mut workers = Vec::new();
    for worker in 0..8 {
        let (app, answered) = (app.clone(), answered.clone());
        workers.push(tokio::spawn(async move {
            for i in 0.. {
                let key = format!("w{worker}-{i}");
                let request = app
                    .client
                    .post(app.url(&paths::tickets("main")))
                    .header("Idempotency-Key", &key)
                    .send()
                    .await;
                // After the kill every request fails: the storm is over.
                let Ok(response) = request else { return };
                let Ok(ticket) = response.json::<vestibule_shared::TicketStatus>().await else {
                    return;
                };
                let position = ticket.position.expect("a new ticket waits");
                let mut answered = answered.lock().unwrap();
                answered.insert(key, (ticket.ticket_id, position));
            }
        }));
    }
    while answered.lock().unwrap().len() < 400 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    app.signal("KILL");
    for worker in workers {
        worker.await.unwrap();
    }
    let app = Arc::into_inner(app).expect("workers are done");
    crash(app).await;

    let app = start(&dir).await;
    let answered = answered.lock().unwrap().clone();
    let mut by_place = Vec::new();
    for (key, (id, position)) in &answered {
        let (status, again) = app.join("main", Some(key)).await;
        assert_eq!(status, StatusCode::OK, "answered join {key} was lost");
        assert_eq!(&again.ticket_id, id);
        by_place.push((*position, again.position.unwrap()));
    }
    // Relative order is arrival order; at most the unanswered joins in flight sit between.
    by_place.sort_unstable();
    assert!(
        by_place.windows(2).all(|pair| pair[0].1 < pair[1].1),
        "{by_place:?}"
    );
    assert!(by_place.iter().all(|(before, after)| after <= before));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_on_the_same_data_dir_refuses_to_start() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("data");
    let _first = start(&dir).await;
    let mut second = vestibule_command(None, &["--data-dir", dir.to_str().unwrap()], "info");
    let output = tokio::task::spawn_blocking(move || second.output())
        .await
        .unwrap()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("in use by another Vestibule process"),
        "{stderr}"
    );
}

/// Rooms created and deleted at run time and their audit log survive a crash: the
/// created room runs again with its settings and its line, the deleted one stays deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rooms_created_and_deleted_at_run_time_survive_a_crash() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("data");
    let app = start(&dir).await;
    let admin = |method: reqwest::Method, path: String| {
        app.client
            .request(method, app.url(&path))
            .bearer_auth(ADMIN_TOKEN)
    };
    for room in ["drop-7", "drop-8"] {
        let created = admin(reqwest::Method::POST, paths::admin_rooms())
            .json(&json!({"room": room, "paused": true, "messageEn": "back at 9"}))
            .send()
            .await
            .expect("create");
        assert_eq!(created.status(), StatusCode::CREATED);
    }
    let (_, waiting) = app.join("drop-7", Some("k")).await;
    let deleted = admin(
        reqwest::Method::DELETE,
        format!("{}?force=true", paths::admin_room("drop-8")),
    )
    .send()
    .await
    .expect("delete");
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    crash(app).await;

    let app = start(&dir).await;
    let listed: serde_json::Value = app
        .client
        .get(app.url(&paths::admin_rooms()))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("JSON");
    let slugs: Vec<&str> = listed["rooms"]
        .as_array()
        .expect("rooms")
        .iter()
        .filter_map(|room| room["room"].as_str())
        .collect();
    assert_eq!(slugs, ["drop-7", "main"]);
    let again = app.poll("drop-7", &waiting.ticket_id).await;
    assert_eq!(
        (again.position, again.message_en.as_deref()),
        (Some(1), Some("back at 9"))
    );
    let (status, audit) = {
        let response = app
            .client
            .get(app.url(&paths::admin_room_audit("drop-8")))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("audit");
        (
            response.status(),
            response.json::<serde_json::Value>().await.unwrap(),
        )
    };
    assert_eq!(status, StatusCode::OK, "{audit}");
    assert_eq!(audit["entries"][0]["field"], "room", "{audit}");
    assert_eq!(
        audit["entries"][0]["new"],
        serde_json::Value::Null,
        "{audit}"
    );
}

/// `main`, deleted by an operator and seeded again by `--rooms` at the next start, must not come
/// back at settings version 0, or an `If-Match` read from the deleted room would apply to it. A
/// revived room starts its versions at its revival time (µs), as a created room does; on
/// Redis too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_room_deleted_and_seeded_again_takes_no_etag_of_the_deleted_one() {
    let dir = tempfile::tempdir().unwrap();
    let app = start(dir.path()).await;
    let mut old = vec![etag(&app).await];
    app.patch_room("main", json!({"admissionRatePerSec": 3}))
        .await;
    old.push(etag(&app).await);
    crash_after_delete(app).await;
    let app = start(dir.path()).await;
    refuses_old_etags(&app, &old).await;
    // On Redis: the tombstone of the deleted room revives it with a new first version.
    let redis = vestibule_tests::RedisServer::start();
    let args = ["--rooms", "main"];
    let first = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
    let mut old = vec![etag(&first).await];
    first
        .patch_room("main", json!({"admissionRatePerSec": 3}))
        .await;
    old.push(etag(&first).await);
    crash_after_delete(first).await;
    let again = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
    refuses_old_etags(&again, &old).await;
    let (status, _) = again.join("main", None).await;
    assert!(
        status.is_success(),
        "the revived room takes joins: {status}"
    );
}

/// Deletes `main` (force) and kills the process.
async fn crash_after_delete(app: TestApp) {
    let response = app
        .client
        .delete(app.url(&format!("{}?force=true", paths::admin_room("main"))))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("DELETE");
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    crash(app).await;
}

/// Every ETag in `old` gets 412 on `main`.
async fn refuses_old_etags(app: &TestApp, old: &[String]) {
    for etag in old {
        let response = app
            .client
            .patch(app.url(&paths::admin_room("main")))
            .bearer_auth(ADMIN_TOKEN)
            .header("If-Match", etag)
            .json(&json!({"paused": true}))
            .send()
            .await
            .expect("PATCH");
        assert_eq!(
            response.status(),
            StatusCode::PRECONDITION_FAILED,
            "If-Match {etag} of the deleted room applied to the revived one"
        );
    }
}
