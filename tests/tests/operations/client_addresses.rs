//! Client addresses behind proxies: what the join limit counts as one client, in
//! `X-Forwarded-For` and in RFC 7239 `Forwarded`, over IPv4 and IPv6.

use serde_json::json;
use vestibule_shared::paths;
use vestibule_tests::{Backend, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_pick_its_address_with_a_forwarded_header_line_of_its_own() {
    let app = TestApp::behind_proxy_with_join_limit("3", &[]).await;
    let mut statuses = Vec::new();
    for i in 0..6 {
        // The client's made-up line first, then the line the proxy appended.
        let mut headers = reqwest::header::HeaderMap::new();
        headers.append("x-forwarded-for", format!("10.9.8.{i}").parse().unwrap());
        headers.append("x-forwarded-for", "198.51.100.7".parse().unwrap());
        let response = app
            .client
            .post(app.url(&paths::tickets("main")))
            .headers(headers)
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [201, 201, 201, 429, 429, 429]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_trusted_proxies_the_address_the_outer_one_saw_is_the_client() {
    let app = TestApp::behind_proxy_with_join_limit("1", &["--trusted-proxy-hops", "2"]).await;
    let join = |chain: &'static str| {
        app.client
            .post(app.url(&paths::tickets("main")))
            .header("X-Forwarded-For", chain)
            .send()
    };
    // Client spoofs the first entry; the CDN appended the real client, the proxy the CDN.
    let statuses = [
        join("6.6.6.1, [2001:db8::7]:51000, 10.0.0.2")
            .await
            .unwrap()
            .status(),
        join("6.6.6.2, 2001:db8::7, 10.0.0.2")
            .await
            .unwrap()
            .status(),
        join("6.6.6.3, 203.0.113.9, 10.0.0.2")
            .await
            .unwrap()
            .status(),
    ];
    assert_eq!(statuses.map(|s| s.as_u16()), [201, 429, 201]);
}

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

/// With `--client-ip-header Forwarded` and one join a minute per client, the same client written
/// in another legal RFC 7239 form shares its allowance, a client-written element before the
/// proxy's does not matter, and `unknown`, obfuscated or malformed values fall back to the peer.
// Reports: primus/forwarded-for#7, lpinca/forwarded-parse#7 (RFC 7239 forms real proxies send).
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

/// An IPv6 shopper is given a whole /64 and picks any address in it for each connection, so the
/// join limit counts a /64 as one client; an IPv4 client written by a dual-stack proxy as
/// `::ffff:a.b.c.d` stays that client. The proxy here is honest: it appends what it saw.
// Reports: zulip/zulip#21544, actix-ratelimit#22, AspNetCoreRateLimit#32, technocore-chat#733.
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
