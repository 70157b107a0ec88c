//! The page under a mount prefix, as gate mode serves it: the built `dist/` behind a
//! small reverse proxy of this test ([`MountProxy`]) that serves Vestibule only under
//! `/_vestibule/` (stripping the prefix) and a stand-in store everywhere else. Nothing the page
//! asks for may fall outside the prefix: its assets, its early join, the WASM's calls and the
//! event stream all go to `/_vestibule/…`.
//!
//! The proxy also answers `POST /_vestibule/api/v1/rooms/{room}/session` as gate mode does
//! (the token in a JSON body → 200 and an HttpOnly cookie), so the page's hand-off is tested:
//! admitted with `?return=/checkout?x=1`, it opens the session (after a failed first attempt and
//! "Try again", in Korean) and lands on the store's `/checkout?x=1` with the cookie, the token
//! never in a URL; a `return` that leaves the origin lands on `/`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{header, HeaderMap, HeaderName, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use fantoccini::Client;
use serde_json::{json, Value};
use vestibule_shared::TicketState;
use vestibule_tests::chromium::{
    click, dist_dir, focused_id, save_screenshot, shown_position, stored_ticket_of, text_of,
    wait_for, wait_for_path, ChromeDriver,
};
use vestibule_tests::{Backend, TestApp};

/// Where the proxy mounts Vestibule (gate mode's default `--mount-prefix`).
const PREFIX: &str = "/_vestibule";

/// Headers that belong to one connection, not to the request (RFC 9110 §7.6.1).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "content-length",
];

/// What the proxy saw and how its session stand-in answers.
#[derive(Default)]
struct Seen {
    /// Method and path-and-query of every request, in order.
    requests: Mutex<Vec<String>>,
    /// Bodies of the session requests (JSON).
    sessions: Mutex<Vec<Value>>,
    /// How many more session requests answer 503 before one succeeds.
    session_failures: AtomicU32,
}

struct Mount {
    upstream: String,
    client: reqwest::Client,
    seen: Seen,
}

/// A reverse proxy on `127.0.0.1:<port>`: `/_vestibule/…` → the app at `/…`; the session
/// stand-in; any other path → the stand-in store's page.
struct MountProxy {
    base: String,
    mount: Arc<Mount>,
    server: tokio::task::JoinHandle<()>,
}

impl MountProxy {
    async fn start(upstream: &str) -> Self {
        let mount = Arc::new(Mount {
            upstream: upstream.to_owned(),
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            seen: Seen::default(),
        });
        let router = Router::new()
            .route(
                &format!("{PREFIX}/api/v1/rooms/{{room}}/session"),
                post(open_session),
            )
            .fallback(forward)
            .with_state(Arc::clone(&mount));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Self {
            base,
            mount,
            server,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn requests(&self) -> Vec<String> {
        self.mount.seen.requests.lock().unwrap().clone()
    }

    fn sessions(&self) -> Vec<Value> {
        self.mount.seen.sessions.lock().unwrap().clone()
    }
}

impl Drop for MountProxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn record(mount: &Mount, request: &Request) {
    let target = request
        .uri()
        .path_and_query()
        .map_or_else(String::new, |pq| pq.as_str().to_owned());
    mount
        .seen
        .requests
        .lock()
        .unwrap()
        .push(format!("{} {target}", request.method()));
}

/// Gate mode's session endpoint, as the page sees it: the token in a JSON body, an HttpOnly
/// cookie and `{"room", "expiresAt"}` back (503 while `session_failures` lasts).
async fn open_session(
    State(mount): State<Arc<Mount>>,
    UrlPath(room): UrlPath<String>,
    request: Request,
) -> Response {
    record(&mount, &request);
    let is_json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let body = axum::body::to_bytes(request.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    mount.seen.sessions.lock().unwrap().push(body.clone());
    let failing = mount
        .seen
        .session_failures
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if failing {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            Json(json!({"error": "store_unavailable", "message": "try again"})),
        )
            .into_response();
    }
    let Some(token) = body["entryToken"].as_str().filter(|_| is_json) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "bad_request", "message": "entryToken"})),
        )
            .into_response();
    };
    (
        [(
            header::SET_COOKIE,
            format!(
                "vestibule_entry={}; Path=/; HttpOnly; SameSite=Lax",
                token.len()
            ),
        )],
        Json(json!({"room": room, "expiresAt": 4_102_444_800_000_u64})),
    )
        .into_response()
}

/// Forwards `/_vestibule/…` to the app without the prefix (bodies streamed back, so SSE works);
/// any other path is the store.
async fn forward(State(mount): State<Arc<Mount>>, request: Request) -> Response {
    record(&mount, &request);
    let path_and_query = request
        .uri()
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .to_owned();
    let Some(rest) = path_and_query
        .strip_prefix(PREFIX)
        .filter(|rest| rest.starts_with('/'))
    else {
        return store_page(&path_and_query, request.headers());
    };
    let mut upstream = mount.client.request(
        request.method().clone(),
        format!("{}{rest}", mount.upstream),
    );
    for (name, value) in request.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            upstream = upstream.header(name, value);
        }
    }
    let body = axum::body::to_bytes(request.into_body(), 1024 * 1024)
        .await
        .unwrap_or_default();
    let answer = match upstream.body(body).send().await {
        Ok(answer) => answer,
        Err(error) => return (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    };
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap()
}

/// The stand-in store: a page that shows the path it was asked for and the session cookie.
fn store_page(path_and_query: &str, headers: &HeaderMap) -> Response {
    let cookie = headers
        .get(HeaderName::from_static("cookie"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none");
    let escape = |text: &str| text.replace('&', "&amp;").replace('<', "&lt;");
    Html(format!(
        "<!doctype html><html lang=\"en\"><title>Store</title><h1>Store</h1>\
         <p id=\"store-path\">{}</p><p id=\"store-cookie\">{}</p></html>",
        escape(path_and_query),
        escape(cookie)
    ))
    .into_response()
}

async fn page_app(args: &[&str]) -> TestApp {
    let dist = dist_dir().to_string_lossy().to_string();
    let mut all = vec!["--static-dir", dist.as_str()];
    all.extend_from_slice(args);
    TestApp::spawn(Backend::Memory, &all).await
}

/// Every request the browser made went under the prefix.
fn assert_all_under_prefix(proxy: &MountProxy) {
    let outside: Vec<_> = proxy
        .requests()
        .into_iter()
        .filter(|r| {
            !r.split(' ')
                .nth(1)
                .unwrap_or("")
                .starts_with("/_vestibule/")
        })
        .collect();
    assert!(
        outside.is_empty(),
        "requests outside the prefix: {outside:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_mount_prefix_the_page_joins_and_follows_its_place_over_sse() {
    let app = page_app(&["--admission-rate", "50"]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let (_, first) = app.join("main", None).await;
    app.join("main", None).await;
    let proxy = MountProxy::start(&app.base).await;
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "en-US").await;

    browser
        .goto(&proxy.url("/_vestibule/?room=main&lang=en&transport=sse"))
        .await
        .unwrap();
    assert_eq!(shown_position(&browser).await, "3");
    wait_for(
        &browser,
        "#connection",
        Some("data-state"),
        Duration::from_secs(10),
        |s| s == "live",
    )
    .await;
    // The stream moves the place: the first shopper leaves, the page shows 2 without a poll.
    assert_eq!(app.leave("main", &first.ticket_id).await, 204);
    wait_for(&browser, "#position", None, Duration::from_secs(10), |t| {
        t == "2"
    })
    .await;
    let transport = browser
        .find(fantoccini::Locator::Css("#connection"))
        .await
        .unwrap()
        .attr("data-transport")
        .await
        .unwrap();
    assert_eq!(transport.as_deref(), Some("sse"));
    save_screenshot(&browser, "mounted-waiting-en.png").await;

    let requests = proxy.requests();
    let ticket = stored_ticket_of(&browser, "main").await;
    for expected in [
        "GET /_vestibule/?room=main".to_owned(),
        "POST /_vestibule/api/v1/rooms/main/tickets".to_owned(),
        format!("GET /_vestibule/api/v1/rooms/main/tickets/{ticket}/events"),
    ] {
        assert!(
            requests.iter().any(|r| r.starts_with(&expected)),
            "no {expected} in {requests:?}"
        );
    }
    assert!(
        requests.iter().any(|r| r.ends_with(".wasm")),
        "{requests:?}"
    );

    // The demo checkout is chosen by the path relative to the base, and links back under it.
    browser
        .goto(&proxy.url("/_vestibule/checkout?room=main&lang=en"))
        .await
        .unwrap();
    wait_for(&browser, "#no-token", None, Duration::from_secs(10), |t| {
        !t.is_empty()
    })
    .await;
    let back = browser
        .find(fantoccini::Locator::Css("#no-token a"))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap();
    assert_eq!(back.as_deref(), Some("/_vestibule/?room=main&lang=en"));
    assert_all_under_prefix(&proxy);
    println!("{} requests, all under {PREFIX}/", proxy.requests().len());
    browser.close().await.unwrap();
}

/// The store page's path and cookie, once the browser is there.
async fn store_arrival(browser: &Client, path: &str) -> (String, String) {
    wait_for_path(browser, path, Duration::from_secs(20)).await;
    let shown = wait_for(browser, "#store-path", None, Duration::from_secs(5), |t| {
        !t.is_empty()
    })
    .await;
    (shown, text_of(browser, "#store-cookie").await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_hand_off_opens_a_session_then_returns_to_the_store_and_retries_a_failure() {
    let app = page_app(&["--admission-rate", "50", "--rooms", "main,drop"]).await;
    let proxy = MountProxy::start(&app.base).await;
    proxy.mount.seen.session_failures.store(1, Ordering::SeqCst);
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "ko-KR").await;

    // Sent by the gate from /checkout?x=1; the browser's language (Korean) decides.
    browser
        .goto(&proxy.url("/_vestibule/?room=main&return=%2Fcheckout%3Fx%3D1"))
        .await
        .unwrap();
    // Admitted at once; the first hand-off fails (503): said in Korean, with "Try again".
    wait_for(
        &browser,
        "#handoff",
        Some("data-state"),
        Duration::from_secs(20),
        |s| s == "failed",
    )
    .await;
    let message = text_of(&browser, "#handoff-error").await;
    assert!(
        message
            .chars()
            .any(|c| ('\u{AC00}'..='\u{D7A3}').contains(&c)),
        "not in Korean: {message}"
    );
    wait_for(&browser, "#announcer", None, Duration::from_secs(2), |t| {
        t == message
    })
    .await;
    save_screenshot(&browser, "handoff-failed-ko.png").await;
    // The language switch keeps the way back to the store.
    let switch = browser
        .find(fantoccini::Locator::Css(".footer a"))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(switch.ends_with("&return=%2Fcheckout%3Fx%3D1"), "{switch}");
    click(&browser, "#handoff-retry").await;
    assert_eq!(focused_id(&browser).await, "status");
    let (path, cookie) = store_arrival(&browser, "/checkout").await;
    assert_eq!(path, "/checkout?x=1");
    assert!(cookie.contains("vestibule_entry="), "{cookie}");

    // The token went in the session requests' JSON bodies, and never into a URL.
    let ticket = stored_ticket_of(&browser, "main").await;
    let status = app.poll("main", &ticket).await;
    assert_eq!(status.status, TicketState::TokenIssued);
    let token = status.entry_token.expect("an entry token");
    let sessions = proxy.sessions();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    for body in &sessions {
        assert_eq!(body, &json!({"entryToken": token}));
    }
    let requests = proxy.requests();
    assert!(
        requests.iter().all(|r| !r.contains(&token)),
        "the token in a URL: {requests:?}"
    );
    assert_eq!(
        requests
            .iter()
            .filter(|r| r.starts_with("POST /_vestibule/api/v1/rooms/main/session"))
            .count(),
        2
    );

    // A `return` that leaves the origin is replaced by the store's home.
    browser
        .goto(&proxy.url("/_vestibule/?room=drop&lang=en&return=%2F%2Fevil.example%2Fcheckout"))
        .await
        .unwrap();
    let (path, _) = store_arrival(&browser, "/").await;
    assert_eq!(path, "/");
    assert_eq!(proxy.sessions().len(), 3);
    browser.close().await.unwrap();
}

/// A storefront origin for the real gate: `/checkout` shows what the gate told it (the
/// `X-Vestibule-Entry` claims), any other path a home page.
async fn storefront() -> (String, tokio::task::JoinHandle<()>) {
    async fn checkout(headers: HeaderMap) -> Html<String> {
        let claims = headers
            .get("x-vestibule-entry")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .replace('<', "&lt;");
        Html(format!(
            "<!doctype html><title>Shop</title><h1 id=\"origin\">origin checkout</h1>\
             <pre id=\"claims\">{claims}</pre>"
        ))
    }
    let app = Router::new()
        .route("/checkout", axum::routing::get(checkout))
        .fallback(|| async { Html("<!doctype html><h1 id=\"origin\">origin home</h1>") });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (base, server)
}

/// Pauses or resumes `room` through the admin API under the gate's prefix.
async fn set_paused(app: &TestApp, room: &str, paused: bool) {
    let answer = app
        .client
        .patch(app.url(&format!(
            "{PREFIX}{}",
            vestibule_shared::paths::admin_room(room)
        )))
        .bearer_auth(vestibule_tests::ADMIN_TOKEN)
        .json(&json!({ "paused": paused }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_real_gate_a_shopper_goes_from_checkout_to_the_waiting_room_and_back() {
    let (origin, origin_server) = storefront().await;
    let app = page_app(&[
        "--upstream",
        &origin,
        "--gate",
        "/checkout=main",
        "--rooms",
        "main",
        "--admission-rate",
        "50",
    ])
    .await;
    let driver = ChromeDriver::start();
    for (browser_language, page_language) in [("en-US", "en"), ("ko-KR", "ko")] {
        // The room holds its line while the shopper arrives, so the waiting room is seen.
        set_paused(&app, "main", true).await;
        let profile = tempfile::tempdir().unwrap();
        let browser = driver.browser(profile.path(), browser_language).await;
        browser.goto(&app.url("/checkout?item=7")).await.unwrap();
        // Sent to the waiting room under the prefix, with the way back.
        wait_for_path(&browser, "/_vestibule/", Duration::from_secs(10)).await;
        let url = browser.current_url().await.unwrap();
        assert_eq!(
            url.query(),
            Some("room=main&return=%2Fcheckout%3Fitem%3D7"),
            "{url}"
        );
        assert_eq!(
            shown_position(&browser).await,
            "1",
            "{page_language}: the place is shown"
        );
        let lang = browser
            .execute("return document.documentElement.lang", vec![])
            .await
            .unwrap();
        assert_eq!(lang, json!(page_language));
        save_screenshot(&browser, &format!("gate-waiting-{page_language}.png")).await;

        // Admitted: the page opens the session and the shopper is back on the store's page.
        set_paused(&app, "main", false).await;
        wait_for_path(&browser, "/checkout", Duration::from_secs(20)).await;
        let claims = wait_for(&browser, "#claims", None, Duration::from_secs(5), |t| {
            !t.is_empty()
        })
        .await;
        let claims: Value = serde_json::from_str(&claims).expect("the origin saw JSON claims");
        assert_eq!(claims["room"], "main", "{claims}");
        assert_eq!(browser.current_url().await.unwrap().query(), Some("item=7"));
        // The session cookie is HttpOnly: the page's script cannot read it.
        let cookies = browser
            .execute("return document.cookie", vec![])
            .await
            .unwrap();
        assert!(
            !cookies.as_str().unwrap_or("").contains("vestibule_entry"),
            "{cookies}"
        );
        // A reload keeps the session: the store's page again, no waiting room.
        browser.refresh().await.unwrap();
        wait_for(&browser, "#origin", None, Duration::from_secs(5), |t| {
            t == "origin checkout"
        })
        .await;
        assert_eq!(browser.current_url().await.unwrap().path(), "/checkout");
        browser.close().await.unwrap();
    }
    origin_server.abort();
}
