//! A scheduled opening with a pre-queue and a provably fair draw (docs/DESIGN.md
//! "Scheduled opening and the draw"), against the real binary: refused before the pre-queue,
//! `PRE_QUEUE` tickets in it, one draw at the opening (paused or not) that is a permutation
//! committed to in advance and recomputed by `vestibule verify-draw`; on two replicas sharing
//! Redis, a leader killed at the opening neither breaks nor repeats the draw.

use std::collections::HashSet;
use std::time::Duration;

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use vestibule_shared::{TicketState, TicketStatus};
use vestibule_tests::{
    both_stores, metric_value, on_redis_cluster_too, vestibule_binary, Backend, RedisServer,
    TestApp,
};

both_stores!(
    a_scheduled_opening_refuses_then_prequeues_then_draws_once,
    a_keyed_retry_while_the_room_is_not_open_gets_its_ticket,
);

// The same flows on a Redis Cluster (tests/tests/cluster.rs: the cluster's own tests).
on_redis_cluster_too!(a_scheduled_opening_refuses_then_prequeues_then_draws_once,);

/// RFC 3339 of now + `ms`.
pub(crate) fn in_ms(ms: i64) -> String {
    let at = time::OffsetDateTime::now_utc() + time::Duration::milliseconds(ms);
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

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

async fn join_many(app: &TestApp, n: usize, prefix: &str) -> Vec<TicketStatus> {
    join_range(app, 0..n, prefix).await
}

async fn join_range(
    app: &TestApp,
    range: std::ops::Range<usize>,
    prefix: &str,
) -> Vec<TicketStatus> {
    join_all(range.map(|i| {
        let key = format!("{prefix}-{i}");
        async move {
            let (code, ticket) = app.join("main", Some(&key)).await;
            assert_eq!(code, StatusCode::CREATED, "{ticket:?}");
            ticket
        }
    }))
    .await
}

/// `vestibule verify-draw ARGS`: exit code and output.
fn verify_draw(args: &[&str]) -> (i32, String) {
    let output = std::process::Command::new(vestibule_binary())
        .arg("verify-draw")
        .args(args)
        .output()
        .expect("the binary runs");
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.code().unwrap_or(-1), text)
}

fn sha256_hex(hex_text: &str) -> String {
    let bytes: Vec<u8> = (0..hex_text.len() / 2)
        .map(|i| u8::from_str_radix(&hex_text[i * 2..i * 2 + 2], 16).unwrap())
        .collect();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Polls every ticket until none is `PRE_QUEUE`; their positions.
async fn drawn_positions(app: &TestApp, tickets: &[TicketStatus]) -> Vec<(u64, String)> {
    for _ in 0..100 {
        let polled = join_all(tickets.iter().map(|t| app.poll("main", &t.ticket_id))).await;
        if polled.iter().all(|t| t.status == TicketState::Waiting) {
            return polled
                .into_iter()
                .map(|t| {
                    (
                        t.position.expect("a drawn place"),
                        t.ticket_tag.expect("a tag"),
                    )
                })
                .collect();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the pre-queue was not drawn within 10 s of the opening");
}

/// Also against mterwill/office-hours-help-queue#216 ("students who script clicking … land on
/// the top of the queue when it first opens"): the 30 shoppers
/// whose scripts join first (one after another, before the other 270) get no head start: their
/// drawn places are spread over the line, not 1..30.
async fn a_scheduled_opening_refuses_then_prequeues_then_draws_once(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    // Bad times are refused with a clear answer and change nothing: a malformed time is 400, a
    // schedule that contradicts itself (each time valid alone) is 409 `conflict`.
    for (bad, status, code) in [
        (
            json!({"opensAt": in_ms(5_000), "prequeueOpensAt": in_ms(9_000)}),
            StatusCode::CONFLICT,
            "conflict",
        ),
        (
            json!({"prequeueOpensAt": in_ms(1_000)}),
            StatusCode::CONFLICT,
            "conflict",
        ),
        (
            json!({"opensAt": "tomorrow at nine"}),
            StatusCode::BAD_REQUEST,
            "invalid_field",
        ),
    ] {
        let (got, body) = patch(&app, bad.clone()).await;
        assert_eq!(got, status, "{bad} → {body}");
        assert_eq!(body["error"], code, "{body}");
    }
    // A time before 1970 is taken, as the document allows any RFC 3339 date-time: it is simply
    // past (read back as the epoch), and changes nothing else.
    let (got, body) = patch(&app, json!({"opensAt": "1151-07-10T11:01:26.48Z"})).await;
    assert_eq!(got, StatusCode::OK, "{body}");
    assert_eq!(body["opensAt"], "1970-01-01T00:00:00Z", "{body}");
    let (got, body) = patch(&app, json!({"opensAt": null})).await;
    assert_eq!(got, StatusCode::OK, "{body}");
    // Paused: the draw happens at the opening all the same.
    let settings = app
        .patch_room(
            "main",
            json!({"opensAt": in_ms(5_000), "prequeueOpensAt": in_ms(1_500), "paused": true}),
        )
        .await;
    assert!(settings["opensAt"].is_string(), "{settings}");

    // Before the pre-queue: 409 room_not_open with both times and Retry-After.
    let response = app.join_request("main").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"], "room_not_open", "{body}");
    assert_eq!(body["opensAt"], settings["opensAt"], "{body}");
    assert_eq!(
        body["prequeueOpensAt"], settings["prequeueOpensAt"],
        "{body}"
    );
    let (_, draw) = app.get_json("/api/v1/rooms/main/draw").await;
    assert_eq!(draw["state"], "NONE", "{draw}");
    // Counted by its code, not as `none`.
    assert_eq!(
        app.metric("vestibule_http_responses_total{status=\"409\",code=\"room_not_open\"}")
            .await,
        1.0
    );

    tokio::time::sleep(Duration::from_millis(1_700)).await;
    let (_, draw) = app.get_json("/api/v1/rooms/main/draw").await;
    assert_eq!(draw["state"], "COMMITTED", "{draw}");
    assert!(
        draw["seed"].is_null(),
        "the seed stays secret until the draw: {draw}"
    );
    let commitment = draw["seedSha256"].as_str().unwrap().to_owned();

    let mut tickets = Vec::new();
    for i in 0..30 {
        tickets.extend(join_range(&app, i..i + 1, "pre").await);
    }
    tickets.extend(join_range(&app, 30..300, "pre").await);
    for ticket in &tickets {
        assert_eq!(ticket.status, TicketState::PreQueue, "{ticket:?}");
        assert_eq!(ticket.position, None);
        assert_eq!(ticket.opens_at.as_deref(), settings["opensAt"].as_str());
        // The hint wakes the client just after the opening (≤ 3.3 s away), spread over 4.5 s.
        assert!(
            (1_000..=8_500).contains(&ticket.next_poll_after_ms),
            "{ticket:?}"
        );
    }
    let hints: HashSet<u64> = tickets.iter().map(|t| t.next_poll_after_ms / 250).collect();
    assert!(
        hints.len() >= 10,
        "the first polls after the opening are spread: {hints:?}"
    );
    let (code, again) = app.join("main", Some("pre-7")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        (again.ticket_id.as_str(), again.status),
        (tickets[7].ticket_id.as_str(), TicketState::PreQueue)
    );

    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let late = app.join("main", Some("after-the-opening")).await.1;
    let mut drawn = drawn_positions(&app, &tickets).await;
    drawn.sort();
    let places: Vec<u64> = drawn.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        places,
        (1..=300).collect::<Vec<_>>(),
        "a permutation of places 1..300"
    );
    assert_eq!(app.poll("main", &late.ticket_id).await.position, Some(301));

    let (_, draw) = app
        .get_json("/api/v1/rooms/main/draw?offset=0&limit=10000")
        .await;
    assert_eq!(draw["state"], "DRAWN", "{draw}");
    assert_eq!(
        draw["seedSha256"],
        commitment.as_str(),
        "the commitment never changes"
    );
    assert_eq!(
        sha256_hex(draw["seed"].as_str().unwrap()),
        commitment,
        "SHA-256(seed) = commitment"
    );
    let published: Vec<String> = serde_json::from_value(draw["tags"].clone()).unwrap();
    let by_place: Vec<String> = drawn.iter().map(|(_, tag)| tag.clone()).collect();
    assert_eq!(
        published, by_place,
        "the published order is the queue's order"
    );

    // Paging past the end lists nothing; a bad offset or limit is a clear 400.
    let (code, past) = app
        .get_json("/api/v1/rooms/main/draw?offset=9223372036854775807")
        .await;
    assert_eq!(
        (code, past["tags"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(0)),
        "{past}"
    );
    // Past the document's int64 bound (2^63) is refused.
    for bad in [
        "limit=0",
        "limit=10001",
        "offset=-1",
        "offset=x",
        "offset=9223372036854775808",
    ] {
        let (code, body) = app
            .get_json(&format!("/api/v1/rooms/main/draw?{bad}"))
            .await;
        assert_eq!(
            (code, body["error"].as_str()),
            (StatusCode::BAD_REQUEST, Some("invalid_field")),
            "{bad}"
        );
    }
    let url = app.url("/api/v1/rooms/main/draw");
    let (code, out) = verify_draw(&[&url, "--tag", &by_place[41]]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("place 42"), "{out}");
    let dir = tempfile::tempdir().unwrap();
    let mut forged = draw.clone();
    forged["tags"].as_array_mut().unwrap().swap(0, 1);
    let file = dir.path().join("draw.json");
    std::fs::write(&file, forged.to_string()).unwrap();
    let (code, out) = verify_draw(&[file.to_str().unwrap()]);
    assert_eq!(code, 1, "a swapped pair is caught: {out}");
    // A saved file with only some of the pages is incomplete, not a mismatch.
    let mut partial = draw.clone();
    partial["tags"].as_array_mut().unwrap().truncate(3);
    std::fs::write(&file, partial.to_string()).unwrap();
    let (code, out) = verify_draw(&[file.to_str().unwrap()]);
    assert_eq!(code, 2, "missing pages are not a mismatch: {out}");
    assert!(
        !out.contains("MISMATCH") && out.contains("incomplete"),
        "{out}"
    );
    // A tag that is not in a matching draw has its own exit code.
    let (code, out) = verify_draw(&[&url, "--tag", "000000000000"]);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("OK") && out.contains("not in the draw"),
        "{out}"
    );

    // Admission starts in the drawn order.
    app.patch_room("main", json!({"paused": false})).await;
    let first = tickets
        .iter()
        .find(|t| t.ticket_tag.as_deref() == Some(by_place[0].as_str()))
        .unwrap();
    let admitted = app
        .poll_until("main", &first.ticket_id, Duration::from_secs(5), |t| {
            t.status == TicketState::TokenIssued
        })
        .await;
    assert_eq!(admitted.status, TicketState::TokenIssued);
}

/// Two replicas on one Redis; the leader is killed (SIGKILL) just before the opening: the other
/// takes the lease and makes the draw, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_at_the_opening_neither_breaks_nor_repeats_the_draw() {
    let redis = RedisServer::start();
    let a = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    a.patch_room(
        "main",
        json!({"opensAt": in_ms(4_000), "prequeueOpensAt": in_ms(500), "paused": true}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mut tickets = join_many(&a, 100, "a").await;
    tickets.extend(join_many(&b, 100, "b").await);
    let series = "vestibule_scheduler_leader{room=\"main\"}";
    let a_leads = metric_value(&a.metrics().await, series);
    let b_leads = metric_value(&b.metrics().await, series);
    assert_eq!(a_leads + b_leads, 1.0, "one leader");
    let (dead, alive) = if a_leads == 1.0 { (a, b) } else { (b, a) };
    tokio::time::sleep(Duration::from_millis(2_700)).await;
    dead.signal("KILL");
    let mut drawn = drawn_positions(&alive, &tickets).await;
    drawn.sort();
    assert_eq!(
        drawn.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
        (1..=200).collect::<Vec<_>>()
    );
    let (_, draw) = alive.get_json("/api/v1/rooms/main/draw").await;
    assert_eq!(draw["count"], 200, "{draw}");
    let (code, out) = verify_draw(&[&alive.url("/api/v1/rooms/main/draw")]);
    assert_eq!(code, 0, "{out}");
    // A replica started after the draw does not draw again.
    let c = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let (_, again) = c.get_json("/api/v1/rooms/main/draw").await;
    assert_eq!(
        (again["count"].clone(), again["drawnAt"].clone()),
        (draw["count"].clone(), draw["drawnAt"].clone())
    );
}

/// Issue 42 ("Who chooses the draw"): someone with write access to Redis sets the draw seed
/// (`HSETNX`, as the server does) before the pre-queue opens. The server takes that seed as the
/// committed one, but the order follows from it mixed with the hash of the drawn tags, which
/// nobody knew then: the published draw verifies, and a draw ordered by the attacker's raw seed
/// (what the attacker chose) is refused with code 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_written_into_redis_before_the_prequeue_does_not_choose_the_order() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    app.patch_room(
        "main",
        json!({"opensAt": in_ms(3_500), "prequeueOpensAt": in_ms(1_200), "paused": true}),
    )
    .await;
    let chosen = format!("{}2a", "00".repeat(31));
    let written = redis.cli(&["HSETNX", "vestibule:{main}:g1:draw", "seed", &chosen]);
    assert_eq!(written, "1", "the attacker's seed is written first");
    tokio::time::sleep(Duration::from_millis(1_400)).await;
    let (_, draw) = app.get_json("/api/v1/rooms/main/draw").await;
    assert_eq!(
        draw["seedSha256"].as_str(),
        Some(sha256_hex(&chosen).as_str()),
        "the attacker's seed is the one committed: {draw}"
    );
    let tickets = join_many(&app, 120, "pre").await;
    let mut drawn = drawn_positions(&app, &tickets).await;
    drawn.sort();
    let by_place: Vec<String> = drawn.into_iter().map(|(_, tag)| tag).collect();

    let (_, draw) = app
        .get_json("/api/v1/rooms/main/draw?offset=0&limit=10000")
        .await;
    assert_eq!(draw["seed"].as_str(), Some(chosen.as_str()), "{draw}");
    let published: Vec<String> = serde_json::from_value(draw["tags"].clone()).unwrap();
    assert_eq!(published, by_place, "the published order is the queue's");
    let mut sorted = published.clone();
    sorted.sort();
    let tags_hash: String =
        Sha256::digest(sorted.iter().map(|t| format!("{t}\n")).collect::<String>())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
    assert_eq!(
        draw["tagsSha256"].as_str(),
        Some(tags_hash.as_str()),
        "{draw}"
    );
    let url = app.url("/api/v1/rooms/main/draw");
    let (code, out) = verify_draw(&[&url]);
    assert_eq!(code, 0, "the real draw verifies: {out}");

    // The order the attacker's seed alone gives (HMAC-SHA256(seed, tag) ascending, ties by tag)
    // is not the queue's.
    let seed: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&chosen[i * 2..i * 2 + 2], 16).unwrap())
        .collect();
    let mut raw = published.clone();
    raw.sort_by_cached_key(|tag| {
        let mut mac = <hmac::Hmac<Sha256> as hmac::Mac>::new_from_slice(&seed).unwrap();
        hmac::Mac::update(&mut mac, tag.as_bytes());
        (hmac::Mac::finalize(mac).into_bytes().to_vec(), tag.clone())
    });
    assert_ne!(raw, published, "the attacker's seed did not fix the order");
    // A draw ordered by the attacker's seed is refused: as published (the mix's fields kept),
    // and passed off as a draw made before the mix.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("draw.json");
    let mut forged = draw.clone();
    forged["tags"] = json!(raw);
    std::fs::write(&file, forged.to_string()).unwrap();
    let (code, out) = verify_draw(&[file.to_str().unwrap()]);
    assert_eq!(code, 1, "the raw seed's order is caught: {out}");
    assert!(out.contains("MISMATCH"), "{out}");
    for field in ["tagsSha256", "drawSeed"] {
        forged[field] = Value::Null;
    }
    forged["algorithm"] = json!(vestibule_shared::draw::DRAW_ALGORITHM_UNMIXED);
    std::fs::write(&file, forged.to_string()).unwrap();
    let (code, out) = verify_draw(&[file.to_str().unwrap()]);
    assert_eq!(code, 1, "an unmixed draw is refused: {out}");
    assert!(out.contains("not mixed"), "{out}");
}

/// A keyed retry while the room takes no joins (`room_not_open`) gets the live ticket it has
/// (200, same id), not 409; a new key still gets 409 and nothing is created.
async fn a_keyed_retry_while_the_room_is_not_open_gets_its_ticket(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let (code, first) = app.join("main", Some("kept-key")).await;
    assert_eq!(code, StatusCode::CREATED);
    let (got, body) = patch(&app, json!({"opensAt": in_ms(600_000)})).await;
    assert_eq!(got, StatusCode::OK, "{body}");
    let (code, again) = app.join("main", Some("kept-key")).await;
    assert_eq!(code, StatusCode::OK, "a keyed retry finds its ticket");
    assert_eq!(again.ticket_id, first.ticket_id);
    assert_eq!(again.status, TicketState::Waiting);
    assert_eq!(again.position, Some(1));
    let refused = app
        .client
        .post(app.url("/api/v1/rooms/main/tickets"))
        .header("Idempotency-Key", "new-key")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "room_not_open", "{body}");
}
