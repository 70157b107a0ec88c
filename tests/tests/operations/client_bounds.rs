//! Every wait on a client has a bound: shutdown ends within its grace, a client that stops
//! reading is dropped after the write timeout, and streams that never read hold bounded memory;
//! an SSE follower that keeps reading holds shutdown no longer than the grace.

use std::process::Stdio;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vestibule_shared::paths;
use vestibule_tests::{Backend, TestApp};

/// A client that pipelines `count` requests for the OpenAPI document on one connection with a
/// 4 KB receive buffer and never reads.
async fn stalled_reader(app: &TestApp, count: usize) -> tokio::net::TcpStream {
    let address: std::net::SocketAddr = app.base.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(address).await.unwrap();
    let request = format!("GET {} HTTP/1.1\r\nHost: test\r\n\r\n", paths::OPENAPI);
    let mut pipelined = Vec::with_capacity(request.len() * count);
    for _ in 0..count {
        pipelined.extend_from_slice(request.as_bytes());
    }
    // The server stops reading once its answers back up; write what it takes.
    let _ = tokio::time::timeout(Duration::from_secs(2), stream.write_all(&pipelined)).await;
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_within_the_grace_even_with_a_client_that_never_reads() {
    let mut app = TestApp::spawn(
        Backend::Memory,
        &["--shutdown-grace-secs", "2", "--write-timeout-secs", "600"],
    )
    .await;
    let _stalled = stalled_reader(&app, 1500).await;
    // Let the server fill the socket: its answers now wait on a client that never reads.
    tokio::time::sleep(Duration::from_secs(1)).await;
    app.signal("TERM");
    let started = Instant::now();
    let exit = app.wait_exit(Duration::from_secs(10)).await;
    let took = started.elapsed();
    println!("exit {exit:?} after {took:?}");
    assert!(exit.is_some(), "still running 10 s after SIGTERM");
    // The grace and then at once: the connection is dropped, nothing else waits.
    assert!(
        took < Duration::from_secs(3),
        "took {took:?} with a 2 s grace"
    );
    assert!(
        app.log().contains("still open after the shutdown grace"),
        "{}",
        app.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_dropped_after_the_write_timeout() {
    let app = TestApp::spawn(Backend::Memory, &["--write-timeout-secs", "2"]).await;
    let mut stalled = stalled_reader(&app, 1500).await;
    let document_bytes = app.get_bytes(paths::OPENAPI).await.len();
    tokio::time::sleep(Duration::from_secs(4)).await;
    // The server has closed the connection: reading drains what was buffered, then ends.
    let mut received = 0usize;
    let mut buffer = vec![0u8; 64 * 1024];
    let drained = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stalled.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received += n,
            }
        }
    })
    .await;
    println!("received {received} of {} bytes", 1500 * document_bytes);
    assert!(drained.is_ok(), "the connection is still open");
    assert!(received < 1500 * document_bytes, "every answer was sent");
    // Everyone else is served meanwhile.
    assert_eq!(app.get_json(paths::HEALTHZ).await.0, StatusCode::OK);
}

/// A live `curl -N` follower reads every keep-alive, so no write timeout ends it (unlike a client
/// that stops reading): with a 2 s shutdown grace, SIGTERM ends the process within the grace
/// plus a margin, and the follower's stream ends too instead of hanging.
// Reports: tokio-rs/axum#2673, hyper/hyper#2787 (open SSE streams blocked graceful shutdown).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_process_within_the_grace_while_an_sse_follower_keeps_reading() {
    let mut app = TestApp::spawn(
        Backend::Memory,
        &["--shutdown-grace-secs", "2", "--sse-refresh-ms", "200"],
    )
    .await;
    app.patch_room("main", json!({"paused": true})).await;
    let (_, ticket) = app.join("main", None).await;
    let mut curl = tokio::process::Command::new("curl")
        .args(["-sN", "-H", "Accept: text/event-stream"])
        .arg(app.url(&paths::events("main", &ticket.ticket_id)))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("curl runs");
    let mut stdout = curl.stdout.take().unwrap();
    let mut first = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), stdout.read(&mut first))
        .await
        .expect("the stream sent its first event")
        .unwrap();
    let first = String::from_utf8_lossy(&first[..n]).into_owned();
    assert!(first.contains("data:"), "{first}");
    // Keep draining, as a browser would, so the server's writes never block.
    let reader = tokio::spawn(async move {
        let mut total = 0usize;
        let mut buffer = vec![0u8; 4096];
        while let Ok(n) = stdout.read(&mut buffer).await {
            if n == 0 {
                break;
            }
            total += n;
        }
        total
    });
    app.signal("TERM");
    let started = Instant::now();
    let exit = app.wait_exit(Duration::from_secs(15)).await;
    let took = started.elapsed();
    let curl_exit = tokio::time::timeout(Duration::from_secs(5), curl.wait()).await;
    println!("vestibule exit {exit:?} after {took:?}; curl {curl_exit:?}");
    assert!(exit.is_some(), "still running 15 s after SIGTERM");
    assert!(
        took < Duration::from_secs(5),
        "took {took:?} with a 2 s grace"
    );
    assert!(curl_exit.is_ok(), "the SSE follower is still connected");
    let _ = reader.await;
}

/// Resident memory of a process, KiB (`VmRSS`).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_sse_streams_that_never_read_hold_bounded_memory_while_the_room_admits() {
    const STREAMS: usize = 1000;
    let app = TestApp::spawn(
        Backend::Memory,
        &["--admission-rate", "20", "--write-timeout-secs", "5"],
    )
    .await;
    app.patch_room("main", json!({"paused": true})).await;
    let mut tickets = Vec::with_capacity(STREAMS);
    for _ in 0..STREAMS {
        tickets.push(app.join("main", None).await.1.ticket_id);
    }
    let before = rss_kib(app.pid());
    let address: std::net::SocketAddr = app.base.trim_start_matches("http://").parse().unwrap();
    let mut streams = Vec::with_capacity(STREAMS);
    for ticket in &tickets {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut stream = socket.connect(address).await.unwrap();
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n\r\n",
            paths::events("main", ticket)
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        streams.push(stream);
    }
    app.patch_room("main", json!({"paused": false})).await;
    let mut samples = Vec::new();
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        samples.push(rss_kib(app.pid()));
    }
    let peak = samples.iter().copied().max().unwrap_or(0);
    let per_stream = peak.saturating_sub(before) * 1024 / STREAMS as u64;
    println!(
        "RSS before {before} KiB, with {STREAMS} non-reading SSE streams while admitting: \
         {samples:?} KiB; {per_stream} B per stream"
    );
    // Bounded: no growth with time once the streams are open, and a small cost per stream.
    assert!(per_stream < 64 * 1024, "{per_stream} B per stream");
    let last = *samples.last().unwrap();
    assert!(
        last <= samples[1] + 16 * 1024,
        "memory kept growing: {samples:?}"
    );
    assert_eq!(app.get_json(paths::HEALTHZ).await.0, StatusCode::OK);
    drop(streams);
}
