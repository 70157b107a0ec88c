//! Hostile input (docs/guarantees.md): random requests get no 5xx; slow bodies and headers
//! are cut off.

use reqwest::StatusCode;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vestibule_shared::{paths, TicketState, TicketStatus};
use vestibule_tests::{Backend, TestApp, ADMIN_TOKEN};

/// xorshift64*: a tiny seeded generator, so a failing case can be replayed from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    fn text(&mut self, max: usize) -> String {
        let alphabet = [
            "a", "Z", "0", "-", "_", ".", "/", "%", "é", "방", "✓", "\u{202e}", " ", "\"", "{",
            "}", "%00", "..", "\\",
        ];
        let len = self.below(max + 1);
        (0..len).map(|_| *self.pick(&alphabet)).collect()
    }
}

/// (method, path, headers as raw bytes, body).
type HostileRequest = (reqwest::Method, String, Vec<(String, Vec<u8>)>, Vec<u8>);

fn hostile_request(rng: &mut Rng, valid_ticket: &str) -> HostileRequest {
    let methods = ["GET", "POST", "DELETE", "PATCH", "PUT", "OPTIONS", "HEAD"];
    let method: reqwest::Method = rng.pick(&methods).parse().unwrap();
    let room = match rng.below(6) {
        0 => "main".to_owned(),
        1 => "a".repeat(10_000),
        2 => rng.text(40),
        3 => "방".repeat(rng.below(50)),
        4 => "MAIN".to_owned(),
        _ => format!("room-{}", rng.below(100)),
    };
    let ticket = match rng.below(5) {
        0 => valid_ticket.to_owned(),
        1 => "A".repeat(22),
        2 => rng.text(30),
        3 => "x".repeat(10_000),
        _ => String::new(),
    };
    let encode = |text: &str| -> String {
        text.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    };
    let path = match rng.below(9) {
        0 => paths::tickets(&encode(&room)),
        1 => paths::ticket(&encode(&room), &encode(&ticket)),
        2 => paths::events(&encode(&room), &encode(&ticket)),
        3 => paths::room(&encode(&room)),
        4 => paths::orders(&encode(&room)),
        5 => paths::admin_room(&encode(&room)),
        6 => format!("/{}", encode(&rng.text(20))),
        7 => paths::OPENAPI.to_owned(),
        _ => format!("{}/{}", paths::API_V1, encode(&rng.text(30))),
    };
    let mut headers = Vec::new();
    for _ in 0..rng.below(4) {
        let name = rng
            .pick(&[
                "idempotency-key",
                "x-entry-token",
                "content-type",
                "authorization",
                "x-user-assertion",
                "accept",
                "x-forwarded-for",
            ])
            .to_string();
        let value: Vec<u8> = match rng.below(5) {
            0 => rng
                .text(20)
                .into_bytes()
                .into_iter()
                .filter(|b| *b >= 0x20 && *b != 0x7f)
                .collect(),
            1 => vec![b'k'; rng.below(20_000)],
            2 => b"application/json".to_vec(),
            3 => b"Bearer not-the-admin-token".to_vec(),
            _ => (0..rng.below(40))
                .map(|_| 0x80 + (rng.next() % 0x7f) as u8)
                .collect(),
        };
        headers.push((name, value));
    }
    let body: Vec<u8> = match rng.below(7) {
        0 => Vec::new(),
        1 => br#"{"sku":"x","quantity":1}"#.to_vec(),
        2 => br#"{"admissionRatePerSec":1e308,"paused":"no"}"#.to_vec(),
        3 => rng.text(200).into_bytes(),
        4 => vec![b'{'; 40_000],
        5 => (0..rng.below(300)).map(|_| rng.next() as u8).collect(),
        _ => format!(
            r#"{{"quantity":{},"sku":"{}"}}"#,
            rng.next() as i64,
            rng.text(100)
        )
        .into_bytes(),
    };
    (method, path, headers, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_hostile_requests_get_no_5xx_and_leave_the_queue_consistent() {
    for (backend, cases) in [(Backend::Memory, 10_000u64), (Backend::Redis, 3_000)] {
        let app = Arc::new(TestApp::spawn(backend, &["--max-body-bytes", "4096"]).await);
        app.patch_room("main", json!({"paused": true})).await;
        let mut keepers = Vec::new();
        for _ in 0..3 {
            keepers.push(app.join("main", None).await.1);
        }
        let joined = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let tasks: Vec<_> = (0..16u64)
            .map(|worker| {
                let (app, joined) = (app.clone(), joined.clone());
                let keeper = keepers[0].ticket_id.clone();
                tokio::spawn(async move {
                    // A fresh connection per case: one case's connection fate (e.g. closed after
                    // an oversize body) must not fail the next case.
                    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
                    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((worker + 1) * 7919));
                    for case in 0..cases / 16 {
                        let (method, path, headers, body) = hostile_request(&mut rng, &keeper);
                        let mut request = client.request(method.clone(), app.url(&path)).timeout(Duration::from_secs(5));
                        for (name, value) in &headers {
                            if let Ok(value) = reqwest::header::HeaderValue::from_bytes(value) {
                                request = request.header(name.as_str(), value);
                            }
                        }
                        let body_len = body.len();
                        let short_path: String = path.chars().take(100).collect();
                        let sent = request.body(body).send().await;
                        // Past the body limit the server answers 413 and closes; a client still
                        // writing may see the reset instead of the answer. Anything else must answer.
                        if body_len > 4096 && sent.as_ref().is_err_and(|e| e.is_request()) {
                            continue;
                        }
                        let response = sent.unwrap_or_else(|e| {
                            let mut chain = format!("{e}");
                            let mut source = std::error::Error::source(&e);
                            while let Some(inner) = source {
                                chain.push_str(&format!(" / {inner}"));
                                source = inner.source();
                            }
                            panic!("worker {worker} case {case} {method} {short_path} body {body_len} B, headers {:?}: {chain}", headers.iter().map(|(n, v)| (n, v.len())).collect::<Vec<_>>())
                        });
                        let status = response.status();
                        let is_json = response.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
                        let is_stream = response.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
                        assert!(status.as_u16() < 500, "worker {worker} case {case}: {method} {short_path} → {status}");
                        if is_stream {
                            continue; // a valid SSE stream: dropped here
                        }
                        let text = response.text().await.unwrap_or_default();
                        if status.is_client_error() && method != reqwest::Method::HEAD {
                            assert!(is_json, "{method} {short_path} → {status} not JSON: {text}");
                            let body: Value = serde_json::from_str(&text).unwrap();
                            assert!(body["error"].is_string(), "{text}");
                        }
                        if method == reqwest::Method::POST && status == StatusCode::CREATED {
                            let ticket: TicketStatus = serde_json::from_str(&text).expect("a 201 carries a ticket");
                            joined.lock().unwrap().push(ticket.ticket_id);
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        // The queue holds exactly the accepted joins (and keepers) that did not leave.
        let info = app.get_json(&paths::room("main")).await.1;
        assert_eq!(
            info["state"], "PAUSED",
            "{backend:?}: no hostile request reached the admin API"
        );
        let accepted = joined.lock().unwrap().clone();
        let mut still_waiting = 0;
        for id in accepted.iter().chain(keepers.iter().map(|k| &k.ticket_id)) {
            if app.poll("main", id).await.status == TicketState::Waiting {
                still_waiting += 1;
            }
        }
        assert_eq!(
            info["waiting"], still_waiting,
            "{backend:?}: only accepted requests change the queue"
        );
        for keeper in &keepers[1..] {
            assert_eq!(
                app.poll("main", &keeper.ticket_id).await.status,
                TicketState::Waiting,
                "nobody else's ticket was touched"
            );
        }
        println!("{backend:?}: {cases} hostile requests, {} joins accepted, {still_waiting} waiting, 0 × 5xx", accepted.len());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_body_is_cut_off_by_the_request_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = TestApp::spawn(Backend::Memory, &["--request-timeout-secs", "1"]).await;
    let address = app.base.trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "PATCH {} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"pau",
        paths::admin_room("main")
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"error\""), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_headers_cannot_hold_a_connection_open() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = TestApp::spawn(Backend::Memory, &["--header-read-timeout-secs", "1"]).await;
    let address = app.base.trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    socket
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let closed =
        tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut answer)).await;
    assert!(
        closed.is_ok(),
        "the server kept a half-sent request open for 5 s"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "closed after {:?}",
        started.elapsed()
    );
    // A complete request on a fresh connection is still served.
    assert_eq!(app.get_json(paths::HEALTHZ).await.0, StatusCode::OK);
}

/// Reads from `socket` until the server closes it (or `limit` passes); the bytes and how long.
async fn read_until_closed(
    socket: &mut tokio::net::TcpStream,
    limit: Duration,
) -> (Option<Vec<u8>>, Duration) {
    use tokio::io::AsyncReadExt;
    let started = Instant::now();
    let mut received = Vec::new();
    let closed = tokio::time::timeout(limit, socket.read_to_end(&mut received))
        .await
        .is_ok();
    (closed.then_some(received), started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_in_both_protocols_but_an_open_stream_is_not() {
    use tokio::io::AsyncWriteExt;
    let app = TestApp::spawn(
        Backend::Memory,
        &["--header-read-timeout-secs", "1", "--sse-refresh-ms", "200"],
    )
    .await;
    let address = app.base.trim_start_matches("http://").to_owned();

    // A socket that never sends a byte.
    let mut silent = tokio::net::TcpStream::connect(&address).await.unwrap();
    let (closed, took) = read_until_closed(&mut silent, Duration::from_secs(5)).await;
    assert!(closed.is_some(), "a silent socket was held for 5 s");
    assert!(took < Duration::from_secs(3), "closed after {took:?}");

    // An HTTP/2 connection that opens no stream but pings every 300 ms (the server's acks are
    // not progress): GOAWAY after the idle limit. Its preface comes a byte at a time, as a
    // client behind a slow link may send it: the server's SETTINGS first shows it was still
    // told apart from HTTP/1.1.
    let mut idle = tokio::net::TcpStream::connect(&address).await.unwrap();
    idle.set_nodelay(true).unwrap();
    for byte in b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" {
        idle.write_all(&[*byte]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    idle.write_all(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let started = Instant::now();
    let mut received = Vec::new();
    let mut frames = Vec::new();
    while !frames.contains(&0x7) && started.elapsed() < Duration::from_secs(5) {
        use tokio::io::AsyncReadExt;
        let _ = idle
            .write_all(b"\x00\x00\x08\x06\x00\x00\x00\x00\x00pingping")
            .await;
        let mut buffer = [0u8; 4096];
        if let Ok(Ok(n)) =
            tokio::time::timeout(Duration::from_millis(300), idle.read(&mut buffer)).await
        {
            if n == 0 {
                break;
            }
            received.extend_from_slice(&buffer[..n]);
        }
        frames.clear();
        let mut rest = &received[..];
        while rest.len() >= 9 {
            let length =
                usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
            frames.push(rest[3]);
            rest = &rest[(9 + length).min(rest.len())..];
        }
    }
    assert_eq!(frames.first(), Some(&0x4), "no SETTINGS first: {frames:?}");
    assert!(
        frames.contains(&0x7),
        "no GOAWAY among frame types {frames:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "GOAWAY after {:?}",
        started.elapsed()
    );

    // A kept-alive HTTP/1.1 connection after its answer.
    let mut kept = tokio::net::TcpStream::connect(&address).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (closed, took) = read_until_closed(&mut kept, Duration::from_secs(5)).await;
    let received = closed.expect("an idle kept-alive connection was held for 5 s");
    assert!(String::from_utf8_lossy(&received).starts_with("HTTP/1.1 200"));
    assert!(took < Duration::from_secs(3), "closed after {took:?}");

    // An SSE stream over HTTP/2 (curl, prior knowledge) lives on past the idle limit: its
    // connection has a request in flight.
    app.patch_room("main", json!({"paused": true})).await;
    let (_, ticket) = app.join("main", None).await;
    let mut curl = tokio::process::Command::new("curl")
        .args([
            "-sN",
            "--http2-prior-knowledge",
            "-H",
            "Accept: text/event-stream",
        ])
        .arg(app.url(&paths::events("main", &ticket.ticket_id)))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("curl runs");
    let mut stdout = curl.stdout.take().unwrap();
    let reader = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut events = String::new();
        let mut buffer = vec![0u8; 4096];
        while let Ok(Ok(n)) =
            tokio::time::timeout(Duration::from_secs(6), stdout.read(&mut buffer)).await
        {
            if n == 0 {
                break;
            }
            events.push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
        events
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        curl.try_wait().unwrap().is_none(),
        "the stream's connection was closed as idle"
    );
    // The room moves: the open stream still gets it, 3 s (three idle limits) after it opened.
    app.patch_room("main", json!({"paused": false})).await;
    let events = reader.await.unwrap();
    assert!(events.contains("TOKEN_ISSUED"), "{events}");
    let _ = curl.kill().await;
}

/// `curl` over `protocol` (`--http1.1` or `--http2-prior-knowledge`) with extra `headers`: the
/// status and the body.
async fn curl_with_headers(app: &TestApp, protocol: &str, headers: &[String]) -> (u16, String) {
    // From a file: one argument may hold at most 128 KiB.
    let file = std::env::temp_dir().join(format!(
        "vestibule-headers-{}-{}",
        std::process::id(),
        headers.iter().map(String::len).sum::<usize>()
    ));
    std::fs::write(&file, headers.join("\r\n")).unwrap();
    let output = tokio::process::Command::new("curl")
        .args(["-s", protocol, "-w", "\n%{http_code}", "-H"])
        .arg(format!("@{}", file.display()))
        .arg(app.url(&paths::room("main")))
        .output()
        .await
        .expect("curl runs");
    let _ = std::fs::remove_file(&file);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').expect("a status line");
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_large_or_too_many_headers_get_the_same_json_431_over_both_protocols() {
    let app = TestApp::spawn(Backend::Memory, &[]).await;
    let large = vec![format!("X-Large: {}", "a".repeat(40 * 1024))];
    // 90 fields: over the 80 allowed, under hyper's own HTTP/1.1 bound of 100.
    let many: Vec<String> = (0..90).map(|n| format!("X-Field-{n}: {n}")).collect();
    // A storefront's large cookies (20 KB) are still fine.
    let cookies = vec![format!("Cookie: cart={}", "c".repeat(20 * 1024))];
    for protocol in ["--http1.1", "--http2-prior-knowledge"] {
        for (what, headers) in [("40 KB", &large), ("90 fields", &many)] {
            let (status, body) = curl_with_headers(&app, protocol, headers).await;
            assert_eq!(status, 431, "{protocol} {what}: {body}");
            let body: Value = serde_json::from_str(&body)
                .unwrap_or_else(|_| panic!("{protocol} {what}: not JSON: {body:?}"));
            assert_eq!(body["error"], "request_headers_too_large", "{body}");
        }
        let (status, body) = curl_with_headers(&app, protocol, &cookies).await;
        assert_eq!(status, 200, "{protocol} 20 KB of cookies: {body}");
        // The same boundary over both protocols: curl adds `User-Agent` and `Accept`, and
        // `Host` (HTTP/2's `:authority`) is not counted, so 78 more make exactly 80.
        for (extra, expected) in [(78, 200), (79, 431)] {
            let fields: Vec<String> = (0..extra).map(|n| format!("X-F{n}: {n}")).collect();
            let (status, body) = curl_with_headers(&app, protocol, &fields).await;
            assert_eq!(status, expected, "{protocol} {extra} + 2 fields: {body}");
        }
    }
    // The connection layers' own bound is still there for what no JSON answer is worth reading.
    let huge = vec![format!("X-Huge: {}", "h".repeat(200 * 1024))];
    let (status, _) = curl_with_headers(&app, "--http1.1", &huge).await;
    assert_eq!(status, 431);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_http2_reader_gets_the_whole_answer_past_the_idle_limit() {
    // Python's `h2` (an independent HTTP/2 implementation) opens a 16 KiB window and gives it
    // back slowly: the 110 KB OpenAPI document takes 3.5–17 s, many idle limits. The body is
    // handed to the protocol layer at once, so "nothing in flight" comes early, and the idle
    // close must not cut it short.
    let app = TestApp::spawn(Backend::Memory, &["--header-read-timeout-secs", "1"]).await;
    let whole = app.get_bytes(paths::OPENAPI).await.len();
    let address = app.base.trim_start_matches("http://").to_owned();
    let (host, port) = address.rsplit_once(':').unwrap();
    let script = vestibule_tests::workspace_root().join("tests/interop/h2_slow_reader.py");
    // Window updates every 0.5 s: the connection keeps writing, so it never looks idle. Every
    // 2.5 s: it does (the whole answer was handed over, nothing leaves for 2.5 s), the GOAWAY
    // comes, and the stream it lets finish still gets every byte.
    for (pause, goaway) in [("0.5", false), ("2.5", true)] {
        let output = tokio::process::Command::new(vestibule_tests::python_tool("python"))
            .arg(&script)
            .args([host, port, paths::OPENAPI, "16384", pause])
            .output()
            .await
            .expect("python runs");
        let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
            panic!(
                "no report: {} {}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        assert_eq!(report["status"], "200", "pause {pause}: {report}");
        assert_eq!(report["bytes"], whole, "pause {pause}: {report}");
        assert_eq!(report["ended"], true, "pause {pause}: {report}");
        assert_eq!(report["goaway"], goaway, "pause {pause}: {report}");
    }
}

/// `curl -I` (HEAD) of `path` over `protocol` with extra `headers`: whether curl read a whole
/// answer (exit 0) and its status.
async fn curl_head(app: &TestApp, protocol: &str, path: &str, headers: &[String]) -> (bool, u16) {
    let mut command = tokio::process::Command::new("curl");
    command.args([
        "-s",
        "-I",
        protocol,
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
    ]);
    for header in headers {
        command.arg("-H").arg(header);
    }
    let output = command
        .arg(app.url(path))
        .output()
        .await
        .expect("curl runs");
    let status = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    (output.status.success(), status)
}

/// A HEAD answered by a layer in front of the routes (the entry-token check, the header limit)
/// carries no body over either protocol: over HTTP/2 the JSON body went out as DATA after the
/// answer's HEADERS, and curl refused the stream ("was not closed cleanly", exit 92, no status).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_to_head_carry_no_body_over_both_protocols() {
    let app = TestApp::spawn(Backend::Memory, &[]).await;
    let many: Vec<String> = (0..90).map(|n| format!("X-Field-{n}: {n}")).collect();
    // Under the protected prefix but not the order route itself (which checks its token in
    // its handler): the token layer answers.
    let protected = format!("{}/1", paths::orders("main"));
    let room = paths::room("main");
    for protocol in ["--http1.1", "--http2-prior-knowledge"] {
        for (path, headers, expected) in [
            (protected.as_str(), &[][..], 403),
            (room.as_str(), &many[..], 431),
            ("/", &many[..], 431),
            (room.as_str(), &[][..], 200),
            ("/api/v1/nowhere", &[][..], 404),
        ] {
            let (whole, status) = curl_head(&app, protocol, path, headers).await;
            assert!(
                whole,
                "{protocol} HEAD {path}: curl could not read the answer ({status})"
            );
            assert_eq!(status, expected, "{protocol} HEAD {path}");
        }
    }
}

/// Sends `request` (with `Connection: close`) on a fresh connection to `app` and reads the whole
/// answer, or what came within 5 s.
async fn raw_answer(address: &str, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// Every answer carries the page's security headers and every answer under `/api/`
/// `Cache-Control: no-store`, whichever layer made it: a 408 of the request timeout, a 405 of
/// the page's routes, a 431 and a CORS preflight too (the answer layer adds the headers after
/// replacing a bodiless error with a JSON one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_has_the_security_headers_and_every_api_answer_no_store() {
    let shop = "https://shop.example";
    let app = TestApp::spawn(
        Backend::Memory,
        &["--request-timeout-secs", "1", "--cors-origins", shop],
    )
    .await;
    let address = app.base.trim_start_matches("http://").to_owned();
    let many: String = (0..90).map(|n| format!("X-Field-{n}: {n}\r\n")).collect();
    let cases = [
        (
            "408 of a slow body",
            format!(
                "PATCH {} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{{\"pau",
                paths::admin_room("main")
            ),
            "HTTP/1.1 408",
            true,
        ),
        (
            "405 of the page's routes",
            format!("POST / HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
            "HTTP/1.1 405",
            false,
        ),
        (
            "431 on the API",
            format!("GET /api/v1/rooms/main HTTP/1.1\r\nHost: {address}\r\n{many}Connection: close\r\n\r\n"),
            "HTTP/1.1 431",
            true,
        ),
        (
            "CORS preflight on the API",
            format!("OPTIONS /api/v1/rooms/main/tickets HTTP/1.1\r\nHost: {address}\r\nOrigin: {shop}\r\nAccess-Control-Request-Method: POST\r\nConnection: close\r\n\r\n"),
            "HTTP/1.1 200",
            true,
        ),
        (
            "a poll of an unknown ticket",
            format!("GET /api/v1/rooms/main/tickets/AAAAAAAAAAAAAAAAAAAAAA HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"),
            "HTTP/1.1 404",
            true,
        ),
        (
            "a room's status",
            format!("GET /api/v1/rooms/main HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"),
            "HTTP/1.1 200",
            true,
        ),
    ];
    for (what, request, status, api) in cases {
        let answer = raw_answer(&address, &request).await;
        assert!(answer.starts_with(status), "{what}: {answer}");
        let head = answer
            .split("\r\n\r\n")
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        for header in [
            "content-security-policy: frame-ancestors 'self' https://shop.example",
            "x-content-type-options: nosniff",
            "referrer-policy: no-referrer",
        ] {
            assert!(head.contains(header), "{what}: no `{header}` in {head}");
        }
        assert_eq!(
            head.contains("cache-control: no-store"),
            api,
            "{what}: no-store on API answers only: {head}"
        );
    }
}
