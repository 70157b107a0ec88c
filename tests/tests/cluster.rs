//! Vestibule on a Redis Cluster (`--redis-cluster`, docs/operating.md): rooms spread over
//! the masters with each room on one slot and the catalog on one slot, and a master killed
//! mid-sale fails over to its replica while the room keeps its line and admits on. The API flows
//! themselves run on a cluster too, from their own files (`api/*.rs`, `on_redis_cluster_too!`).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use vestibule_shared::{paths, TicketState, TicketStatus};
use vestibule_tests::{vestibule_command, RedisCluster, TestApp, ADMIN_TOKEN};

async fn start_cluster() -> RedisCluster {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .expect("the cluster starts");
    println!(
        "Redis Cluster of 6 nodes ready in {:.2} s",
        cluster.started_in.as_secs_f64()
    );
    cluster
}

async fn create_room(app: &TestApp, room: &str) {
    let response = app
        .client
        .post(app.url(&paths::admin_rooms()))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"room": room}))
        .send()
        .await
        .expect("create request");
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert_eq!(status, StatusCode::CREATED, "creating {room}: {body}");
}

#[test]
fn a_redis_url_and_a_cluster_together_are_refused_with_a_reason() {
    let output = vestibule_command(
        Some("redis://127.0.0.1:1"),
        &["--redis-cluster", "redis://127.0.0.1:2"],
        "info",
    )
    .output()
    .expect("vestibule runs");
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("--redis-url") && said.contains("--redis-cluster"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rooms_spread_over_the_masters_each_on_one_slot_and_the_catalog_on_one() {
    let cluster = start_cluster().await;
    let app = TestApp::spawn_on_cluster(&cluster, &["--rooms", "main"]).await;
    // Rooms created at run time, through the admin API.
    let rooms: Vec<String> = (0..12).map(|i| format!("drop-{i}")).collect();
    for room in &rooms {
        create_room(&app, room).await;
    }
    let mut masters: HashMap<u16, Vec<&str>> = HashMap::new();
    for room in &rooms {
        let (status, ticket) = app.join(room, Some(&format!("{room}-key"))).await;
        assert!(status.is_success(), "{room}: {status}");
        // Every key of the room is on the master of its slot, the queue and document included:
        // asked without following redirections, that master has them.
        let queue = format!("vestibule:{{{room}}}:g1:queue");
        let document = format!("vestibule:{{{room}}}:room");
        let slot = cluster.key_slot(&queue);
        assert_eq!(cluster.key_slot(&document), slot);
        let master = cluster.master_of_slot(slot);
        assert_eq!(cluster.cli(master, &["EXISTS", &document]), "1", "{room}");
        let ticket_key = format!("vestibule:{{{room}}}:g1:ticket:{}", ticket.ticket_id);
        if ticket.status == TicketState::TokenIssued {
            assert_eq!(cluster.cli(master, &["EXISTS", &ticket_key]), "1", "{room}");
        }
        masters.entry(master).or_default().push(room);
    }
    println!("rooms by master: {masters:?}");
    assert!(
        masters.len() >= 2,
        "12 rooms all on one master: {masters:?}"
    );
    // The index of rooms is one key, on its master.
    let index = "vestibule:{_catalog}:rooms";
    let master = cluster.master_of_key(index);
    assert_eq!(cluster.cli(master, &["SCARD", index]), "13");
    // A deletion (the document and the purge on the room's slot, the index on its own) works
    // across slots.
    let response = app
        .client
        .delete(app.url(&format!("{}?force=true", paths::admin_room("drop-3"))))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("delete");
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    assert_eq!(cluster.cli(master, &["SISMEMBER", index, "drop-3"]), "0");
    let room_master = cluster.master_of_key("vestibule:{drop-3}:room");
    assert_eq!(
        cluster.cli(room_master, &["HGET", "vestibule:{drop-3}:room", "state"]),
        "deleted"
    );
    let left = cluster.cli(
        room_master,
        &["--scan", "--pattern", "vestibule:{drop-3}:*"],
    );
    let left: BTreeSet<&str> = left.lines().collect();
    assert_eq!(
        left,
        BTreeSet::from([
            "vestibule:{drop-3}:audit",
            "vestibule:{drop-3}:gen",
            "vestibule:{drop-3}:room"
        ]),
        "the purge leaves the audit log, the counter and the document only"
    );
    // `/readyz` reads every node's settings.
    let (status, ready) = app.get_json(paths::READYZ).await;
    assert_eq!(status, StatusCode::OK, "{ready}");
    assert_eq!(ready["redis"]["maxmemoryPolicy"], "noeviction", "{ready}");
}

/// What the shoppers saw of one ticket.
#[derive(Default, Debug)]
struct Seen {
    tokens: Vec<String>,
    ordered: Option<String>,
}

async fn try_poll(
    app: &TestApp,
    room: &str,
    id: &str,
) -> Result<TicketStatus, (StatusCode, Value)> {
    let response = app
        .client
        .get(app.url(&paths::ticket(room, id)))
        .send()
        .await
        .map_err(|_| (StatusCode::REQUEST_TIMEOUT, Value::Null))?;
    let status = response.status();
    let retry_after = response.headers().contains_key("retry-after");
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if status == StatusCode::OK {
        return Ok(serde_json::from_value(body).expect("TicketStatus"));
    }
    // Never a 500: the store's outage is 503 (or 504 for a change it may have made) with
    // Retry-After and a JSON error.
    assert!(
        matches!(
            status,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
        ),
        "a poll during the failover answered {status}: {body}"
    );
    assert!(retry_after, "{status} without Retry-After: {body}");
    assert!(body["error"].is_string(), "{status}: {body}");
    Err((status, body))
}

/// The master's replication offset has reached its replica: every write answered so far is on
/// both.
fn wait_replica_caught_up(cluster: &RedisCluster, master: u16) {
    let offset = |port: u16, field: &str| -> u64 {
        cluster
            .cli(port, &["INFO", "replication"])
            .lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0)
    };
    let master_info = cluster.cli(master, &["INFO", "replication"]);
    let replica_port: u16 = master_info
        .lines()
        .find_map(|line| line.strip_prefix("slave0:"))
        .and_then(|fields| {
            fields
                .split(',')
                .find_map(|field| field.strip_prefix("port="))
        })
        .and_then(|port| port.parse().ok())
        .expect("the master has a replica");
    let target = offset(master, "master_repl_offset");
    let deadline = Instant::now() + Duration::from_secs(5);
    while offset(replica_port, "slave_repl_offset") < target {
        assert!(Instant::now() < deadline, "the replica never caught up");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_mid_sale_fails_over_and_the_room_keeps_its_line() {
    const SHOPPERS: usize = 120;
    const RATE: u64 = 20;
    let mut cluster = start_cluster().await;
    let app = Arc::new(
        TestApp::spawn_on_cluster(
            &cluster,
            &["--rooms", "flash", "--admission-rate", &RATE.to_string()],
        )
        .await,
    );
    app.patch_room("flash", json!({"paused": true})).await;
    let mut ids = Vec::new();
    for i in 0..SHOPPERS {
        let (status, ticket) = app.join("flash", Some(&format!("shopper-{i}"))).await;
        assert_eq!(status, StatusCode::CREATED);
        assert_eq!(ticket.position, Some(i as u64 + 1));
        ids.push(ticket.ticket_id);
    }
    let master = cluster.master_of_key("vestibule:{flash}:room");
    let seen: Arc<Mutex<HashMap<String, Seen>>> = Arc::default();

    // The sale: admitted at RATE a second; shoppers poll and the first ten order at once.
    app.patch_room("flash", json!({"paused": false})).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let errors = Arc::new(Mutex::new(Vec::<StatusCode>::new()));
    let pollers: Vec<_> = (0..4)
        .map(|worker| {
            let (app, seen, stop, errors) =
                (app.clone(), seen.clone(), stop.clone(), errors.clone());
            let mine: Vec<String> = ids.iter().skip(worker).step_by(4).cloned().collect();
            tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for id in &mine {
                        match try_poll(&app, "flash", id).await {
                            Ok(ticket) => {
                                if let Some(token) = ticket.entry_token {
                                    let mut seen = seen.lock().unwrap();
                                    let entry = seen.entry(id.clone()).or_default();
                                    if !entry.tokens.contains(&token) {
                                        entry.tokens.push(token);
                                    }
                                }
                            }
                            Err((status, _)) => errors.lock().unwrap().push(status),
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        })
        .collect();
    // Ten shoppers order once admitted (before the kill).
    let mut ordered = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while ordered < 10 {
        assert!(Instant::now() < deadline, "nobody was admitted");
        let admitted: Vec<(String, String)> = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, s)| s.ordered.is_none())
            .map(|(id, s)| (id.clone(), s.tokens[0].clone()))
            .collect();
        for (id, token) in admitted.into_iter().take(10 - ordered) {
            let (status, receipt) = app.order("flash", Some(&token)).await;
            assert_eq!(status, StatusCode::CREATED, "{receipt}");
            seen.lock().unwrap().get_mut(&id).unwrap().ordered = Some(token);
            ordered += 1;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Every join and order answered so far is on the replica; admissions go on meanwhile.
    tokio::task::block_in_place(|| wait_replica_caught_up(&cluster, master));

    // SIGKILL the room's master mid-sale.
    let admitted_before = seen.lock().unwrap().len();
    let killed_at = Instant::now();
    tokio::task::block_in_place(|| cluster.kill(master));
    println!("killed master :{master} with {admitted_before} of {SHOPPERS} admitted");
    // The room answers again (a fresh join is the probe: it needs the room's master).
    let mut readiness = Vec::new();
    let answered_again = loop {
        readiness.push(app.get_json(paths::READYZ).await.0.as_u16());
        let response = app
            .join_request("flash")
            .header("Idempotency-Key", "probe")
            .send()
            .await
            .expect("join");
        if response.status().is_success() {
            break killed_at.elapsed();
        }
        let status = response.status();
        assert!(
            matches!(
                status,
                StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
            ),
            "a join during the failover answered {status}"
        );
        assert!(killed_at.elapsed() < Duration::from_secs(20), "no failover");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Every node has learnt of the new master (the probe needed only the room's slot).
    tokio::task::block_in_place(|| cluster.wait_ready(Duration::from_secs(10)));
    let ready = readiness.iter().filter(|&&status| status == 200).count();
    println!(
        "/readyz during the failover: {ready} of {} answers 200 (the cluster answers; the \
         failed shard's rooms answer 503)",
        readiness.len()
    );
    assert!(readiness
        .iter()
        .all(|&status| status == 200 || status == 503));
    let promoted = cluster.master_of_key("vestibule:{flash}:room");
    assert_ne!(promoted, master);
    println!(
        "failover: the room answered again {:.2} s after the kill (new master :{promoted})",
        answered_again.as_secs_f64()
    );
    // Admission goes on: everyone gets a token.
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.lock().unwrap().len() < SHOPPERS {
        assert!(
            Instant::now() < deadline,
            "{} of {SHOPPERS} admitted after the failover",
            seen.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let admissions_resumed = killed_at.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for poller in pollers {
        poller.await.expect("poller");
    }
    let errors = errors.lock().unwrap().clone();
    println!(
        "everyone admitted {:.2} s after the kill; {} polls answered 503/504 meanwhile",
        admissions_resumed.as_secs_f64(),
        errors.len()
    );

    // Nobody lost, nobody admitted twice. Everything answered before the replica caught up is on
    // the new master exactly; what the scheduler admitted in the last moments before the kill could
    // be lost by asynchronous replication (docs/operating.md, "Redis Cluster"): such a shopper is
    // back in line and admitted again, and its first token is refused as unknown, so nobody ever
    // holds two live tokens.
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let mut readmitted = 0;
    for id in &ids {
        let ticket = app.poll("flash", id).await;
        let shopper = &seen[id];
        match &shopper.ordered {
            Some(token) => {
                assert_eq!(ticket.status, TicketState::Completed, "an order was lost");
                let (status, body) = app.order("flash", Some(token)).await;
                assert_eq!(
                    (status, body["error"].as_str()),
                    (StatusCode::FORBIDDEN, Some("entry_token_used")),
                    "a used token works again after the failover: {body}"
                );
            }
            None => {
                assert_eq!(ticket.status, TicketState::TokenIssued, "{id}");
                let live = ticket.entry_token.expect("a token");
                assert_eq!(&live, shopper.tokens.last().unwrap());
                for old in &shopper.tokens[..shopper.tokens.len() - 1] {
                    readmitted += 1;
                    let (status, body) = app.order("flash", Some(old)).await;
                    assert_eq!(
                        (status, body["error"].as_str()),
                        (StatusCode::FORBIDDEN, Some("entry_token_unknown")),
                        "a lost admission's token still works: {body}"
                    );
                }
            }
        }
    }
    // At most one tick's quota (⌈20 × 0.1⌉ = 2) was admitted and not yet replicated when the
    // master died, on a loopback link; usually none.
    assert!(readmitted <= 2, "{readmitted} shoppers admitted twice");
    println!(
        "shoppers whose admission the failover lost and who were admitted again: {readmitted}"
    );
    let distinct: HashSet<&String> = seen.values().flat_map(|s| s.tokens.iter()).collect();
    assert_eq!(
        distinct.len(),
        SHOPPERS + readmitted,
        "a token given to two shoppers"
    );
    let (_, info) = app.get_json(&paths::room("flash")).await;
    assert_eq!(info["waiting"], 0, "{info}");
}

/// The origin API key of the once-under-failover rounds.
const ORIGIN_KEY: &str = "failover-origin-key-0123456789";

/// An order (`Idempotency-Key` = `key`) or, with `key` = `None`, a storefront's consume of
/// `token`: its status and the order id (an order's 201) or the error code.
async fn use_token(app: &TestApp, token: &str, key: Option<&str>) -> (StatusCode, String) {
    let response = match key {
        Some(key) => app.order_with_key("flash", token, Some(key), 1).await,
        None => app
            .client
            .post(app.url("/api/v1/rooms/flash/entries/consume"))
            .bearer_auth(ORIGIN_KEY)
            .json(&json!({"entryToken": token}))
            .send()
            .await
            .expect("consume request"),
    };
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let said = body["orderId"]
        .as_str()
        .or(body["error"].as_str())
        .or(body["jti"].as_str())
        .unwrap_or_default()
        .to_owned();
    (status, said)
}

/// Retries a use until the store answers it (not 503/504), within 30 s.
async fn use_token_until_answered(
    app: &TestApp,
    token: &str,
    key: Option<&str>,
) -> (StatusCode, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, said) = use_token(app, token, key).await;
        if !matches!(
            status,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
        ) {
            return (status, said);
        }
        assert!(
            Instant::now() < deadline,
            "no answer after the failover: {status} {said}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One round: three shoppers of a room with stock 3 on a cluster with a replica per master, two
/// Vestibules. Z orders while the replica keeps up; then the room's replica stops (it falls
/// behind), X orders and Y's storefront consumes through Vestibule A; the master is killed, the
/// stale replica promoted, and each use is retried through Vestibule B. Returns the answers
/// (Z through A, Z through B, X through A, X through B, Y through A, Y through B).
async fn failover_round() -> [(StatusCode, String); 6] {
    let mut cluster = start_cluster().await;
    let args = [
        "--rooms",
        "flash",
        "--admission-rate",
        "50",
        "--origin-api-key",
        ORIGIN_KEY,
    ];
    let a = TestApp::spawn_on_cluster(&cluster, &args).await;
    let b = TestApp::spawn_on_cluster(&cluster, &args).await;
    a.patch_room("flash", json!({"stock": 3})).await;
    let (_, z) = a.admitted("flash").await;
    let (_, x) = a.admitted("flash").await;
    let (_, y) = a.admitted("flash").await;
    let master = cluster.master_of_key("vestibule:{flash}:room");
    let replica = cluster.replica_of(master);

    let z_first = use_token(&a, &z, Some("order-z")).await;
    tokio::task::block_in_place(|| wait_replica_caught_up(&cluster, master));
    cluster.signal(replica, "STOP");
    // 20 MB for the replica ahead of the uses: more than its socket buffers take, so what the
    // master sends after it is still in the master's output buffer when the master dies.
    cluster.cli(
        master,
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], string.rep('x', 20000000))",
            "1",
            "vestibule:{flash}:backlog",
        ],
    );
    let x_first = use_token(&a, &x, Some("order-x")).await;
    let y_first = use_token(&a, &y, None).await;
    tokio::task::block_in_place(|| cluster.kill(master));
    cluster.signal(replica, "CONT");

    let z_again = use_token_until_answered(&b, &z, Some("order-z")).await;
    let x_again = use_token_until_answered(&b, &x, Some("order-x")).await;
    let y_again = use_token_until_answered(&b, &y, None).await;
    tokio::task::block_in_place(|| cluster.wait_ready(Duration::from_secs(10)));
    assert_eq!(cluster.master_of_key("vestibule:{flash}:room"), replica);
    let (_, info) = b.get_json(&paths::room("flash")).await;
    let sold = info["sold"].as_u64().unwrap_or(0);
    assert!(sold <= 3, "more sold than stock: {info}");
    [z_first, z_again, x_first, x_again, y_first, y_again]
}

/// A use of a token is answered only once a replica has it, so a failover that promotes a
/// replica behind its master never sells one token twice, whichever Vestibule a retry reaches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_buys_once_through_a_failover_to_a_replica_that_fell_behind() {
    let rounds: usize = std::env::var("VESTIBULE_FAILOVER_ROUNDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(2);
    let mut unconfirmed = 0;
    for round in 1..=rounds {
        let [z_first, z_again, x_first, x_again, y_first, y_again] = failover_round().await;
        println!(
            "round {round}: Z {z_first:?} → {z_again:?}; X {x_first:?} → {x_again:?}; \
             Y {y_first:?} → {y_again:?}"
        );
        // Confirmed while the replica kept up: the retry replays the same order.
        assert_eq!(z_first.0, StatusCode::CREATED, "{z_first:?}");
        assert_eq!(z_again, z_first, "a confirmed order was lost or sold again");
        // Never two orders for one token: the first answer was not a 201, or the retry
        // replays it.
        for (first, again) in [(&x_first, &x_again), (&y_first, &y_again)] {
            let succeeded = |(status, _): &(StatusCode, String)| status.is_success();
            if succeeded(first) {
                assert!(
                    !succeeded(again) || again == first,
                    "one token used twice: {first:?} then {again:?}"
                );
            } else {
                // 504: not confirmed (or no answer); 503: refused before anything was sent.
                assert!(
                    matches!(
                        first.0,
                        StatusCode::GATEWAY_TIMEOUT | StatusCode::SERVICE_UNAVAILABLE
                    ),
                    "{first:?}"
                );
                unconfirmed += 1;
            }
            // The use is not lost: the retry finds it or makes it.
            assert!(
                again.0.is_success() || again.1 == "entry_token_consumed",
                "{again:?}"
            );
        }
    }
    println!("uses answered 503/504 (not confirmed) while the replica was stopped: {unconfirmed}");
}

/// A script the master does not hold yet (after a start, a restart or `SCRIPT FLUSH`) is sent
/// with its source to the slot's master alone: a hung node elsewhere (the room's replica,
/// another shard's master) holds up no join.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripts_first_call_waits_for_no_hung_node() {
    let cluster = start_cluster().await;
    let app = TestApp::spawn_on_cluster(&cluster, &["--rooms", "flash"]).await;
    let (status, _) = app.join("flash", Some("warm")).await;
    assert_eq!(status, StatusCode::CREATED);
    let master = cluster.master_of_key("vestibule:{flash}:room");
    let replica = cluster.replica_of(master);
    let other = cluster
        .nodes()
        .into_iter()
        .find(|node| node.master && node.port != master)
        .map(|node| node.port)
        .expect("another master");
    let hung = [replica, other];
    for port in hung {
        cluster.signal(port, "STOP");
    }
    let mut took = Vec::new();
    for round in 0..3 {
        assert_eq!(cluster.cli(master, &["SCRIPT", "FLUSH"]), "OK");
        let started = Instant::now();
        let response = app
            .join_request("flash")
            .header("Idempotency-Key", format!("after-flush-{round}"))
            .send()
            .await
            .expect("join");
        took.push((response.status(), started.elapsed()));
    }
    for port in hung {
        cluster.signal(port, "CONT");
    }
    println!("joins after SCRIPT FLUSH with two nodes hung: {took:?}");
    // The store timeout is 1 s: a join that waited for a hung node took all of it.
    for (status, took) in took {
        assert_eq!(status, StatusCode::CREATED);
        assert!(took < Duration::from_millis(800), "a join took {took:?}");
    }
}
