//! Entry tokens at the gate: an expired one, the `pass` outage policy's offline check, and the
//! table of tokens shared with the storefront's layer.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use vestibule_tests::Backend;

use crate::origin::Origin;
use crate::{admitted, gate_in_front_of, json_of, no_redirects, open_session, seen_header};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_opens_no_session_and_passes_no_gate() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &["--token-ttl-secs", "1"]).await;
    let token = admitted(&app, "main").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, _, refused) = json_of(open_session(&app, "main", &token, json!({})).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(refused["error"], "entry_token_expired", "{refused}");
    let (status, _, refused) = json_of(
        app.client
            .get(app.url("/checkout"))
            .header("x-entry-token", &token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(refused["error"], "entry_token_expired", "{refused}");
    assert!(
        origin.paths().is_empty(),
        "the origin saw {:?}",
        origin.paths()
    );
}

/// With the store down and the room's outage policy `pass`, a gated request passes on the
/// offline check alone (signature, expiry, room) and the origin still gets the claims; a forged
/// token is still refused; under the default policy the gate answers 503.
#[tokio::test]
async fn with_the_store_down_the_pass_policy_checks_tokens_offline() {
    let origin = Origin::start().await;
    let mut app = gate_in_front_of(
        &origin,
        Backend::Redis,
        &["--outage-policy", "reject,main=pass"],
    )
    .await;
    let main = admitted(&app, "main").await;
    let flash = admitted(&app, "flash").await;
    app.redis.as_mut().unwrap().stop();
    let (status, _, echoed) = json_of(
        app.client
            .get(app.url("/checkout"))
            .header("x-entry-token", &main)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{echoed}");
    let claims: Value = serde_json::from_str(&seen_header(&echoed, "x-vestibule-entry"))
        .expect("the claims, from the offline check");
    assert_eq!(claims["room"], "main");
    let (status, _, refused) = json_of(
        app.client
            .get(app.url("/checkout"))
            .header("x-entry-token", "main.AAAAAAAAAAAAAAAAAAAAAA")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    // The other room keeps the default policy: no pass while admission cannot be asked.
    let (status, _, refused) = json_of(
        app.client
            .get(app.url("/rooms/flash/pay"))
            .header("x-entry-token", &flash)
            .header("accept", "application/json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");
}

/// The shared table of tokens (`vestibule_tests::entry_cases`, also run against the storefront's
/// layer): each gets the same refusal at the gate, and none reaches the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_table_of_tokens_is_refused_at_the_gate_as_at_the_layer() {
    use vestibule_tests::entry_cases;
    let dir = tempfile::tempdir().unwrap();
    let key = entry_cases::key_file(dir.path());
    let origin = Origin::start().await;
    let app = gate_in_front_of(
        &origin,
        Backend::Memory,
        &["--signing-key-file", key.to_str().unwrap()],
    )
    .await;
    let (_, keys) = app.get_json("/.well-known/jwks.json").await;
    let kid = keys["keys"][0]["kid"].as_str().unwrap().to_owned();
    let client = no_redirects();
    for case in entry_cases::cases(&kid, "main", "storefront") {
        let mut request = client.get(app.url("/checkout"));
        if let Some(token) = &case.token {
            request = request.header("x-entry-token", token);
        }
        let (status, _, body) = json_of(request.send().await.unwrap()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{}: {body}", case.name);
        assert_eq!(body["error"], case.code, "{}", case.name);
    }
    assert!(
        origin.paths().is_empty(),
        "the origin saw {:?}",
        origin.paths()
    );
    let token = admitted(&app, "main").await;
    let passed = client
        .get(app.url("/checkout"))
        .header("x-entry-token", token)
        .send()
        .await
        .unwrap();
    assert_eq!(passed.status(), StatusCode::OK);
}
