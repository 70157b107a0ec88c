//! Rooms at run time (docs/DESIGN.md "Rooms at run time"): created, listed, read,
//! changed and deleted through the admin API on both stores and across two replicas on one
//! Redis; every change in the audit log; the message to waiters in polls and streams; who is
//! waiting, paged; bad input gets the documented 4xx. Two replicas on one Redis:
//! `rooms_replicas.rs`.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use vestibule_shared::{paths, TicketState, TicketStatus};
use vestibule_tests::{both_stores, on_redis_cluster_too, Backend, TestApp, ADMIN_TOKEN};

both_stores!(
    a_room_is_created_listed_read_and_deleted,
    bad_room_input_gets_the_documented_4xx,
    every_admin_change_is_in_the_audit_log,
    the_message_to_waiters_reaches_polls_and_streams,
    the_waiters_list_pages_in_queue_order_without_ticket_ids,
    an_etag_of_a_deleted_room_never_applies_to_the_room_created_again,
    a_room_created_again_keeps_its_keyed_joins_idempotent,
    the_bearer_scheme_is_matched_without_regard_to_case,
);

// The same flows on a Redis Cluster (tests/tests/cluster.rs: the cluster's own tests).
on_redis_cluster_too!(
    a_room_is_created_listed_read_and_deleted,
    every_admin_change_is_in_the_audit_log,
    a_room_created_again_keeps_its_keyed_joins_idempotent,
);

/// A request to the admin API with the test token; its status, headers and JSON body.
pub(crate) async fn admin(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let mut request = app
        .client
        .request(method, app.url(path))
        .bearer_auth(ADMIN_TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("admin request");
    let (status, headers) = (response.status(), response.headers().clone());
    (
        status,
        headers,
        response.json().await.unwrap_or(Value::Null),
    )
}

/// `GET /api/v1/admin/rooms/{room}`: its status and body.
pub(crate) async fn room_settings(app: &TestApp, room: &str) -> (StatusCode, Value) {
    let (status, _, body) = admin(app, reqwest::Method::GET, &paths::admin_room(room), None).await;
    (status, body)
}

/// The slugs `GET /api/v1/admin/rooms` lists, in its order (asserts it answers 200).
pub(crate) async fn listed_rooms(app: &TestApp) -> Vec<String> {
    let (status, _, list) = admin(app, reqwest::Method::GET, &paths::admin_rooms(), None).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list["rooms"]
        .as_array()
        .expect("rooms")
        .iter()
        .filter_map(|room| room["room"].as_str().map(str::to_owned))
        .collect()
}

pub(crate) async fn create(
    app: &TestApp,
    body: Value,
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    admin(
        app,
        reqwest::Method::POST,
        &paths::admin_rooms(),
        Some(body),
    )
    .await
}

/// A ticket's poll answer: status and body.
pub(crate) async fn try_poll(app: &TestApp, room: &str, id: &str) -> (StatusCode, Value) {
    app.get_json(&paths::ticket(room, id)).await
}

pub(crate) async fn audit(app: &TestApp, room: &str, limit: u32) -> Vec<Value> {
    let path = format!("{}?limit={limit}", paths::admin_room_audit(room));
    let (status, _, body) = admin(app, reqwest::Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["entries"].as_array().cloned().unwrap_or_default()
}

async fn a_room_is_created_listed_read_and_deleted(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    let (status, headers, body) = create(
        &app,
        json!({"room": "drop-7", "admissionRatePerSec": 50, "displayNameEn": "Drop 7",
               "displayNameKo": "드롭 7", "tokenTtlSecs": 120}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(headers["location"], "/api/v1/admin/rooms/drop-7");
    assert!(headers.contains_key("etag") && headers.contains_key("x-audit-ids"));
    assert_eq!(
        (
            &body["room"],
            &body["admissionRatePerSec"],
            &body["tokenTtlSecs"]
        ),
        (&json!("drop-7"), &json!(50.0), &json!(120)),
        "{body}"
    );
    assert_eq!(body["displayNameKo"], "드롭 7");
    // Listed, sorted by slug, beside the seeded room.
    assert_eq!(listed_rooms(&app).await, ["drop-7", "main"]);
    let (status, read) = room_settings(&app, "drop-7").await;
    assert_eq!(
        (status, &read["displayNameEn"]),
        (StatusCode::OK, &json!("Drop 7"))
    );
    // It admits at once.
    let (admitted, _) = app.admitted("drop-7").await;
    assert_eq!(admitted.room, "drop-7");
    // Not deleted while a shopper holds a token or waits; with force, every ticket ends.
    admin(
        &app,
        reqwest::Method::PATCH,
        &paths::admin_room("drop-7"),
        Some(json!({"paused": true})),
    )
    .await;
    let (_, waiting) = app.join("drop-7", None).await;
    let (status, _, body) = admin(
        &app,
        reqwest::Method::DELETE,
        &paths::admin_room("drop-7"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"], "room_not_empty", "{body}");
    let force = format!("{}?force=true", paths::admin_room("drop-7"));
    let (status, headers, _) = admin(&app, reqwest::Method::DELETE, &force, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(headers.contains_key("x-audit-ids"));
    for id in [&waiting.ticket_id, &admitted.ticket_id] {
        let (status, body) = try_poll(&app, "drop-7", id).await;
        assert_eq!(status, StatusCode::GONE, "{body}");
        assert_eq!(body["error"], "room_deleted", "{body}");
    }
    let (status, _, body) = admin(
        &app,
        reqwest::Method::GET,
        &paths::admin_room("drop-7"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::GONE, "{body}");
    let (status, _, body) = admin(
        &app,
        reqwest::Method::DELETE,
        &paths::admin_room("drop-7"),
        None,
    )
    .await;
    assert_eq!(
        (status, &body["error"]),
        (StatusCode::NOT_FOUND, &json!("room_not_found"))
    );
    // The slug can be used again: a fresh room, nobody in it.
    let (status, _, body) = create(&app, json!({"room": "drop-7"})).await;
    assert_eq!((status, &body["waiting"]), (StatusCode::CREATED, &json!(0)));
    let (status, body) = try_poll(&app, "drop-7", &waiting.ticket_id).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

async fn bad_room_input_gets_the_documented_4xx(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    for (body, expected, code) in [
        (
            json!({"room": "Drop_7"}),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            json!({"room": ""}),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            json!({"room": "a".repeat(65)}),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (json!({"room": 7}), StatusCode::BAD_REQUEST, "bad_request"),
        (
            json!({"admissionRatePerSec": 5}),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (json!(["main"]), StatusCode::BAD_REQUEST, "bad_request"),
        (
            json!({"room": "x", "admissionRatePerSec": -1}),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            json!({"room": "x", "rate": 5}),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            json!({"room": "x", "messageEn": "m".repeat(281)}),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (
            json!({"room": "x", "displayNameEn": " "}),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
        (json!({"room": "main"}), StatusCode::CONFLICT, "room_exists"),
        (
            json!({"room": "x", "prequeueOpensAt": "2030-01-01T00:00:00Z"}),
            StatusCode::CONFLICT,
            "conflict",
        ),
    ] {
        let (status, _, answer) = create(&app, body.clone()).await;
        assert_eq!(
            (status, answer["error"].as_str()),
            (expected, Some(code)),
            "{body} → {answer}"
        );
    }
    // Nothing was created by a refused create.
    let (_, _, list) = admin(&app, reqwest::Method::GET, &paths::admin_rooms(), None).await;
    assert_eq!(list["rooms"].as_array().map(Vec::len), Some(1), "{list}");
    let (status, _, _) = admin(
        &app,
        reqwest::Method::PATCH,
        &paths::admin_room("main"),
        Some(json!({"messageKo": "x".repeat(281)})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    for (method, path) in [
        (reqwest::Method::GET, paths::admin_room("nope")),
        (reqwest::Method::DELETE, paths::admin_room("nope")),
        (reqwest::Method::GET, paths::admin_room_audit("nope")),
        (reqwest::Method::GET, paths::admin_room_waiters("nope")),
    ] {
        let (status, _, body) = admin(&app, method.clone(), &path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path} → {body}");
        assert_eq!(body["error"], "room_not_found");
    }
    for query in ["limit=0", "limit=501", "offset=-1", "limit=x"] {
        let path = format!("{}?{query}", paths::admin_room_waiters("main"));
        let (status, _, body) = admin(&app, reqwest::Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query} → {body}");
    }
    for query in ["limit=0", "limit=1001"] {
        let path = format!("{}?{query}", paths::admin_room_audit("main"));
        let (status, _, _) = admin(&app, reqwest::Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
    }
    let path = format!("{}?force=maybe", paths::admin_room("main"));
    let (status, _, _) = admin(&app, reqwest::Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // No token, or a wrong one.
    let url = app.url(&paths::admin_rooms());
    let anonymous = app.client.get(&url).send().await.expect("list");
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let wrong = app
        .client
        .post(&url)
        .bearer_auth("not-the-token")
        .json(&json!({"room": "x"}))
        .send()
        .await
        .expect("create");
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    let delete = app
        .client
        .delete(app.url(&paths::admin_room("main")))
        .send()
        .await
        .expect("delete");
    assert_eq!(delete.status(), StatusCode::UNAUTHORIZED);
}

async fn every_admin_change_is_in_the_audit_log(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    let (status, _, _) = create(&app, json!({"room": "drop-7", "admissionRatePerSec": 40})).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, headers, _) = admin(
        &app,
        reqwest::Method::PATCH,
        &paths::admin_room("drop-7"),
        Some(json!({"admissionRatePerSec": 80, "closed": true, "paused": false})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // Two fields changed (paused was false already): two entries, named in the answer.
    let ids: Vec<String> = headers["x-audit-ids"]
        .to_str()
        .expect("ids")
        .split(',')
        .map(str::to_owned)
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    let entries = audit(&app, "drop-7", 100).await;
    let newest: Vec<(&str, &Value, &Value)> = entries
        .iter()
        .take(2)
        .map(|e| {
            (
                e["field"].as_str().unwrap_or_default(),
                &e["old"],
                &e["new"],
            )
        })
        .collect();
    assert!(
        newest.contains(&("admissionRatePerSec", &json!(40.0), &json!(80.0))),
        "{entries:?}"
    );
    assert!(
        newest.contains(&("closed", &json!(false), &json!(true))),
        "{entries:?}"
    );
    for entry in entries.iter().take(2) {
        assert!(ids.contains(&entry["id"].as_str().unwrap_or_default().to_owned()));
        assert!(
            entry["replica"].as_str().is_some_and(|r| !r.is_empty()),
            "{entry}"
        );
        assert!(
            entry["at"].as_str().is_some_and(|at| at.ends_with('Z')),
            "{entry}"
        );
        assert!(entry["atMs"].as_u64().is_some(), "{entry}");
    }
    // The create is the oldest entries: the room, then each field set.
    let oldest = entries.last().expect("entries");
    assert_eq!(oldest["field"], "room", "{entries:?}");
    assert_eq!(
        (&oldest["old"], &oldest["new"]),
        (&Value::Null, &json!("drop-7"))
    );
    assert_eq!(audit(&app, "drop-7", 1).await.len(), 1);
    // A delete is recorded, and the log outlives the room.
    let force = format!("{}?force=true", paths::admin_room("drop-7"));
    admin(&app, reqwest::Method::DELETE, &force, None).await;
    let after = audit(&app, "drop-7", 1).await;
    assert_eq!(
        (&after[0]["field"], &after[0]["new"]),
        (&json!("room"), &Value::Null)
    );
}

/// Reads an SSE response until a status satisfies `done` (or 5 s pass); that status.
async fn stream_until(
    response: reqwest::Response,
    done: impl Fn(&TicketStatus) -> bool,
) -> Option<TicketStatus> {
    use futures_util::StreamExt;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            if let Some(data) = block.lines().find_map(|line| line.strip_prefix("data:")) {
                if let Ok(status) = serde_json::from_str::<TicketStatus>(data.trim()) {
                    if done(&status) {
                        return Some(status);
                    }
                }
            }
        }
        match tokio::time::timeout_at(deadline.into(), stream.next()).await {
            Ok(Some(Ok(chunk))) => buffer.push_str(&String::from_utf8_lossy(&chunk)),
            _ => return None,
        }
    }
}

async fn the_message_to_waiters_reaches_polls_and_streams(backend: Backend) {
    let app = TestApp::spawn(backend, &["--sse-refresh-ms", "100"]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let (_, ticket) = app.join("main", None).await;
    assert_eq!(
        (ticket.message_en.as_deref(), ticket.message_ko.as_deref()),
        (None, None)
    );
    let stream = app
        .client
        .get(app.url(&paths::events("main", &ticket.ticket_id)))
        .send()
        .await
        .expect("stream");
    assert_eq!(stream.status(), StatusCode::OK);
    let set = Instant::now();
    app.patch_room(
        "main",
        json!({"messageEn": "Sizes 42–44 are sold out", "messageKo": "42–44 사이즈는 품절입니다"}),
    )
    .await;
    let streamed = stream_until(stream, |s| s.message_en.is_some())
        .await
        .expect("the message in a stream event within 5 s");
    assert_eq!(
        streamed.message_ko.as_deref(),
        Some("42–44 사이즈는 품절입니다")
    );
    assert!(
        set.elapsed() < Duration::from_secs(2),
        "{:?}",
        set.elapsed()
    );
    let polled = app.poll("main", &ticket.ticket_id).await;
    assert_eq!(
        polled.message_en.as_deref(),
        Some("Sizes 42–44 are sold out")
    );
    let (_, info) = app.get_json(&paths::room("main")).await;
    assert_eq!(info["messageKo"], "42–44 사이즈는 품절입니다", "{info}");
    // Cleared: gone from the next answer; admitted shoppers never get it.
    app.patch_room("main", json!({"messageEn": null, "messageKo": null}))
        .await;
    let polled = app.poll("main", &ticket.ticket_id).await;
    assert_eq!((polled.message_en, polled.message_ko), (None, None));
    app.patch_room("main", json!({"messageEn": "hello", "paused": false}))
        .await;
    let admitted = app
        .poll_until("main", &ticket.ticket_id, Duration::from_secs(5), |t| {
            t.status == TicketState::TokenIssued
        })
        .await;
    assert_eq!(
        (admitted.status, admitted.message_en),
        (TicketState::TokenIssued, None)
    );
}

async fn the_waiters_list_pages_in_queue_order_without_ticket_ids(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(app.join("main", None).await.1.ticket_id);
    }
    let page = |query: &'static str| {
        let app = &app;
        async move {
            let path = format!("{}{query}", paths::admin_room_waiters("main"));
            let (status, _, body) = admin(app, reqwest::Method::GET, &path, None).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            body
        }
    };
    let all = page("").await;
    assert_eq!(all["total"], 5, "{all}");
    let text = all.to_string();
    assert!(
        ids.iter().all(|id| !text.contains(id.as_str())),
        "a ticket id leaked: {text}"
    );
    let waiters = all["waiters"].as_array().expect("waiters");
    let positions: Vec<u64> = waiters
        .iter()
        .filter_map(|w| w["position"].as_u64())
        .collect();
    assert_eq!(positions, [1, 2, 3, 4, 5]);
    for waiter in waiters {
        let tag = waiter["ticketTag"].as_str().expect("tag");
        assert!(
            tag.len() == 12 && tag.bytes().all(|b| b.is_ascii_hexdigit()),
            "{waiter}"
        );
        assert!(
            waiter["ageSecs"].as_u64().is_some_and(|age| age < 60),
            "{waiter}"
        );
        assert!(
            waiter["lastSeenSecsAgo"]
                .as_u64()
                .is_some_and(|ago| ago < 60),
            "{waiter}"
        );
    }
    let second = page("?offset=1&limit=2").await;
    assert_eq!(second["total"], 5);
    assert_eq!(second["waiters"][0], waiters[1], "{second}");
    assert_eq!(second["waiters"][1], waiters[2], "{second}");
    assert_eq!(second["waiters"].as_array().map(Vec::len), Some(2));
    // One leaves: everyone behind moves up.
    app.leave("main", &ids[0]).await;
    let after = page("?limit=1").await;
    assert_eq!(
        (&after["total"], &after["waiters"][0]["position"]),
        (&json!(4), &json!(1))
    );
    assert_eq!(after["waiters"][0]["ticketTag"], waiters[1]["ticketTag"]);
    let past = page("?offset=10").await;
    assert_eq!(past["waiters"], json!([]), "{past}");
}

/// A room created again must not start its settings versions at 0 again, or an `If-Match` read
/// from the deleted room would apply to the new one once it reached that version. Versions of a
/// created room start at its creation time (ms): every earlier ETag is below.
async fn an_etag_of_a_deleted_room_never_applies_to_the_room_created_again(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    let room = paths::admin_room("again");
    let (status, _, _) = create(&app, json!({"room": "again"})).await;
    assert_eq!(status, StatusCode::CREATED);
    let mut old_etags = Vec::new();
    for n in 0..3 {
        let (_, headers, _) = admin(
            &app,
            reqwest::Method::PATCH,
            &room,
            Some(json!({"admissionRatePerSec": 10 + n})),
        )
        .await;
        old_etags.push(headers["etag"].to_str().unwrap().to_owned());
    }
    // An empty PATCH changes nothing, the version included.
    let (status, headers, _) = admin(&app, reqwest::Method::PATCH, &room, Some(json!({}))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers["etag"].to_str().unwrap(),
        old_etags.last().unwrap(),
        "{backend:?}: an empty PATCH moved the version"
    );
    let (status, _, _) = admin(&app, reqwest::Method::DELETE, &room, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, _) = create(&app, json!({"room": "again"})).await;
    assert_eq!(status, StatusCode::CREATED);
    for _ in 0..3 {
        for etag in &old_etags {
            let response = app
                .client
                .patch(app.url(&room))
                .bearer_auth(ADMIN_TOKEN)
                .header("If-Match", etag)
                .json(&json!({"paused": true}))
                .send()
                .await
                .expect("PATCH");
            assert_eq!(
                response.status(),
                StatusCode::PRECONDITION_FAILED,
                "{backend:?}: If-Match {etag} of the deleted room applied to the new one"
            );
        }
        // Move the new room's version on, past where the old one's were.
        admin(
            &app,
            reqwest::Method::PATCH,
            &room,
            Some(json!({"admissionRatePerSec": 5})),
        )
        .await;
    }
}

/// A deleted room's secret and draw seed must not stay cached in the store handles of the
/// process that deleted it (one per serving thread): the room created again under the same slug
/// gets a new secret in Redis, so once a handle checked its copy again (5 s later) the same
/// `Idempotency-Key` would derive another ticket id and a retried join would make a second
/// ticket. Every handle of the process forgets a room when it is deleted.
async fn a_room_created_again_keeps_its_keyed_joins_idempotent(backend: Backend) {
    // Two serving threads; the admin calls go over the app's connection and the joins over
    // another one, so they are served by different threads' store handles.
    let app = TestApp::spawn(backend, &["--serving-threads", "2"]).await;
    let shopper = reqwest::Client::new();
    let join = |key: &'static str| {
        let request = shopper
            .post(app.url(&paths::tickets("again-keyed")))
            .header("Idempotency-Key", key);
        async move {
            let response = request.send().await.expect("join");
            let status = response.status();
            let ticket: TicketStatus = response.json().await.expect("join body");
            (status, ticket)
        }
    };
    let (status, _, _) = create(&app, json!({"room": "again-keyed", "paused": true})).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = join("shopper-1").await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _, _) = admin(
        &app,
        reqwest::Method::DELETE,
        &format!("{}?force=true", paths::admin_room("again-keyed")),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, _) = create(&app, json!({"room": "again-keyed", "paused": true})).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, first) = join("shopper-1").await;
    assert_eq!(status, StatusCode::CREATED, "{backend:?}");
    assert_eq!(first.position, Some(1));
    // Past a cached secret's recheck (5 s): still the same ticket, still alone in the line.
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    for _ in 0..3 {
        let (status, later) = join("shopper-1").await;
        assert_eq!(
            (status, &later.ticket_id, later.position),
            (StatusCode::OK, &first.ticket_id, Some(1)),
            "{backend:?}: a retried join made another ticket"
        );
    }
}

/// `Authorization: bearer …` is accepted: an auth scheme is case-insensitive (RFC 9110 §11.1); a
/// missing or other scheme gets 401.
async fn the_bearer_scheme_is_matched_without_regard_to_case(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    let url = app.url(&paths::admin_rooms());
    for (header, expected) in [
        (format!("bearer {ADMIN_TOKEN}"), StatusCode::OK),
        (format!("BEARER  {ADMIN_TOKEN}"), StatusCode::OK),
        (format!("Basic {ADMIN_TOKEN}"), StatusCode::UNAUTHORIZED),
        (ADMIN_TOKEN.to_owned(), StatusCode::UNAUTHORIZED),
    ] {
        let response = app
            .client
            .get(&url)
            .header("Authorization", &header)
            .send()
            .await
            .expect("GET rooms");
        assert_eq!(response.status(), expected, "{backend:?}: {header:?}");
    }
}

/// A keyed join through a replica that has not seen its room's deletion yet (the document says
/// deleted, the generation's keys not purged yet) answers 410 `room_deleted` and writes no room
/// secret back (`backend/tests/scripts.rs` runs every script so).
#[tokio::test]
async fn a_keyed_join_in_a_deleted_room_writes_no_secret_back() {
    let app = TestApp::spawn(Backend::Redis, &[]).await;
    let redis = app.redis.as_ref().expect("a Redis app");
    // The process's copy of the secret is checked against Redis again after 5 s.
    tokio::time::sleep(Duration::from_millis(5300)).await;
    redis.cli(&["HSET", "vestibule:{main}:room", "state", "deleted"]);
    redis.cli(&["DEL", "vestibule:{main}:g1:secret"]);
    let response = reqwest::Client::new()
        .post(app.url(&paths::tickets("main")))
        .header("Idempotency-Key", "late-key")
        .send()
        .await
        .expect("join");
    assert_eq!(response.status(), StatusCode::GONE);
    let body: Value = response.json().await.expect("JSON error");
    assert_eq!(body["error"], "room_deleted", "{body}");
    assert_eq!(redis.cli(&["EXISTS", "vestibule:{main}:g1:secret"]), "0");
}
