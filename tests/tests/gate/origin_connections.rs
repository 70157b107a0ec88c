//! The gate's connections to the origin, and what origins and clients send passed on as HTTP
//! says an intermediary does, against the raw origin of `raw_origin.rs`.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use vestibule_tests::Backend;

use crate::origin::Origin;
use crate::raw_origin::{exchange, gate_on_counting_origin, raw_get};
use crate::{gate_in_front_of, json_of, no_redirects, raw_exchange, PREFIX};

/// The gate's connections to the origin: kept alive and used by one answer at a time; answers
/// with no body (`HEAD`, 204) give their connection back too; an answer whose reader went away
/// mid-body takes its connection with it; a kept-alive connection the origin closed is not used
/// again, and a bodyless idempotent request the origin dropped unanswered goes out once more on
/// a new connection (no 502 for the keep-alive race), a POST never, nor a GET that a fresh
/// connection dropped.
#[tokio::test]
async fn origin_connections_are_kept_alive_lent_per_answer_and_dropped_when_unusable() {
    use std::sync::atomic::Ordering;
    let (app, mut client, accepted, requests) = gate_on_counting_origin().await;
    let address = app.base.trim_start_matches("http://").to_owned();
    for round in 0..20 {
        let answer = exchange(&mut client, &raw_get("/products"), 2).await;
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "round {round}: {answer}"
        );
        let answer = exchange(
            &mut client,
            "HEAD /products HTTP/1.1\r\nHost: shop.example\r\n\r\n",
            0,
        )
        .await;
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "round {round}: {answer}"
        );
        let answer = exchange(&mut client, &raw_get("/empty"), 0).await;
        assert!(
            answer.starts_with("HTTP/1.1 204"),
            "round {round}: {answer}"
        );
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "60 answers, one after another, over one kept-alive origin connection"
    );

    // The origin closes after each answer, unannounced: every request is still answered.
    for round in 0..10 {
        let answer = exchange(&mut client, &raw_get("/close"), 2).await;
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "round {round}: {answer}"
        );
    }
    let after_closes = accepted.load(Ordering::SeqCst);
    assert!(
        (10..=12).contains(&after_closes),
        "one connection per closed answer: {after_closes}"
    );

    // The keep-alive race, made certain: the origin drops the kept-alive connection as the
    // next request arrives on it. A GET goes out once more on a new connection (as nginx does);
    // a POST with a body is never sent twice: 502.
    let answer = exchange(&mut client, &raw_get("/drop-next"), 2).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let answer = exchange(&mut client, &raw_get("/products"), 2).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "a GET on a connection the origin dropped: {answer}"
    );
    let answer = exchange(&mut client, &raw_get("/drop-next"), 2).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let post = "POST /orders HTTP/1.1\r\nHost: shop.example\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nbody";
    let answer = exchange(&mut client, post, 0).await;
    assert!(
        answer.starts_with("HTTP/1.1 502"),
        "a POST is not sent twice: {answer}"
    );
    // A GET that a fresh connection drops unanswered is the origin failing on that request,
    // not the race: not sent twice either (nginx resends on a cached connection only). The
    // origin closes the connection of `/close`; the pause lets the gate see it, so `/crash`
    // goes out on a new connection.
    let answer = exchange(&mut client, &raw_get("/close"), 2).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let answer = exchange(&mut client, &raw_get("/crash"), 0).await;
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    let crashes = requests
        .lock()
        .unwrap()
        .iter()
        .filter(|line| *line == "GET /crash")
        .count();
    assert_eq!(crashes, 1, "sent once");

    // A reader that leaves mid-body: its origin connection (still sending) is not lent again.
    let mut leaving = tokio::net::TcpStream::connect(&address).await.unwrap();
    let first = exchange(&mut leaving, &raw_get("/held"), 0).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    drop(leaving);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let answer = exchange(&mut client, &raw_get("/products"), 2).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("ok"), "{answer}");
}

/// Real origins and clients behind the gate: what the origin sends and what the client gets are
/// what HTTP says an intermediary passes on (and what nginx does).
#[tokio::test]
async fn what_origins_and_clients_send_is_passed_on_as_http_says() {
    let (app, mut client, _, requests) = gate_on_counting_origin().await;

    // Content-Length beside Transfer-Encoding: the length is dropped (RFC 9112 §6.3), the
    // 3-byte body arrives whole and the connection stays usable.
    let answer = exchange(&mut client, &raw_get("/clte"), 0).await;
    let answer = if answer.ends_with("\r\n0\r\n\r\n") {
        answer
    } else {
        let mut rest = answer.into_bytes();
        while !rest.ends_with(b"\r\n0\r\n\r\n") {
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(Duration::from_secs(5), client.read(&mut chunk))
                .await
                .unwrap()
                .unwrap();
            assert!(
                n > 0,
                "closed mid-answer: {:?}",
                String::from_utf8_lossy(&rest)
            );
            rest.extend_from_slice(&chunk[..n]);
        }
        String::from_utf8(rest).unwrap()
    };
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        !answer.to_ascii_lowercase().contains("content-length"),
        "{answer}"
    );
    assert!(answer.contains("abc"), "{answer}");
    let next = exchange(&mut client, &raw_get("/products"), 2).await;
    assert!(next.starts_with("HTTP/1.1 200"), "{next}");

    // A repeated length from the origin (`3, 3`, all agreeing) reaches the client as one.
    let answer = exchange(&mut client, &raw_get("/cl33"), 3).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("content-length: 3\r\n"), "{answer}");
    assert!(answer.ends_with("abc"), "{answer}");

    // 150 Set-Cookie lines: all passed on, none folded (hyper's default limit is 100 lines).
    let answer = exchange(&mut client, &raw_get("/many"), 2).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(answer.matches("set-cookie: c").count(), 150, "{answer}");

    // HEAD with no length from the origin: no invented `Content-Length: 0` (RFC 9110 §8.6), and
    // the connection goes on.
    let answer = exchange(
        &mut client,
        "HEAD /nolength HTTP/1.1\r\nHost: shop.example\r\n\r\n",
        0,
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        !answer.to_ascii_lowercase().contains("content-length"),
        "{answer}"
    );
    let next = exchange(&mut client, &raw_get("/products"), 2).await;
    assert!(next.starts_with("HTTP/1.1 200"), "{next}");

    // An unreadable answer is the origin's answer, not a dropped connection: 502 that says so,
    // and the GET is not sent twice.
    let answer = exchange(&mut client, &raw_get("/malformed"), 0).await;
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert!(answer.contains("cannot be passed on"), "{answer}");
    let sent = requests
        .lock()
        .unwrap()
        .iter()
        .filter(|line| *line == "GET /malformed")
        .count();
    assert_eq!(sent, 1, "a GET the origin answered is sent once");

    // An HTTP/1.1 request without Host: 400 (RFC 9112 §3.2), never the origin's own address;
    // the asterisk form for another method than OPTIONS: 400 (RFC 9112 §3.2.4).
    let answer = raw_exchange(&app, "GET /products HTTP/1.1\r\nAccept: */*\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let answer = raw_exchange(&app, "GET * HTTP/1.1\r\nHost: shop.example\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(!requests
        .lock()
        .unwrap()
        .iter()
        .any(|line| line.ends_with(" *")));

    // The origin behind a gate with rules: cookies, preflights, `Expect`, `Location`.
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;
    // Cookies sent on separate lines over HTTP/2 reach the HTTP/1.1 origin as one line.
    let output = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "--http2-prior-knowledge",
            "-H",
            "Cookie: session_id=S123",
            "-H",
            "Cookie: cart=C9",
        ])
        .arg(app.url("/account"))
        .output()
        .await
        .expect("curl is installed");
    let echo: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    assert_eq!(
        echo["headers"]["cookie"],
        json!(["session_id=S123; cart=C9"]),
        "{echo}"
    );

    // A CORS preflight of a gated path goes to the origin (it carries no credentials).
    let client = no_redirects();
    let preflight = client
        .request(reqwest::Method::OPTIONS, app.url("/checkout"))
        .header("origin", "https://shop.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "x-entry-token")
        .send()
        .await
        .unwrap();
    let (status, _, echo) = json_of(preflight).await;
    assert_eq!(status, StatusCode::OK, "{echo}");
    assert_eq!(echo["method"], "OPTIONS");
    // The request it clears still meets the gate.
    let refused = client.post(app.url("/checkout")).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);

    // `Expect: 100-continue` to a gated path without a token: refused at once, no `100
    // Continue` asking for the body first.
    let answer = raw_exchange(
        &app,
        "POST /checkout HTTP/1.1\r\nHost: shop.example\r\nContent-Type: application/json\r\n\
         Content-Length: 1000000\r\nExpect: 100-continue\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(!answer.contains("100 Continue"), "{answer}");

    // A new ticket's Location is under the mount prefix, where the API is.
    let joined = reqwest::Client::new()
        .post(app.url(&format!("{PREFIX}api/v1/rooms/main/tickets")))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(joined.status(), StatusCode::CREATED);
    let location = joined.headers()["location"].to_str().unwrap().to_owned();
    assert!(
        location.starts_with("/_vestibule/api/v1/rooms/main/tickets/"),
        "{location}"
    );
    let followed = reqwest::get(app.url(&location)).await.unwrap();
    assert_eq!(followed.status(), StatusCode::OK, "{location}");
    assert!(origin.paths().iter().all(|path| !path.contains("tickets")));
}
