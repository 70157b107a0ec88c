//! Faults other waiting rooms, SSE servers, Redis clients and reverse proxies were reported for
//! in public, replayed against the real binary (issue 8's kinds: retries whose outcome is
//! unknown, Redis that may lose keys, waits without a bound, client addresses behind proxies,
//! a join limit that refuses or counts the wrong requests). Each test names the report it comes
//! from; none repeats a case of `retries.rs` or `operations.rs`. Where a standard client exists
//! it is used: Python `requests`/`urllib3` for retries, `curl` for raw header shapes and SSE.

use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use vestibule_shared::{paths, TicketState};
use vestibule_tests::{both_stores, python_tool, vestibule_command, Backend, RedisServer, TestApp};

/// An unkeyed join; its status code and `Retry-After` (seconds) when present.
async fn plain_join(app: &TestApp) -> (u16, Option<u64>) {
    let response = app
        .client
        .post(app.url(&paths::tickets("main")))
        .send()
        .await
        .expect("join");
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.trim().parse().ok());
    (response.status().as_u16(), retry_after)
}

// ---------------------------------------------------------------------------------------------
// Retries whose first try is still running, or failed for sure
// ---------------------------------------------------------------------------------------------

// jcagarcia/grape-idempotency#10 "Two requests with idempotency key are performing the code when
// one of the requests didn't finish yet": a retry that arrives while the first try still runs
// executed the operation a second time. Here a double-clicked "buy" (8 copies of one keyed
// order at once) must make exactly one order: one original receipt, every other answer the same
// receipt replayed, never 403 `entry_token_used` for the shopper's own order.
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

// Same report (jcagarcia/grape-idempotency#10), for joins: the page's retry of a join races the
// first try (a mobile app on a flaky network). Sixteen copies of one keyed join at once must
// leave one place in the queue, and every copy must name that one ticket.
async fn concurrent_copies_of_one_keyed_join_leave_one_place(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let answers = join_all((0..16).map(|_| app.join("main", Some("flaky-network-1")))).await;
    let ids: std::collections::BTreeSet<&str> =
        answers.iter().map(|(_, t)| t.ticket_id.as_str()).collect();
    let statuses: Vec<u16> = answers.iter().map(|(s, _)| s.as_u16()).collect();
    println!("statuses {statuses:?}, ticket ids {ids:?}");
    assert_eq!(ids.len(), 1, "one key, several tickets: {ids:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1);
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 15);
    assert_eq!(app.get_json(&paths::room("main")).await.1["waiting"], 1);
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

// KeeperHub/keeperhub#1840 "a reused idempotency_key replays a cached failure, so a retry can
// never recover" (and ikyriak/IdempotentAPI#37, a retry after a failed first try answered 409
// instead of running): a failure that surely applied nothing must not be stored against the key.
// Redis is full (noeviction), so the order is refused (503, nothing happened); a standard
// retrying client (Python requests + urllib3 Retry, honouring Retry-After) keeps the same key,
// room is made meanwhile, and the retry must place the order. The token then buys nothing else.
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

// ---------------------------------------------------------------------------------------------
// A Redis connection after commands that timed out
// ---------------------------------------------------------------------------------------------

// redis/redis-py#2624 "Canceling async Redis command leaves connection open, in unsafe state for
// future commands" (off by one: the next command reads the previous command's reply; it showed
// ChatGPT users each other's data). Vestibule gives up on store calls after --store-timeout-ms
// while Redis still owes their replies. After a stall with many calls abandoned, every shopper's
// poll must describe their own ticket, at their own place, and every keyed join sent into the
// stall must, retried, name its own ticket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_store_stall_every_answer_belongs_to_the_shopper_who_asked() {
    const SHOPPERS: usize = 12;
    let app = TestApp::spawn(Backend::Redis, &["--store-timeout-ms", "300"]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let mut tickets = Vec::new();
    for i in 0..SHOPPERS {
        let (_, ticket) = app.join("main", Some(&format!("shopper-{i}"))).await;
        assert_eq!(ticket.position, Some(i as u64 + 1));
        tickets.push(ticket.ticket_id);
    }
    let poll = |id: &str| app.client.get(app.url(&paths::ticket("main", id))).send();
    let redis = app.redis.as_ref().unwrap();
    redis.pause();
    let stalled_polls = join_all(tickets.iter().map(|id| poll(id))).await;
    let stalled_joins = join_all((0..SHOPPERS).map(|i| {
        app.client
            .post(app.url(&paths::tickets("main")))
            .header("Idempotency-Key", format!("late-{i}"))
            .send()
    }))
    .await;
    redis.resume();
    let stalled: Vec<u16> = stalled_polls
        .iter()
        .chain(stalled_joins.iter())
        .map(|r| r.as_ref().map_or(0, |r| r.status().as_u16()))
        .collect();
    println!("answers during the stall: {stalled:?}");
    assert!(
        stalled.iter().all(|s| *s == 503 || *s == 504),
        "{stalled:?}"
    );
    for round in 0..3 {
        let answers = join_all(tickets.iter().map(|id| poll(id))).await;
        for (i, (id, answer)) in tickets.iter().zip(answers).enumerate() {
            let answer = answer.expect("poll answered");
            assert_eq!(answer.status(), StatusCode::OK, "round {round}");
            let body: Value = answer.json().await.unwrap();
            assert_eq!(body["ticketId"], id.as_str(), "round {round}: {body}");
            assert_eq!(body["position"], i + 1, "round {round}: {body}");
        }
    }
    let late_keys: Vec<String> = (0..SHOPPERS).map(|i| format!("late-{i}")).collect();
    let late = join_all(late_keys.iter().map(|key| app.join("main", Some(key)))).await;
    let late_ids: std::collections::BTreeSet<String> =
        late.iter().map(|(_, t)| t.ticket_id.clone()).collect();
    assert_eq!(late_ids.len(), SHOPPERS, "two keys got one ticket");
    assert!(late_ids.iter().all(|id| !tickets.contains(id)));
    for (i, (_, ticket)) in late.iter().enumerate() {
        let (_, again) = app.join("main", Some(&format!("late-{i}"))).await;
        assert_eq!(again.ticket_id, ticket.ticket_id);
    }
    assert_eq!(
        app.get_json(&paths::room("main")).await.1["waiting"],
        2 * SHOPPERS
    );
}

// ---------------------------------------------------------------------------------------------
// The join limit counts what it should
// ---------------------------------------------------------------------------------------------

// sourcegraph/sourcegraph-public-snapshot#51899 "ratelimiter: Don't keep counting after user ran
// into rate limit" (rejected requests were counted, so a client that kept retrying was never let
// back in). A client that hammers past the join limit and then waits the Retry-After it was
// given must be let in: the refused joins must not have been counted.
async fn a_client_that_hammers_past_the_join_limit_gets_in_after_its_retry_after(backend: Backend) {
    // 20 a minute: one new join every 3 s once the allowance is spent.
    let app = TestApp::spawn(backend, &["--joins-per-ip-per-minute", "20"]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let mut accepted = 0;
    loop {
        let (status, _) = plain_join(&app).await;
        if status == 429 {
            break;
        }
        assert_eq!(status, 201);
        accepted += 1;
        assert!(accepted <= 20, "the limit never refused");
    }
    let hammered = join_all((0..60).map(|_| plain_join(&app))).await;
    let statuses: Vec<u16> = hammered.iter().map(|(s, _)| *s).collect();
    assert!(
        statuses.iter().all(|s| *s == 429),
        "the limit let a hammering client through: {statuses:?}"
    );
    let retry_after = hammered.last().and_then(|(_, r)| *r).expect("Retry-After");
    println!("{accepted} accepted, then 60 refused; Retry-After {retry_after} s");
    assert!(
        retry_after <= 4,
        "refused joins pushed the wait to {retry_after} s"
    );
    tokio::time::sleep(Duration::from_millis(retry_after * 1000 + 200)).await;
    let (status, _) = plain_join(&app).await;
    assert_eq!(status, 201, "refused after waiting its Retry-After");
}

// ---------------------------------------------------------------------------------------------
// Client addresses in the RFC 7239 Forwarded header
// ---------------------------------------------------------------------------------------------

/// POSTs a join with `curl`, one `-H` per given header line (so repeated names stay separate
/// lines on the wire); returns the status code.
async fn curl_join(app: &TestApp, headers: &[&str]) -> u16 {
    let mut command = tokio::process::Command::new("curl");
    command.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"]);
    for header in headers {
        command.args(["-H", header]);
    }
    let output = command
        .arg(app.url(&paths::tickets("main")))
        .output()
        .await
        .expect("curl runs");
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .expect("curl printed a status")
}

// primus/forwarded-for#7 (RFC 7239 values such as `For="[2001:db8:cafe::17]:4711"`,
// `for=192.0.2.60; proto=http; by=203.0.113.43`, `for=192.0.2.43, for=198.51.100.17`) and
// lpinca/forwarded-parse#7 (parsing failed on an IPv6 `for=`): real proxies send these shapes.
// With one join a minute per client and `--client-ip-header Forwarded`, the same client written
// in another legal form must share its allowance, a client-written element before the proxy's
// must not matter, and `unknown`, obfuscated or malformed values must fall back to the peer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc_7239_forwarded_forms_name_one_client_and_odd_values_fall_back_to_the_peer() {
    let app = TestApp::spawn(
        Backend::Memory,
        &[
            "--joins-per-ip-per-minute",
            "1",
            "--client-ip-header",
            "Forwarded",
        ],
    )
    .await;
    app.patch_room("main", json!({"paused": true})).await;
    let cases: [(&str, &[&str], u16); 9] = [
        (
            "IPv6 with port, after a client-written element",
            &[r#"Forwarded: for=192.0.2.43, for="[2001:db8:cafe::17]:4711""#],
            201,
        ),
        (
            "the same IPv6, `For` capitalised, no port, other parameters around it",
            &[r#"Forwarded: by=203.0.113.43;For="[2001:db8:cafe::17]";proto=https"#],
            429,
        ),
        (
            "the same IPv6 with optional spaces around `;`",
            &[r#"Forwarded: for="[2001:db8:cafe::17]" ; proto=http"#],
            429,
        ),
        (
            "a client-written line, then the proxy's line with `for` not first",
            &[
                "Forwarded: for=6.6.6.6",
                "Forwarded: proto=http;for=198.51.100.17",
            ],
            201,
        ),
        (
            "that IPv4 with a port",
            &[r#"Forwarded: for="198.51.100.17:8080""#],
            429,
        ),
        ("`unknown` → the peer", &["Forwarded: for=unknown"], 201),
        (
            "an obfuscated node → the peer again",
            &[r#"Forwarded: for="_hidden""#],
            429,
        ),
        (
            "a garbled element → the peer again",
            &["Forwarded: for=6.6.6.7, for=;;=="],
            429,
        ),
        ("no header → the peer again", &[], 429),
    ];
    let mut failures = Vec::new();
    for (what, headers, expected) in cases {
        let got = curl_join(&app, headers).await;
        println!("{got} (expected {expected}): {what}");
        if got != expected {
            failures.push(format!("{what}: {got}, expected {expected}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

// ---------------------------------------------------------------------------------------------
// Shutdown with an SSE reader that keeps reading
// ---------------------------------------------------------------------------------------------

// tokio-rs/axum#2673 "Open SSE connections with pending streams block graceful shutdown" and
// hyper/hyper#2787 "Graceful shutdown never stops the server when there is an open sse
// connection". Unlike a client that stops reading (operations.rs), a live `curl -N` follower
// reads every keep-alive, so no write timeout ever ends it: only the shutdown grace can. With
// --shutdown-grace-secs 2, SIGTERM must end the process within the grace (plus margin) and the
// follower's stream must end too instead of hanging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_process_within_the_grace_while_an_sse_follower_keeps_reading() {
    let mut app = TestApp::spawn(
        Backend::Memory,
        &["--shutdown-grace-secs", "2", "--sse-refresh-ms", "200"],
    )
    .await;
    app.patch_room("main", json!({"paused": true})).await;
    let (_, ticket) = app.join("main", None).await;
    let mut curl = tokio::process::Command::new("curl")
        .args(["-sN", "-H", "Accept: text/event-stream"])
        .arg(app.url(&paths::events("main", &ticket.ticket_id)))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("curl runs");
    let mut stdout = curl.stdout.take().unwrap();
    let mut first = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), stdout.read(&mut first))
        .await
        .expect("the stream sent its first event")
        .unwrap();
    let first = String::from_utf8_lossy(&first[..n]).into_owned();
    assert!(first.contains("data:"), "{first}");
    // Keep draining, as a browser would, so the server's writes never block.
    let reader = tokio::spawn(async move {
        let mut total = 0usize;
        let mut buffer = vec![0u8; 4096];
        while let Ok(n) = stdout.read(&mut buffer).await {
            if n == 0 {
                break;
            }
            total += n;
        }
        total
    });
    app.signal("TERM");
    let started = Instant::now();
    let exit = app.wait_exit(Duration::from_secs(15)).await;
    let took = started.elapsed();
    let curl_exit = tokio::time::timeout(Duration::from_secs(5), curl.wait()).await;
    println!("vestibule exit {exit:?} after {took:?}; curl {curl_exit:?}");
    assert!(exit.is_some(), "still running 15 s after SIGTERM");
    assert!(
        took < Duration::from_secs(5),
        "took {took:?} with a 2 s grace"
    );
    assert!(curl_exit.is_ok(), "the SSE follower is still connected");
    let _ = reader.await;
}

// ---------------------------------------------------------------------------------------------
// A managed Redis that hides CONFIG
// ---------------------------------------------------------------------------------------------

/// `vestibule --require-safe-redis` on `redis`; whether it started, and its output.
async fn started_with_require_safe_redis(redis: RedisServer) -> (bool, String) {
    let url = redis.url();
    let mut command = vestibule_command(Some(&url), &["--require-safe-redis"], "info");
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("vestibule runs");
    // Started = still running and listening after 3 s; refused = exited.
    let deadline = Instant::now() + Duration::from_secs(3);
    let exited = loop {
        if let Ok(Some(_)) = child.try_wait() {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    if !exited {
        let _ = child.kill();
    }
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .expect("output");
    drop(redis);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (!exited && text.contains("listening on"), text)
}

fn redis_without_config(policy: &str) -> RedisServer {
    RedisServer::with_8mb_limit(policy, &["--rename-command", "CONFIG", ""])
}

// taskforcesh/bullmq#921 "Throw exception if trying to use a redis instance with a different
// eviction policy than noeviction" (the maintainers relaxed the check because "some hosting
// providers do not allow us to gather the maxmemory policy"; managed Redis often disables
// CONFIG). On a Redis whose CONFIG command is gone, Vestibule must still see an evicting policy
// (warning, /readyz, metric, and --require-safe-redis refusing), and must still start on such a
// Redis that is safe (noeviction) even with --require-safe-redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_config_an_evicting_redis_is_still_reported_and_a_safe_one_still_starts() {
    let redis = redis_without_config("volatile-lru");
    assert!(redis
        .cli(&["CONFIG", "GET", "save"])
        .contains("unknown command"));
    let app = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let (status, ready) = app.get_json(paths::READYZ).await;
    println!("/readyz {status}: {ready}");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ready["redis"]["maxmemoryPolicy"], "volatile-lru", "{ready}");
    assert!(
        ready["warnings"].as_array().is_some_and(|w| w
            .iter()
            .any(|w| w.as_str().unwrap_or("").contains("noeviction"))),
        "{ready}"
    );
    assert_eq!(app.metric("vestibule_store_may_evict").await, 1.0);
    assert_eq!(app.join("main", None).await.0, StatusCode::CREATED);
    drop(app);
    let (started, output) = started_with_require_safe_redis(redis).await;
    assert!(!started, "started on an evicting Redis:\n{output}");
    assert!(output.contains("maxmemory-policy"), "{output}");

    let (started, output) =
        started_with_require_safe_redis(redis_without_config("noeviction")).await;
    assert!(
        started,
        "refused a noeviction Redis that hides CONFIG:\n{output}"
    );
}

both_stores!(
    concurrent_copies_of_one_keyed_order_make_one_order_and_all_get_its_receipt,
    concurrent_copies_of_one_keyed_join_leave_one_place,
    a_client_that_hammers_past_the_join_limit_gets_in_after_its_retry_after,
);

// ---------------------------------------------------------------------------------------------
// Found failing (left failing for the teammate: see the commit message)
// ---------------------------------------------------------------------------------------------

// zulip/zulip#21544 "Improve IPv6 rate-limiting by bucketing" (a client shifts to a new adjacent
// IPv6 address within its /64 and gets a fresh per-IP allowance), also
// TerminalWitchcraft/actix-ratelimit#22 and stefanprodan/AspNetCoreRateLimit#32; and
// flop-labs/technocore-chat#733 (an IPv4 client written by a dual-stack proxy as `::ffff:a.b.c.d`
// must stay that IPv4 client). An IPv6 shopper is normally given a whole /64 and picks any
// address in it for each connection, so "a client cannot pick its address" only holds if the
// join limit counts a /64 as one client. The proxy here is honest: it appends what it saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ipv6_client_cannot_reset_its_join_allowance_by_rotating_addresses_in_its_prefix() {
    let app = TestApp::behind_proxy_with_join_limit("1", &[]).await;
    let mut failures = Vec::new();
    for (address, expected) in [
        ("2001:db8:1:2::1", 201),
        // Privacy addresses of the same host, or other hosts of the same home: one /64.
        ("2001:db8:1:2::2", 429),
        ("2001:db8:1:2:a5f3:19c2:7e01:d4b8", 429),
        // Another /64 is another client.
        ("2001:db8:1:3::1", 201),
        ("198.51.100.7", 201),
        // The same IPv4 client as a dual-stack proxy writes it.
        ("::ffff:198.51.100.7", 429),
    ] {
        let got = curl_join(&app, &[&format!("X-Forwarded-For: {address}")]).await;
        println!("{address}: {got} (expected {expected})");
        if got != expected {
            failures.push(format!("{address}: {got}, expected {expected}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

// taskforcesh/bullmq#921 (the eviction check could not be made on hosts that "do not allow us
// to gather" the settings), redis/redis#8988 (redis-benchmark failed/warned on cloud Redis that
// hides `save` and uses its own backups) and Grokzen/redis-py-cluster#166 (CONFIG refused on
// ElastiCache): on managed Redis the RDB snapshot schedule cannot be read. Here Redis does keep
// RDB snapshots (`save 60 1`) but refuses CONFIG: /readyz shows `rdbSave: null` (unknown), so no
// warning may state as fact that Redis keeps no snapshots and that a restart empties every queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_whose_snapshot_schedule_cannot_be_read_is_not_reported_as_keeping_none() {
    let redis = RedisServer::start_with(&[
        "--save",
        "60 1",
        "--appendonly",
        "no",
        "--rename-command",
        "CONFIG",
        "",
    ]);
    let app = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let (status, ready) = app.get_json(paths::READYZ).await;
    println!("/readyz {status}: {ready}");
    assert_eq!(status, StatusCode::OK);
    assert!(ready["redis"]["rdbSave"].is_null(), "{ready}");
    let warnings: Vec<&str> = ready["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let false_claims: Vec<&&str> = warnings
        .iter()
        .filter(|w| w.contains("no RDB snapshots"))
        .collect();
    assert!(
        false_claims.is_empty(),
        "an unknown snapshot schedule is reported as none: {false_claims:?}"
    );
    assert!(
        !app.log().contains("no RDB snapshots"),
        "the start-up log states it too:\n{}",
        app.log()
    );
}

// ---------------------------------------------------------------------------------------------
// A proxy in front of the event stream
// ---------------------------------------------------------------------------------------------

/// A `curl -N` follower of an event stream; what it has read so far.
struct CurlFollower {
    name: &'static str,
    child: tokio::process::Child,
    seen: std::sync::Arc<std::sync::Mutex<String>>,
}

impl CurlFollower {
    fn start(name: &'static str, url: String, http2: bool) -> Self {
        let mut command = tokio::process::Command::new("curl");
        command.args(["-sN", "-H", "Accept: text/event-stream"]);
        if http2 {
            command.arg("--http2-prior-knowledge");
        }
        let mut child = command
            .arg(url)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("curl runs (scripts/setup-tools.sh --test installs it)");
        let mut stdout = child.stdout.take().expect("curl's stdout");
        let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = seen.clone();
        tokio::spawn(async move {
            let mut buffer = vec![0u8; 4096];
            while let Ok(n) = stdout.read(&mut buffer).await {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        Self { name, child, seen }
    }

    /// Waits up to `within` for a `status` event whose data contains `needle`; how long it took.
    async fn wait_for(&self, needle: &str, within: Duration) -> Option<Duration> {
        let started = Instant::now();
        while started.elapsed() < within {
            if self.seen.lock().unwrap().contains(needle) {
                return Some(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }
}

// nginx/nginx#1505 "Buffering breaks event streams" (and the X-Accel-Buffering pull requests of
// django-eventstream#37, express-sse#23, go-sse#13): nginx buffers a proxied answer by default,
// so behind it an event stream reaches the browser only once kilobytes have gathered, i.e. a
// waiting shopper sees nothing for minutes. Vestibule answers SSE with `X-Accel-Buffering: no`.
// Behind Debian's nginx with its default buffering, over HTTP/1.1 and over h2c, and straight to
// Vestibule over h2c (many streams per connection, as a CDN sends them), curl must read the
// first event at once and a position change within one refresh of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_in_front_passes_every_event_at_once_over_http1_and_http2() {
    use vestibule_tests::nginx::Nginx;
    let app = TestApp::spawn(Backend::Memory, &["--sse-refresh-ms", "200"]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let (_, ahead) = app.join("main", None).await;
    let (_, follower) = app.join("main", None).await;
    let upstream = app.url("");
    let upstream = upstream.trim_end_matches('/');
    let plain = Nginx::start(upstream, false).expect("nginx starts");
    let h2c = Nginx::start(upstream, true).expect("nginx starts with h2c");
    let path = paths::events("main", &follower.ticket_id);
    let followers = [
        CurlFollower::start("nginx, HTTP/1.1", format!("{}{path}", plain.base()), false),
        CurlFollower::start("nginx, h2c", format!("{}{path}", h2c.base()), true),
        CurlFollower::start("Vestibule, h2c", app.url(&path), true),
    ];
    for follower in &followers {
        let took = follower
            .wait_for("\"position\":2", Duration::from_secs(5))
            .await;
        println!("{}: first event after {took:?}", follower.name);
        assert!(
            took.is_some(),
            "{}: no first event within 5 s: {:?}",
            follower.name,
            follower.seen.lock().unwrap()
        );
    }
    assert_eq!(
        app.leave("main", &ahead.ticket_id).await,
        StatusCode::NO_CONTENT
    );
    for follower in &followers {
        // The hub moves positions every 200 ms; 2 s leaves room for a busy box, far less than
        // any proxy buffer would take to fill with one stream's events.
        let took = follower
            .wait_for("\"position\":1", Duration::from_secs(2))
            .await;
        println!("{}: position 1 after {took:?}", follower.name);
        assert!(
            took.is_some(),
            "{}: the move to position 1 did not arrive within 2 s: {:?}",
            follower.name,
            follower.seen.lock().unwrap()
        );
    }
    for mut follower in followers {
        let _ = follower.child.kill().await;
    }
}
