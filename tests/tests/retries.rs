//! Every write can be retried: a store stall between sending a change and its answer never leaves a
//! client unable to learn what happened (docs/api.md, "Retries"): an order whose answer is lost,
//! admin changes that answer 503 and then take effect, a join limit that must not lock a known
//! shopper out of their own ticket, and faults reported against other products (each names its
//! report): copies of one keyed order racing each other, and a failure that a standard retrying
//! client must recover from.

use std::process::Stdio;
use std::time::Duration;

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::{json, Value};
use vestibule_shared::{paths, TicketState};
use vestibule_tests::{both_stores, python_tool, Backend, RedisServer, TestApp, ADMIN_TOKEN};

/// Sends `request` while Redis is frozen (SIGSTOP), wakes Redis after the answer, and returns
/// the answer's status, `Retry-After` and JSON body.
async fn sent_during_a_stall(
    redis: &RedisServer,
    request: reqwest::RequestBuilder,
) -> (StatusCode, Option<reqwest::header::HeaderValue>, Value) {
    redis.pause();
    let answer = request.send().await;
    redis.resume();
    let answer = answer.expect("an answer during the stall");
    let status = answer.status();
    let retry_after = answer.headers().get("retry-after").cloned();
    (
        status,
        retry_after,
        answer.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_whose_answer_is_lost_in_a_store_stall_is_retried_to_one_receipt() {
    let app = TestApp::spawn(Backend::Redis, &["--store-timeout-ms", "300"]).await;
    let redis = app.redis.as_ref().unwrap();
    let (ticket, token) = app.admitted("main").await;
    // Any use of a token loads the token script, so Redis can run the stalled consume on waking
    // (a made-up token never reaches the store: it is refused offline).
    let (_, spare) = app.admitted("main").await;
    assert_eq!(app.order("main", Some(&spare)).await.0, StatusCode::CREATED);

    // Redis freezes with the order's consume sent: the server cannot know whether it happened.
    let order = app
        .client
        .post(app.url(&paths::orders("main")))
        .header("X-Entry-Token", &token)
        .header("Idempotency-Key", "order-1")
        .json(&json!({"sku": "sneaker-42", "quantity": 1}));
    let (status, retry_after, body) = sent_during_a_stall(redis, order).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    assert_eq!(body["error"], "store_timeout");
    assert!(retry_after.is_some(), "504 without Retry-After");

    // Redis ran the consume when it woke. The retry with the same key gets its receipt.
    let retried = app.order_with_key("main", &token, Some("order-1"), 1).await;
    assert_eq!(retried.status(), StatusCode::CREATED);
    assert_eq!(retried.headers()["idempotent-replayed"], "true");
    let receipt: Value = retried.json().await.unwrap();
    let again = app.order_with_key("main", &token, Some("order-1"), 1).await;
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.json::<Value>().await.unwrap(), receipt);

    // Any other use of the token is still refused: a token buys one order.
    let other = app.order_with_key("main", &token, Some("order-2"), 1).await;
    assert_eq!(other.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        other.json::<Value>().await.unwrap()["error"],
        "entry_token_used"
    );
    let (status, body) = app.order("main", Some(&token)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    // The same key for a different order is a client bug, said so.
    let changed = app.order_with_key("main", &token, Some("order-1"), 2).await;
    assert_eq!(changed.status(), StatusCode::CONFLICT);
    assert_eq!(
        changed.json::<Value>().await.unwrap()["error"],
        "idempotency_key_reused"
    );
    let done = app.poll("main", &ticket.ticket_id).await;
    assert_eq!(done.status, TicketState::Completed);
}

async fn a_retried_order_returns_the_first_receipt(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    let (_, token) = app.admitted("main").await;
    let first = app.order_with_key("main", &token, Some("k-1"), 1).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: Value = first.json().await.unwrap();
    let retry = app.order_with_key("main", &token, Some("k-1"), 1).await;
    assert_eq!(retry.status(), StatusCode::CREATED);
    assert_eq!(
        retry.json::<Value>().await.unwrap()["orderId"],
        first["orderId"]
    );
    let (status, _) = app.order("main", Some(&token)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A malformed key is refused before the token is touched.
    let bad = app
        .order_with_key("main", &token, Some("has space"), 1)
        .await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
}

/// A double-clicked "buy" (8 copies of one keyed order at once) makes exactly one order: one
/// original receipt, every other answer that receipt replayed, never 403 `entry_token_used` for
/// the shopper's own order.
// Report: jcagarcia/grape-idempotency#10 (a retry racing its first try ran the operation twice).
async fn concurrent_copies_of_one_keyed_order_make_one_order_and_all_get_its_receipt(
    backend: Backend,
) {
    let app = TestApp::spawn(backend, &[]).await;
    let (ticket, token) = app.admitted("main").await;
    let answers =
        join_all((0..8).map(|_| app.order_with_key("main", &token, Some("double-click-1"), 1)))
            .await;
    let mut seen = Vec::new();
    for answer in answers {
        let status = answer.status().as_u16();
        let replayed = answer.headers().contains_key("idempotent-replayed");
        let body: Value = answer.json().await.unwrap_or(Value::Null);
        seen.push((status, replayed, body));
    }
    println!("{seen:#?}");
    assert!(
        seen.iter().all(|(status, _, _)| *status == 201),
        "a copy of the shopper's own order was refused: {seen:?}"
    );
    let order_ids: std::collections::BTreeSet<String> = seen
        .iter()
        .map(|(_, _, body)| body["orderId"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(order_ids.len(), 1, "more than one order: {order_ids:?}");
    assert_eq!(
        seen.iter().filter(|(_, replayed, _)| !replayed).count(),
        1,
        "exactly one answer is the original"
    );
    let done = app.poll("main", &ticket.ticket_id).await;
    assert_eq!(done.status, TicketState::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_changes_in_a_stall_answer_504_and_if_match_makes_retries_safe() {
    let app = TestApp::spawn(Backend::Redis, &["--store-timeout-ms", "300"]).await;
    let redis = app.redis.as_ref().unwrap();
    let admin = |method: reqwest::Method| {
        app.client
            .request(method, app.url(&paths::admin_room("main")))
            .bearer_auth(ADMIN_TOKEN)
    };
    // A first change loads the settings script, so Redis can run the stalled one on waking.
    app.patch_room("main", json!({"paused": false})).await;
    let read = admin(reqwest::Method::GET).send().await.unwrap();
    assert_eq!(read.status(), StatusCode::OK);
    let etag = read.headers()["etag"].to_str().unwrap().to_owned();

    let change = admin(reqwest::Method::PATCH)
        .header("If-Match", &etag)
        .json(&json!({"admissionRatePerSec": 7}));
    let (status, retry_after, body) = sent_during_a_stall(redis, change).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    assert!(retry_after.is_some());
    assert_eq!(body["error"], "store_timeout");

    // The change happened when Redis woke; a blind retry of the conditional change is refused
    // (nothing applied twice), and a read shows the truth.
    let retry = admin(reqwest::Method::PATCH)
        .header("If-Match", &etag)
        .json(&json!({"admissionRatePerSec": 7}))
        .send()
        .await
        .unwrap();
    assert_eq!(retry.status(), StatusCode::PRECONDITION_FAILED);
    assert_eq!(
        retry.json::<Value>().await.unwrap()["error"],
        "precondition_failed"
    );
    let now = admin(reqwest::Method::GET).send().await.unwrap();
    assert_ne!(now.headers()["etag"].to_str().unwrap(), etag);
    assert_eq!(
        now.json::<Value>().await.unwrap()["admissionRatePerSec"],
        7.0
    );
    // A malformed If-Match is a 400, not a silent unconditional change.
    let bad = admin(reqwest::Method::PATCH)
        .header("If-Match", "seven")
        .json(&json!({"paused": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_change_through_one_replica_is_read_at_once_through_another() {
    let redis = RedisServer::start();
    let a = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    a.patch_room("main", json!({"admissionRatePerSec": 33}))
        .await;
    let (status, read) = b.get_json(&paths::admin_room("main")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "needs the bearer: {read}");
    let read: Value = b
        .client
        .get(b.url(&paths::admin_room("main")))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(read["admissionRatePerSec"], 33.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_join_in_a_stall_answers_504_and_its_retry_finds_one_place() {
    let app = TestApp::spawn(Backend::Redis, &["--store-timeout-ms", "300"]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let redis = app.redis.as_ref().unwrap();
    let join = app
        .client
        .post(app.url(&paths::tickets("main")))
        .header("Idempotency-Key", "page-key-1");
    let (status, _, body) = sent_during_a_stall(redis, join).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("Idempotency-Key"),
        "{body}"
    );
    let (status, ticket) = app.join("main", Some("page-key-1")).await;
    assert!(
        status == StatusCode::OK || status == StatusCode::CREATED,
        "{status}"
    );
    assert_eq!(ticket.position, Some(1));
    let (_, again) = app.join("main", Some("page-key-1")).await;
    assert_eq!(again.ticket_id, ticket.ticket_id);
    assert_eq!(app.get_json(&paths::room("main")).await.1["waiting"], 1);
}

async fn a_retried_join_is_never_refused_by_the_join_limit(backend: Backend) {
    let app = TestApp::spawn(backend, &["--joins-per-ip-per-minute", "2"]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let (_, first) = app.join("main", Some("app-install-1")).await;
    app.join("main", Some("app-install-2")).await;
    let refused = app
        .client
        .post(app.url(&paths::tickets("main")))
        .header("Idempotency-Key", "app-install-3")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"));
    // Over the limit, the app still gets its own ticket back, as often as it asks.
    for _ in 0..5 {
        let (status, again) = app.join("main", Some("app-install-1")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(again.ticket_id, first.ticket_id);
        assert_eq!(again.position, Some(1));
    }
    assert_eq!(app.get_json(&paths::room("main")).await.1["waiting"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_join_limit_is_shared_by_every_replica_on_one_redis() {
    let redis = RedisServer::start();
    let args = ["--joins-per-ip-per-minute", "2"];
    let a = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
    a.patch_room("main", json!({"paused": true})).await;
    let mut statuses = Vec::new();
    for app in [&a, &b, &a, &b] {
        let response = app
            .client
            .post(app.url(&paths::tickets("main")))
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [201, 201, 429, 429]);
}

both_stores!(
    a_retried_order_returns_the_first_receipt,
    concurrent_copies_of_one_keyed_order_make_one_order_and_all_get_its_receipt,
    a_retried_join_is_never_refused_by_the_join_limit,
);

/// Joins sent to Redis together (docs/DESIGN.md "Joins sent together") wait their turn in a
/// lane while a call is out; in a stall each call takes the whole store timeout, so a join behind
/// several calls would wait several timeouts. Each waits at most one: 500 joins at once on one
/// serving thread while Redis is frozen all answer within the timeout and a margin (8 calls of
/// 64 would take 8 × 300 ms). Those never sent answer 503 and changed nothing: their keys make
/// new tickets afterwards. Every key holds one ticket in the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_waiting_behind_a_stalled_call_answer_within_the_store_timeout() {
    let app = TestApp::spawn(
        Backend::Redis,
        &["--store-timeout-ms", "300", "--serving-threads", "1"],
    )
    .await;
    let redis = app.redis.as_ref().unwrap();
    app.patch_room("main", json!({"paused": true})).await;
    // The join script is loaded, the room's secret cached.
    assert_eq!(app.join("main", Some("warm")).await.0, StatusCode::CREATED);

    redis.pause();
    let joins = (0..500).map(|i| {
        let request = app
            .join_request("main")
            .header("Idempotency-Key", format!("stall-{i}"));
        async move {
            let sent = std::time::Instant::now();
            let answer = request.send().await.expect("an answer during the stall");
            let waited = sent.elapsed();
            let status = answer.status();
            let retry_after = answer.headers().contains_key("retry-after");
            let body: Value = answer.json().await.unwrap_or(Value::Null);
            (status, retry_after, body, waited)
        }
    });
    let answers = futures_util::future::join_all(joins).await;
    redis.resume();

    let longest = answers.iter().map(|a| a.3).max().unwrap();
    assert!(
        longest < std::time::Duration::from_millis(1_500),
        "a join waited {longest:?} with a store timeout of 300 ms"
    );
    let mut unsent = Vec::new();
    for (i, (status, retry_after, body, _)) in answers.iter().enumerate() {
        match (status.as_u16(), body["error"].as_str()) {
            (503, Some("store_unavailable")) => unsent.push(i),
            (504, Some("store_timeout")) => {}
            other => panic!("join {i} answered {other:?}: {body}"),
        }
        assert!(
            retry_after,
            "join {i} answered {status} without Retry-After"
        );
    }
    assert!(
        !unsent.is_empty(),
        "every join was sent: none waited in the lane"
    );
    // Redis ran the calls that were out when it woke; the joins never sent changed nothing.
    for i in &unsent {
        let (status, _) = app.join("main", Some(&format!("stall-{i}"))).await;
        assert_eq!(
            status,
            StatusCode::CREATED,
            "join {i} answered 503 but had been made"
        );
    }
    let mut ids = std::collections::HashSet::new();
    for i in 0..500 {
        let (status, ticket) = app.join("main", Some(&format!("stall-{i}"))).await;
        assert!(status.is_success(), "join {i} after the stall: {status}");
        assert!(ids.insert(ticket.ticket_id), "two keys share a ticket");
    }
    let info = app.get_json(&paths::room("main")).await.1;
    assert_eq!(
        info["waiting"], 501,
        "one ticket per key (and the warm-up's)"
    );
}

/// A small Python program using `requests` with urllib3's standard `Retry` (503/504 retried,
/// `Retry-After` respected, POST allowed): one keyed order; prints status, body and how many
/// answers came before the last.
const PYTHON_RETRYING_ORDER: &str = r#"
import json, sys, requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry
url, token, key = sys.argv[1:4]
retry = Retry(total=12, backoff_factor=0.2, status_forcelist=[503, 504], allowed_methods=None,
              respect_retry_after_header=True, raise_on_status=False)
session = requests.Session()
session.mount("http://", HTTPAdapter(max_retries=retry))
response = session.post(url, json={"sku": "sneaker-42", "quantity": 1}, timeout=10,
                        headers={"X-Entry-Token": token, "Idempotency-Key": key})
history = response.raw.retries.history if response.raw.retries else ()
print(json.dumps({"status": response.status_code, "body": response.json(),
                  "earlier": [h.status for h in history]}))
"#;

/// An order refused because Redis is full (503: nothing happened) is not stored against its key:
/// a standard retrying client (Python requests with urllib3's `Retry`, honouring `Retry-After`)
/// keeps the key while room is made, and its retry places the order; the token then buys nothing
/// else.
// Reports: KeeperHub/keeperhub#1840, ikyriak/IdempotentAPI#37 (a failed try replayed to retries).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standard_retrying_client_recovers_an_order_first_refused_by_a_full_redis() {
    let redis = RedisServer::with_8mb_limit("noeviction", &[]);
    let app = TestApp::spawn_with_url(Some(&redis.url()), &["--retry-after-secs", "1"]).await;
    let (ticket, token) = app.admitted("main").await;
    let filled = redis.fill_to_limit();
    let python = tokio::process::Command::new(python_tool("python"))
        .arg("-c")
        .arg(PYTHON_RETRYING_ORDER)
        .arg(app.url(&paths::orders("main")))
        .arg(&token)
        .arg("retry-me-1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    // Redis stays full long enough for the first tries to be refused.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    redis.unfill(filled);
    let output = tokio::time::timeout(Duration::from_secs(30), python.wait_with_output())
        .await
        .expect("the Python client finished")
        .expect("python output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!(
        "python: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_str(stdout.trim()).expect("the client printed JSON");
    let earlier = result["earlier"].as_array().expect("history");
    assert!(
        !earlier.is_empty() && earlier.iter().all(|s| s == 503),
        "the first tries were not refused with 503: {result}"
    );
    assert_eq!(result["status"], 201, "the retry never recovered: {result}");
    let order_id = result["body"]["orderId"].clone();
    assert!(order_id.is_string(), "{result}");
    // The key now holds that receipt; the token buys no other order.
    let again = app
        .order_with_key("main", &token, Some("retry-me-1"), 1)
        .await;
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(again.json::<Value>().await.unwrap()["orderId"], order_id);
    let other = app
        .order_with_key("main", &token, Some("retry-me-2"), 1)
        .await;
    assert_eq!(other.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        app.poll("main", &ticket.ticket_id).await.status,
        TicketState::Completed
    );
}

/// Joins answered 504 in a store stall made tickets whose ids nobody learned (docs/DESIGN.md
/// "Joins nobody heard the answer of"): three keyless joins while Redis is frozen for 3 s never
/// get a token and count in nobody's position, while the shoppers joined before and after are
/// admitted normally; a keyed join answered 504 and retried after the stall gets its ticket
/// back at its own place, between them, and is admitted. (Joins that wait behind the frozen
/// call are never sent: how many of the keyless ones ran depends on the batching.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_answered_504_in_a_stall_take_no_slot_and_no_place_until_heard_from() {
    let app = TestApp::spawn(Backend::Redis, &["--store-timeout-ms", "300"]).await;
    let redis = app.redis.as_ref().unwrap();
    app.patch_room("main", json!({"paused": true})).await;
    // Two shoppers before the stall (the join script is loaded, the room's secret cached).
    let (_, first) = app.join("main", None).await;
    let (_, second) = app.join("main", Some("before-key")).await;
    assert_eq!(second.position, Some(2));

    redis.pause();
    let frozen = std::time::Instant::now();
    // The keyed join first, so that its call is the one sent into the frozen Redis; the keyless
    // ones may be sent with it or wait behind it and never be sent (both are answered 504).
    let keyed = app
        .join_request("main")
        .header("Idempotency-Key", "stalled-key")
        .send();
    let keyless = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        join_all((0..3).map(|_| app.join_request("main").send())).await
    };
    let (keyless, keyed) = tokio::join!(keyless, keyed);
    tokio::time::sleep(Duration::from_secs(3).saturating_sub(frozen.elapsed())).await;
    redis.resume();
    for answer in keyless.into_iter().chain([keyed]) {
        let answer = answer.expect("an answer during the stall");
        assert_eq!(answer.status(), StatusCode::GATEWAY_TIMEOUT);
        let body: Value = answer.json().await.unwrap();
        assert_eq!(body["error"], "store_timeout", "{body}");
    }
    // Redis ran the four joins on waking; the server parks what it made right behind them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, after) = app.join("main", None).await;
    assert_eq!(after.position, Some(3), "the stalled joins take no place");
    assert_eq!(app.poll("main", &first.ticket_id).await.position, Some(1));
    assert_eq!(app.poll("main", &second.ticket_id).await.position, Some(2));
    assert_eq!(app.get_json(&paths::room("main")).await.1["waiting"], 3);
    let held = || {
        redis
            .cli(&["--scan", "--pattern", "vestibule:*ticket:*"])
            .lines()
            .filter(|key| redis.cli(&["HGET", key, "state"]) == "HELD")
            .count()
    };
    // Every stalled join that ran is parked (none is in the line: `waiting` is 3): the keyed
    // one, and the keyless ones sent with it.
    let parked = held();
    assert!(
        (1..=4).contains(&parked),
        "{parked} tickets held after the stall"
    );

    // The keyed join retried: its ticket, at its own place (after the two before, ahead of the
    // one after).
    let (status, retried) = app.join("main", Some("stalled-key")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(retried.position, Some(3));
    assert!(retried.place_kept);
    assert_eq!(app.poll("main", &after.ticket_id).await.position, Some(4));

    // Admission: the four shoppers really there, in order, and nobody else.
    app.patch_room(
        "main",
        json!({"paused": false, "admissionRatePerSec": 50.0}),
    )
    .await;
    for ticket in [&first, &second, &retried, &after] {
        let admitted = app
            .poll_until("main", &ticket.ticket_id, Duration::from_secs(10), |t| {
                t.status == TicketState::TokenIssued
            })
            .await;
        assert_eq!(admitted.status, TicketState::TokenIssued);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let room = app.get_json(&paths::room("main")).await.1;
    assert_eq!(room["waiting"], 0, "{room}");
    assert_eq!(room["activeUsers"], 4, "{room}");
    let tokens = redis.cli(&["--scan", "--pattern", "vestibule:*token:*"]);
    assert_eq!(
        tokens.lines().count(),
        4,
        "no token for the absent: {tokens}"
    );
    assert_eq!(
        held(),
        parked - 1,
        "the keyless tickets that ran still hold nothing"
    );
}
