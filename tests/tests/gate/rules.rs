//! What a gated path asks for: the API and the key set under the prefix, a refusal that names
//! the waiting room, the claims an admitted request carries to the origin, a refused body that
//! keeps its connection, and OPTIONS that is no bare preflight.

use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::header;
use reqwest::StatusCode;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vestibule_tests::Backend;

use crate::origin::Origin;
use crate::{
    admitted, gate_in_front_of, json_of, no_redirects, seen_header, SystemTimeSecs, PREFIX,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_client_is_refused_then_admitted_with_its_token_and_the_origin_sees_the_claims() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;

    // Vestibule lives under the prefix; the root belongs to the origin, health stays.
    let (status, _, info) = json_of(
        app.client
            .get(app.url(&format!("{PREFIX}api/v1/rooms/main")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{info}");
    assert_eq!(info["room"], "main");
    let (status, _, echoed) = json_of(
        app.client
            .get(app.url("/api/v1/rooms/main"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        echoed["path"], "/api/v1/rooms/main",
        "the origin answers the root: {echoed}"
    );
    assert_eq!(app.get_json("/healthz").await.0, StatusCode::OK);
    assert_eq!(app.get_json("/readyz").await.0, StatusCode::OK);
    let bare = no_redirects()
        .get(app.url("/_vestibule?room=main"))
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(
        bare.headers()[header::LOCATION.as_str()],
        "/_vestibule/?room=main"
    );
    let (_, _, document) = json_of(
        app.client
            .get(app.url(&format!("{PREFIX}api/v1/openapi.json")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(document["paths"]["/api/v1/rooms/{room}/session"]["post"].is_object());
    assert_eq!(
        document["servers"][0]["url"], "/_vestibule",
        "clients must call the API under the prefix"
    );
    // The key set is where JWT libraries look for it, and under the prefix too.
    for path in [
        "/.well-known/jwks.json",
        "/_vestibule/.well-known/jwks.json",
    ] {
        let (status, _, keys) = json_of(app.client.get(app.url(path)).send().await.unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(keys["keys"][0]["crv"], "Ed25519", "{path}: {keys}");
    }

    // No token: 403 JSON naming the waiting room; the origin never hears of it.
    let (status, headers, refused) = json_of(
        app.client
            .get(app.url("/checkout"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(refused["error"], "entry_token_missing", "{refused}");
    assert_eq!(
        refused["joinUrl"],
        "/_vestibule/?room=main&return=%2Fcheckout"
    );
    assert_eq!(headers["cache-control"], "no-store");
    assert!(!origin.paths().contains(&"/checkout".to_owned()));

    // Admitted: the token passes; the origin gets the claims, never a client's own.
    let token = admitted(&app, "main").await;
    let before = SystemTimeSecs::now();
    let (status, _, echoed) = json_of(
        app.client
            .post(app.url("/checkout/pay?x=1"))
            .header("x-entry-token", &token)
            .header(
                "x-vestibule-entry",
                r#"{"room":"main","sub":"forged","exp":9999999999}"#,
            )
            .header("X-Vestibule-Admin", "yes")
            .body("order=1")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{echoed}");
    assert_eq!(echoed["method"], "POST");
    assert_eq!(echoed["path"], "/checkout/pay");
    assert_eq!(echoed["query"], "x=1");
    assert_eq!(echoed["body"], "order=1");
    let claims: Value = serde_json::from_str(&seen_header(&echoed, "x-vestibule-entry"))
        .expect("one claims header");
    assert_eq!(claims["room"], "main");
    assert_ne!(claims["sub"], "forged");
    assert_eq!(claims["sub"].as_str().unwrap().len(), 12, "{claims}");
    let exp = claims["exp"].as_u64().unwrap();
    assert!(
        (before + 290..=before + 301).contains(&exp),
        "exp {exp} vs now {before}"
    );
    assert_eq!(seen_header(&echoed, "x-vestibule-admin"), "");
    assert_eq!(seen_header(&echoed, "x-forwarded-for"), "127.0.0.1");
    assert_eq!(seen_header(&echoed, "x-forwarded-proto"), "http");
    assert_eq!(
        seen_header(&echoed, "x-forwarded-host"),
        app.base.trim_start_matches("http://")
    );

    // A path no rule gates goes through without a token, and without any claims.
    let (status, _, echoed) = json_of(
        app.client
            .get(app.url("/products?q=shoes"))
            .header("x-vestibule-entry", "forged")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(echoed["query"], "q=shoes");
    assert_eq!(seen_header(&echoed, "x-vestibule-entry"), "");

    // Other rooms' and made-up tokens are refused (a room that does not exist: `paths.rs`).
    let flash = admitted(&app, "flash").await;
    for (token, code) in [
        (flash.as_str(), "entry_token_wrong_room"),
        ("main.AAAAAAAAAAAAAAAAAAAAAA", "entry_token_unknown"),
        ("garbage", "entry_token_unknown"),
    ] {
        let (status, _, refused) = json_of(
            app.client
                .get(app.url("/checkout"))
                .header("x-entry-token", token)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{token}");
        assert_eq!(refused["error"], code, "{token}: {refused}");
        assert!(refused["joinUrl"].is_string());
    }
    let (status, _, _) = json_of(
        app.client
            .get(app.url("/rooms/flash/pay"))
            .header("x-entry-token", &flash)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{{room}} rules take the room from the path"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_with_a_body_gets_its_answer_and_keeps_its_connection() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;
    let address = app.base.trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    let body = vec![b'x'; 12_000];
    let head = format!(
        "POST /checkout HTTP/1.1\r\nHost: shop.test\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    // The body arrives in two parts, as over a slow link: the answer must wait for all of it.
    socket.write_all(&body[..4000]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    socket.write_all(&body[4000..]).await.unwrap();
    socket
        .write_all(b"GET /products HTTP/1.1\r\nHost: shop.test\r\n\r\n")
        .await
        .unwrap();
    let mut answers = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buffer = [0u8; 4096];
    while Instant::now() < deadline {
        let text = String::from_utf8_lossy(&answers).to_string();
        if text.matches("HTTP/1.1 ").count() >= 2 && text.ends_with('}') {
            break;
        }
        match tokio::time::timeout(Duration::from_secs(5), socket.read(&mut buffer)).await {
            Ok(Ok(0)) | Err(_) => break,
            Ok(Ok(n)) => answers.extend_from_slice(&buffer[..n]),
            Ok(Err(error)) => panic!("the connection broke: {error}"),
        }
    }
    let text = String::from_utf8_lossy(&answers);
    assert!(text.starts_with("HTTP/1.1 403"), "{text}");
    assert!(text.contains("entry_token_missing"), "{text}");
    let second = text
        .split("HTTP/1.1 ")
        .nth(2)
        .expect("a second answer on the same connection");
    assert!(second.starts_with("200"), "{text}");
    assert_eq!(
        origin.paths(),
        ["/products"],
        "the refused POST never reached the origin"
    );
}

/// An OPTIONS request to a gated path that is not a bare CORS preflight (a cookie, an
/// `Authorization`, an entry token or a body) is gated like any other method: it never reaches
/// the origin without admission. A bare preflight still does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_with_credentials_or_a_body_to_a_gated_path_never_reaches_the_origin() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;
    let client = no_redirects();
    let preflight = || {
        client
            .request(
                reqwest::Method::OPTIONS,
                app.url("/checkout?item=7&qty=100"),
            )
            .header("origin", "https://shop.example")
            .header("access-control-request-method", "POST")
    };
    for (what, request) in [
        ("a cookie", preflight().header("cookie", "session=abc")),
        (
            "Authorization",
            preflight().header("authorization", "Bearer x"),
        ),
        (
            "an entry token",
            preflight().header("x-entry-token", "forged"),
        ),
        ("a body", preflight().body("item=7&qty=100!")),
        (
            "a chunked body",
            preflight().body(reqwest::Body::wrap_stream(futures_util::stream::iter([
                Ok::<_, std::io::Error>(Bytes::from("item=7")),
            ]))),
        ),
    ] {
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), StatusCode::FORBIDDEN, "with {what}");
    }
    assert!(
        origin.paths().is_empty(),
        "the origin saw {:?}",
        origin.paths()
    );
    let bare = preflight().send().await.unwrap();
    assert_eq!(bare.status(), StatusCode::OK);
    assert_eq!(origin.paths(), ["/checkout"]);
}
