//! Requests an origin could read otherwise than the gate: header spellings, `Connection` lists,
//! planted cookies, broken bodies, hosts that are no hosts, path overrides, transfer codings.
//! (The path spellings are rows of the table in `paths.rs`.)

use reqwest::StatusCode;
use serde_json::Value;
use vestibule_tests::Backend;

use crate::origin::Origin;
use crate::{admitted, closing_get, gate_in_front_of, json_of, raw_exchange, seen_header};

/// Spellings of the kinds reported against other proxies (Envoy CVE-2019-9901, gunicorn #2799,
/// traefik #12961): each kept closed here.
#[tokio::test]
async fn spellings_that_an_origin_reads_otherwise_are_refused_or_neutralised() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;

    // 1. Underscore spellings of headers (read as dashes by CGI-style origins) never arrive.
    let (status, _, echoed) = json_of(
        app.client
            .get(app.url("/products"))
            .header("X_Vestibule_Entry", r#"{"room":"main","sub":"evil"}"#)
            .header("X-Vestibule_Entry", "evil")
            .header("X_Forwarded_For", "6.6.6.6")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{echoed}");
    let names: Vec<String> = echoed["headers"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert!(names.iter().all(|n| !n.contains('_')), "{names:?}");

    // 2. `Connection` cannot make the gate drop the claims it adds.
    let token = admitted(&app, "main").await;
    let (status, _, echoed) = json_of(
        app.client
            .get(app.url("/checkout"))
            .header("x-entry-token", &token)
            .header("connection", "x-vestibule-entry, host")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{echoed}");
    let claims: Value = serde_json::from_str(&seen_header(&echoed, "x-vestibule-entry"))
        .expect("the claims survive Connection");
    assert_eq!(claims["room"], "main");
    assert!(!seen_header(&echoed, "x-forwarded-host").is_empty());

    // 3. A planted cookie of the same name sent first does not lock the shopper out, and an
    //    empty X-Entry-Token does not hide the cookie.
    let (status, _, echoed) = json_of(
        app.client
            .get(app.url("/checkout"))
            .header("x-entry-token", "")
            .header(
                "cookie",
                format!("vestibule_entry_main=planted; vestibule_entry_main={token}"),
            )
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{echoed}");

    // 4. A client's broken body is the client's fault (400), not "the shop is down" (502).
    let answer = raw_exchange(
        &app,
        "POST /products HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\
         Connection: close\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");

    // 5. Two Host headers: 400 (RFC 9112 §3.2).
    let answer = raw_exchange(
        &app,
        "GET /products HTTP/1.1\r\nHost: y\r\nHost: z\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");

    // 6. Only WebSocket upgrades are tunnelled: an h2c upgrade reaches the origin as a plain
    //    request, without its Upgrade header.
    let (status, _, echoed) = json_of(
        app.client
            .get(app.url("/products"))
            .header("connection", "upgrade")
            .header("upgrade", "h2c")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{echoed}");
    assert_eq!(seen_header(&echoed, "upgrade"), "");
    let metrics = app
        .client
        .get(app.url("/metrics"))
        .bearer_auth(vestibule_tests::ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !metrics.contains("vestibule_gate_upstream_errors_total"),
        "a client's fault counted as the origin's: {metrics}"
    );
}

/// Hosts that are no hosts, path overrides and transfer codings the gate cannot pass on (after
/// Symfony CVE-2018-14773, host header poisoning, nginx's 501 for unknown transfer codings; paths
/// an origin may trim are rows in `paths.rs`): none reaches the origin.
#[tokio::test]
async fn hosts_that_are_no_hosts_and_path_overrides_never_reach_the_origin() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;

    // 1. A Host that is no host: 400 (the origin would build links from it, and it would be
    //    copied into X-Forwarded-Host).
    for host in [
        "",
        "a.example, b.example",
        "shop.test/evil",
        "user@shop.test",
        "[::1",
    ] {
        let answer = raw_exchange(&app, &closing_get("/products", host)).await;
        assert!(
            answer.starts_with("HTTP/1.1 400"),
            "Host {host:?}: {answer}"
        );
    }
    for host in ["shop.test", "shop.test:8080", "127.0.0.1:3000", "[::1]:443"] {
        let answer = raw_exchange(&app, &closing_get("/products", host)).await;
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "Host {host:?}: {answer}"
        );
    }

    // 2. Path overrides and forwarding headers a client made up never arrive.
    let (status, _, echoed) = json_of(
        app.client
            .get(app.url("/products"))
            .header("x-original-url", "/checkout")
            .header("x-rewrite-url", "/checkout")
            .header("x-forwarded-port", "8443")
            .header("x-forwarded-prefix", "/evil")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{echoed}");
    for name in [
        "x-original-url",
        "x-rewrite-url",
        "x-forwarded-port",
        "x-forwarded-prefix",
    ] {
        assert_eq!(seen_header(&echoed, name), "", "{name} reached the origin");
    }

    // 3. A transfer coding the gate cannot pass on: 501, not a body the origin misreads.
    let forwarded_before = origin.paths().len();
    let answer = raw_exchange(
        &app,
        "POST /products HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: gzip, chunked\r\n\
         Connection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 501"), "{answer}");
    assert_eq!(
        origin.paths().len(),
        forwarded_before,
        "{:?}",
        origin.paths()
    );
}
