//! The guard in front of a small axum app, against the real Vestibule binary: tokens it issued
//! pass (claims in the extensions), everything else is sent to the waiting room or refused.

use axum::body::{to_bytes, Body};
use axum::http::{header, Request, StatusCode};
use axum::routing::get;
use axum::{Extension, Router};
use serde_json::Value;
use tower::ServiceExt as _;
use vestibule_guard::{EntryClaims, EntryGuard};
use vestibule_tests::TestApp;

const ORIGIN_KEY: &str = "origin-key-for-tests-0123456789";

fn shop(guard: EntryGuard) -> Router {
    Router::new()
        .route(
            "/checkout",
            get(|Extension(entry): Extension<EntryClaims>| async move {
                format!("hello {}", entry.sub)
            }),
        )
        .layer(guard)
}

async fn send(app: &Router, request: Request<Body>) -> (StatusCode, Option<String>, String) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let location = response
        .headers()
        .get(header::LOCATION)
        .map(|value| value.to_str().unwrap().to_owned());
    let body = to_bytes(response.into_body(), 1 << 16).await.unwrap();
    (
        status,
        location,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

fn get_with(token: Option<&str>, accept: &str) -> Request<Body> {
    let mut request = Request::get("/checkout?size=42").header(header::ACCEPT, accept);
    if let Some(token) = token {
        request = request.header("X-Entry-Token", token);
    }
    request.body(Body::empty()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admitted_shoppers_pass_and_everyone_else_goes_to_the_waiting_room() {
    let vestibule = TestApp::spawn_with_url(None, &["--rooms", "main,other"]).await;
    let (ticket, token) = vestibule.admitted("main").await;
    let (_, other_room) = vestibule.admitted("other").await;
    let guard = EntryGuard::builder("main", "storefront")
        .jwks_url(vestibule.url("/.well-known/jwks.json"))
        .waiting_room(vestibule.url("/"))
        .cookie("entry")
        .build()
        .await
        .unwrap();
    let app = shop(guard);

    let (status, _, body) = send(&app, get_with(Some(&token), "application/json")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        format!(
            "hello {}",
            vestibule_tests::entry_claims(&token)["sub"]
                .as_str()
                .unwrap()
        )
    );
    assert!(!body.contains(&ticket.ticket_id));
    // The same token from a cookie.
    let cookie = Request::get("/checkout")
        .header(header::COOKIE, format!("theme=dark; entry={token}"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, cookie).await.0, StatusCode::OK);

    // A navigation without a token goes to the waiting room and comes back to where it was.
    let (status, location, _) = send(&app, get_with(None, "text/html,application/xhtml+xml")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        location.as_deref(),
        Some(
            vestibule
                .url("/?room=main&return=%2Fcheckout%3Fsize%3D42")
                .as_str()
        )
    );
    // An API call gets JSON naming the problem, with the join link.
    let mut forged = token.clone();
    forged.pop();
    forged.push(if token.ends_with('A') { 'B' } else { 'A' });
    for (token, code) in [
        (None, "entry_token_missing"),
        (Some(forged.as_str()), "entry_token_unknown"),
        (Some("garbage"), "entry_token_unknown"),
        (Some(other_room.as_str()), "entry_token_wrong_room"),
    ] {
        let (status, _, body) = send(&app, get_with(token, "application/json")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{token:?}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"], code, "{token:?}");
        assert!(body["joinUrl"].as_str().unwrap().contains("room=main"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_online_consume_a_token_gets_through_once() {
    let vestibule = TestApp::spawn_with_url(None, &["--origin-api-key", ORIGIN_KEY]).await;
    let (_, token) = vestibule.admitted("main").await;
    let guard = EntryGuard::builder("main", "storefront")
        .jwks_url(vestibule.url("/.well-known/jwks.json"))
        .consume_online(&vestibule.base, ORIGIN_KEY)
        .build()
        .await
        .unwrap();
    let app = shop(guard);
    assert_eq!(
        send(&app, get_with(Some(&token), "*/*")).await.0,
        StatusCode::OK
    );
    let (status, _, body) = send(&app, get_with(Some(&token), "*/*")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"],
        "entry_token_used"
    );
    // A navigation replaying a used token is sent back to the waiting room.
    let (status, location, _) = send(&app, get_with(Some(&token), "text/html")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(location
        .unwrap()
        .starts_with("/_vestibule/?room=main&return="));
}

/// A key-set server whose answer the test changes, counting its fetches.
struct KeySetServer {
    url: String,
    body: std::sync::Arc<std::sync::Mutex<String>>,
    fetches: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl KeySetServer {
    async fn start(body: String) -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::{Arc, Mutex};
        let body = Arc::new(Mutex::new(body));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (served, counted) = (body.clone(), fetches.clone());
        let app = Router::new().route(
            "/jwks.json",
            get(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                let body = served.lock().unwrap().clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], body) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, body, fetches }
    }

    fn fetches(&self) -> usize {
        self.fetches.load(std::sync::atomic::Ordering::SeqCst)
    }
}

async fn key_set(app: &TestApp) -> Value {
    app.get_json("/.well-known/jwks.json").await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_kid_fetches_the_key_set_again_but_not_more_than_the_limit_allows() {
    // Two waiting rooms with different keys stand for one before and after a rotation.
    let before = TestApp::spawn_with_url(None, &[]).await;
    let after = TestApp::spawn_with_url(None, &[]).await;
    let (_, old_token) = before.admitted("main").await;
    let (_, new_token) = after.admitted("main").await;
    let keys = KeySetServer::start(key_set(&before).await.to_string()).await;
    let rotating = shop(
        EntryGuard::builder("main", "storefront")
            .jwks_url(&keys.url)
            .jwks_min_refresh(std::time::Duration::ZERO)
            .build()
            .await
            .unwrap(),
    );
    assert_eq!(
        send(&rotating, get_with(Some(&old_token), "*/*")).await.0,
        StatusCode::OK
    );
    assert_eq!(
        send(&rotating, get_with(Some(&old_token), "*/*")).await.0,
        StatusCode::OK
    );
    assert_eq!(keys.fetches(), 1, "known kids come from the cache");
    // The rotation: the set now holds the new key first, the old one after.
    let mut rotated = key_set(&after).await;
    let old = key_set(&before).await["keys"][0].clone();
    rotated["keys"].as_array_mut().unwrap().push(old);
    *keys.body.lock().unwrap() = rotated.to_string();
    assert_eq!(
        send(&rotating, get_with(Some(&new_token), "*/*")).await.0,
        StatusCode::OK
    );
    assert_eq!(
        send(&rotating, get_with(Some(&old_token), "*/*")).await.0,
        StatusCode::OK
    );
    assert_eq!(keys.fetches(), 2, "one fetch for the new kid");

    // With the default limit, tokens naming unknown kids cause at most one fetch.
    let limited = KeySetServer::start(key_set(&before).await.to_string()).await;
    let guarded = shop(
        EntryGuard::builder("main", "storefront")
            .jwks_url(&limited.url)
            .build()
            .await
            .unwrap(),
    );
    assert_eq!(
        send(&guarded, get_with(Some(&old_token), "*/*")).await.0,
        StatusCode::OK
    );
    for _ in 0..5 {
        let (status, _, body) = send(&guarded, get_with(Some(&new_token), "*/*")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    }
    assert_eq!(
        limited.fetches(),
        2,
        "one at the start, one for the unknown kid"
    );
}

/// The shared table of tokens (`vestibule_tests::entry_cases`, also run against the gate): the
/// layer refuses each with the gate's code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_table_of_tokens_is_refused_at_the_layer_as_at_the_gate() {
    use vestibule_tests::entry_cases;
    let dir = tempfile::tempdir().unwrap();
    let key = entry_cases::key_file(dir.path());
    let vestibule =
        TestApp::spawn_with_url(None, &["--signing-key-file", key.to_str().unwrap()]).await;
    let kid = key_set(&vestibule).await["keys"][0]["kid"]
        .as_str()
        .unwrap()
        .to_owned();
    let app = shop(
        EntryGuard::builder("main", "storefront")
            .jwks_url(vestibule.url("/.well-known/jwks.json"))
            .build()
            .await
            .unwrap(),
    );
    for case in entry_cases::cases(&kid, "main", "storefront") {
        let (status, _, body) = send(&app, get_with(case.token.as_deref(), "*/*")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{}: {body}", case.name);
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"], case.code, "{}", case.name);
    }
    let (_, token) = vestibule.admitted("main").await;
    assert_eq!(
        send(&app, get_with(Some(&token), "*/*")).await.0,
        StatusCode::OK
    );
}

/// A guard built while Vestibule is down starts after its bounded wait; a browser whose token
/// cannot be checked yet gets an HTML page, never JSON and never the queue again; once Vestibule
/// is back the guard recovers within its cooldown; while Vestibule hangs, tokens whose key is
/// held pass at once; a guard needs a room and an audience.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_vestibule_down_then_hanging_then_back_known_keys_always_pass() {
    use std::time::{Duration, Instant};
    use vestibule_tests::{LinkProxy, LinkState};
    assert!(matches!(
        EntryGuard::builder("main", "")
            .jwks_url("http://x")
            .build()
            .await,
        Err(vestibule_guard::GuardError::Unnamed)
    ));
    let vestibule = TestApp::spawn_with_url(None, &[]).await;
    let link = LinkProxy::start(&vestibule.base).await;
    link.set(LinkState::Down);
    let cooldown = Duration::from_secs(2);
    let started = Instant::now();
    let guard = EntryGuard::builder("main", "storefront")
        .jwks_url(link.url("/.well-known/jwks.json"))
        .waiting_room(link.url("/"))
        .startup_wait(Duration::from_secs(1))
        .jwks_min_refresh(cooldown)
        .jwks_refresh_every(Duration::from_secs(30))
        .timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(3), "a bounded wait");
    assert!(!guard.has_keys());
    let app = shop(guard.clone());
    let (_, token) = vestibule.admitted("main").await;

    // Down: nothing can tell whether the token is good. A browser gets a page to retry.
    let (status, _, page) = send(&app, get_with(Some(&token), "text/html")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(page.starts_with("<!doctype html>"), "{page}");
    let (status, _, body) = send(&app, get_with(Some(&token), "application/json")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"],
        "entry_check_unavailable"
    );

    // Back: the first request past the cooldown reads the keys.
    link.set(LinkState::Up);
    let back = Instant::now();
    loop {
        let (status, _, _) = send(&app, get_with(Some(&token), "text/html")).await;
        if status == StatusCode::OK {
            break;
        }
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            back.elapsed() < cooldown + Duration::from_secs(1),
            "no recovery within the cooldown"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(guard.has_keys());

    // Hanging: held keys check tokens offline, at once, never a 503.
    link.set(LinkState::Hung);
    for _ in 0..20 {
        let asked = Instant::now();
        let (status, _, body) = send(&app, get_with(Some(&token), "text/html")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(
            asked.elapsed() < Duration::from_millis(300),
            "{:?}",
            asked.elapsed()
        );
    }
    // A token of a key never seen gets at most one (bounded) fetch per cooldown, and a browser
    // still no JSON.
    let other = TestApp::spawn_with_url(None, &[]).await;
    let (_, foreign) = other.admitted("main").await;
    tokio::time::sleep(cooldown).await;
    let (status, _, page) = send(&app, get_with(Some(&foreign), "text/html")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(page.starts_with("<!doctype html>"), "{page}");
    let asked = Instant::now();
    let (status, _, _) = send(&app, get_with(Some(&foreign), "text/html")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        asked.elapsed() < Duration::from_millis(300),
        "within the cooldown: no fetch"
    );
    let (status, _, _) = send(&app, get_with(Some(&token), "text/html")).await;
    assert_eq!(status, StatusCode::OK);

    // Back again: the foreign key is known to be foreign once fetched.
    link.set(LinkState::Up);
    tokio::time::sleep(cooldown).await;
    let (status, location, _) = send(&app, get_with(Some(&foreign), "text/html")).await;
    assert_eq!(
        status,
        StatusCode::SEE_OTHER,
        "a token not issued goes to the queue"
    );
    assert!(location.unwrap().contains("room=main"));
    assert_eq!(
        send(&app, get_with(Some(&token), "text/html")).await.0,
        StatusCode::OK
    );
}

/// The guard speaks HTTPS to Vestibule: a key set at an `https://` URL is fetched (here from a
/// closed port: the request is sent and fails to connect), not refused as a URL the client
/// cannot use. (In this workspace the test crates turn reqwest's TLS on too; that the crate's
/// own default feature does is `cargo tree -p vestibule-guard -e normal -i rustls`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_key_set_is_fetched_in_the_default_build() {
    let port = vestibule_tests::free_port().unwrap();
    let guard = EntryGuard::builder("main", "storefront")
        .jwks_url(format!("https://127.0.0.1:{port}/.well-known/jwks.json"))
        .startup_wait(std::time::Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    // A token naming a key: only its header is read before the key set is asked for.
    let header = "eyJhbGciOiJFZERTQSIsImtpZCI6ImsifQ"; // {"alg":"EdDSA","kid":"k"}
    let token = format!("{header}.e30.c2ln");
    let (status, _, body) = send(&shop(guard), get_with(Some(&token), "application/json")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let message = serde_json::from_str::<Value>(&body).unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("error sending request"), "{message}");
    assert!(!message.contains("builder error"), "{message}");
}
