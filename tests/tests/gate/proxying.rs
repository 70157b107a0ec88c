//! Proxying to the origin: a slow origin gets 504, a stopped one 502 while the queue keeps
//! working; bodies stream both ways and upgrades become tunnels; an HTTP/1.0 origin is answered
//! in the client's version.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use futures_util::StreamExt as _;
use reqwest::StatusCode;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vestibule_tests::{Backend, TestApp};

use crate::origin::Origin;
use crate::{gate_in_front_of, json_of, PREFIX};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_origin_gets_504_and_a_stopped_one_502_while_the_queue_keeps_working() {
    let mut origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;

    let started = Instant::now();
    let (status, headers, slow) =
        json_of(app.client.get(app.url("/slow")).send().await.unwrap()).await;
    let took = started.elapsed();
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{slow}");
    assert_eq!(slow["error"], "upstream_timeout");
    assert!(headers.contains_key("retry-after"));
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(4),
        "{took:?}"
    );

    let waiting: Value = app
        .client
        .post(app.url(&format!("{PREFIX}api/v1/rooms/main/tickets")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ticket = waiting["ticketId"].as_str().unwrap().to_owned();

    origin.stop().await;
    // Proxied paths fail fast with 502 (JSON for clients, a page for browsers) …
    let started = Instant::now();
    let (status, headers, down) =
        json_of(app.client.get(app.url("/products")).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{down}");
    assert_eq!(down["error"], "upstream_unavailable");
    assert!(headers.contains_key("retry-after"));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let page = app
        .client
        .get(app.url("/"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::BAD_GATEWAY);
    assert!(page.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));

    // … while joins, polls, the page and the event stream keep answering.
    let (status, _, joined) = json_of(
        app.client
            .post(app.url(&format!("{PREFIX}api/v1/rooms/main/tickets")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{joined}");
    let (status, _, polled) = json_of(
        app.client
            .get(app.url(&format!("{PREFIX}api/v1/rooms/main/tickets/{ticket}")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{polled}");
    let page = app.client.get(app.url(PREFIX)).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let events = app
        .client
        .get(app.url(&format!(
            "{PREFIX}api/v1/rooms/main/tickets/{ticket}/events"
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    let mut stream = events.bytes_stream();
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("an event within 5 s")
        .expect("a chunk")
        .unwrap();
    assert!(String::from_utf8_lossy(&first).contains("event: status"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_stream_both_ways_and_upgrades_pass_through() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;

    // Download: the first chunk arrives before the origin writes the second.
    let response = app.client.get(app.url("/stream")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut chunks = response.bytes_stream();
    let first = tokio::time::timeout(Duration::from_secs(5), chunks.next())
        .await
        .expect("the first chunk before the last was written: not buffered")
        .unwrap()
        .unwrap();
    assert_eq!(&first[..], b"first;");
    origin.seen.release_stream.notify_one();
    let mut rest = Vec::new();
    while let Some(chunk) = chunks.next().await {
        rest.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(rest, b"second");

    // Upload: the origin has the first chunk before the client sends the second.
    let started = origin.seen.upload_started.clone();
    let streamed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = streamed.clone();
    let body = futures_util::stream::once(async {
        Ok::<_, std::io::Error>(Bytes::from(vec![b'a'; 1000]))
    })
    .chain(futures_util::stream::once(async move {
        let arrived = tokio::time::timeout(Duration::from_secs(5), started.notified()).await;
        flag.store(arrived.is_ok(), std::sync::atomic::Ordering::SeqCst);
        Ok(Bytes::from(vec![b'b'; 500]))
    }));
    let (status, _, counted) = json_of(
        app.client
            .put(app.url("/upload"))
            .body(reqwest::Body::wrap_stream(body))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{counted}");
    assert_eq!(counted["bytes"], 1500);
    assert!(
        streamed.load(std::sync::atomic::Ordering::SeqCst),
        "the upload was buffered"
    );

    // An HTTP/1.1 upgrade (a WebSocket's handshake) becomes a tunnel to the origin.
    let address = app.base.trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    socket
        .write_all(
            b"GET /ws HTTP/1.1\r\nHost: shop.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        )
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            socket.read(&mut byte).await.unwrap(),
            1,
            "closed in the head"
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("upgrade: websocket"), "{head}");
    socket.write_all(b"ping through the gate").await.unwrap();
    let mut echoed = vec![0u8; 21];
    tokio::time::timeout(Duration::from_secs(5), socket.read_exact(&mut echoed))
        .await
        .expect("the tunnel echoes")
        .unwrap();
    assert_eq!(&echoed, b"ping through the gate");
}

// An origin that answers HTTP/1.0 (Python's `http.server`): passing that version on would give
// an HTTP/1.1 client `HTTP/1.0 200 OK` and close its kept-alive connection after every answer.
// The gate answers in the client's own version.
#[tokio::test]
async fn an_http_1_0_origin_is_answered_in_the_clients_version_on_a_kept_alive_connection() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = vec![0u8; 4096];
                let _ = socket.read(&mut request).await;
                let _ = socket
                    .write_all(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\norigin")
                    .await;
            });
        }
    });
    let upstream = format!("http://{origin}");
    let app = TestApp::spawn(Backend::Memory, &["--upstream", &upstream]).await;
    let address = app.base.trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    for round in 0..2 {
        socket
            .write_all(b"GET /products HTTP/1.1\r\nHost: shop.example\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !answer.ends_with(b"origin") && Instant::now() < deadline {
            let mut chunk = vec![0u8; 4096];
            match tokio::time::timeout(Duration::from_secs(5), socket.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => answer.extend_from_slice(&chunk[..n]),
                _ => break,
            }
        }
        let text = String::from_utf8_lossy(&answer).into_owned();
        println!("round {round}: {text}");
        assert!(text.starts_with("HTTP/1.1 200"), "round {round}: {text:?}");
        assert!(text.ends_with("origin"), "round {round}: {text:?}");
        assert!(
            !text.to_ascii_lowercase().contains("connection: close"),
            "round {round}: {text:?}"
        );
    }
}
