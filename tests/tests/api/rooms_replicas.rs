//! Rooms at run time across replicas: two replicas on one Redis share rooms created,
//! changed and deleted through either within a tick, and a room Redis lost (restarted without
//! persistence) is listed again by the replica running it.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use vestibule_shared::{paths, TicketState};
use vestibule_tests::{RedisServer, TestApp};

use crate::rooms::{admin, audit, create, listed_rooms, room_settings, try_poll};

/// Waits up to 3 s for `check` to hold; whether it did.
async fn within(mut check: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        if check().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_redis_share_rooms_created_changed_and_deleted_at_run_time() {
    let redis = RedisServer::start();
    let a = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let (status, _, body) = create(&a, json!({"room": "drop-7", "admissionRatePerSec": 20})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let created = Instant::now();
    // Through B within a tick or so (100 ms): a shopper joins there and is admitted by whichever
    // replica leads the new room.
    assert!(
        within(async || {
            let response = b.join_request("drop-7").send().await.expect("join");
            response.status().is_success()
        })
        .await,
        "B never took joins for the room A created"
    );
    let seen_by_b = created.elapsed();
    eprintln!("a room created through A took joins through B after {seen_by_b:?}");
    assert!(seen_by_b < Duration::from_secs(1), "{seen_by_b:?}");
    let (admitted, _) = b.admitted("drop-7").await;
    assert_eq!(admitted.status, TicketState::TokenIssued);
    // Listed by both.
    let (_, _, list) = admin(&b, reqwest::Method::GET, &paths::admin_rooms(), None).await;
    assert_eq!(list["rooms"][0]["room"], "drop-7", "{list}");
    // A change through B reaches A's waiting shoppers within a tick.
    admin(
        &b,
        reqwest::Method::PATCH,
        &paths::admin_room("drop-7"),
        Some(json!({"paused": true})),
    )
    .await;
    let (_, waiting) = a.join("drop-7", None).await;
    let changed = Instant::now();
    admin(
        &b,
        reqwest::Method::PATCH,
        &paths::admin_room("drop-7"),
        Some(json!({"messageEn": "back soon"})),
    )
    .await;
    assert!(
        within(async || a
            .poll("drop-7", &waiting.ticket_id)
            .await
            .message_en
            .is_some())
        .await,
        "the message set through B never reached A"
    );
    let reached_a = changed.elapsed();
    eprintln!("a message set through B reached a poll through A after {reached_a:?}");
    assert!(reached_a < Duration::from_secs(1), "{reached_a:?}");
    // Both audit entries name the replica that made them.
    let entries = audit(&a, "drop-7", 10).await;
    assert_eq!(entries[0]["field"], "messageEn", "{entries:?}");
    let create_replica = entries.last().expect("the create")["replica"].clone();
    assert_ne!(entries[0]["replica"], create_replica, "{entries:?}");
    // Deleted through A: B's shoppers get the end state within a tick.
    let force = format!("{}?force=true", paths::admin_room("drop-7"));
    let (status, _, _) = admin(&a, reqwest::Method::DELETE, &force, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(
        within(async || {
            let (status, _) = try_poll(&b, "drop-7", &waiting.ticket_id).await;
            status == StatusCode::GONE
        })
        .await,
        "B still answers for the deleted room"
    );
    // Its line and tickets are gone from Redis, and its document says deleted.
    for pattern in [
        "vestibule:{drop-7}:g*:ticket:*",
        "vestibule:{drop-7}:g*:queue",
        "vestibule:{drop-7}:g*:active",
    ] {
        let keys = redis.cli(&["--scan", "--pattern", pattern]);
        assert_eq!(keys.trim(), "", "left behind: {keys}");
    }
    assert_eq!(
        redis.cli(&["HGET", "vestibule:{drop-7}:room", "state"]),
        "deleted"
    );
    // Nothing of the room but its document, its counter and its audit log stays once both
    // replicas have stopped it: no replica's lease writes its settings or epoch back.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut left = redis.cli(&["--scan", "--pattern", "vestibule:{drop-7}:*"]);
    left = left
        .lines()
        .filter(|key| !key.ends_with(":audit") && !key.ends_with(":room"))
        .filter(|key| !key.ends_with(":gen"))
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(left, "", "left behind after the delete");
}

/// A room deleted through one replica and created again at once is the new room on the other
/// replica within a tick (its settings, its streams, its rate), whatever version the old one had
/// reached; and changes or joins through a replica that has not seen a deletion yet answer 410
/// `room_deleted` and write nothing (every script checks the room's generation first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_deleted_and_created_again_at_once_is_the_new_room_on_every_replica() {
    let redis = RedisServer::start();
    let a = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let room = paths::admin_room("rr");
    let (status, _, body) = create(&a, json!({"room": "rr", "messageEn": "old"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // A ticket of the old room through B (its stream and polls must end with it).
    let mut old_ticket = String::new();
    assert!(
        within(async || {
            let response = b.join_request("rr").send().await.expect("join");
            let ok = response.status().is_success();
            if ok {
                let body: serde_json::Value = response.json().await.expect("ticket");
                old_ticket = body["ticketId"].as_str().unwrap_or_default().to_owned();
            }
            ok
        })
        .await,
        "B never took joins for the room A created"
    );
    // Several changes, so the old room's settings version is well above a new room's.
    for n in 1..=5 {
        let patch = json!({"closed": true, "messageEn": format!("old{n}")});
        admin(&a, reqwest::Method::PATCH, &room, Some(patch)).await;
    }
    let info = |app: &TestApp| {
        let url = app.url(&paths::room("rr"));
        let client = app.client.clone();
        async move {
            let response = client.get(url).send().await.expect("room info");
            response
                .json::<serde_json::Value>()
                .await
                .unwrap_or_default()
        }
    };
    assert!(
        within(async || info(&b).await["state"] == "CLOSED").await,
        "B never saw the old room closed"
    );
    force_delete(&a, "rr").await;
    let (status, _, body) = create(&a, json!({"room": "rr", "messageEn": "new"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert!(
        within(async || {
            let shown = info(&b).await;
            shown["state"] == "OPEN"
        })
        .await,
        "B still runs the old room: {}",
        info(&b).await
    );
    let (status, _) = try_poll(&b, "rr", &old_ticket).await;
    assert!(
        status == StatusCode::NOT_FOUND || status == StatusCode::GONE,
        "the old room's ticket through B: {status}"
    );
    let (_, settings) = room_settings(&b, "rr").await;
    assert_eq!(settings["messageEn"], "new", "{settings}");

    // Deleted through B, changed and joined through A before A has seen it: 410, nothing written.
    force_delete(&b, "rr").await;
    let (status, _, body) = admin(
        &a,
        reqwest::Method::PATCH,
        &room,
        Some(json!({"messageEn": "x"})),
    )
    .await;
    assert!(
        status == StatusCode::GONE || status == StatusCode::NOT_FOUND,
        "{status} {body}"
    );
    let join = a.join_request("rr").send().await.expect("join");
    assert!(
        join.status() == StatusCode::GONE || join.status() == StatusCode::NOT_FOUND,
        "a join through A after the delete through B: {}",
        join.status()
    );
    assert_eq!(
        redis.cli(&["HGET", "vestibule:{rr}:room", "state"]).trim(),
        "deleted",
        "a change after the delete wrote the document"
    );
}

/// Deletes `room` through `app`, waiting shoppers or not (`?force=true`).
async fn force_delete(app: &TestApp, room: &str) {
    let force = format!("{}?force=true", paths::admin_room(room));
    let (status, _, body) = admin(app, reqwest::Method::DELETE, &force, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
}

/// The public view of `room` through `app`: its status code.
async fn info_status(app: &TestApp, room: &str) -> StatusCode {
    let url = app.url(&paths::room(room));
    app.client
        .get(url)
        .send()
        .await
        .expect("room info")
        .status()
}

/// A replica that finds a later generation of a room it runs (deleted and created again
/// elsewhere between two of its syncs) puts the new runtime in the old one's place in one step:
/// the room is answered throughout, and the new generation takes joins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_created_again_elsewhere_is_served_throughout_its_restart_here() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let (status, _, body) = create(&app, json!({"room": "rr", "paused": true})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Generation 1 deleted and generation 2 created, as a sync between the two sees it: in one
    // step, the document of the next generation with the same settings.
    let recreated = redis.cli(&[
        "EVAL",
        "local n = redis.call('INCR', KEYS[2]) \
         redis.call('HSET', KEYS[1], 'gen', n, 'ver', n, 'state', 'live') return n",
        "2",
        "vestibule:{rr}:room",
        "vestibule:{rr}:gen",
    ]);
    assert_eq!(recreated, "2");
    let until = Instant::now() + Duration::from_secs(1);
    let mut answers = 0;
    while Instant::now() < until {
        let status = info_status(&app, "rr").await;
        assert_eq!(status, StatusCode::OK, "after {answers} answers");
        answers += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        within(async || app.log().contains("restarted here")).await,
        "{}",
        app.log()
    );
    let response = app.join_request("rr").send().await.expect("join");
    assert!(response.status().is_success(), "{}", response.status());
    assert_eq!(redis.cli(&["ZCARD", "vestibule:{rr}:g2:queue"]), "1");
}

/// The index of rooms is derived from the documents: a live room missing from it (a create whose
/// last step did not reach the store, a key removed by hand) is served throughout and put back
/// in the index by the next sync; a deleted one left in it is taken out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_missing_from_the_index_is_served_and_indexed_again() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let (status, _, body) = create(&app, json!({"room": "rr"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        redis.cli(&["SREM", "vestibule:{_catalog}:rooms", "rr"]),
        "1"
    );
    let until = Instant::now() + Duration::from_millis(500);
    while Instant::now() < until {
        assert_eq!(
            info_status(&app, "rr").await,
            StatusCode::OK,
            "{}",
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        within(async || redis.cli(&["SISMEMBER", "vestibule:{_catalog}:rooms", "rr"]) == "1").await,
        "never indexed again: {}",
        app.log()
    );
    assert!(!app.log().contains("restarted here"), "{}", app.log());
    force_delete(&app, "rr").await;
    assert_eq!(
        redis.cli(&["SADD", "vestibule:{_catalog}:rooms", "rr"]),
        "1"
    );
    assert!(
        within(async || redis.cli(&["SISMEMBER", "vestibule:{_catalog}:rooms", "rr"]) == "0").await,
        "a deleted room stayed in the index"
    );
    assert_eq!(info_status(&app, "rr").await, StatusCode::GONE);
}

/// A replica that started a room created elsewhere (or found it at its own start) restarts it
/// when it is deleted and created again before its next sync: its runtime serves one
/// generation, and a later one replaces it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_started_here_then_created_again_at_once_is_restarted() {
    let redis = RedisServer::start();
    let a = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let (status, _, body) = create(&a, json!({"room": "rr"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let started = async || b.log().contains("room created (through another replica)");
    assert!(within(started).await, "{}", b.log());
    recreate_and_see_restarted(&a, &b, "B").await;
    // The same for a replica that finds the room at its start.
    let c = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    recreate_and_see_restarted(&a, &c, "C").await;
}

/// Deletes room `rr` through `a` and creates it again at once; `replica` (called `name`) must
/// stop or restart its runtime within the wait.
async fn recreate_and_see_restarted(a: &TestApp, replica: &TestApp, name: &str) {
    force_delete(a, "rr").await;
    let (status, _, body) = create(a, json!({"room": "rr", "messageEn": name})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert!(
        within(async || {
            let log = replica.log();
            log.contains("restarted here") || log.contains("room deleted (through another")
        })
        .await,
        "{name} kept the deleted room's runtime: {}",
        replica.log()
    );
}

/// A keyed join right after a room is created again is one ticket on every replica: a replica
/// that has not learnt of the new generation yet has its join refused by the store (its
/// generation is gone), learns the room's document at once and joins the new generation, with
/// the new generation's secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_join_right_after_a_create_again_is_one_ticket_on_every_replica() {
    let redis = RedisServer::start();
    let a = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let (status, _, body) = create(&a, json!({"room": "rr", "paused": true})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let keyed = async |app: &TestApp, key: &str| {
        let response = app
            .join_request("rr")
            .header("Idempotency-Key", key)
            .send()
            .await
            .expect("join");
        let status = response.status();
        let body: serde_json::Value = response.json().await.expect("join body");
        (
            status,
            body["ticketId"].as_str().unwrap_or_default().to_owned(),
        )
    };
    assert!(
        within(async || keyed(&b, "warm-up").await.0.is_success()).await,
        "B never took joins"
    );
    for round in 0..5 {
        force_delete(&a, "rr").await;
        let (status, _, body) = create(&a, json!({"room": "rr", "paused": true})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let key = format!("shopper-{round}");
        // B answers 410 for a tick if its sync fell between the delete and the create.
        let mut through_b = StatusCode::GONE;
        let mut id_b = String::new();
        for _ in 0..40 {
            (through_b, id_b) = keyed(&b, &key).await;
            if through_b != StatusCode::GONE {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let (through_a, id_a) = keyed(&a, &key).await;
        assert!(
            through_b.is_success() && through_a.is_success(),
            "{through_b} {through_a}"
        );
        assert_eq!(id_a, id_b, "round {round}: two tickets for one key");
        let generation = redis.cli(&["HGET", "vestibule:{rr}:room", "gen"]);
        let queue = format!("vestibule:{{rr}}:g{generation}:queue");
        assert_eq!(redis.cli(&["ZCARD", &queue]), "1", "round {round}");
    }
}

/// A create that Redis takes but does not confirm in time (stalled past the store timeout)
/// answers 504; once Redis answers again, the room it made is there, and the create retried with
/// its `Idempotency-Key` and the same settings answers as the first would have (201), so a
/// client's retry is safe; without the key it is another create of an existing room (409).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_caught_in_a_redis_stall_is_made_once_and_its_retry_answers_it() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    assert_eq!(redis.cli(&["CLIENT", "PAUSE", "2500", "ALL"]), "OK");
    let (status, _, body) = create_keyed(&app, json!({"room": "stalled"})).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    let deadline = Instant::now() + Duration::from_secs(8);
    while redis.cli(&["HGET", "vestibule:{stalled}:room", "state"]) != "live" {
        assert!(Instant::now() < deadline, "the create never landed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, _, body) = create_keyed(&app, json!({"room": "stalled"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _, body) = create(&app, json!({"room": "stalled"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "without a key: {body}");
    // Not for other settings: that is another operator's create.
    let (status, _, body) = create(&app, json!({"room": "stalled", "paused": true})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        within(async || {
            let response = app.join_request("stalled").send().await.expect("join");
            response.status().is_success()
        })
        .await,
        "the room created once Redis answered takes no joins"
    );
}

/// A deleted generation's keys are removed after its document says deleted; when Redis refuses
/// the removal, the room is deleted all the same (nothing writes those keys any more), and the
/// next create of the slug removes what is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_redis_refuses_is_finished_by_the_next_create() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let (status, _, body) = create(&app, json!({"room": "rr"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(redis.cli(&["HGET", "vestibule:{rr}:room", "gen"]), "1");
    redis.cli(&["SET", "vestibule:{rr}:g1:left-behind", "1"]);
    assert_eq!(redis.cli(&["ACL", "SETUSER", "default", "-unlink"]), "OK");
    force_delete(&app, "rr").await;
    assert_eq!(redis.cli(&["ACL", "SETUSER", "default", "+unlink"]), "OK");
    assert_eq!(
        redis.cli(&["HGET", "vestibule:{rr}:room", "state"]),
        "deleted"
    );
    assert_eq!(
        redis.cli(&["SISMEMBER", "vestibule:{_catalog}:rooms", "rr"]),
        "0"
    );
    assert_eq!(redis.cli(&["EXISTS", "vestibule:{rr}:g1:left-behind"]), "1");
    let (status, _, body) = create(&app, json!({"room": "rr"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert!(
        within(async || {
            let response = app.join_request("rr").send().await.expect("join");
            response.status().is_success()
        })
        .await,
        "the room created again takes no joins"
    );
    assert!(
        within(async || redis.cli(&["EXISTS", "vestibule:{rr}:g1:left-behind"]) == "0").await,
        "the earlier generation's keys stayed"
    );
}

/// A create writes the room's whole document in one step (`create.lua`): no command outside
/// that script run writes the document, and the run writes every setting (`closed` here) with
/// the state `live`, so nobody sees (nor joins) half a room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_writes_the_whole_document_in_one_step() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let (status, _, _) = create(&app, json!({"room": "rr"})).await;
    assert_eq!(status, StatusCode::CREATED);
    force_delete(&app, "rr").await;
    for slug in ["rr", "fresh"] {
        let seen = create_under_monitor(&redis, &app, json!({"room": slug, "closed": true})).await;
        let doc = format!("\"vestibule:{{{slug}}}:room\"");
        let writes: Vec<usize> = seen
            .iter()
            .enumerate()
            .filter(|(_, line)| line.contains(&doc) && !line.contains("\"HGETALL\""))
            .filter(|(_, line)| !line.contains("\"HMGET\"") && !line.contains("\"HGET\""))
            .filter(|(_, line)| !line.contains("\"EVALSHA\"") && !line.contains("\"EVAL\""))
            .map(|(at, _)| at)
            .collect();
        assert!(!writes.is_empty(), "{slug}: {seen:#?}");
        assert!(
            writes.iter().all(|at| seen[*at].contains(" lua] ")),
            "{slug}: the document written outside a script: {seen:#?}"
        );
        // One script run: from its EVALSHA to the next command not from a script.
        let start = seen[..writes[0]]
            .iter()
            .rposition(|line| line.contains("\"EVALSHA\""))
            .expect("the script's call");
        let end = seen[writes[0]..]
            .iter()
            .position(|line| !line.contains(" lua] "))
            .map_or(seen.len(), |at| writes[0] + at);
        assert!(
            writes.iter().all(|at| (start..end).contains(at)),
            "{slug}: the document written by more than one run: {seen:#?}"
        );
        let run = &seen[start..end];
        assert!(
            run.iter().any(|line| line.contains("\"state\" \"live\"")),
            "{slug}: {run:#?}"
        );
        assert!(
            run.iter().any(|line| line.contains("\"closed\" \"1\"")),
            "{slug}: {run:#?}"
        );
        let join = app.join_request(slug).send().await.expect("join");
        assert_eq!(
            join.status(),
            StatusCode::CONFLICT,
            "{slug}: a join in a closed room"
        );
    }
}

/// Every command Redis ran while `app` created a room of `body`, as `MONITOR` printed them.
async fn create_under_monitor(
    redis: &RedisServer,
    app: &TestApp,
    body: serde_json::Value,
) -> Vec<String> {
    let mut monitor = std::process::Command::new("redis-cli")
        .arg("-s")
        .arg(redis.socket_path())
        .arg("MONITOR")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("redis-cli MONITOR runs");
    let mut lines = std::io::BufReader::new(monitor.stdout.take().expect("stdout"));
    let mut first = String::new();
    std::io::BufRead::read_line(&mut lines, &mut first).expect("MONITOR answers");
    assert_eq!(first.trim(), "OK");
    let (status, _, answer) = create(app, body).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    redis.cli(&["ECHO", "created"]);
    let mut seen = Vec::new();
    for line in std::io::BufRead::lines(lines) {
        let line = line.expect("MONITOR line");
        if line.contains("\"ECHO\" \"created\"") {
            break;
        }
        seen.push(line);
    }
    let _ = monitor.kill();
    let _ = monitor.wait();
    seen
}

/// Redis restarted without persistence loses the rooms' documents and the index too: a replica
/// running a room writes its document back as it holds it (the first replica's copy wins) and
/// indexes it, so the room keeps taking joins, under the generation it ran under (no replica
/// restarts it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_redis_lost_is_listed_again_by_the_replica_running_it() {
    let mut redis = RedisServer::start();
    let app = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let room =
        json!({"room": "drop-7", "admissionRatePerSec": 3, "paused": true, "messageEn": "kept"});
    let (status, _, _) = create(&app, room).await;
    assert_eq!(status, StatusCode::CREATED);
    app.patch_room("drop-7", json!({"admissionRatePerSec": 4, "stock": 9}))
        .await;
    // A few syncs, so that the runtime has read its document.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let generation = redis.cli(&["HGET", "vestibule:{drop-7}:room", "gen"]);
    redis.restart();
    assert!(
        within(async || {
            let listed = redis.cli(&["SMEMBERS", "vestibule:{_catalog}:rooms"]);
            listed.contains("drop-7") && listed.contains("main")
        })
        .await,
        "the rooms were not listed again"
    );
    assert!(
        within(async || {
            let response = app.join_request("drop-7").send().await.expect("join");
            response.status().is_success()
        })
        .await,
        "the room stopped taking joins"
    );
    // Written back under the generation it ran under: not taken for a room created again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!app.log().contains("restarted here"), "{}", app.log());
    // With the settings it ran with, not the command line's defaults (the default rate,
    // unpaused).
    let expected = (json!(4.0), json!(true), json!("kept"), json!(9));
    let mut settings = serde_json::Value::Null;
    let restored = within(async || {
        settings = room_settings(&app, "drop-7").await.1;
        let shown = (
            settings["admissionRatePerSec"].clone(),
            settings["paused"].clone(),
            settings["messageEn"].clone(),
            settings["stock"].clone(),
        );
        shown == expected
    })
    .await;
    assert!(restored, "{settings}");
    // Changes after it take effect.
    app.patch_room("drop-7", json!({"paused": false, "messageEn": "after"}))
        .await;
    assert!(
        within(async || {
            let url = app.url(&paths::room("drop-7"));
            let info: serde_json::Value = app
                .client
                .get(url)
                .send()
                .await
                .expect("room info")
                .json()
                .await
                .unwrap_or_default();
            info["state"] == "OPEN" && info["messageEn"] == "after"
        })
        .await,
        "the change after the restore never took effect"
    );
    // A change made as soon as Redis is back stays: a replica's later write-back of its older
    // copy does not undo it.
    redis.restart();
    let early = json!({"messageEn": "early"});
    assert!(
        within(async || {
            let (status, _, _) = admin(
                &app,
                reqwest::Method::PATCH,
                &paths::admin_room("drop-7"),
                Some(early.clone()),
            )
            .await;
            status == StatusCode::OK
        })
        .await,
        "no change was taken after the restart"
    );
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let (_, settings) = room_settings(&app, "drop-7").await;
    assert_eq!(settings["messageEn"], "early", "{settings}");
    // Nor does it leave the room without the fields it did not name, and the room keeps its
    // generation.
    assert_eq!(
        (&settings["admissionRatePerSec"], &settings["stock"]),
        (&json!(4.0), &json!(9)),
        "{settings}"
    );
    assert_eq!(
        redis.cli(&["HGET", "vestibule:{drop-7}:room", "gen"]),
        generation
    );
}

/// A document lost while the room stays indexed (a key evicted or deleted by hand): the
/// scheduler finds it missing at its lease and writes back every field its runtime holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_lost_alone_are_written_back_as_held() {
    let redis = RedisServer::start();
    let app = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let room = json!({"room": "drop-8", "admissionRatePerSec": 3, "messageEn": "kept", "stock": 9});
    let (status, _, _) = create(&app, room).await;
    assert_eq!(status, StatusCode::CREATED);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, before) = room_settings(&app, "drop-8").await;
    assert_eq!(redis.cli(&["DEL", "vestibule:{drop-8}:room"]), "1");
    let mut settings = serde_json::Value::Null;
    let restored = within(async || {
        settings = room_settings(&app, "drop-8").await.1;
        settings["messageEn"] == "kept"
    })
    .await;
    assert!(restored, "{settings}");
    for field in [
        "admissionRatePerSec",
        "stock",
        "queueingMethod",
        "tokenTtlSecs",
    ] {
        assert_eq!(settings[field], before[field], "{field}: {settings}");
    }
}

/// A Redis written by an earlier version (settings in `vestibule:{r}:settings`, the catalog under
/// `vestibule:rooms…` with its deletion marks and incarnations) is moved into room documents at the
/// first start, once (docs/operating.md, "Upgrading"); its rooms become generation 0, whose keys
/// are the old ones, so waiting shoppers carry on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_under_the_old_key_names_is_moved_once_at_start() {
    let redis = RedisServer::start();
    // As the earlier version left it: drop-1 paused with one shopper waiting, gone-1 deleted.
    redis.cli(&["SADD", "vestibule:rooms", "drop-1"]);
    redis.cli(&["HSET", "vestibule:rooms:deleted", "gone-1", "1764000000000"]);
    redis.cli(&["HSET", "vestibule:rooms:incarnations", "drop-1", "i1"]);
    redis.cli(&[
        "HSET",
        "vestibule:{drop-1}:settings",
        "rate",
        "20",
        "paused",
        "1",
        "ttl_ms",
        "300000",
        "cap",
        "",
        "checkout",
        "",
        "share",
        "0",
        "ver",
        "1764000000000001",
        "stock",
        "",
        "wait_en",
        "old message",
    ]);
    redis.cli(&[
        "ZADD",
        "vestibule:{drop-1}:queue",
        "1",
        "waitingticketid0000000",
    ]);
    redis.cli(&["SET", "vestibule:{drop-1}:seq", "1"]);
    redis.cli(&["SET", "vestibule:{gone-1}:gone", "1764000000000"]);
    let after = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    assert_eq!(listed_rooms(&after).await, ["drop-1", "main"]);
    assert_eq!(
        after
            .poll("drop-1", "waitingticketid0000000")
            .await
            .position,
        Some(1)
    );
    let (_, settings) = room_settings(&after, "drop-1").await;
    assert_eq!(
        (&settings["paused"], &settings["messageEn"]),
        (&json!(true), &json!("old message")),
        "{settings}"
    );
    for old in ["vestibule:rooms", "vestibule:{drop-1}:settings"] {
        assert_eq!(redis.cli(&["EXISTS", old]), "0", "{old} is left behind");
    }
    assert!(
        after
            .log()
            .contains("moved the rooms of an earlier version"),
        "{}",
        after.log()
    );
    // A change and a join carry on in generation 0.
    after.patch_room("drop-1", json!({"paused": false})).await;
    let (_, joined) = after.join("drop-1", None).await;
    assert!(
        joined.position.is_some() || joined.entry_token.is_some(),
        "{joined:?}"
    );
}

/// `POST /api/v1/admin/rooms` with an `Idempotency-Key`, as a client that retries its creates
/// sends it: status, headers and body.
async fn create_keyed(
    app: &TestApp,
    body: serde_json::Value,
) -> (StatusCode, reqwest::header::HeaderMap, serde_json::Value) {
    let response = app
        .client
        .post(app.url(&paths::admin_rooms()))
        .bearer_auth(vestibule_tests::ADMIN_TOKEN)
        .header(vestibule_shared::IDEMPOTENCY_KEY_HEADER, "create-stalled-1")
        .json(&body)
        .send()
        .await
        .expect("admin request");
    let (status, headers) = (response.status(), response.headers().clone());
    let body = response.json().await.unwrap_or(serde_json::Value::Null);
    (status, headers, body)
}
