//! Fast in-process tests of the whole HTTP edge: `http::router(state)` over the embedded memory
//! store, driven with `tower::ServiceExt::oneshot` — no socket, no process, no scheduler.
//!
//! Add a test here when it is about what one request gets back (status, JSON error shape,
//! headers, layers). Tests of the real binary (sockets, Redis, restarts, the page) live in the
//! black-box suite `tests/tests/`; store semantics in `backend/tests/store_contract.rs`.

use std::sync::{Arc, RwLock};

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use clap::Parser as _;
use serde_json::Value;
use tower::ServiceExt as _;
use vestibule::room::RoomRuntime;
use vestibule::state::{AppState, AppStateParts};
use vestibule::store::memory::MemoryStore;
use vestibule::store::Store;
use vestibule::tokens::keys::SharedKey;
use vestibule::tokens::{KeyRing, TokenService};
use vestibule::Config;
use vestibule_shared::{error_code, paths, TicketState, TicketStatus, IDEMPOTENCY_KEY_HEADER};

const ADMIN_TOKEN: &str = "router-test-admin-token";

/// Builds an [`AppState`] over a fresh in-memory store, with the rooms initialised.
struct StateBuilder {
    args: Vec<String>,
}

impl StateBuilder {
    /// Room `main`, no data dir, a known admin token.
    fn new() -> Self {
        let args = [
            "--data-dir",
            "none",
            "--rooms",
            "main",
            "--admin-token",
            ADMIN_TOKEN,
        ];
        Self {
            args: args.map(String::from).to_vec(),
        }
    }

    /// Adds command-line flags, as `vestibule` would read them.
    fn flags(mut self, flags: &[&str]) -> Self {
        self.args.extend(flags.iter().map(|flag| flag.to_string()));
        self
    }

    async fn build(self) -> AppState {
        let config = Config::try_parse_from(std::iter::once("vestibule".into()).chain(self.args))
            .expect("flags parse");
        config.validate().expect("valid flags");
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let keys = KeyRing::load(&config.tokens, SharedKey::Memory)
            .await
            .expect("a generated signing key");
        let tokens = Arc::new(TokenService::new(
            keys,
            &config.tokens.token_issuer,
            &config.tokens.token_audience,
        ));
        let mut rooms = Vec::new();
        for room in &config.rooms {
            let in_force = store
                .seed_room(room, &config.default_settings())
                .await
                .expect("room initialised");
            rooms.push(Arc::new(RoomRuntime::new(
                room.clone(),
                in_force,
                tokens.clone(),
            )));
        }
        let (_, shutdown) = tokio::sync::watch::channel(false);
        let bots = Arc::new(vestibule::bots::Bots::new(
            vestibule::bots::Bots::key_in_memory(),
        ));
        AppState::new(AppStateParts {
            store,
            store_safety: Arc::new(RwLock::new(None)),
            // As `Application::build`: `--disable-admin` leaves no token to match.
            admin_token: config
                .admin_token
                .clone()
                .filter(|_| !config.disable_admin)
                .map(Arc::new),
            room_options: Arc::new(config.room_options()),
            config: Arc::new(config.http_config()),
            rooms: Arc::new(vestibule::room::Rooms::new(rooms)),
            metrics: vestibule::telemetry::metrics_handle(),
            shutdown,
            tokens,
            bots,
            admin_feed: Arc::default(),
            store_handles: Arc::default(),
        })
    }

    async fn router(self) -> Router {
        vestibule::http::router(self.build().await, vestibule::gate::session::router())
    }
}

/// One request through the router: status, headers and the body as JSON (`Null` when empty).
async fn call(app: &Router, request: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Value) {
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("body");
    let json = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&bytes)))
    };
    (status, headers, json)
}

/// `PATCH`es room `main`'s settings with the admin token and a JSON body.
async fn patch_settings(
    app: &Router,
    body: &'static str,
) -> (StatusCode, axum::http::HeaderMap, Value) {
    let request = request(Method::PATCH, &paths::admin_room("main"))
        .header(header::AUTHORIZATION, format!("Bearer {ADMIN_TOKEN}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap();
    call(app, request).await
}

fn request(method: Method, path: &str) -> axum::http::request::Builder {
    Request::builder().method(method).uri(path)
}

/// Asserts the one error shape `{"error": code, "message": …}` with the given code.
fn assert_error(body: &Value, code: &str) {
    assert_eq!(body["error"], code, "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(
        error_code::ALL.contains(&code),
        "{code} is not a documented code"
    );
}

#[tokio::test]
async fn a_join_is_found_again_by_its_poll_and_by_its_key() {
    let app = StateBuilder::new().router().await;
    let join = || {
        request(Method::POST, &paths::tickets("main"))
            .header(IDEMPOTENCY_KEY_HEADER, "router-key-1")
            .body(Body::empty())
            .unwrap()
    };
    let (status, headers, body) = call(&app, join()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let joined: TicketStatus = serde_json::from_value(body).unwrap();
    assert_eq!(joined.status, TicketState::Waiting);
    assert_eq!(joined.position, Some(1));
    assert_eq!(
        headers[header::LOCATION],
        paths::ticket("main", &joined.ticket_id)
    );

    let poll = request(Method::GET, &paths::ticket("main", &joined.ticket_id))
        .body(Body::empty())
        .unwrap();
    let (status, headers, body) = call(&app, poll).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(headers[header::CACHE_CONTROL], "no-store");
    let polled: TicketStatus = serde_json::from_value(body).unwrap();
    assert_eq!(polled.ticket_id, joined.ticket_id);
    assert_eq!(polled.position, Some(1));

    let (status, _, body) = call(&app, join()).await;
    assert_eq!(status, StatusCode::OK, "a retried join finds its ticket");
    assert_eq!(body["ticketId"], joined.ticket_id.as_str());
}

#[tokio::test]
async fn an_unknown_room_is_a_json_404() {
    let app = StateBuilder::new().router().await;
    for request in [
        request(Method::POST, &paths::tickets("nope")),
        request(Method::GET, &paths::room("nope")),
    ] {
        let (status, _, body) = call(&app, request.body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_error(&body, error_code::ROOM_NOT_FOUND);
    }
}

#[tokio::test]
async fn a_malformed_ticket_id_or_body_is_a_json_400() {
    let app = StateBuilder::new().router().await;
    let (status, _, body) = call(
        &app,
        request(Method::GET, &paths::ticket("main", "not-an-id"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, error_code::BAD_REQUEST);

    let (status, _, body) = patch_settings(&app, "{\"paused\": tru").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, error_code::BAD_REQUEST);
}

#[tokio::test]
async fn a_setting_out_of_its_bounds_is_refused_naming_the_field_and_bounds() {
    let app = StateBuilder::new().router().await;
    let (status, _, body) = patch_settings(&app, r#"{"tokenTtlSecs": 86401}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, error_code::INVALID_FIELD);
    assert_eq!(body["message"], "tokenTtlSecs must be 1–86400 s", "{body}");

    let (status, _, body) =
        patch_settings(&app, r#"{"tokenTtlSecs": 86400, "maxActiveUsers": null}"#).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["tokenTtlSecs"], 86_400);
    assert!(body["maxActiveUsers"].is_null());
}

#[tokio::test]
async fn unknown_endpoints_and_methods_answer_json() {
    let app = StateBuilder::new().router().await;
    let (status, _, body) = call(
        &app,
        request(Method::GET, "/api/v1/no-such-thing")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&body, error_code::NOT_FOUND);

    let (status, headers, body) = call(
        &app,
        request(Method::PUT, &paths::tickets("main"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_error(&body, error_code::METHOD_NOT_ALLOWED);
    assert!(headers.contains_key(header::ALLOW), "{headers:?}");
}

#[tokio::test]
async fn a_protected_path_without_an_entry_token_is_refused() {
    let app = StateBuilder::new().router().await;
    let (status, _, body) = call(
        &app,
        request(Method::POST, &paths::orders("main"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_error(&body, error_code::TOKEN_MISSING);
}

#[tokio::test]
async fn the_admin_api_turned_off_answers_403_even_to_the_right_token() {
    let app = StateBuilder::new()
        .flags(&["--disable-admin"])
        .router()
        .await;
    let (status, _, body) = call(
        &app,
        request(Method::GET, &paths::admin_room("main"))
            .header(header::AUTHORIZATION, format!("Bearer {ADMIN_TOKEN}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_error(&body, error_code::FORBIDDEN);
}

/// The answer layer (`finish_answers`) and the body reader do what their five separate layers
/// did: every API answer — a ticket, a handler's error, the body reader's 413 — is JSON, says
/// `no-store`, and carries the framing, sniffing and referrer headers.
#[tokio::test]
async fn every_api_answer_is_json_uncached_and_framed_by_the_one_answer_layer() {
    let app = StateBuilder::new()
        .flags(&["--max-body-bytes", "1024"])
        .router()
        .await;
    let joined = request(Method::POST, &paths::tickets("main"))
        .body(Body::empty())
        .unwrap();
    let unknown = request(Method::GET, &paths::ticket("main", &"A".repeat(22)))
        .body(Body::empty())
        .unwrap();
    let too_large = request(Method::POST, &paths::tickets("main"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(vec![b' '; 4096]))
        .unwrap();
    for (request, expected, code) in [
        (joined, StatusCode::CREATED, None),
        (
            unknown,
            StatusCode::NOT_FOUND,
            Some(error_code::TICKET_NOT_FOUND),
        ),
        (
            too_large,
            StatusCode::PAYLOAD_TOO_LARGE,
            Some(error_code::PAYLOAD_TOO_LARGE),
        ),
    ] {
        let (status, headers, body) = call(&app, request).await;
        assert_eq!(status, expected, "{body}");
        if let Some(code) = code {
            assert_error(&body, code);
        }
        assert_eq!(headers[header::CACHE_CONTROL], "no-store", "{status}");
        assert!(
            headers[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("application/json"),
            "{status}"
        );
        assert_eq!(
            headers[header::CONTENT_SECURITY_POLICY],
            "frame-ancestors 'self'",
            "{status}"
        );
        assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(headers[header::REFERRER_POLICY], "no-referrer");
    }
}

#[tokio::test]
async fn a_join_with_a_malformed_json_body_is_refused_and_creates_no_ticket() {
    let app = StateBuilder::new().router().await;
    let join = |content_type: Option<&str>, body: &'static str| {
        let mut builder = request(Method::POST, &paths::tickets("main"));
        if let Some(content_type) = content_type {
            builder = builder.header(header::CONTENT_TYPE, content_type);
        }
        builder.body(Body::from(body)).unwrap()
    };
    // A broken serializer's output, with and without a Content-Type: 400, and the line is empty.
    // So is what is not JSON by RFC 8259 though a lenient scanner passes it (bytes that are not
    // UTF-8 in a string, a lone surrogate), and a body whose type is empty, malformed or given
    // twice (a proxy may read the other one).
    for (content_types, body) in [
        (vec!["application/json"], &b"{\"lang\": "[..]),
        (vec!["application/json; charset=utf-8"], b"not json"),
        (vec!["application/merge-patch+json"], b"{,}"),
        (vec![], b"{\"a\":1}}"),
        (vec!["application/json"], b"{\"a\":\"\xff\xfe\"}"),
        (vec!["application/json"], b"{\"a\":\"\\ud800\"}"),
        (vec![""], b"{bad"),
        (vec![";;;"], b"{bad"),
        (vec!["application/json, text/plain"], b"{bad"),
        (vec!["text/plain", "application/json"], b"{bad"),
    ] {
        let mut builder = request(Method::POST, &paths::tickets("main"));
        for content_type in &content_types {
            builder = builder.header(header::CONTENT_TYPE, *content_type);
        }
        let (status, headers, answer) =
            call(&app, builder.body(Body::from(body.to_vec())).unwrap()).await;
        let shown = String::from_utf8_lossy(body);
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{content_types:?} {shown:?}: {answer}"
        );
        assert_error(&answer, error_code::BAD_REQUEST);
        assert_eq!(headers[header::CACHE_CONTROL], "no-store");
    }
    let (_, _, room) = call(
        &app,
        request(Method::GET, &paths::room("main"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(room["waiting"], 0, "no refused join holds a place: {room}");

    // What clients send to an endpoint without a body is still fine: nothing, whitespace, `{}`,
    // or a body of a type that is not JSON (ignored, as before).
    for (position, (content_type, body)) in [
        (Some("application/json"), ""),
        (Some("application/json"), " \n"),
        (Some("application/json"), "{}"),
        (None, "{}"),
        (Some("text/plain"), "not json"),
    ]
    .into_iter()
    .enumerate()
    {
        let (status, _, answer) = call(&app, join(content_type, body)).await;
        assert_eq!(
            status,
            StatusCode::CREATED,
            "{content_type:?} {body:?}: {answer}"
        );
        assert_eq!(answer["position"], position + 1, "{answer}");
    }
}
