//! `queueingMethod: "random"` (docs/DESIGN.md "Random queueing") against the real
//! binary: the setting's validation (400 `invalid_field`, 409 `conflict`, never a 500), the
//! status field that tells the page the place can move, the seed kept secret while the lottery
//! runs and published after it, and positions that are the ranks of HMAC-SHA256(seed, tag)
//! recomputed here from the published seed alone.

use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use vestibule_tests::{both_stores, on_redis_cluster_too, Backend, TestApp};

use crate::opening::in_ms;

both_stores!(
    a_random_room_is_validated_said_and_verifiable,
    a_room_turns_random_only_while_open,
);

// The same flows on a Redis Cluster (tests/tests/cluster.rs: the cluster's own tests).
on_redis_cluster_too!(a_random_room_is_validated_said_and_verifiable,);

async fn patch(app: &TestApp, body: Value) -> (StatusCode, Value) {
    let response = app
        .client
        .patch(app.url("/api/v1/admin/rooms/main"))
        .bearer_auth(vestibule_tests::ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len() / 2)
        .map(|i| u8::from_str_radix(&text[i * 2..i * 2 + 2], 16).unwrap())
        .collect()
}

async fn a_random_room_is_validated_said_and_verifiable(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    // Unknown values are 400 `invalid_field`, a wrong type 400 too; nothing changes.
    for (bad, code) in [
        (json!({"queueingMethod": "lottery"}), "invalid_field"),
        (json!({"queueingMethod": "RANDOM"}), "invalid_field"),
        (json!({"queueingMethod": ""}), "invalid_field"),
        (json!({"queueingMethod": 5}), "bad_request"),
    ] {
        let (status, body) = patch(&app, bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad} → {body}");
        assert_eq!(body["error"], code, "{body}");
    }
    // A drawn pre-queue would publish the seed: the two do not go together.
    let (status, body) = patch(
        &app,
        json!({"queueingMethod": "random", "opensAt": in_ms(60_000), "prequeueOpensAt": in_ms(0)}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"], "conflict", "{body}");
    let (_, info) = app.get_json("/api/v1/rooms/main").await;
    assert_eq!(info["queueingMethod"], "fifo", "{info}");

    // FIFO: no field in the status. Paused, so nobody is admitted meanwhile.
    let (status, body) = patch(&app, json!({"paused": true})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut tickets = Vec::new();
    for i in 0..12 {
        let (code, ticket) = app.join("main", Some(&format!("early-{i}"))).await;
        assert_eq!(code, StatusCode::CREATED);
        tickets.push(ticket.ticket_id);
    }
    let (_, polled) = app
        .get_json(&format!("/api/v1/rooms/main/tickets/{}", tickets[0]))
        .await;
    assert!(polled.get("queueingMethod").is_none(), "{polled}");

    // The switch: the admin view, the room's info and every waiting ticket say so.
    let (status, body) = patch(&app, json!({"queueingMethod": "random"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["queueingMethod"], "random", "{body}");
    let (_, info) = app.get_json("/api/v1/rooms/main").await;
    assert_eq!(info["queueingMethod"], "random", "{info}");
    for i in 0..12 {
        let (code, ticket) = app.join("main", Some(&format!("late-{i}"))).await;
        assert_eq!(code, StatusCode::CREATED);
        tickets.push(ticket.ticket_id);
    }
    // The commitment is public, the seed is not while the lottery runs.
    let (_, draw) = app.get_json("/api/v1/rooms/main/draw").await;
    let commitment = draw["seedSha256"]
        .as_str()
        .expect("a commitment")
        .to_owned();
    assert!(draw["seed"].is_null(), "{draw}");
    let mut positions = Vec::new();
    for id in &tickets {
        let (code, status) = app
            .get_json(&format!("/api/v1/rooms/main/tickets/{id}"))
            .await;
        assert_eq!(code, StatusCode::OK, "{status}");
        assert_eq!(status["status"], "WAITING", "{status}");
        assert_eq!(status["queueingMethod"], "random", "{status}");
        let tag = status["ticketTag"].as_str().expect("a tag").to_owned();
        let expected_tag = hex(&Sha256::digest(id.as_bytes())[..6]);
        assert_eq!(tag, expected_tag, "the tag names the ticket");
        positions.push(status["position"].as_u64().expect("a position"));
    }
    let mut sorted = positions.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (1..=24).collect::<Vec<u64>>(),
        "positions are a permutation"
    );

    // Back to FIFO: the seed is published, matches the commitment, and the positions the
    // lottery gave were the ranks of HMAC-SHA256(seed, tag) (ties by tag, then id).
    let (status, body) = patch(&app, json!({"queueingMethod": "fifo"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, draw) = app.get_json("/api/v1/rooms/main/draw").await;
    let seed = draw["seed"].as_str().expect("the seed once back on FIFO");
    assert_eq!(hex(&Sha256::digest(unhex(seed))), commitment, "{draw}");
    let mut keyed: Vec<(Vec<u8>, String, String)> = tickets
        .iter()
        .map(|id| {
            let tag = hex(&Sha256::digest(id.as_bytes())[..6]);
            let mut mac = Hmac::<Sha256>::new_from_slice(&unhex(seed)).unwrap();
            mac.update(tag.as_bytes());
            (mac.finalize().into_bytes().to_vec(), tag, id.clone())
        })
        .collect();
    keyed.sort();
    for (id, position) in tickets.iter().zip(&positions) {
        let rank = keyed.iter().position(|(_, _, k)| k == id).unwrap() as u64 + 1;
        assert_eq!(*position, rank, "a random position is the rank by key");
    }
    // FIFO again: arrival order, and no field.
    let (_, status) = app
        .get_json(&format!("/api/v1/rooms/main/tickets/{}", tickets[5]))
        .await;
    assert_eq!(status["position"], 6, "{status}");
    assert!(status.get("queueingMethod").is_none(), "{status}");
    // The seed is public now: a new lottery under it would be predictable.
    let (status, body) = patch(&app, json!({"queueingMethod": "random"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"], "conflict", "{body}");
}

/// A room created closed and random (or turned random while closed) would publish its seed at
/// once (a closed random room does) and then could never open as random. So a room turns random
/// only while open: prepared closed as FIFO, it opens random in one change, with its
/// seed hidden.
async fn a_room_turns_random_only_while_open(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    let created = app
        .client
        .post(app.url("/api/v1/admin/rooms"))
        .bearer_auth(vestibule_tests::ADMIN_TOKEN)
        .json(&json!({"room": "drop", "queueingMethod": "random", "closed": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CONFLICT, "{backend:?}");
    let (status, _) = patch(&app, json!({"closed": true})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = patch(&app, json!({"queueingMethod": "random"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{backend:?}: {body}");
    assert_eq!(body["error"], "conflict");
    let (status, body) = patch(&app, json!({"closed": false, "queueingMethod": "random"})).await;
    assert_eq!(status, StatusCode::OK, "{backend:?}: {body}");
    let draw: Value = app
        .client
        .get(app.url("/api/v1/rooms/main/draw"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        draw.get("seed").is_none_or(Value::is_null),
        "{backend:?}: the seed is out while the lottery runs: {draw}"
    );
}
