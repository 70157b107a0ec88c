//! Gate mode end to end: the real binary with `--upstream` in front of a small origin run by
//! the test (an axum server that echoes what it received as JSON, plus streaming, slow, upload,
//! upgrade and hop-by-hop routes). JSON clients, curl, cookies, the origin stopped and slow.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode as OriginStatus};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use futures_util::StreamExt as _;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;
use vestibule_shared::TicketState;
use vestibule_tests::{both_stores, Backend, TestApp};

const PREFIX: &str = "/_vestibule/";

// ---------------------------------------------------------------------------------------------
// The origin: a storefront stand-in in the test process
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Default)]
struct Seen {
    /// Paths the origin received, in order.
    paths: Arc<Mutex<Vec<String>>>,
    /// Released by the test once it read the first chunk of `/stream`.
    release_stream: Arc<Notify>,
    /// Signalled by the origin when the first chunk of an `/upload` arrived.
    upload_started: Arc<Notify>,
}

struct Origin {
    address: SocketAddr,
    seen: Seen,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Origin {
    async fn start() -> Self {
        let seen = Seen::default();
        let app = Router::new()
            .route("/stream", get(stream))
            .route("/slow", get(slow))
            .route("/upload", any(upload))
            .route("/ws", get(upgrade))
            .route("/hop", get(hop))
            .fallback(echo)
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Self {
            address,
            seen,
            stop: Some(stop),
            task: Some(task),
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    fn paths(&self) -> Vec<String> {
        self.seen.paths.lock().unwrap().clone()
    }

    /// Stops serving and closes the port (connections refused from now on).
    async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

/// Answers what it received: method, path, query, every header (all values), body.
async fn echo(State(seen): State<Seen>, request: Request) -> Json<Value> {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    seen.paths.lock().unwrap().push(parts.uri.path().to_owned());
    let mut headers = serde_json::Map::new();
    for (name, value) in &parts.headers {
        let values = headers.entry(name.as_str()).or_insert_with(|| json!([]));
        values
            .as_array_mut()
            .unwrap()
            .push(json!(value.to_str().unwrap_or("<bytes>")));
    }
    Json(json!({
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "query": parts.uri.query(),
        "headers": headers,
        "body": String::from_utf8_lossy(&body),
    }))
}

/// Sends `first`, then `second` only once the test has read `first` (a buffering proxy would
/// never deliver `first`).
async fn stream(State(seen): State<Seen>) -> Response {
    let release = seen.release_stream.clone();
    let first =
        futures_util::stream::once(async { Ok::<_, std::io::Error>(Bytes::from("first;")) });
    let second = futures_util::stream::once(async move {
        release.notified().await;
        Ok(Bytes::from("second"))
    });
    Body::from_stream(first.chain(second)).into_response()
}

async fn slow() -> &'static str {
    tokio::time::sleep(Duration::from_secs(30)).await;
    "too late"
}

/// Counts the body's bytes, telling the test when the first chunk arrived.
async fn upload(State(seen): State<Seen>, request: Request) -> Json<Value> {
    let mut body = request.into_body().into_data_stream();
    let mut total = 0;
    let mut first = true;
    while let Some(Ok(chunk)) = body.next().await {
        total += chunk.len();
        if first {
            seen.upload_started.notify_one();
            first = false;
        }
    }
    Json(json!({"bytes": total}))
}

/// Switches to a byte echo protocol (what a WebSocket server does after its handshake).
async fn upgrade(mut request: Request) -> Response {
    let upgraded = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        let Ok(upgraded) = upgraded.await else { return };
        let mut io = hyper_util::rt::TokioIo::new(upgraded);
        let mut buffer = [0u8; 256];
        while let Ok(n) = io.read(&mut buffer).await {
            if n == 0 || io.write_all(&buffer[..n]).await.is_err() {
                return;
            }
        }
    });
    Response::builder()
        .status(OriginStatus::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "upgrade")
        .header(header::UPGRADE, "websocket")
        .body(Body::empty())
        .unwrap()
}

/// Answers with a hop-by-hop header named in `Connection`.
async fn hop() -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONNECTION, "x-origin-hop".parse().unwrap());
    headers.insert("x-origin-hop", "1".parse().unwrap());
    headers.insert("x-end-to-end", "kept".parse().unwrap());
    (headers, "hop").into_response()
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

async fn gate_in_front_of(origin: &Origin, backend: Backend, extra: &[&str]) -> TestApp {
    let upstream = origin.url();
    let mut args = vec![
        "--upstream",
        upstream.as_str(),
        "--rooms",
        "main,flash",
        "--gate",
        "/checkout=main",
        "--gate",
        "/rooms/{room}/pay",
        "--admission-rate",
        "1000",
        "--upstream-timeout-secs",
        "2",
    ];
    args.extend_from_slice(extra);
    TestApp::spawn(backend, &args).await
}

/// Joins `room` under the prefix and waits for the entry token.
async fn admitted(app: &TestApp, room: &str) -> String {
    let joined: Value = app
        .client
        .post(app.url(&format!("{PREFIX}api/v1/rooms/{room}/tickets")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = joined["ticketId"].as_str().expect("a ticket").to_owned();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let status: Value = app
            .client
            .get(app.url(&format!("{PREFIX}api/v1/rooms/{room}/tickets/{id}")))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if status["status"] == TicketState::TokenIssued.as_str() {
            // A room's checkout is its first gated path (the page follows it without `return`).
            let first_gated = match room {
                "main" => "/checkout".to_owned(),
                room => format!("/rooms/{room}/pay"),
            };
            assert_eq!(status["checkoutUrl"], first_gated, "{status}");
            return status["entryToken"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "not admitted: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

async fn json_of(response: reqwest::Response) -> (StatusCode, HeaderMap, Value) {
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|_| json!({ "text": text }));
    (status, headers, body)
}

/// All values of `name` the origin saw, as one comma-joined string ("" when none).
fn seen_header(echo: &Value, name: &str) -> String {
    echo["headers"][name]
        .as_array()
        .map(|values| {
            values
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

async fn open_session(app: &TestApp, room: &str, token: &str, extra: Value) -> reqwest::Response {
    let mut body = json!({ "entryToken": token });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    app.client
        .post(app.url(&format!("{PREFIX}api/v1/rooms/{room}/session")))
        .json(&body)
        .send()
        .await
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

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

    // A browser navigation is sent to the waiting room, coming back to where it was going.
    let navigation = no_redirects()
        .get(app.url("/checkout/pay?step=2&x=a%20b"))
        .header("accept", "text/html,application/xhtml+xml,*/*;q=0.8")
        .send()
        .await
        .unwrap();
    assert_eq!(navigation.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        navigation.headers()["location"],
        "/_vestibule/?room=main&return=%2Fcheckout%2Fpay%3Fstep%3D2%26x%3Da%2520b"
    );

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

    // Other rooms' and made-up tokens are refused; so is a room that does not exist.
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
    let (status, _, missing) = json_of(
        app.client
            .get(app.url("/rooms/ghost/pay"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(missing["error"], "room_not_found");
}

/// Whole seconds since the Unix epoch.
struct SystemTimeSecs;

impl SystemTimeSecs {
    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }
}

both_stores!(the_session_endpoint_sets_the_entry_cookie_and_the_cookie_passes_the_gate);

async fn the_session_endpoint_sets_the_entry_cookie_and_the_cookie_passes_the_gate(
    backend: Backend,
) {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, backend, &["--token-ttl-secs", "120"]).await;
    let token = admitted(&app, "main").await;

    let response = open_session(
        &app,
        "main",
        &token,
        json!({"returnTo": "/checkout?step=2"}),
    )
    .await;
    let (status, headers, session) = json_of(response).await;
    assert_eq!(status, StatusCode::OK, "{session}");
    assert_eq!(session["room"], "main");
    assert_eq!(session["returnTo"], "/checkout?step=2");
    let expires_at = session["expiresAt"].as_u64().unwrap();
    let now_ms = SystemTimeSecs::now() * 1000;
    assert!(
        (now_ms + 100_000..=now_ms + 121_000).contains(&expires_at),
        "{expires_at}"
    );
    assert_eq!(headers["cache-control"], "no-store");
    let cookie = headers["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.starts_with(&format!("vestibule_entry_main={token};")),
        "{cookie}"
    );
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(
            cookie.split("; ").any(|part| part == attribute),
            "{cookie} lacks {attribute}"
        );
    }
    assert!(
        !cookie.contains("Secure"),
        "plain HTTP, no trusted proxy: {cookie}"
    );
    let max_age: u64 = cookie
        .split("; ")
        .find_map(|part| part.strip_prefix("Max-Age="))
        .expect("Max-Age")
        .parse()
        .unwrap();
    assert!((100..=120).contains(&max_age), "Max-Age {max_age}");

    // The browser sends the cookie back: the gated page comes from the origin, with claims.
    let pair = cookie.split(';').next().unwrap();
    let (status, _, echoed) = json_of(
        no_redirects()
            .get(app.url("/checkout?step=2"))
            .header("accept", "text/html")
            .header("cookie", format!("theme=dark; {pair}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{echoed}");
    assert_eq!(echoed["path"], "/checkout");
    assert!(seen_header(&echoed, "x-vestibule-entry").contains("\"room\":\"main\""));

    // A cookie with a refused token sends the browser back to the line and is deleted.
    let refused = no_redirects()
        .get(app.url("/checkout"))
        .header("accept", "text/html")
        .header("cookie", "vestibule_entry_main=main.AAAAAAAAAAAAAAAAAAAAAA")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::SEE_OTHER);
    assert!(refused.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .contains("Max-Age=0"));

    // Other rooms', made-up and missing tokens get no session.
    let flash = admitted(&app, "flash").await;
    for (room, token, status, code) in [
        (
            "main",
            flash.as_str(),
            StatusCode::FORBIDDEN,
            "entry_token_wrong_room",
        ),
        (
            "flash",
            token.as_str(),
            StatusCode::FORBIDDEN,
            "entry_token_wrong_room",
        ),
        (
            "main",
            "main.AAAAAAAAAAAAAAAAAAAAAA",
            StatusCode::FORBIDDEN,
            "entry_token_unknown",
        ),
        (
            "main",
            "garbage",
            StatusCode::FORBIDDEN,
            "entry_token_unknown",
        ),
        ("main", "", StatusCode::FORBIDDEN, "entry_token_missing"),
        (
            "ghost",
            token.as_str(),
            StatusCode::NOT_FOUND,
            "room_not_found",
        ),
    ] {
        let (got, headers, body) = json_of(open_session(&app, room, token, json!({})).await).await;
        assert_eq!(
            (got, body["error"].as_str()),
            (status, Some(code)),
            "{room} {token}: {body}"
        );
        assert!(!headers.contains_key("set-cookie"));
    }
    let wrong_body = app
        .client
        .post(app.url(&format!("{PREFIX}api/v1/rooms/main/session")))
        .header("content-type", "application/json")
        .body("{\"token\": 1}")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_body.status(), StatusCode::BAD_REQUEST);

    // The browser ends its own session with its cookie (HttpOnly: the page cannot read the
    // token), only on a JSON request (a cross-site form cannot send one): the cookie is cleared
    // and the gate stops passing it at once.
    let release = |content_type: &'static str| {
        app.client
            .post(app.url(&format!("{PREFIX}api/v1/rooms/main/entries/release")))
            .header("cookie", pair.to_owned())
            .header("content-type", content_type)
            .body(if content_type == "application/json" {
                "{}"
            } else {
                ""
            })
            .send()
    };
    let form = release("application/x-www-form-urlencoded").await.unwrap();
    assert_eq!(form.status(), StatusCode::UNAUTHORIZED);
    let (status, headers, body) = json_of(release("application/json").await.unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["released"], true, "{body}");
    let cleared = headers["set-cookie"].to_str().unwrap();
    assert!(
        cleared.starts_with("vestibule_entry_main=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    let after = no_redirects()
        .get(app.url("/checkout"))
        .header("accept", "text/html")
        .header("cookie", pair.to_owned())
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), StatusCode::SEE_OTHER, "a released session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_open_redirect_variant_is_refused() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;
    let token = admitted(&app, "main").await;
    // The page asks the server where to go back to: only a same-origin path comes back.
    for evil in [
        "//evil.example",
        "//evil.example/checkout",
        "///evil.example",
        "/\\evil.example",
        "\\\\evil.example",
        "https://evil.example/checkout",
        "HTTPS://evil.example",
        "javascript:alert(1)",
        "evil.example",
        "/\t/evil.example",
        "/\n/evil.example",
        "/checkout\u{0}",
        "",
    ] {
        let (status, _, session) =
            json_of(open_session(&app, "main", &token, json!({"returnTo": evil})).await).await;
        assert_eq!(status, StatusCode::OK, "{evil:?}: {session}");
        assert_eq!(session["returnTo"], "/", "{evil:?}");
    }
    // A gated request whose own path would make a protocol-relative return comes back to the
    // same path with its slashes collapsed: same origin, never `//host`.
    let navigation = no_redirects()
        .get(app.url("//checkout"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(navigation.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        navigation.headers()["location"],
        "/_vestibule/?room=main&return=%2Fcheckout"
    );
    assert!(
        origin.paths().is_empty(),
        "the origin saw {:?}",
        origin.paths()
    );
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_through_the_gate_loses_hop_by_hop_headers_and_forged_forwarding() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;
    let token = admitted(&app, "main").await;
    let output = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            "-i",
            "-X",
            "POST",
            "--data-binary",
            "payload",
        ])
        .args(["-H", "Connection: keep-alive, X-Private-Hop"])
        .args(["-H", "X-Private-Hop: secret"])
        .args(["-H", "Keep-Alive: timeout=5"])
        .args(["-H", "Proxy-Authorization: Basic eDp5"])
        .args(["-H", "TE: trailers"])
        .args(["-H", "X-Forwarded-For: 6.6.6.6"])
        .args(["-H", "X-Forwarded-Proto: https"])
        .args(["-H", "X-Vestibule-Entry: {\"room\":\"main\"}"])
        .args(["-H", &format!("X-Entry-Token: {token}")])
        .arg(app.url("/checkout?via=curl"))
        .output()
        .await
        .expect("curl is installed");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (_, body) = text.split_once("\r\n\r\n").expect("head and body");
    let echoed: Value = serde_json::from_str(body).unwrap();
    assert_eq!(echoed["method"], "POST");
    assert_eq!(echoed["query"], "via=curl");
    assert_eq!(echoed["body"], "payload");
    for hop in ["x-private-hop", "keep-alive", "proxy-authorization", "te"] {
        assert_eq!(
            seen_header(&echoed, hop),
            "",
            "{hop} reached the origin: {echoed}"
        );
    }
    assert_eq!(seen_header(&echoed, "x-forwarded-for"), "127.0.0.1");
    assert_eq!(seen_header(&echoed, "x-forwarded-proto"), "http");
    let claims: Value = serde_json::from_str(&seen_header(&echoed, "x-vestibule-entry")).unwrap();
    assert_eq!(claims["room"], "main");
    assert!(
        claims["sub"].is_string() && claims["exp"].is_u64(),
        "{claims}"
    );

    // The origin's own hop-by-hop header stops at the gate (it does send it: asked directly).
    let direct = reqwest::get(format!("{}/hop", origin.url())).await.unwrap();
    assert!(direct.headers().contains_key("x-origin-hop"));
    let proxied = app.client.get(app.url("/hop")).send().await.unwrap();
    assert!(!proxied.headers().contains_key("x-origin-hop"));
    assert_eq!(proxied.headers()["x-end-to-end"], "kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_the_chain_is_kept_and_https_sessions_get_secure_cookies() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(
        &origin,
        Backend::Memory,
        &["--client-ip-header", "X-Forwarded-For"],
    )
    .await;
    let (status, _, echoed) = json_of(
        app.client
            .get(app.url("/products"))
            .header("x-forwarded-for", "6.6.6.6, 198.51.100.7")
            .header("x-forwarded-proto", "https")
            .header("x-forwarded-host", "shop.example")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        seen_header(&echoed, "x-forwarded-for"),
        "198.51.100.7, 127.0.0.1"
    );
    assert_eq!(seen_header(&echoed, "x-forwarded-proto"), "https");
    assert_eq!(seen_header(&echoed, "x-forwarded-host"), "shop.example");

    let token = admitted(&app, "main").await;
    let response = app
        .client
        .post(app.url(&format!("{PREFIX}api/v1/rooms/main/session")))
        .header("x-forwarded-proto", "https")
        .json(&json!({"entryToken": token}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let cookie = response.headers()["set-cookie"].to_str().unwrap();
    assert!(cookie.split("; ").any(|part| part == "Secure"), "{cookie}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_opens_no_session_and_passes_no_gate() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &["--token-ttl-secs", "1"]).await;
    let token = admitted(&app, "main").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, _, refused) = json_of(open_session(&app, "main", &token, json!({})).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(refused["error"], "entry_token_expired", "{refused}");
    let (status, _, refused) = json_of(
        app.client
            .get(app.url("/checkout"))
            .header("x-entry-token", &token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(refused["error"], "entry_token_expired", "{refused}");
    assert!(
        origin.paths().is_empty(),
        "the origin saw {:?}",
        origin.paths()
    );
}

/// With the store down and the room's outage policy `pass`, a gated request passes on the
/// offline check alone (signature, expiry, room) and the origin still gets the claims; a forged
/// token is still refused; under the default policy the gate answers 503.
#[tokio::test]
async fn with_the_store_down_the_pass_policy_checks_tokens_offline() {
    let origin = Origin::start().await;
    let mut app = gate_in_front_of(
        &origin,
        Backend::Redis,
        &["--outage-policy", "reject,main=pass"],
    )
    .await;
    let main = admitted(&app, "main").await;
    let flash = admitted(&app, "flash").await;
    app.redis.as_mut().unwrap().stop();
    let (status, _, echoed) = json_of(
        app.client
            .get(app.url("/checkout"))
            .header("x-entry-token", &main)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{echoed}");
    let claims: Value = serde_json::from_str(&seen_header(&echoed, "x-vestibule-entry"))
        .expect("the claims, from the offline check");
    assert_eq!(claims["room"], "main");
    let (status, _, refused) = json_of(
        app.client
            .get(app.url("/checkout"))
            .header("x-entry-token", "main.AAAAAAAAAAAAAAAAAAAAAA")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    // The other room keeps the default policy: no pass while admission cannot be asked.
    let (status, _, refused) = json_of(
        app.client
            .get(app.url("/rooms/flash/pay"))
            .header("x-entry-token", &flash)
            .header("accept", "application/json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");
}

/// One raw request on a fresh connection (`Connection: close` is the caller's); the whole answer.
/// A raw `GET path` naming `host`, on a connection that closes after the answer.
fn closing_get(path: &str, host: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

async fn raw_exchange(app: &TestApp, request: &str) -> String {
    let address = app.base.trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// Faults a black-box probe found, after reports against other proxies (Envoy CVE-2019-9901,
/// gunicorn #2799, traefik #12961): each kept closed here.
#[tokio::test]
async fn spellings_that_an_origin_reads_otherwise_are_refused_or_neutralised() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;

    // 1. A path the origin could resolve into a gated one (or the gate into an ungated one) is
    //    refused before any rule: 400, and the origin never sees it.
    for path in [
        "/checkout/..%2fx",
        "/checkout/..;/x",
        "/checkout/%2e%2e/x",
        "/checkout/../products",
        "/checkout/x/../..",
        "/checkout%00",
        "/%252e%252e/checkout",
    ] {
        let answer = raw_exchange(&app, &closing_get(path, "shop.test")).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{path}: {answer}");
        assert!(answer.contains("bad_request"), "{path}: {answer}");
    }
    assert!(origin.paths().is_empty(), "{:?}", origin.paths());

    // 2. Underscore spellings of headers (read as dashes by CGI-style origins) never arrive.
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

    // 3. `Connection` cannot make the gate drop the claims it adds.
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

    // 4. A planted cookie of the same name sent first does not lock the shopper out, and an
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

    // 5. A client's broken body is the client's fault (400), not "the shop is down" (502).
    let answer = raw_exchange(
        &app,
        "POST /products HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\
         Connection: close\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");

    // 6. Two Host headers: 400 (RFC 9112 §3.2).
    let answer = raw_exchange(
        &app,
        "GET /products HTTP/1.1\r\nHost: y\r\nHost: z\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");

    // 7. Only WebSocket upgrades are tunnelled: an h2c upgrade reaches the origin as a plain
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

/// Faults a second black-box probe found (after Spring CVE-2016-5007, IIS trailing dots, Symfony
/// CVE-2018-14773, host header poisoning, nginx's 501 for unknown transfer codings): each reached
/// the origin, most without admission to a gated path.
#[tokio::test]
async fn paths_an_origin_may_trim_hosts_that_are_no_hosts_and_path_overrides_never_reach_the_origin(
) {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;

    // 1. Segments an origin may trim, and escapes that are not UTF-8 (`%C0%AF`: an overlong
    //    `/`): 400, never forwarded.
    for path in [
        "/checkout%20",
        "/checkout.",
        "/checkout%2e",
        "/checkout%C0%AF",
        "/checkout./pay",
        "/%20checkout",
    ] {
        let answer = raw_exchange(&app, &closing_get(path, "shop.test")).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{path}: {answer}");
        assert!(answer.contains("bad_request"), "{path}: {answer}");
    }
    assert!(origin.paths().is_empty(), "{:?}", origin.paths());

    // 2. A format suffix names the same action (Rails, Spring MVC): gated with its path.
    for path in ["/checkout.json", "/checkout.html?step=2"] {
        let response = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{path}");
    }
    assert!(origin.paths().is_empty(), "{:?}", origin.paths());

    // 3. A Host that is no host: 400 (the origin would build links from it, and it would be
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

    // 4. Path overrides and forwarding headers a client made up never arrive.
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

    // 5. A transfer coding the gate cannot pass on: 501, not a body the origin misreads.
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

// A black-box probe put Python's `http.server` (which answers HTTP/1.0) behind the gate: the gate
// passed that version on, so an HTTP/1.1 client got `HTTP/1.0 200 OK` and its kept-alive
// connection was closed after every answer. The gate answers in the client's own version.
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
async fn gate_on_counting_origin() -> (
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
fn raw_get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: shop.example\r\n\r\n")
}

/// Sends `request` on `socket` and reads one answer: its head and `body_len` bytes of body.
async fn exchange(socket: &mut tokio::net::TcpStream, request: &str, body_len: usize) -> String {
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

/// Faults a black-box probe found by putting real origins and clients behind the gate, each
/// kept fixed here: what the origin sends and what the client gets are what HTTP says an
/// intermediary passes on (and what nginx does).
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

    // `//checkout` is gated like `/checkout`, and the way back is `/checkout`.
    let answer = raw_exchange(
        &app,
        "GET //checkout?step=2 HTTP/1.1\r\nHost: shop.example\r\nAccept: text/html\r\n\
         Connection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 303"), "{answer}");
    assert!(answer.contains("return=%2Fcheckout%3Fstep%3D2"), "{answer}");

    // An escaped slash in a `{room}` segment: an origin routing on raw segments reads
    // /rooms/{main%2Fx}/pay, so the gate does too (no such room: refused, never proxied).
    let answer = raw_exchange(
        &app,
        "GET /rooms/main%2Fx/pay HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(origin.paths().iter().all(|path| !path.contains("pay")));

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

/// The gate's own extras for a storefront: the verified token for an origin that checks it
/// itself, metrics only with the admin token, and the top-level hand-off a framed page uses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_origin_gets_the_token_metrics_need_the_admin_token_and_a_form_hands_off() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &[]).await;
    let token = admitted(&app, "main").await;
    let client = no_redirects();

    // The origin sees the very token that admitted the request; a client's own is dropped.
    let (status, _, echo) = json_of(
        client
            .get(app.url("/checkout"))
            .header("x-entry-token", &token)
            .header("x-vestibule-token", "forged")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{echo}");
    assert_eq!(seen_header(&echo, "x-vestibule-token"), token);
    let (_, _, echo) = json_of(
        client
            .get(app.url("/elsewhere"))
            .header("x-vestibule-token", "forged")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(seen_header(&echo, "x-vestibule-token"), "");

    // Metrics on the shop's domain: the admin token, at the root and under the prefix.
    for path in ["/metrics", "/_vestibule/metrics"] {
        let anonymous = client.get(app.url(path)).send().await.unwrap();
        assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED, "{path}");
        let wrong = client
            .get(app.url(path))
            .bearer_auth("not-the-admin-token-at-all")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), StatusCode::FORBIDDEN, "{path}");
        let admin = client
            .get(app.url(path))
            .bearer_auth(vestibule_tests::ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(admin.status(), StatusCode::OK, "{path}");
    }
    assert!(origin.paths().iter().all(|path| !path.contains("metrics")));

    // The form hand-off: 303 to `return` with the session cookie, which then passes the gate.
    let handoff = |token: &str, back: &str| {
        client
            .post(app.url(&format!("{PREFIX}api/v1/rooms/main/handoff")))
            .form(&[("entryToken", token), ("return", back)])
            .send()
    };
    let handed = handoff(&token, "/checkout?x=1").await.unwrap();
    assert_eq!(handed.status(), StatusCode::SEE_OTHER);
    assert_eq!(handed.headers()["location"], "/checkout?x=1");
    assert_eq!(handed.headers()["referrer-policy"], "no-referrer");
    let cookie = handed.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    let through = client
        .get(app.url("/checkout?x=1"))
        .header("cookie", pair)
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(through.status(), StatusCode::OK);
    // A `return` that is not a clean same-origin path comes back as `/`, by form and by JSON.
    for dirty in [
        "/%5Cevil.example",
        "/%09/evil.example",
        "/checkout%0a",
        "/checkout%0B",
        "/%0d/x",
        "/%2F%2Fevil.example",
        "//evil.example",
    ] {
        let handed = handoff(&token, dirty).await.unwrap();
        assert_eq!(handed.headers()["location"], "/", "{dirty:?}");
        let (_, _, session) =
            json_of(open_session(&app, "main", &token, json!({"returnTo": dirty})).await).await;
        assert_eq!(session["returnTo"], "/", "{dirty:?}");
    }
    // A token that does not work goes back to the waiting room, its way back kept.
    let refused = handoff("garbage", "/checkout?x=1").await.unwrap();
    assert_eq!(refused.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        refused.headers()["location"],
        "/_vestibule/?room=main&return=%2Fcheckout%3Fx%3D1"
    );
    // Anything but a form is refused with the JSON error.
    let json = client
        .post(app.url(&format!("{PREFIX}api/v1/rooms/main/handoff")))
        .json(&json!({"entryToken": token}))
        .send()
        .await
        .unwrap();
    assert_eq!(json.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

/// The shared table of tokens (`vestibule_tests::entry_cases`, also run against the storefront's
/// layer): each gets the same refusal at the gate, and none reaches the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_table_of_tokens_is_refused_at_the_gate_as_at_the_layer() {
    use vestibule_tests::entry_cases;
    let dir = tempfile::tempdir().unwrap();
    let key = entry_cases::key_file(dir.path());
    let origin = Origin::start().await;
    let app = gate_in_front_of(
        &origin,
        Backend::Memory,
        &["--signing-key-file", key.to_str().unwrap()],
    )
    .await;
    let (_, keys) = app.get_json("/.well-known/jwks.json").await;
    let kid = keys["keys"][0]["kid"].as_str().unwrap().to_owned();
    let client = no_redirects();
    for case in entry_cases::cases(&kid, "main", "storefront") {
        let mut request = client.get(app.url("/checkout"));
        if let Some(token) = &case.token {
            request = request.header("x-entry-token", token);
        }
        let (status, _, body) = json_of(request.send().await.unwrap()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{}: {body}", case.name);
        assert_eq!(body["error"], case.code, "{}", case.name);
    }
    assert!(
        origin.paths().is_empty(),
        "the origin saw {:?}",
        origin.paths()
    );
    let token = admitted(&app, "main").await;
    let passed = client
        .get(app.url("/checkout"))
        .header("x-entry-token", token)
        .send()
        .await
        .unwrap();
    assert_eq!(passed.status(), StatusCode::OK);
}

/// `--metrics-bind`: `/metrics` with no token on an address of its own, while the shop's domain
/// keeps asking for the admin token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_open_on_their_own_bind_address_only() {
    let origin = Origin::start().await;
    let port = vestibule_tests::free_port().unwrap();
    let address = format!("127.0.0.1:{port}");
    let app = gate_in_front_of(&origin, Backend::Memory, &["--metrics-bind", &address]).await;
    let client = no_redirects();
    let own = client
        .get(format!("http://{address}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), StatusCode::OK);
    assert!(own.text().await.unwrap().contains("vestibule_"));
    let other = client
        .get(format!("http://{address}/_vestibule/api/v1/rooms/main"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        other.status(),
        StatusCode::NOT_FOUND,
        "only the metrics there"
    );
    let shop = client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(shop.status(), StatusCode::UNAUTHORIZED);
}

/// A room stored before gate mode was turned on (its checkout never set) sends its admitted
/// shoppers to its first gated path, not to the demo checkout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_stored_before_gate_mode_checks_out_on_its_first_gated_path() {
    let redis = vestibule_tests::RedisServer::start();
    let before = TestApp::spawn_with_url(Some(&redis.url()), &["--rooms", "main,flash"]).await;
    drop(before);
    let origin = Origin::start().await;
    let upstream = origin.url();
    let app = TestApp::spawn_with_url(
        Some(&redis.url()),
        &[
            "--upstream",
            upstream.as_str(),
            "--rooms",
            "main,flash",
            "--gate",
            "/checkout=main",
            "--gate",
            "/rooms/{room}/pay",
            "--admission-rate",
            "1000",
        ],
    )
    .await;
    admitted(&app, "main").await;
    admitted(&app, "flash").await;
}
