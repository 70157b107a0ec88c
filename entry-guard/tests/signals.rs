//! What the guard reports with `report_signals`, read at a recording stand-in for Vestibule's
//! signals route: a post once a second from the start (`requests: 0` while quiet), the
//! requests it let through with their errors, none of the ones it refused, the origin API key
//! and the room's path; nothing once the guard is dropped; and a Vestibule that hangs never
//! slows a shopper.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Path;
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use tower::ServiceExt as _;
use vestibule_guard::EntryGuard;
use vestibule_tests::{Served, TestApp};

const SINK_KEY: &str = "origin-key-for-the-sink-0123456789";

/// One post the stand-in received: the room in its path, its `Authorization`, its body.
#[derive(Debug, Clone)]
struct Post {
    room: String,
    authorization: String,
    body: Value,
}

/// A stand-in for Vestibule's `POST /api/v1/rooms/{room}/signals` that records every post.
struct SignalsSink {
    server: Served,
    posts: Arc<Mutex<Vec<Post>>>,
}

impl SignalsSink {
    async fn start() -> Self {
        let posts = Arc::new(Mutex::new(Vec::new()));
        let recorded = posts.clone();
        let app = Router::new().route(
            "/api/v1/rooms/{room}/signals",
            post(
                move |Path(room): Path<String>, headers: HeaderMap, body: String| {
                    let authorization = headers
                        .get(header::AUTHORIZATION)
                        .and_then(|value| value.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    let body = serde_json::from_str(&body).unwrap_or(Value::Null);
                    recorded.lock().unwrap().push(Post {
                        room,
                        authorization,
                        body,
                    });
                    async { StatusCode::NO_CONTENT }
                },
            ),
        );
        Self {
            server: Served::start(app).await,
            posts,
        }
    }

    fn posts(&self) -> Vec<Post> {
        self.posts.lock().unwrap().clone()
    }

    /// Waits up to `within` for a post whose body satisfies `ok`.
    async fn wait_for(&self, within: Duration, ok: impl Fn(&Value) -> bool) -> Post {
        let deadline = Instant::now() + within;
        loop {
            if let Some(found) = self.posts().into_iter().find(|post| ok(&post.body)) {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "no such post within {within:?}: {:?}",
                self.posts()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A shop whose `/checkout` answers 200 and `/broken` 500, behind `guard`.
fn shop(guard: EntryGuard) -> Router {
    Router::new()
        .route("/checkout", get(|| async { "ok" }))
        .route(
            "/broken",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "broken") }),
        )
        .layer(guard)
}

async fn status_of(app: &Router, path: &str, token: Option<&str>) -> StatusCode {
    let mut request = Request::get(path).header(header::ACCEPT, "application/json");
    if let Some(token) = token {
        request = request.header("X-Entry-Token", token);
    }
    let request = request.body(Body::empty()).unwrap();
    app.clone().oneshot(request).await.unwrap().status()
}

async fn reporting_guard(vestibule: &TestApp, base: &str) -> EntryGuard {
    EntryGuard::builder("main", "storefront")
        .jwks_url(vestibule.url("/.well-known/jwks.json"))
        .report_signals(base, SINK_KEY)
        .build()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_reports_what_it_let_through_once_a_second_until_dropped() {
    let vestibule = TestApp::spawn_with_url(None, &[]).await;
    let (_, token) = vestibule.admitted("main").await;
    let sink = SignalsSink::start().await;
    // A base URL with a trailing `/` is the same base.
    let guard = reporting_guard(&vestibule, &format!("{}/", sink.server.url())).await;
    let app = shop(guard.clone());

    // Quiet: a post all the same, with no requests, to the room's route with the origin key.
    let quiet = sink
        .wait_for(Duration::from_secs(3), |body| body["requests"] == 0)
        .await;
    assert_eq!(quiet.room, "main");
    assert_eq!(quiet.authorization, format!("Bearer {SINK_KEY}"));
    for field in ["p50Ms", "p95Ms", "errorRate", "inFlight", "sent"] {
        assert_eq!(quiet.body[field], 0.0, "{field} in {}", quiet.body);
    }
    assert_eq!(
        quiet.body["windowSecs"], 5,
        "the whole window: {}",
        quiet.body
    );

    // 30 answered 200 and 6 answered 500 pass through; 20 are refused by the guard.
    for _ in 0..30 {
        assert_eq!(
            status_of(&app, "/checkout", Some(&token)).await,
            StatusCode::OK
        );
    }
    for _ in 0..6 {
        assert_eq!(
            status_of(&app, "/broken", Some(&token)).await,
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
    for token in [None, Some("garbage")] {
        for _ in 0..10 {
            assert_eq!(
                status_of(&app, "/checkout", token).await,
                StatusCode::FORBIDDEN
            );
        }
    }
    let busy = sink
        .wait_for(Duration::from_secs(4), |body| body["requests"] == 36)
        .await;
    assert_eq!(busy.body["sent"], 36, "{}", busy.body);
    let spanned = busy.body["windowSecs"].as_u64().unwrap();
    assert!((1..=5).contains(&spanned), "{}", busy.body);
    assert_eq!(busy.body["inFlight"], 0, "{}", busy.body);
    let error_rate = busy.body["errorRate"].as_f64().unwrap();
    assert!((error_rate - 6.0 / 36.0).abs() < 1e-9, "{}", busy.body);
    let p95 = busy.body["p95Ms"].as_f64().unwrap();
    assert!(
        (0.0..50.0).contains(&p95),
        "in-process answers: {}",
        busy.body
    );
    assert!(
        sink.posts()
            .iter()
            .all(|post| post.body["requests"].as_u64().unwrap() <= 36),
        "refused requests were counted: {:?}",
        sink.posts()
    );
    // The guard shows what it reports.
    let shown = guard.signals().expect("reporting");
    assert_eq!((shown.requests, shown.sent), (36, 36));

    // Once a second: the posts so far span about as many seconds.
    let posts = sink.posts();
    assert!(posts.len() >= 2, "{posts:?}");

    // Dropped (every clone: the layer in the app too): the posts stop within a period.
    drop((app, guard));
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let after_drop = sink.posts().len();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        sink.posts().len(),
        after_drop,
        "the report went on after the guard was dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vestibule_that_hangs_or_refuses_never_slows_a_shopper() {
    let vestibule = TestApp::spawn_with_url(None, &[]).await;
    let (_, token) = vestibule.admitted("main").await;
    // Accepts connections and never answers.
    let hanging = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hanging_base = format!("http://{}", hanging.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = hanging.accept().await {
            held.push(socket);
        }
    });
    // Answers every post 403 (a wrong origin key).
    let refusing = Served::start(Router::new().fallback(|| async { StatusCode::FORBIDDEN })).await;

    for base in [hanging_base, refusing.url()] {
        let app = shop(reporting_guard(&vestibule, &base).await);
        let started = Instant::now();
        let mut slowest = Duration::ZERO;
        // Through three report periods.
        while started.elapsed() < Duration::from_millis(3200) {
            let sent = Instant::now();
            assert_eq!(
                status_of(&app, "/checkout", Some(&token)).await,
                StatusCode::OK
            );
            slowest = slowest.max(sent.elapsed());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            slowest < Duration::from_millis(200),
            "{base}: a request waited {slowest:?}"
        );
    }
}
