//! The entry cookie and the way back: the session endpoint sets the cookie the gate then takes,
//! a shopper releases it, every `returnTo` that is not a same-origin path comes back as `/`, and
//! a room's checkout is its first gated path.

use reqwest::StatusCode;
use serde_json::json;
use vestibule_tests::{both_stores, Backend, TestApp};

use crate::origin::Origin;
use crate::{
    admitted, gate_in_front_of, json_of, no_redirects, open_session, seen_header, SystemTimeSecs,
    PREFIX,
};

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
    assert!(
        origin.paths().is_empty(),
        "the origin saw {:?}",
        origin.paths()
    );
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
