//! Embedding (issue 18): a room's `checkoutUrl` (a path here or a URL on a `--cors-origins`
//! storefront, anything else 400 `invalid_field`), followed by `TOKEN_ISSUED`; the
//! `shareTokenWithEmbedder` switch; what `…/embedding` tells a framed page or the widget.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use vestibule_shared::{error_code, paths, TicketState};
use vestibule_tests::{both_stores, Backend, TestApp, ADMIN_TOKEN};

const SHOP: &str = "https://shop.example";
const WAIT: Duration = Duration::from_secs(10);

async fn patch(app: &TestApp, body: Value) -> (StatusCode, Value) {
    let response = app
        .client
        .patch(app.url(&paths::admin_room("main")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .expect("PATCH");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

both_stores!(the_checkout_url_is_checked_kept_and_followed,);

async fn the_checkout_url_is_checked_kept_and_followed(backend: Backend) {
    let app = TestApp::spawn(backend, &["--cors-origins", SHOP, "--admission-rate", "0"]).await;
    let (_, before) = app.get_json(&paths::admin_room("main")).await;
    let (status, settings) = patch(&app, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{before}");
    assert_eq!(settings["checkoutUrl"], Value::Null);
    assert_eq!(settings["shareTokenWithEmbedder"], false);

    for bad in [
        json!("https://evil.example/checkout"),
        json!("https://shop.example.evil.example/"),
        json!("http://shop.example/checkout"),
        json!("//evil.example/"),
        json!("/\\evil.example"),
        json!("javascript:alert(1)"),
        json!("checkout"),
        json!("/a b"),
        json!(""),
        json!(format!("/{}", "a".repeat(2048))),
    ] {
        let (status, body) = patch(&app, json!({"checkoutUrl": bad})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["error"], error_code::INVALID_FIELD, "{bad}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("checkoutUrl must be"), "{message}");
    }
    for wrong_type in [json!(7), json!(["/x"]), json!({"url": "/x"})] {
        let (status, body) = patch(&app, json!({"checkoutUrl": wrong_type})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
    let (status, body) = patch(&app, json!({"shareTokenWithEmbedder": "yes"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // A storefront URL on a configured origin: kept, and in TOKEN_ISSUED.
    let checkout = "https://shop.example/cart/checkout?from=queue";
    let settings = app
        .patch_room(
            "main",
            json!({"checkoutUrl": checkout, "shareTokenWithEmbedder": true}),
        )
        .await;
    assert_eq!(settings["checkoutUrl"], checkout);
    assert_eq!(settings["shareTokenWithEmbedder"], true);
    let (_, embedding) = app.get_json("/api/v1/rooms/main/embedding").await;
    assert_eq!(
        embedding,
        json!({"room": "main", "allowedOrigins": [SHOP], "shareTokenWithEmbedder": true})
    );
    let (_, ticket) = app.join("main", None).await;
    app.patch_room("main", json!({"admissionRatePerSec": 50}))
        .await;
    let admitted = app
        .poll_until("main", &ticket.ticket_id, WAIT, |s| {
            s.status == TicketState::TokenIssued
        })
        .await;
    assert_eq!(admitted.checkout_url.as_deref(), Some(checkout));

    // A path here; then null: the demo checkout again.
    let settings = app
        .patch_room("main", json!({"checkoutUrl": "/buy?step=2"}))
        .await;
    assert_eq!(settings["checkoutUrl"], "/buy?step=2");
    assert_eq!(settings["shareTokenWithEmbedder"], true, "unchanged");
    let settings = app.patch_room("main", json!({"checkoutUrl": null})).await;
    assert_eq!(settings["checkoutUrl"], Value::Null);
    let (_, ticket) = app.join("main", None).await;
    let admitted = app
        .poll_until("main", &ticket.ticket_id, WAIT, |s| {
            s.status == TicketState::TokenIssued
        })
        .await;
    assert_eq!(
        admitted.checkout_url.as_deref(),
        Some("/checkout?room=main")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_storefront_origins_only_paths_are_checkout_urls_and_nothing_is_told() {
    let app = TestApp::spawn(Backend::Memory, &["--checkout-url", "/store/checkout"]).await;
    let (_, settings) = patch(&app, json!({})).await;
    assert_eq!(
        settings["checkoutUrl"], "/store/checkout",
        "the flag seeds the room"
    );
    let (status, body) = patch(&app, json!({"checkoutUrl": "https://shop.example/"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, embedding) = app.get_json("/api/v1/rooms/main/embedding").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(embedding["allowedOrigins"], json!([]));
    assert_eq!(embedding["shareTokenWithEmbedder"], false);
    let (status, body) = app.get_json("/api/v1/rooms/nope/embedding").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");

    // The flag is checked at start like the PATCH.
    let output = std::process::Command::new(vestibule_tests::vestibule_binary())
        .args(["--checkout-url", "https://evil.example/"])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--checkout-url"), "{stderr}");
}
