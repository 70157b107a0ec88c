//! A bare HTTP/1.1 origin on raw sockets, for what an axum origin never sends: connections
//! closed unannounced or mid-request, answers without a length, malformed heads. With the gate
//! on one serving thread in front of it and a raw client.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vestibule_tests::{Backend, TestApp};

/// A bare HTTP/1.1 origin on raw sockets that counts the connections it accepted and answers by
/// path: `/close` closes the connection after its answer without saying so (as an origin whose
/// keep-alive timeout fires just then), `/empty` is 204, `HEAD` has no body, `/held` sends one
/// chunk and holds the rest; `/drop-next` answers, then closes the connection unanswered when
/// the next request arrives on it (an origin whose keep-alive timeout fires as that request is
/// sent); `/crash` is read and its connection closed unanswered (an origin failing on it); `/clte` has both `Content-Length: 100` and a 3-byte chunked body, `/many` 150
/// `Set-Cookie` lines, `/cl33` `Content-Length: 3, 3`, `/nolength` a chunked body (and no length for `HEAD`), `/malformed` an
/// obsolete folded header line (unreadable); anything else is `200 ok`. Every request line it
/// read is kept, in order.
async fn counting_origin() -> (
    SocketAddr,
    Arc<std::sync::atomic::AtomicUsize>,
    Arc<Mutex<Vec<String>>>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    let many = format!(
        "HTTP/1.1 200 OK\r\n{}Content-Length: 2\r\n\r\nok",
        (0..150)
            .map(|i| format!("Set-Cookie: c{i}=v{i}\r\n"))
            .collect::<String>()
    );
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let seen = seen.clone();
            let many = many.clone();
            tokio::spawn(async move {
                let mut pending = Vec::new();
                let mut drop_next = false;
                loop {
                    let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") else {
                        let mut chunk = [0u8; 4096];
                        match socket.read(&mut chunk).await {
                            Ok(n) if n > 0 => pending.extend_from_slice(&chunk[..n]),
                            _ => return,
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&pending[..end]).into_owned();
                    pending.drain(..end + 4);
                    if drop_next {
                        return;
                    }
                    let mut line = head.split(' ');
                    let (method, path) = (line.next().unwrap_or(""), line.next().unwrap_or(""));
                    drop_next = path == "/drop-next";
                    seen.lock().unwrap().push(format!("{method} {path}"));
                    if path == "/crash" {
                        return;
                    }
                    if method == "POST" {
                        // The tests' POSTs carry a 4-byte body.
                        while pending.len() < 4 {
                            let mut chunk = [0u8; 64];
                            match socket.read(&mut chunk).await {
                                Ok(n) if n > 0 => pending.extend_from_slice(&chunk[..n]),
                                _ => return,
                            }
                        }
                        pending.drain(..4);
                    }
                    let answer: &[u8] = match (method, path) {
                        ("HEAD", "/nolength") => {
                            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                        }
                        ("HEAD", _) => b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
                        (_, "/clte") => b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
                        (_, "/nolength") => {
                            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
                        }
                        (_, "/many") => many.as_bytes(),
                        (_, "/cl33") => b"HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\nabc",
                        (_, "/malformed") => {
                            b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\nok"
                        }
                        (_, "/empty") => b"HTTP/1.1 204 No Content\r\n\r\n",
                        (_, "/held") => {
                            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst;\r\n"
                        }
                        _ => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                    };
                    if socket.write_all(answer).await.is_err() {
                        return;
                    }
                    match path {
                        "/close" => return,
                        "/held" => {
                            tokio::time::sleep(Duration::from_secs(30)).await;
                            return;
                        }
                        _ => {}
                    }
                }
            });
        }
    });
    (address, accepted, requests)
}

/// The gate on one serving thread (so one client connection's requests share its origin
/// connections) in front of [`counting_origin`], a raw client connection to it, and the origin's
/// counts.
pub async fn gate_on_counting_origin() -> (
    TestApp,
    tokio::net::TcpStream,
    Arc<std::sync::atomic::AtomicUsize>,
    Arc<Mutex<Vec<String>>>,
) {
    let (origin, accepted, requests) = counting_origin().await;
    let upstream = format!("http://{origin}");
    let app = TestApp::spawn(
        Backend::Memory,
        &["--upstream", &upstream, "--serving-threads", "1"],
    )
    .await;
    let address = app.base.trim_start_matches("http://").to_owned();
    let client = tokio::net::TcpStream::connect(&address).await.unwrap();
    (app, client, accepted, requests)
}

/// `GET path` to the storefront, as a raw HTTP/1.1 request.
pub fn raw_get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: shop.example\r\n\r\n")
}

/// Sends `request` on `socket` and reads one answer: its head and `body_len` bytes of body.
pub async fn exchange(
    socket: &mut tokio::net::TcpStream,
    request: &str,
    body_len: usize,
) -> String {
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let complete = |answer: &[u8]| {
        answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .is_some_and(|end| answer.len() >= end + 4 + body_len)
    };
    while !complete(&answer) {
        let mut chunk = [0u8; 4096];
        match tokio::time::timeout(Duration::from_secs(5), socket.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => answer.extend_from_slice(&chunk[..n]),
            other => panic!("no whole answer to {request:?}: {other:?}, got {answer:?}"),
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}
