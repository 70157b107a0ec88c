//! Hostile input (README "Guarantees"): random requests get no 5xx; slow bodies and headers
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
