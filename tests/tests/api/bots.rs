//! Bots at the door: proof of work on joins, one place per person, what operators
//! see. On both stores; the cross-replica promises on two replicas sharing one Redis.

use std::time::Duration;

use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{json, Value};
use sha2::Sha256;
use vestibule_shared::bots::{solution_bits, solve, Challenge, PROOF_OF_WORK_HEADER};
use vestibule_shared::{paths, TicketStatus, USER_ASSERTION_HEADER};
use vestibule_tests::{
    both_stores, on_redis_cluster_too, Backend, RedisServer, TestApp, ADMIN_TOKEN,
};

both_stores!(
    a_protected_room_takes_exactly_one_join_per_solved_challenge,
    wrong_expired_and_other_room_solutions_are_refused_with_their_own_codes,
    a_room_that_requires_assertions_holds_one_live_ticket_per_user,
    operators_see_refusals_and_the_clients_that_join_most,
    the_difficulty_rises_with_the_join_rate_when_asked,
    a_request_loop_without_work_gets_no_places,
    after_a_users_token_expires_the_user_may_queue_again,
    challenges_fetched_before_a_burst_do_not_escape_the_rise,
    refused_joins_neither_raise_the_difficulty_nor_count_as_forged_assertions,
);

// The same flows on a Redis Cluster (tests/tests/cluster.rs: the cluster's own tests).
on_redis_cluster_too!(a_protected_room_takes_exactly_one_join_per_solved_challenge,);

const SECRET: &str = "storefront-secret-0123456789";

async fn challenge(app: &TestApp, room: &str) -> Challenge {
    let (status, body) = app
        .get_json(&format!("/api/v1/rooms/{room}/challenge"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    serde_json::from_value(body).expect("a challenge")
}

/// A solved challenge of `app`'s `room`, as the join header.
async fn solved(app: &TestApp, room: &str) -> String {
    let challenge = challenge(app, room).await;
    let nonce = solve(&challenge.challenge, challenge.difficulty);
    format!("{}:{nonce}", challenge.challenge)
}

/// Joins `room` with optional proof and assertion; status and JSON body.
async fn join(
    app: &TestApp,
    room: &str,
    proof: Option<&str>,
    assertion: Option<&str>,
) -> (StatusCode, Value) {
    let mut request = app.join_request(room);
    if let Some(proof) = proof {
        request = request.header(PROOF_OF_WORK_HEADER, proof);
    }
    if let Some(assertion) = assertion {
        request = request.header(USER_ASSERTION_HEADER, assertion);
    }
    let response = request.send().await.expect("join");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `userId.expiry.hexHmac` as a storefront signs it (docs/bots.md, "One place per person").
fn assertion(room: &str, user: &str) -> String {
    let expiry = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{room}\n{user}\n{expiry}").as_bytes());
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{user}.{expiry}.{hex}")
}

async fn waiting(app: &TestApp, room: &str) -> u64 {
    app.get_json(&paths::room(room)).await.1["waiting"]
        .as_u64()
        .unwrap()
}

async fn a_protected_room_takes_exactly_one_join_per_solved_challenge(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    app.patch_room("main", json!({"paused": true, "proofOfWorkDifficulty": 10}))
        .await;
    // A scripted client that does no work cannot join.
    let (status, body) = join(&app, "main", None, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"], "proof_of_work_required");
    assert_eq!(waiting(&app, "main").await, 0);
    // Each solved challenge is one ticket; the same solution again is refused.
    let mut proofs = Vec::new();
    for i in 0..5 {
        let proof = solved(&app, "main").await;
        let (status, body) = join(&app, "main", Some(&proof), None).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(body["position"], i + 1);
        proofs.push(proof);
    }
    for proof in &proofs {
        let (status, body) = join(&app, "main", Some(proof), None).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(body["error"], "proof_of_work_reused");
    }
    assert_eq!(waiting(&app, "main").await, 5);
    // Proof of work off again: plain joins work.
    app.patch_room("main", json!({"proofOfWorkDifficulty": 0}))
        .await;
    let (status, _) = join(&app, "main", None, None).await;
    assert_eq!(status, StatusCode::CREATED);
}

async fn wrong_expired_and_other_room_solutions_are_refused_with_their_own_codes(backend: Backend) {
    let app = TestApp::spawn(
        backend,
        &["--rooms", "main,other", "--challenge-ttl-secs", "1"],
    )
    .await;
    for room in ["main", "other"] {
        app.patch_room(room, json!({"paused": true, "proofOfWorkDifficulty": 8}))
            .await;
    }
    let refused = |expected: (StatusCode, &'static str)| {
        move |(status, body): (StatusCode, Value)| {
            assert_eq!(
                (status, body["error"].as_str().unwrap_or("")),
                expected,
                "{body}"
            );
        }
    };
    let fresh = challenge(&app, "main").await;
    assert_eq!(fresh.difficulty, 8);
    let wrong = (0..)
        .find(|n| solution_bits(&fresh.challenge, *n) < 8)
        .unwrap();
    refused((StatusCode::FORBIDDEN, "proof_of_work_wrong"))(
        join(
            &app,
            "main",
            Some(&format!("{}:{wrong}", fresh.challenge)),
            None,
        )
        .await,
    );
    let for_other = solved(&app, "other").await;
    refused((StatusCode::FORBIDDEN, "proof_of_work_wrong_room"))(
        join(&app, "main", Some(&for_other), None).await,
    );
    refused((StatusCode::FORBIDDEN, "proof_of_work_malformed"))(
        join(&app, "main", Some("not-a-challenge:12"), None).await,
    );
    let forged = format!("{}x:1", fresh.challenge);
    refused((StatusCode::FORBIDDEN, "proof_of_work_malformed"))(
        join(&app, "main", Some(&forged), None).await,
    );
    let soon_expired = solved(&app, "main").await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    refused((StatusCode::FORBIDDEN, "proof_of_work_expired"))(
        join(&app, "main", Some(&soon_expired), None).await,
    );
    // A challenge issued before the room's difficulty rose no longer passes either.
    app.patch_room("main", json!({"proofOfWorkDifficulty": 9}))
        .await;
    let cheap = format!("{}:{}", fresh.challenge, solve(&fresh.challenge, 8));
    refused((StatusCode::FORBIDDEN, "proof_of_work_expired"))(
        join(&app, "main", Some(&cheap), None).await,
    );
    assert_eq!(
        waiting(&app, "main").await,
        0,
        "no refused join took a place"
    );
    let proof = solved(&app, "other").await;
    assert_eq!(
        join(&app, "other", Some(&proof), None).await.0,
        StatusCode::CREATED
    );
}

/// Against SimplQ/simplQ-backend#47 ("the same person can't join the queue twice; he can
/// join again once he left") and tl-its-umich-edu/remote-office-hours-queue#397 (one click sent
/// two join requests; the second failed with "already in a meeting"): here concurrent joins of
/// one user all get the same ticket, and after leaving the user joins again.
async fn a_room_that_requires_assertions_holds_one_live_ticket_per_user(backend: Backend) {
    let app = TestApp::spawn(backend, &["--user-assertion-secret", SECRET]).await;
    app.patch_room(
        "main",
        json!({"paused": true, "requireUserAssertion": true}),
    )
    .await;
    let (status, body) = join(&app, "main", None, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"], "user_assertion_required");
    assert_eq!(
        app.metric(
            "vestibule_joins_refused_total{room=\"main\",reason=\"user_assertion\",kind=\"missing\"}"
        )
        .await,
        1.0
    );
    let ada = assertion("main", "ada");
    let (status, first) = join(&app, "main", None, Some(&ada)).await;
    assert_eq!(status, StatusCode::CREATED);
    // Again (another tab, another device, a script): the same ticket, never a second place.
    for _ in 0..3 {
        let (status, again) = join(&app, "main", None, Some(&assertion("main", "ada"))).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(again["ticketId"], first["ticketId"]);
    }
    let grace = assertion("main", "grace");
    let racing =
        futures_util::future::join_all((0..10).map(|_| join(&app, "main", None, Some(&grace))))
            .await;
    let created = racing
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    assert_eq!(created, 1, "{racing:?}");
    assert!(racing
        .iter()
        .all(|(s, b)| s.is_success() && b["ticketId"] == racing[0].1["ticketId"]));
    assert_eq!(waiting(&app, "main").await, 2);
    // After leaving, the user may queue again (one *live* ticket).
    let first: TicketStatus = serde_json::from_value(first).unwrap();
    app.leave("main", &first.ticket_id).await;
    let (status, again) = join(&app, "main", None, Some(&ada)).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_ne!(again["ticketId"], first.ticket_id.as_str());
}

async fn operators_see_refusals_and_the_clients_that_join_most(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    app.patch_room("main", json!({"paused": true, "proofOfWorkDifficulty": 6}))
        .await;
    for _ in 0..4 {
        join(&app, "main", None, None).await;
    }
    let proof = solved(&app, "main").await;
    join(&app, "main", Some(&proof), None).await;
    join(&app, "main", Some(&proof), None).await;
    let metrics = app.metrics().await;
    let refused = |kind: &str| {
        vestibule_tests::metric_value(
            &metrics,
            &format!(
                "vestibule_joins_refused_total{{room=\"main\",reason=\"proof_of_work\",kind=\"{kind}\"}}"
            ),
        )
    };
    assert_eq!(refused("missing"), 4.0, "{metrics}");
    assert_eq!(refused("reused"), 1.0, "{metrics}");
    let top = app
        .client
        .get(app.url("/api/v1/admin/rooms/main/top-clients?limit=5"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(top.status(), StatusCode::OK);
    let top: Value = top.json().await.unwrap();
    assert_eq!(
        top["clients"][0],
        json!({"client": "127.0.0.1", "joins": 6}),
        "{top}"
    );
    assert_eq!(top["scope"], "replica");
    let anonymous = app
        .client
        .get(app.url("/api/v1/admin/rooms/main/top-clients"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
}

async fn the_difficulty_rises_with_the_join_rate_when_asked(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    let body = app
        .patch_room(
            "main",
            json!({"paused": true, "proofOfWorkDifficulty": 4, "proofOfWorkAutoJoinsPerSec": 1}),
        )
        .await;
    assert_eq!(body["proofOfWorkAutoJoinsPerSec"], 1);
    assert_eq!(challenge(&app, "main").await.difficulty, 4);
    // 40 joins within a few seconds: ≥ 2 joins/s on the 10 s meter, so at least +2 bits.
    for _ in 0..40 {
        let proof = solved(&app, "main").await;
        assert_eq!(
            join(&app, "main", Some(&proof), None).await.0,
            StatusCode::CREATED
        );
    }
    let risen = challenge(&app, "main").await.difficulty;
    assert!((6..=12).contains(&risen), "difficulty {risen}");
}

/// Two replicas on one Redis: a solution works once on either, and a user holds one ticket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn across_replicas_a_solution_works_once_and_a_user_holds_one_ticket() {
    let redis = RedisServer::start();
    let flags = ["--user-assertion-secret", SECRET];
    let a = TestApp::spawn_with_url(Some(&redis.url()), &flags).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &flags).await;
    a.patch_room(
        "main",
        json!({"paused": true, "proofOfWorkDifficulty": 8, "requireUserAssertion": true}),
    )
    .await;
    // b learns the settings at its next tick.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ada = assertion("main", "ada");
    // A challenge from one replica verifies on the other (one shared key) …
    let proof = solved(&a, "main").await;
    let (status, first) = join(&b, "main", Some(&proof), Some(&ada)).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    // … once: replayed on either replica it is refused.
    for replica in [&a, &b] {
        let (status, body) = join(
            replica,
            "main",
            Some(&proof),
            Some(&assertion("main", "bob")),
        )
        .await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(body["error"], "proof_of_work_reused");
    }
    // The same user through the other replica, with fresh work: the same ticket.
    let (status, again) = join(&a, "main", Some(&solved(&a, "main").await), Some(&ada)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again["ticketId"], first["ticketId"]);
    let (status, body) = join(&a, "main", Some(&solved(&b, "main").await), None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("user_assertion_required"))
    );
    assert_eq!(waiting(&a, "main").await, 1);
}

/// Against aws-solutions/virtual-waiting-room-on-aws#209: "it is so easy to create a robot
/// to call [the join] api in large amounts (like postman)… generating junk request ids". In a
/// room with proof of work, 300 joins without work and 300 replays of one solution leave exactly
/// the one place that was paid for.
async fn a_request_loop_without_work_gets_no_places(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    app.patch_room("main", json!({"paused": true, "proofOfWorkDifficulty": 12}))
        .await;
    let proof = solved(&app, "main").await;
    let answers = futures_util::future::join_all((0..600).map(|i| {
        let proof = (i % 2 == 0).then_some(proof.as_str());
        join(&app, "main", proof, None)
    }))
    .await;
    let created = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    assert_eq!(created, 1);
    assert!(answers
        .iter()
        .all(|(s, _)| s.is_client_error() || *s == StatusCode::CREATED));
    assert_eq!(waiting(&app, "main").await, 1);
}

/// One live ticket per user holds while the user is admitted; once the entry token expired
/// unused, the user gets a new place.
async fn after_a_users_token_expires_the_user_may_queue_again(backend: Backend) {
    let app = TestApp::spawn(
        backend,
        &["--user-assertion-secret", SECRET, "--token-ttl-secs", "1"],
    )
    .await;
    app.patch_room("main", json!({"requireUserAssertion": true}))
        .await;
    let ada = assertion("main", "ada");
    let (_, first) = join(&app, "main", None, Some(&ada)).await;
    let first: TicketStatus = serde_json::from_value(first).unwrap();
    let admitted = app
        .poll_until("main", &first.ticket_id, Duration::from_secs(5), |t| {
            t.status == vestibule_shared::TicketState::TokenIssued
        })
        .await;
    assert_eq!(admitted.status, vestibule_shared::TicketState::TokenIssued);
    let (status, again) = join(&app, "main", None, Some(&ada)).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "admitted: still the one live ticket"
    );
    assert_eq!(again["ticketId"], first.ticket_id.as_str());
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let (status, after) = join(&app, "main", None, Some(&ada)).await;
    assert_eq!(status, StatusCode::CREATED, "{after}");
    assert_ne!(after["ticketId"], first.ticket_id.as_str());
}

/// Replica B may decide joins on its copy of the settings for up to a tick after an admin change
/// through replica A; a join sent at once through B still meets a proof of work, a user assertion
/// or the pre-queue just turned on: the store refuses a join decided on an old settings version
/// and B decides it again on the store's settings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_through_another_replica_right_after_a_change_obeys_the_change() {
    let redis = RedisServer::start();
    let flags = ["--user-assertion-secret", SECRET];
    let a = TestApp::spawn_with_url(Some(&redis.url()), &flags).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &flags).await;
    a.patch_room("main", json!({"paused": true})).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, body) = join(&b, "main", None, None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // Proof of work turned on through A: B asks for it at once.
    a.patch_room("main", json!({"proofOfWorkDifficulty": 8}))
        .await;
    let (status, body) = join(&b, "main", None, None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("proof_of_work_required")),
        "{body}"
    );
    // A join B decides twice (its copy, then the store's settings) uses its solution once: the
    // refusal spends it, like any refused join that carried one.
    let proof = solved(&a, "main").await;
    a.patch_room("main", json!({"requireUserAssertion": true}))
        .await;
    let (status, body) = join(&b, "main", Some(&proof), None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("user_assertion_required")),
        "{body}"
    );
    let ada = assertion("main", "ada");
    let (status, body) = join(&b, "main", Some(&proof), Some(&ada)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("proof_of_work_reused")),
        "{body}"
    );
    let fresh = solved(&b, "main").await;
    let (status, body) = join(&b, "main", Some(&fresh), Some(&ada)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = join(&a, "main", Some(&fresh), Some(&assertion("main", "bob"))).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("proof_of_work_reused")),
        "{body}"
    );

    // A pre-queue opened through A: B's next join waits for the draw instead of queueing FIFO.
    a.patch_room(
        "main",
        json!({"proofOfWorkDifficulty": 0, "requireUserAssertion": false}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let opens_at = crate::opening::in_ms(3_600_000);
    let prequeue_opens_at = crate::opening::in_ms(-60_000);
    a.patch_room(
        "main",
        json!({"opensAt": opens_at, "prequeueOpensAt": prequeue_opens_at}),
    )
    .await;
    let (status, body) = join(&b, "main", None, None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["status"], "PRE_QUEUE", "{body}");
    // The first join, ada's and the pre-queue ticket: no refused join left a place.
    assert_eq!(waiting(&a, "main").await, 3);
}

/// A farm that fetches 60 challenges while nobody joins (difficulty 4), then joins with all of
/// them, does not escape the rise of the difficulty: a solution must have the difficulty in force
/// at the join, less one bit.
async fn challenges_fetched_before_a_burst_do_not_escape_the_rise(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    app.patch_room(
        "main",
        json!({"paused": true, "proofOfWorkDifficulty": 4, "proofOfWorkAutoJoinsPerSec": 1}),
    )
    .await;
    let mut stock = Vec::new();
    for _ in 0..50 {
        stock.push(solved(&app, "main").await);
    }
    let (mut created, mut expired) = (0, 0);
    for proof in &stock {
        let (status, body) = join(&app, "main", Some(proof), None).await;
        match (status, body["error"].as_str()) {
            (StatusCode::CREATED, _) => created += 1,
            (StatusCode::FORBIDDEN, Some("proof_of_work_expired")) => expired += 1,
            other => panic!("unexpected answer {other:?}: {body}"),
        }
    }
    // 1 join/s on the 10 s meter is +1 bit (still passes with the bit of grace); from about
    // 20 joins on, +2 bits refuse the stockpiled 4-bit solutions.
    assert!(
        (10..=30).contains(&created),
        "{created} created, {expired} refused"
    );
    assert_eq!(created + expired, 50);
    // A fresh challenge at the difficulty in force still joins.
    let proof = solved(&app, "main").await;
    assert_eq!(
        join(&app, "main", Some(&proof), None).await.0,
        StatusCode::CREATED
    );
}

/// Joins a closed room refuses do not raise the difficulty (the meter counts only the joins the
/// store accepted), a malformed `Idempotency-Key` is not counted as a forged user assertion, and
/// a nonce of more than 20 digits (leading zeros) is refused.
async fn refused_joins_neither_raise_the_difficulty_nor_count_as_forged_assertions(
    backend: Backend,
) {
    let app = TestApp::spawn(backend, &[]).await;
    app.patch_room(
        "main",
        json!({"closed": true, "proofOfWorkDifficulty": 2, "proofOfWorkAutoJoinsPerSec": 1}),
    )
    .await;
    for _ in 0..40 {
        let proof = solved(&app, "main").await;
        let (status, body) = join(&app, "main", Some(&proof), None).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::CONFLICT, Some("room_closed"))
        );
    }
    assert_eq!(challenge(&app, "main").await.difficulty, 2);

    for key in ["a b", &"k".repeat(200)] {
        let (status, body) = crate::sale::try_join(&app, key).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
    let forged = app
        .metric("vestibule_joins_refused_total{room=\"main\",reason=\"user_assertion\",kind=\"invalid\"}")
        .await;
    assert_eq!(forged, 0.0);

    let challenge = challenge(&app, "main").await;
    let nonce = solve(&challenge.challenge, challenge.difficulty);
    let padded = format!("{}:{nonce:0>21}", challenge.challenge);
    let (status, body) = join(&app, "main", Some(&padded), None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("proof_of_work_malformed"))
    );
}
