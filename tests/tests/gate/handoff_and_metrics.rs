//! The gate's own extras for a storefront: the verified token for the origin, metrics with the
//! admin token or on their own address, the form hand-off a framed page uses, and the origin's
//! requests in flight as the closed loop reads them.

use reqwest::StatusCode;
use serde_json::json;
use vestibule_shared::admin_events::AdminEvent;
use vestibule_shared::auto_rate::OriginSignals;
use vestibule_tests::Backend;

use crate::origin::Origin;
use crate::{admitted, gate_in_front_of, json_of, no_redirects, open_session, seen_header, PREFIX};

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

/// The loop reads a backlog from the origin's requests in flight: a gated request its shopper
/// gives up on (the client goes away, the forward is cancelled) stops counting at once, while
/// one still waiting counts until it is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_given_up_by_its_shopper_is_no_longer_counted_in_flight() {
    let origin = Origin::start().await;
    let app = gate_in_front_of(&origin, Backend::Memory, &["--gate", "/slow=main"]).await;
    let token = admitted(&app, "main").await;
    // One answer, so the room has origin signals to show.
    let answered = app
        .client
        .get(app.url("/checkout"))
        .header("x-entry-token", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), StatusCode::OK);
    // The signals read complete seconds: wait until the figures show that answer (for 5 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while origin_of(&app.admin_event_under(PREFIX).await).is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the answer never showed in the figures"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // Two requests to an origin that takes 30 s (the gate gives it 2): one waits, one is given
    // up after 300 ms.
    let started = unix_ms();
    let waiting = {
        let (client, url, token) = (app.client.clone(), app.url("/slow"), token.clone());
        tokio::spawn(async move { client.get(url).header("x-entry-token", token).send().await })
    };
    let given_up = app
        .client
        .get(app.url("/slow"))
        .header("x-entry-token", &token)
        .timeout(std::time::Duration::from_millis(300))
        .send()
        .await;
    assert!(given_up.is_err(), "the origin answered within 300 ms");
    let gave_up = unix_ms();

    // Figures taken after the give-up and before the gate's 2 s timeout ends the other.
    let in_flight = loop {
        let event = app.admin_event_under(PREFIX).await;
        assert!(
            event.at_ms < started + 1_900,
            "no figures within the waiting request's life"
        );
        if event.at_ms < gave_up + 100 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        }
        break origin_of(&event).expect("origin signals").in_flight;
    };
    assert_eq!(
        in_flight, 1,
        "the given-up request still counts, or the waiting one not"
    );
    let waited = waiting.await.unwrap().unwrap();
    assert_eq!(waited.status(), StatusCode::GATEWAY_TIMEOUT);
}

/// Room `main`'s origin signals in an admin event.
fn origin_of(event: &AdminEvent) -> Option<OriginSignals> {
    event.rooms.iter().find(|room| room.room == "main")?.origin
}

/// Now, ms since the Unix epoch (the clock the figures are stamped by).
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}
