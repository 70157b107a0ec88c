//! Embedding: a room's `checkoutUrl` (a path here or a URL on a `--cors-origins`
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

/// Hostile or careless checkout URLs (open redirects through the embedder's checkout link, as in
/// public widget bug reports: `javascript:`/`data:` links, origin checks by prefix or substring,
/// userinfo, backslashes, protocol-relative URLs, case or port tricks, control characters):
/// each is a 400 `invalid_field` and the room keeps the URL it had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_checkout_urls_are_refused_and_never_stored() {
    let app = TestApp::spawn(Backend::Memory, &["--cors-origins", SHOP]).await;
    let kept = "https://shop.example/checkout";
    app.patch_room("main", json!({"checkoutUrl": kept})).await;
    let long_path = format!("/{}", "a".repeat(2048));
    let long_url = format!("{SHOP}/{}", "é".repeat(2040));
    for bad in [
        "javascript:alert(1)",
        "JavaScript:alert(document.domain)",
        " javascript:alert(1)",
        "java\tscript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:msgbox(1)",
        "//evil.example/checkout",
        "///evil.example/",
        "/\\evil.example/",
        "\\\\evil.example/",
        "/\t/evil.example",
        "/\n/evil.example",
        "https:evil.example",
        "https:/evil.example",
        "https://shop.example.evil.example/",
        "https://shop.exampleevil.example/",
        "https://shop.example@evil.example/",
        "https://shop.example:443@evil.example/",
        "https://shop.example\\@evil.example/",
        "https://shop.example%2F@evil.example/",
        "https://evil.example/https://shop.example/",
        "https://evil.example/?https://shop.example",
        "HTTPS://SHOP.EXAMPLE/checkout",
        "https://SHOP.example/checkout",
        "https://shop.example./checkout",
        "https://shop.example:8443/checkout",
        "https://shöp.example/",
        "https://shop.example\u{2028}.evil.example/",
        "https://shop.example/\u{0}",
        "/checkout\u{0}",
        "\u{feff}//evil.example",
        "http://shop.example/",
        "*",
        &long_path,
        &long_url,
    ] {
        let (status, body) = patch(&app, json!({"checkoutUrl": bad})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}: {body}");
        assert_eq!(body["error"], error_code::INVALID_FIELD, "{bad:?}: {body}");
    }
    let (_, settings) = patch(&app, json!({})).await;
    assert_eq!(settings["checkoutUrl"], kept, "nothing refused was stored");
}

/// CORS answers only the configured storefront, exactly, never with credentials or `*`, and
/// says `Vary: Origin` so no cache hands one origin's answer to another; the same for
/// `widget.js` and the page's files it loads.
/// A built page's stand-in: `index.html` naming one `.js`, `.wasm` and `.css`, and the files.
fn fake_dist() -> tempfile::TempDir {
    let dist = tempfile::tempdir().unwrap();
    std::fs::write(
        dist.path().join("index.html"),
        r#"<!doctype html><link rel="stylesheet" href="./app-1.css"><script type="module">import init from './app-1.js'; init({module_or_path: './app-1_bg.wasm'});</script>"#,
    )
    .unwrap();
    for (name, text) in [
        ("app-1.js", "export default 1"),
        ("app-1_bg.wasm", "\0asm"),
        ("app-1.css", "b{}"),
    ] {
        std::fs::write(dist.path().join(name), text).unwrap();
    }
    dist
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_answers_only_the_configured_origin_and_never_with_credentials() {
    let dist = fake_dist();
    let dist_arg = dist.path().to_string_lossy().to_string();
    let app = TestApp::spawn(
        Backend::Memory,
        &["--cors-origins", SHOP, "--static-dir", &dist_arg],
    )
    .await;
    let get = |path: &str, origin: &str| {
        app.client
            .get(app.url(path))
            .header("origin", origin)
            .send()
    };
    let widget = get("/widget.js", SHOP).await.unwrap();
    assert_eq!(widget.status(), StatusCode::OK);
    assert_eq!(
        widget.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    let module = widget.text().await.unwrap();
    assert!(
        module.contains("app-1.js") && module.contains("app-1_bg.wasm"),
        "{module}"
    );
    for path in [
        "/widget.js",
        "/app-1.js",
        "/app-1_bg.wasm",
        "/api/v1/rooms/main/embedding",
    ] {
        let allowed = get(path, SHOP).await.unwrap();
        assert_eq!(allowed.status(), StatusCode::OK, "{path}");
        let headers = allowed.headers();
        assert_eq!(headers["access-control-allow-origin"], SHOP, "{path}");
        assert!(
            !headers.contains_key("access-control-allow-credentials"),
            "{path}: {headers:?}"
        );
        let vary: Vec<_> = headers.get_all("vary").iter().collect();
        assert!(
            vary.iter().any(|v| v
                .to_str()
                .unwrap_or_default()
                .to_ascii_lowercase()
                .contains("origin")),
            "{path}: {vary:?}"
        );
        for stranger in [
            "https://evil.example",
            "null",
            "https://shop.example.evil.example",
            "http://shop.example",
            "https://shop.example:8443",
            "https://evil.example, https://shop.example",
        ] {
            let refused = get(path, stranger).await.unwrap();
            assert!(
                !refused
                    .headers()
                    .contains_key("access-control-allow-origin"),
                "{path} from {stranger}: {:?}",
                refused.headers()
            );
        }
    }
    for (method, path, headers) in [
        (
            "POST",
            paths::tickets("main"),
            "content-type,idempotency-key",
        ),
        (
            "PATCH",
            paths::admin_room("main"),
            "authorization,content-type",
        ),
        ("DELETE", paths::admin_room("main"), "authorization"),
    ] {
        for origin in ["https://evil.example", "null"] {
            let preflight = app
                .client
                .request(reqwest::Method::OPTIONS, app.url(&path))
                .header("origin", origin)
                .header("access-control-request-method", method)
                .header("access-control-request-headers", headers)
                .send()
                .await
                .unwrap();
            assert!(
                !preflight
                    .headers()
                    .contains_key("access-control-allow-origin"),
                "{method} {path} from {origin}: {:?}",
                preflight.headers()
            );
        }
    }
}

/// A careless `--cors-origins` (a space-separated list, a wildcard, a path, a default port,
/// capitals) would never match a browser's `Origin`, or would widen `frame-ancestors` to any
/// framer: the binary refuses to start and names the flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storefront_origins_that_browsers_never_send_are_refused_at_start() {
    for bad in [
        "https://shop.example https://evil.example",
        "https://shop.example *",
        "*",
        "https://*.shop.example",
        "https://shop.example;script-src",
        "https://shop.example/",
        "https://shop.example/en",
        "https://shop.example:443",
        "https://Shop.Example",
        "https://user@shop.example",
        "null",
    ] {
        let output = std::process::Command::new(vestibule_tests::vestibule_binary())
            .args(["--cors-origins", bad])
            .output()
            .expect("runs");
        assert!(!output.status.success(), "{bad:?} was accepted");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--cors-origins"), "{bad:?}: {stderr}");
    }
}

/// A careless operator drops a storefront origin from `--cors-origins` but the durable room
/// still holds a checkout URL on it: shoppers are no longer sent there (the demo checkout
/// instead), since that domain may have changed hands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkout_url_on_an_origin_dropped_since_is_not_followed() {
    let temp = tempfile::tempdir().unwrap();
    let data = temp.path().join("data");
    let dir = data.to_str().unwrap();
    let old = "https://old-shop.example/checkout";
    let mut app = TestApp::spawn_with_url(
        None,
        &[
            "--data-dir",
            dir,
            "--cors-origins",
            "https://old-shop.example",
        ],
    )
    .await;
    app.patch_room("main", json!({"checkoutUrl": old})).await;
    let (admitted, _) = app.admitted("main").await;
    assert_eq!(admitted.checkout_url.as_deref(), Some(old));
    app.signal("TERM");
    assert!(app.wait_exit(Duration::from_secs(10)).await.is_some());
    let app = TestApp::spawn_with_url(None, &["--data-dir", dir, "--cors-origins", SHOP]).await;
    let (admitted, _) = app.admitted("main").await;
    assert_eq!(
        admitted.checkout_url.as_deref(),
        Some("/checkout?room=main")
    );
}

/// In gate mode `widget.js` is under the mount prefix, with the same content type and the same
/// CORS answers; its module loads the page's files from its own folder (the prefix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_mount_prefix_widget_js_answers_the_storefront_only() {
    let dist = fake_dist();
    let dist_arg = dist.path().to_string_lossy().to_string();
    let app = TestApp::spawn(
        Backend::Memory,
        &[
            "--upstream",
            "http://127.0.0.1:9",
            "--mount-prefix",
            "/queue/",
            "--cors-origins",
            SHOP,
            "--static-dir",
            &dist_arg,
        ],
    )
    .await;
    let get = |origin: &'static str| {
        app.client
            .get(app.url("/queue/widget.js"))
            .header("origin", origin)
            .send()
    };
    let widget = get(SHOP).await.unwrap();
    assert_eq!(widget.status(), StatusCode::OK);
    assert_eq!(
        widget.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    assert_eq!(widget.headers()["access-control-allow-origin"], SHOP);
    let module = widget.text().await.unwrap();
    assert!(
        module.contains(r#"new URL("./", import.meta.url)"#),
        "{module}"
    );
    let stranger = get("https://evil.example").await.unwrap();
    assert!(!stranger
        .headers()
        .contains_key("access-control-allow-origin"));
    for file in ["app-1.js", "app-1_bg.wasm"] {
        assert!(module.contains(file), "{module}");
        let asset = app
            .client
            .get(app.url(&format!("/queue/{file}")))
            .header("origin", SHOP)
            .send()
            .await
            .unwrap();
        assert_eq!(asset.status(), StatusCode::OK, "{file}");
        assert_eq!(
            asset.headers()["access-control-allow-origin"],
            SHOP,
            "{file}"
        );
    }
}
