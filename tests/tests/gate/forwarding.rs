//! What the origin learns of the client: hop-by-hop headers and forged forwarding headers stop
//! at the gate; behind a trusted proxy its chain is kept and HTTPS sessions get secure cookies.

use reqwest::StatusCode;
use serde_json::{json, Value};
use vestibule_tests::Backend;

use crate::origin::Origin;
use crate::{admitted, gate_in_front_of, json_of, seen_header, PREFIX};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_through_the_gate_loses_hop_by_hop_headers_and_forged_forwarding() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;
    let token = admitted(&app, "main").await;
    let output = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            "-i",
            "-X",
            "POST",
            "--data-binary",
            "payload",
        ])
        .args(["-H", "Connection: keep-alive, X-Private-Hop"])
        .args(["-H", "X-Private-Hop: secret"])
        .args(["-H", "Keep-Alive: timeout=5"])
        .args(["-H", "Proxy-Authorization: Basic eDp5"])
        .args(["-H", "TE: trailers"])
        .args(["-H", "X-Forwarded-For: 6.6.6.6"])
        .args(["-H", "X-Forwarded-Proto: https"])
        .args(["-H", "X-Vestibule-Entry: {\"room\":\"main\"}"])
        .args(["-H", &format!("X-Entry-Token: {token}")])
        .arg(app.url("/checkout?via=curl"))
        .output()
        .await
        .expect("curl is installed");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (_, body) = text.split_once("\r\n\r\n").expect("head and body");
    let echoed: Value = serde_json::from_str(body).unwrap();
    assert_eq!(echoed["method"], "POST");
    assert_eq!(echoed["query"], "via=curl");
    assert_eq!(echoed["body"], "payload");
    for hop in ["x-private-hop", "keep-alive", "proxy-authorization", "te"] {
        assert_eq!(
            seen_header(&echoed, hop),
            "",
            "{hop} reached the origin: {echoed}"
        );
    }
    assert_eq!(seen_header(&echoed, "x-forwarded-for"), "127.0.0.1");
    assert_eq!(seen_header(&echoed, "x-forwarded-proto"), "http");
    let claims: Value = serde_json::from_str(&seen_header(&echoed, "x-vestibule-entry")).unwrap();
    assert_eq!(claims["room"], "main");
    assert!(
        claims["sub"].is_string() && claims["exp"].is_u64(),
        "{claims}"
    );

    // The origin's own hop-by-hop header stops at the gate (it does send it: asked directly).
    let direct = reqwest::get(format!("{}/hop", origin.url())).await.unwrap();
    assert!(direct.headers().contains_key("x-origin-hop"));
    let proxied = app.client.get(app.url("/hop")).send().await.unwrap();
    assert!(!proxied.headers().contains_key("x-origin-hop"));
    assert_eq!(proxied.headers()["x-end-to-end"], "kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_the_chain_is_kept_and_https_sessions_get_secure_cookies() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(
        &origin,
        Backend::Memory,
        &["--client-ip-header", "X-Forwarded-For"],
    )
    .await;
    let (status, _, echoed) = json_of(
        app.client
            .get(app.url("/products"))
            .header("x-forwarded-for", "6.6.6.6, 198.51.100.7")
            .header("x-forwarded-proto", "https")
            .header("x-forwarded-host", "shop.example")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        seen_header(&echoed, "x-forwarded-for"),
        "198.51.100.7, 127.0.0.1"
    );
    assert_eq!(seen_header(&echoed, "x-forwarded-proto"), "https");
    assert_eq!(seen_header(&echoed, "x-forwarded-host"), "shop.example");

    let token = admitted(&app, "main").await;
    let response = app
        .client
        .post(app.url(&format!("{PREFIX}api/v1/rooms/main/session")))
        .header("x-forwarded-proto", "https")
        .json(&json!({"entryToken": token}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let cookie = response.headers()["set-cookie"].to_str().unwrap();
    assert!(cookie.split("; ").any(|part| part == "Secure"), "{cookie}");
}
