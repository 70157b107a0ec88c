//! Bad input: only JSON 4xx answers, and the queue unchanged.

use crate::paused_app;
use vestibule_shared::paths;
use vestibule_tests::{both_stores, on_redis_cluster_too, Backend};

both_stores!(bad_input_gets_only_json_4xx_and_leaves_the_queue_unchanged,);

// The same flows on a Redis Cluster (tests/tests/cluster.rs: the cluster's own tests).
on_redis_cluster_too!(bad_input_gets_only_json_4xx_and_leaves_the_queue_unchanged,);

/// (method, path, one header, JSON body, expected status).
type BadInputCase = (
    &'static str,
    String,
    Option<(&'static str, String)>,
    Option<String>,
    u16,
);

async fn bad_input_gets_only_json_4xx_and_leaves_the_queue_unchanged(backend: Backend) {
    let app = paused_app(backend, &["--max-body-bytes", "1024"]).await;
    let (_, keeper) = app.join("main", Some("keeper")).await;
    let big = "x".repeat(4096);
    let long_room = "a".repeat(10_000);
    let admin = || {
        Some((
            "Authorization",
            format!("Bearer {}", vestibule_tests::ADMIN_TOKEN),
        ))
    };
    let cases: Vec<BadInputCase> = vec![
        ("POST", paths::tickets("nope"), None, None, 404),
        ("POST", paths::tickets("MAIN"), None, None, 404),
        ("POST", paths::tickets(&long_room), None, None, 404),
        ("POST", paths::tickets("%E2%9C%93"), None, None, 404),
        ("GET", paths::ticket("main", "short"), None, None, 400),
        (
            "GET",
            paths::ticket("main", "AAAAAAAAAAAAAAAAAAAAAA"),
            None,
            None,
            404,
        ),
        (
            "GET",
            paths::ticket("main", "..%2F..%2Fetc"),
            None,
            None,
            400,
        ),
        ("DELETE", paths::ticket("main", "%00"), None, None, 400),
        (
            "POST",
            paths::tickets("main"),
            Some(("Idempotency-Key", "k".repeat(500))),
            None,
            400,
        ),
        (
            "POST",
            paths::tickets("main"),
            Some(("Idempotency-Key", "has space".into())),
            None,
            400,
        ),
        (
            "POST",
            paths::tickets("main"),
            Some(("X-User-Assertion", "u.1.abc".into())),
            None,
            403,
        ),
        (
            "PATCH",
            paths::admin_room("main"),
            admin(),
            Some("{not json".into()),
            400,
        ),
        (
            "PATCH",
            paths::admin_room("main"),
            admin(),
            Some(r#"{"admissionRatePerSec":"fast"}"#.into()),
            400,
        ),
        (
            "PATCH",
            paths::admin_room("main"),
            admin(),
            Some(r#"{"admissionRatePerSec":-5}"#.into()),
            400,
        ),
        (
            "PATCH",
            paths::admin_room("main"),
            admin(),
            Some(r#"{"tokenTtlSecs":0}"#.into()),
            400,
        ),
        (
            "PATCH",
            paths::admin_room("main"),
            admin(),
            Some(r#"{"bogus":true}"#.into()),
            400,
        ),
        (
            "PATCH",
            paths::admin_room("main"),
            admin(),
            Some("[50, true]".into()),
            400,
        ),
        (
            "PATCH",
            paths::admin_room("main"),
            admin(),
            Some(r#"{"maxActiveUsers":0}"#.into()),
            400,
        ),
        (
            "PATCH",
            paths::admin_room("main"),
            admin(),
            Some(format!(r#"{{"pad":"{big}"}}"#)),
            413,
        ),
        (
            "PATCH",
            paths::admin_room("main"),
            None,
            Some("{}".into()),
            401,
        ),
        (
            "PATCH",
            paths::admin_room("main"),
            Some(("Authorization", "Bearer wrong-token-wrong-token".into())),
            Some("{}".into()),
            403,
        ),
        (
            "POST",
            paths::orders("main"),
            Some(("X-Entry-Token", "\u{e9}t\u{e9}".into())),
            None,
            403,
        ),
        (
            "POST",
            paths::tickets("main"),
            Some(("Idempotency-Key", "cl\u{e9}".into())),
            None,
            400,
        ),
        (
            "POST",
            paths::orders("main"),
            Some(("X-Entry-Token", big.clone())),
            Some("{}".into()),
            403,
        ),
        ("PUT", paths::tickets("main"), None, None, 405),
        (
            "GET",
            format!("{}/nothing-here", paths::API_V1),
            None,
            None,
            404,
        ),
    ];
    for (method, path, header, body, expected) in cases {
        let mut request = app.client.request(method.parse().unwrap(), app.url(&path));
        if let Some((name, value)) = &header {
            // Raw bytes, so non-ASCII (obs-text) values reach the server as a client could send them.
            let value =
                reqwest::header::HeaderValue::from_bytes(&latin1(value)).expect("header bytes");
            request = request.header(*name, value);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let text = response.text().await.unwrap_or_default();
        assert_eq!(
            status,
            expected,
            "{method} {} {header:?} → {status} {text}",
            &path[..path.len().min(60)]
        );
        assert!(
            content_type.starts_with("application/json"),
            "{method} {path}: {content_type}"
        );
        let body: serde_json::Value = serde_json::from_str(&text).expect("JSON error body");
        assert!(
            body["error"].is_string() && body["message"].is_string(),
            "{text}"
        );
    }
    let info = app.get_json(&paths::room("main")).await.1;
    assert_eq!(info["waiting"], 1, "rejected requests changed the queue");
    assert_eq!(app.poll("main", &keeper.ticket_id).await.position, Some(1));
}

/// Encodes chars up to U+00FF as single bytes (how HTTP/1.1 carries obs-text).
fn latin1(text: &str) -> Vec<u8> {
    text.chars().map(|c| c as u32 as u8).collect()
}
