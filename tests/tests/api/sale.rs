//! Stock, sold out and closing (docs/DESIGN.md "Stock and sold out", "Room state"): bad values
//! get a JSON 400, joins into a sold-out or closed room a JSON 409 a client can tell apart,
//! waiting shoppers read SOLD_OUT with the room's message, an order with no unit left is 409
//! `sold_out` without using its token up, and the room's state follows its settings.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use vestibule_shared::{paths, RoomState, TicketState};
use vestibule_tests::{both_stores, Backend, TestApp, ADMIN_TOKEN};

use crate::paused_app;

both_stores!(
    bad_sale_settings_get_a_json_400_and_change_nothing,
    a_sold_out_room_refuses_new_joins_and_its_line_reads_sold_out,
    a_closed_room_refuses_new_joins_and_still_admits_its_line,
    an_order_with_no_unit_left_is_refused_and_keeps_its_token,
    the_room_state_follows_pause_closing_and_sold_out,
    a_place_behind_the_stock_left_is_flagged_beyond_it,
);

/// PATCHes the room; returns the status and body (no assertion).
async fn try_patch(app: &TestApp, patch: Value) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .patch(app.url(&paths::admin_room("main")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&patch)
        .send()
        .await
        .expect("PATCH");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A keyed join of `main`: its status and body, whatever it is.
pub(crate) async fn try_join(app: &TestApp, key: &str) -> (StatusCode, Value) {
    let response = app
        .join_request("main")
        .header("Idempotency-Key", key)
        .send()
        .await
        .expect("join");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn room_state(app: &TestApp) -> Value {
    let (status, body) = app.get_json(&paths::room("main")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn bad_sale_settings_get_a_json_400_and_change_nothing(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    let before = app.patch_room("main", json!({"stock": 10})).await;
    let long = "a".repeat(501);
    for bad in [
        json!({"stock": -1}),
        json!({"stock": 1.5}),
        json!({"stock": "10"}),
        json!({"stock": 1_000_000_001u64}),
        json!({"soldOut": "yes"}),
        json!({"closed": 1}),
        json!({"sold": 5}),
        json!({"soldOutMessageEn": ""}),
        json!({"soldOutMessageKo": long}),
        json!({"soldOutMessageEn": "two\nlines"}),
        json!({"soldOutMessageKo": 7}),
    ] {
        let (status, body) = try_patch(&app, bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad} → {body}");
        let code = body["error"].as_str().unwrap_or_default();
        assert!(
            code == "invalid_field" || code == "bad_request",
            "{bad} → {body}"
        );
    }
    // An empty PATCH answers the settings in force.
    let now = app.patch_room("main", json!({})).await;
    assert_eq!(now["stock"], before["stock"]);
    assert_eq!(now["stock"], 10);
    assert_eq!(now["sold"], 0);
    let unlimited = app.patch_room("main", json!({"stock": null})).await;
    assert!(unlimited["stock"].is_null(), "{unlimited}");
}

/// Also a check of aws-solutions/virtual-waiting-room-on-aws#208 ("expired queue remain in the
/// waiting room size"): shoppers no longer waiting must not be counted as waiting — here, once
/// sold out, the room's `waiting` is 0 though their tickets are still stored.
async fn a_sold_out_room_refuses_new_joins_and_its_line_reads_sold_out(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    let (_, waiting) = app.join("main", Some("early-bird")).await;
    assert_eq!(waiting.status, TicketState::Waiting);
    assert_eq!(app.metric("vestibule_waiting{room=\"main\"}").await, 1.0);
    let set = app
        .patch_room(
            "main",
            json!({"soldOut": true, "soldOutMessageEn": "All 100 pairs are gone.",
                   "soldOutMessageKo": "100켤레가 모두 판매되었습니다."}),
        )
        .await;
    assert_eq!(set["soldOut"], true, "{set}");
    let (status, body) = try_join(&app, "late").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"], "sold_out", "{body}");
    let status = app
        .poll_until("main", &waiting.ticket_id, Duration::from_secs(3), |t| {
            t.status == TicketState::SoldOut
        })
        .await;
    assert_eq!(status.status, TicketState::SoldOut);
    assert_eq!(status.position, None);
    assert_eq!(status.room_state, RoomState::SoldOut);
    let message = status.sold_out_message.expect("the room's message");
    assert_eq!(message.en.as_deref(), Some("All 100 pairs are gone."));
    assert_eq!(
        message.ko.as_deref(),
        Some("100켤레가 모두 판매되었습니다.")
    );
    if matches!(backend, Backend::Redis) {
        // Redis takes the sold-out line out of its queue (a bounded number a tick); the
        // tickets keep reading SOLD_OUT until their terminal TTL.
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while app.metric("vestibule_waiting{room=\"main\"}").await > 0.0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the sold-out line stays queued"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let polled = app.poll("main", &waiting.ticket_id).await;
        assert_eq!(
            (polled.status, polled.position),
            (TicketState::SoldOut, None)
        );
    }
    // A retried join of the waiting shopper finds their ticket, SOLD_OUT (not a 409).
    let (status, again) = try_join(&app, "early-bird").await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["status"], "SOLD_OUT", "{again}");
    // Final: neither soldOut: false nor new stock reopens it.
    for reopen in [json!({"soldOut": false}), json!({"stock": 50})] {
        let (status, body) = try_patch(&app, reopen.clone()).await;
        assert_eq!(status, StatusCode::CONFLICT, "{reopen} → {body}");
        assert_eq!(body["error"], "sold_out");
    }
    let info = room_state(&app).await;
    assert_eq!(info["state"], "SOLD_OUT", "{info}");
    assert_eq!(info["waiting"], 0, "{info}");
    assert_eq!(info["soldOutMessage"]["en"], "All 100 pairs are gone.");
    // The operator's view agrees, on every store.
    let admin_view = app.patch_room("main", json!({})).await;
    assert_eq!(admin_view["waiting"], 0, "{admin_view}");
}

async fn a_closed_room_refuses_new_joins_and_still_admits_its_line(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    let (_, in_line) = app.join("main", Some("in-line")).await;
    app.patch_room("main", json!({"closed": true})).await;
    let (status, body) = try_join(&app, "late").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"], "room_closed", "{body}");
    assert_eq!(room_state(&app).await["state"], "CLOSED");
    let still = app.poll("main", &in_line.ticket_id).await;
    assert_eq!(
        (still.status, still.position),
        (TicketState::Waiting, Some(1))
    );
    app.patch_room("main", json!({"paused": false})).await;
    let admitted = app
        .poll_until("main", &in_line.ticket_id, Duration::from_secs(5), |t| {
            t.status == TicketState::TokenIssued
        })
        .await;
    assert_eq!(
        admitted.status,
        TicketState::TokenIssued,
        "closing stopped admission"
    );
    app.patch_room("main", json!({"closed": false})).await;
    let (status, body) = try_join(&app, "late").await;
    assert!(status.is_success(), "{body}");
}

async fn an_order_with_no_unit_left_is_refused_and_keeps_its_token(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    app.patch_room("main", json!({"stock": 1})).await;
    let (first, token) = app.admitted("main").await;
    // The operator takes the last unit away (sold elsewhere): the token out is not refused at
    // the door, but its order finds nothing left.
    app.patch_room("main", json!({"stock": 0})).await;
    let (status, body) = app.order("main", Some(&token)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"], "sold_out", "{body}");
    let ticket = app.poll("main", &first.ticket_id).await;
    assert_eq!(
        ticket.status,
        TicketState::TokenIssued,
        "the refusal used the token up"
    );
    let settings = app.patch_room("main", json!({})).await;
    assert_eq!(
        (settings["stock"].clone(), settings["sold"].clone()),
        (json!(0), json!(0))
    );
}

async fn the_room_state_follows_pause_closing_and_sold_out(backend: Backend) {
    let app = TestApp::spawn(backend, &[]).await;
    app.patch_room("main", json!({"stock": 3})).await;
    let info = room_state(&app).await;
    assert_eq!(
        (
            info["state"].clone(),
            info["stockLeft"].clone(),
            info["sold"].clone()
        ),
        (json!("OPEN"), json!(3), json!(0)),
        "{info}"
    );
    let mut seen = Vec::new();
    for (patch, state) in [
        (json!({"paused": true}), "PAUSED"),
        (json!({"closed": true}), "CLOSED"),
        (json!({"paused": false}), "CLOSED"),
        (json!({"closed": false}), "OPEN"),
        (json!({"closed": true, "soldOut": true}), "SOLD_OUT"),
        (json!({"closed": false}), "SOLD_OUT"),
    ] {
        app.patch_room("main", patch).await;
        let info = room_state(&app).await;
        seen.push(info["state"].as_str().unwrap_or_default().to_owned());
        assert_eq!(info["state"], state, "after {seen:?}: {info}");
    }
}

/// The ETA knows the stock: a shopper behind more people than units left reads `beyondStock`
/// (the page says they may not get one); the ones within the stock do not; no stock, no flag.
async fn a_place_behind_the_stock_left_is_flagged_beyond_it(backend: Backend) {
    let app = paused_app(backend, &[]).await;
    app.patch_room("main", json!({"stock": 2})).await;
    let mut flags = Vec::new();
    for i in 0..3 {
        let (code, ticket) = app.join("main", Some(&format!("stock-{i}"))).await;
        assert_eq!(code, StatusCode::CREATED);
        flags.push((ticket.position, ticket.beyond_stock));
    }
    assert_eq!(
        flags,
        vec![(Some(1), false), (Some(2), false), (Some(3), true)]
    );
    app.patch_room("main", json!({"stock": null})).await;
    let (_, third) = app.join("main", Some("stock-2")).await;
    assert!(!third.beyond_stock, "no stock: no flag");
}
