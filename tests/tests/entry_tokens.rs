//! Signed entry tokens, black-box: the JWKS, interop with PyJWT, the storefront's consume and
//! release endpoints across replicas, key rotation, and the tokens that must be refused.

use std::path::Path;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use vestibule_shared::TicketState;
use vestibule_tests::{
    entry_claims, python_tool, workspace_root, RedisServer, TestApp, ADMIN_TOKEN,
};

const ORIGIN_KEY: &str = "origin-key-for-tests-0123456789";

/// `POST …/entries/consume` with the origin key `key` (none = no Authorization).
async fn consume(app: &TestApp, room: &str, token: &str, key: Option<&str>) -> (StatusCode, Value) {
    let mut request = app
        .client
        .post(app.url(&format!("/api/v1/rooms/{room}/entries/consume")))
        .json(&json!({"entryToken": token}));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("consume answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `POST …/entries/release` by the token's holder (`X-Entry-Token`).
async fn release_as_holder(app: &TestApp, room: &str, token: &str) -> (StatusCode, Value) {
    let response = app
        .client
        .post(app.url(&format!("/api/v1/rooms/{room}/entries/release")))
        .header("X-Entry-Token", token)
        .send()
        .await
        .expect("release answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `POST …/entries/release` by the storefront (origin key, token in the body).
async fn release_with_key(app: &TestApp, room: &str, token: &str) -> (StatusCode, Value) {
    let response = app
        .client
        .post(app.url(&format!("/api/v1/rooms/{room}/entries/release")))
        .bearer_auth(ORIGIN_KEY)
        .json(&json!({"entryToken": token}))
        .send()
        .await
        .expect("release answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The room's active users as the store counts them now (admin API).
async fn active_users(app: &TestApp, room: &str) -> u64 {
    let response = app
        .client
        .get(app.url(&format!("/api/v1/admin/rooms/{room}")))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("admin GET");
    response.json::<Value>().await.unwrap()["activeUsers"]
        .as_u64()
        .expect("activeUsers")
}

/// The JWKS and its `kid`s.
async fn jwks(app: &TestApp) -> (Value, Vec<String>) {
    let response = app
        .client
        .get(app.url("/.well-known/jwks.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["cache-control"], "public, max-age=300");
    let body: Value = response.json().await.unwrap();
    let kids = body["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|key| key["kid"].as_str().unwrap().to_owned())
        .collect();
    (body, kids)
}

/// The `kid` in a token's header.
fn kid_of(token: &str) -> String {
    let header = token.split('.').next().unwrap();
    let claims = entry_claims(&format!("x.{header}.x"));
    claims["kid"].as_str().unwrap().to_owned()
}

/// A fresh Ed25519 key as PKCS#8 PEM, made by Python's `cryptography` (as an operator's tool would).
fn ed25519_pem(path: &Path) {
    let script =
        "from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey\n\
        from cryptography.hazmat.primitives import serialization as s\n\
        import sys\n\
        open(sys.argv[1], 'wb').write(Ed25519PrivateKey.generate().private_bytes(\
        s.Encoding.PEM, s.PrivateFormat.PKCS8, s.NoEncryption()))";
    let status = std::process::Command::new(python_tool("python"))
        .args(["-c", script, path.to_str().unwrap()])
        .status()
        .expect("python runs");
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyjwt_verifies_a_real_token_from_the_jwks_and_refuses_tampered_and_foreign_ones() {
    let app = TestApp::spawn_with_url(
        None,
        &[
            "--token-issuer",
            "https://queue.example",
            "--token-audience",
            "shop",
        ],
    )
    .await;
    let (ticket, token) = app.admitted("main").await;
    let (keys, kids) = jwks(&app).await;
    assert_eq!(keys["keys"][0]["kty"], "OKP");
    assert_eq!(keys["keys"][0]["crv"], "Ed25519");
    assert_eq!(keys["keys"][0]["alg"], "EdDSA");
    assert_eq!(kids, [kid_of(&token)]);

    let output = tokio::process::Command::new(python_tool("python"))
        .arg(workspace_root().join("tests/interop/verify_entry_token.py"))
        .args([
            &app.url("/.well-known/jwks.json"),
            &token,
            "main",
            "https://queue.example",
            "shop",
        ])
        .output()
        .await
        .expect("python runs");
    assert!(
        output.status.success(),
        "PyJWT refused a real token: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let verdict: Value = serde_json::from_slice(&output.stdout).expect("one JSON line");
    let claims = &verdict["claims"];
    assert_eq!(verdict["kid"], kids[0].as_str());
    assert_eq!(claims["room"], "main");
    assert_eq!(claims["iss"], "https://queue.example");
    assert_eq!(claims["aud"], "shop");
    assert_ne!(
        claims["sub"],
        ticket.ticket_id.as_str(),
        "sub never names the ticket"
    );
    assert_eq!(claims["sub"].as_str().unwrap().len(), 12);
    let ttl = claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap();
    assert!(
        (299..=300).contains(&ttl),
        "exp − iat = the default token TTL (300 s): {ttl}"
    );
    assert_eq!(verdict["tampered"], "InvalidSignatureError");
    assert_eq!(verdict["foreign"], "InvalidSignatureError");
    assert_eq!(verdict["otherAudience"], "InvalidAudienceError");
    // Every poll returns the very same string.
    assert_eq!(
        app.poll("main", &ticket.ticket_id)
            .await
            .entry_token
            .as_deref(),
        Some(token.as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_without_a_key_file_share_one_key_and_consume_works_once_across_them() {
    let redis = RedisServer::start();
    let args = ["--rooms", "main,other", "--origin-api-key", ORIGIN_KEY];
    let a = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
    let b = TestApp::spawn_with_url(Some(&redis.url()), &args).await;
    assert_eq!(jwks(&a).await.1, jwks(&b).await.1, "one shared key");
    let (_, token) = a.admitted("main").await;
    let (_, other_room_token) = a.admitted("other").await;

    // The origin key is needed, and must be right.
    let (status, body) = consume(&b, "main", &token, None).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );
    let (status, body) = consume(&b, "main", &token, Some("wrong-key-wrong-key-wrong")).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("forbidden"))
    );
    // Tokens that do not verify are refused before any use.
    let mut forged = token.clone();
    forged.pop();
    forged.push(if token.ends_with('A') { 'B' } else { 'A' });
    for (bad, code) in [
        (forged.as_str(), "entry_token_unknown"),
        ("main.AAAAAAAAAAAAAAAAAAAAAA", "entry_token_unknown"),
        (other_room_token.as_str(), "entry_token_wrong_room"),
    ] {
        let (status, body) = consume(&b, "main", bad, Some(ORIGIN_KEY)).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::FORBIDDEN, Some(code)),
            "{bad}"
        );
    }

    // B verifies A's token and uses it; a second use anywhere is 409.
    let (status, claims) = consume(&b, "main", &token, Some(ORIGIN_KEY)).await;
    assert_eq!(status, StatusCode::OK, "{claims}");
    assert_eq!(claims["room"], "main");
    assert_eq!(claims["jti"], entry_claims(&token)["jti"]);
    for app in [&a, &b] {
        let (status, body) = consume(app, "main", &token, Some(ORIGIN_KEY)).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::CONFLICT, Some("entry_token_consumed"))
        );
    }
    // The demo order knows it was used too (exactly once across both kinds of use).
    let (status, body) = a.order("main", Some(&token)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("entry_token_used"))
    );
    // And an order's token cannot be consumed afterwards.
    let (_, ordered) = b.admitted("main").await;
    assert_eq!(b.order("main", Some(&ordered)).await.0, StatusCode::CREATED);
    assert_eq!(
        consume(&a, "main", &ordered, Some(ORIGIN_KEY)).await.0,
        StatusCode::CONFLICT
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_session_frees_its_place_for_the_next_shopper_at_the_next_tick() {
    let app = TestApp::spawn_with_url(
        None,
        &[
            "--max-active-users",
            "1",
            "--origin-api-key",
            ORIGIN_KEY,
            "--tick-ms",
            "100",
        ],
    )
    .await;
    let (_, first) = app.admitted("main").await;
    let (_, second) = app.join("main", None).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        app.poll("main", &second.ticket_id).await.status,
        TicketState::Waiting,
        "cap of 1"
    );
    assert_eq!(active_users(&app, "main").await, 1);

    // Releasing needs the holder's token or the origin key.
    let response = app
        .client
        .post(app.url("/api/v1/rooms/main/entries/release"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);

    let (status, body) = release_as_holder(&app, "main", &first).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"room": "main", "released": true}));
    assert_eq!(
        active_users(&app, "main").await,
        0,
        "the count drops at once"
    );
    // The released token stops working; releasing again changes nothing.
    let (status, body) = app.order("main", Some(&first)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("entry_token_used"))
    );
    assert_eq!(
        consume(&app, "main", &first, Some(ORIGIN_KEY)).await.0,
        StatusCode::CONFLICT
    );
    assert_eq!(
        release_as_holder(&app, "main", &first).await.1["released"],
        false
    );

    // The next shopper is admitted at the next tick.
    let admitted = app
        .poll_until("main", &second.ticket_id, Duration::from_secs(2), |t| {
            t.status == TicketState::TokenIssued
        })
        .await;
    let second_token = admitted.entry_token.expect("admitted after the release");
    // The storefront can release too (token in the body).
    let (status, body) = release_with_key(&app, "main", &second_token).await;
    assert_eq!(
        (status, body["released"].as_bool()),
        (StatusCode::OK, Some(true)),
        "{body}"
    );
    assert_eq!(
        app.poll("main", &second.ticket_id).await.status,
        TicketState::Left
    );
    // A forged token cannot release anything.
    let (status, body) = release_as_holder(&app, "main", "main.AAAAAAAAAAAAAAAAAAAAAA").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("entry_token_unknown"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_key_rotation_old_tokens_still_work_and_new_ones_use_the_new_kid() {
    let dir = tempfile::tempdir().unwrap();
    let (old_key, new_key) = (dir.path().join("old.pem"), dir.path().join("new.pem"));
    ed25519_pem(&old_key);
    ed25519_pem(&new_key);
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let old_key = old_key.to_str().unwrap();
    let new_key = new_key.to_str().unwrap();

    let mut before =
        TestApp::spawn_with_url(None, &["--data-dir", data, "--signing-key-file", old_key]).await;
    let (_, old_token) = before.admitted("main").await;
    let (_, spare) = before.admitted("main").await;
    let old_kid = kid_of(&old_token);
    assert_eq!(jwks(&before).await.1, std::slice::from_ref(&old_kid));
    before.signal("TERM");
    assert!(before.wait_exit(Duration::from_secs(10)).await.is_some());

    let mut after = TestApp::spawn_with_url(
        None,
        &[
            "--data-dir",
            data,
            "--signing-key-file",
            new_key,
            "--previous-signing-key-file",
            old_key,
        ],
    )
    .await;
    let (_, new_token) = after.admitted("main").await;
    let new_kid = kid_of(&new_token);
    assert_ne!(new_kid, old_kid);
    assert_eq!(
        jwks(&after).await.1,
        [new_kid.clone(), old_kid.clone()],
        "current key first"
    );
    let (status, body) = after.order("main", Some(&old_token)).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "a token signed before the rotation: {body}"
    );
    after.signal("TERM");
    assert!(after.wait_exit(Duration::from_secs(10)).await.is_some());

    // Once the old key is dropped, its tokens no longer verify.
    let dropped =
        TestApp::spawn_with_url(None, &["--data-dir", data, "--signing-key-file", new_key]).await;
    assert_eq!(jwks(&dropped).await.1, [new_kid]);
    let (status, body) = dropped.order("main", Some(&spare)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("entry_token_unknown"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entry_endpoints_are_off_without_an_origin_key_and_documented() {
    let app = TestApp::spawn_with_url(None, &[]).await;
    let (_, token) = app.admitted("main").await;
    let (status, body) = consume(&app, "main", &token, Some(ORIGIN_KEY)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("forbidden"))
    );
    let (status, body) = consume(&app, "nowhere", &token, Some(ORIGIN_KEY)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("room_not_found"))
    );
    let (_, document) = app.get_json("/api/v1/openapi.json").await;
    for path in [
        "/.well-known/jwks.json",
        "/api/v1/rooms/{room}/entries/consume",
        "/api/v1/rooms/{room}/entries/release",
    ] {
        assert!(document["paths"][path].is_object(), "{path} is documented");
    }
    // Holder release works without the origin key.
    assert_eq!(
        release_as_holder(&app, "main", &token).await.0,
        StatusCode::OK
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restarted_empty_gets_the_running_replicas_key_back_for_the_next_replica() {
    let mut redis = RedisServer::start();
    let first = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    let (_, token) = first.admitted("main").await;
    // Redis comes back without persistence: the shared key is gone …
    redis.stop();
    redis.restart();
    assert_eq!(redis.cli(&["EXISTS", "vestibule:signing-key"]).trim(), "0");
    // … and the running replica writes its copy back at its next upkeep (every 5 s; the first
    // call after the restart may meet the broken connection and reconnect).
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while redis.cli(&["EXISTS", "vestibule:signing-key"]).trim() != "1" {
        assert!(
            std::time::Instant::now() < deadline,
            "the key was not written back"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A replica started now signs and verifies with the same key.
    let second = TestApp::spawn_with_url(Some(&redis.url()), &[]).await;
    assert_eq!(jwks(&second).await.1, [kid_of(&token)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_layer_on_a_protected_prefix_verifies_offline_then_asks_the_store() {
    let app = TestApp::spawn_with_url(
        None,
        &[
            "--rooms",
            "main,other",
            "--protected-prefixes",
            "/api/v1/rooms/{room}/orders,/api/v1/rooms/{room}/vip",
        ],
    )
    .await;
    let (_, token) = app.admitted("main").await;
    let (_, other_room) = app.admitted("other").await;
    let vip = |token: Option<&str>| {
        let mut request = app.client.get(app.url("/api/v1/rooms/main/vip/lounge"));
        if let Some(token) = token {
            request = request.header("X-Entry-Token", token);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    // A live token passes the layer (the route itself does not exist here: 404 not_found).
    let (status, body) = vip(Some(&token)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
    for (bad, code) in [
        (None, "entry_token_missing"),
        (Some("main.AAAAAAAAAAAAAAAAAAAAAA"), "entry_token_unknown"),
        (Some(other_room.as_str()), "entry_token_wrong_room"),
    ] {
        let (status, body) = vip(bad).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::FORBIDDEN, Some(code)),
            "{bad:?}"
        );
    }
    // Once released, the same token is refused by the layer: the store says it is over.
    assert_eq!(
        release_as_holder(&app, "main", &token).await.0,
        StatusCode::OK
    );
    let (status, body) = vip(Some(&token)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("entry_token_used"))
    );
}

/// The three-step rotation of docs/storefront.md, "Rotating the signing key", as a rolling restart
/// of two replicas on one Redis with shoppers admitted throughout: each step restarts one replica
/// at a time, and after every restart a token issued by each replica is used at the other (a
/// storefront's consume), and one issued before the rotation at the end. No token is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_rotation_over_two_replicas_refuses_no_token() {
    let dir = tempfile::tempdir().unwrap();
    let (old_key, new_key) = (dir.path().join("old.pem"), dir.path().join("new.pem"));
    ed25519_pem(&old_key);
    ed25519_pem(&new_key);
    let (old_key, new_key) = (old_key.to_str().unwrap(), new_key.to_str().unwrap());
    let redis = RedisServer::start();
    let spawn = |keys: Vec<&str>| {
        let args: Vec<String> = ["--origin-api-key", ORIGIN_KEY, "--admission-rate", "1000"]
            .iter()
            .chain(&keys)
            .map(|arg| (*arg).to_owned())
            .collect();
        let url = redis.url();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            TestApp::spawn_with_url(Some(&url), &args).await
        }
    };
    let steps: [Vec<&str>; 4] = [
        vec!["--signing-key-file", old_key],
        vec![
            "--signing-key-file",
            old_key,
            "--next-signing-key-file",
            new_key,
        ],
        vec![
            "--signing-key-file",
            new_key,
            "--previous-signing-key-file",
            old_key,
        ],
        vec!["--signing-key-file", new_key],
    ];
    let mut replicas = [spawn(steps[0].clone()).await, spawn(steps[0].clone()).await];
    let (_, held_since_the_start) = replicas[0].admitted("main").await;
    let old_kid = kid_of(&held_since_the_start);
    let mut kids_seen = std::collections::BTreeSet::new();
    let mut used = 0;
    for (step, keys) in steps.iter().enumerate().skip(1) {
        for restarted in 0..2 {
            replicas[restarted].signal("TERM");
            assert!(replicas[restarted]
                .wait_exit(Duration::from_secs(10))
                .await
                .is_some());
            replicas[restarted] = spawn(keys.clone()).await;
            for (issuer, user) in [(0, 1), (1, 0)] {
                let (_, token) = replicas[issuer].admitted("main").await;
                kids_seen.insert(kid_of(&token));
                let (status, body) =
                    consume(&replicas[user], "main", &token, Some(ORIGIN_KEY)).await;
                assert_eq!(
                    status,
                    StatusCode::OK,
                    "step {step}, replica {restarted} restarted: a token of replica {issuer} at replica {user}: {body}"
                );
                used += 1;
            }
            if step == 2 && restarted == 1 {
                // Both sign with the new key now; a token of the old one still works.
                let (status, body) = consume(
                    &replicas[1],
                    "main",
                    &held_since_the_start,
                    Some(ORIGIN_KEY),
                )
                .await;
                assert_eq!(status, StatusCode::OK, "{body}");
            }
        }
        let published = jwks(&replicas[0]).await.1;
        assert_eq!(published, jwks(&replicas[1]).await.1, "step {step}");
        if step == 1 {
            // The next key is announced before anyone signs with it.
            assert_eq!(published.len(), 2, "{published:?}");
            assert!(published.contains(&old_kid));
        }
    }
    assert_eq!(used, 12);
    assert_eq!(kids_seen.len(), 2, "both keys signed during the rotation");
}
