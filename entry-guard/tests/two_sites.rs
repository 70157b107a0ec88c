//! Headless Chromium across two sites: a small axum storefront using the guard on `shop.test`,
//! the real Vestibule (its built page) on `queue.test`, both on 127.0.0.1 through Chromium's
//! `--host-resolver-rules`. A shopper opens the shop's checkout, waits in line, is admitted and
//! lands on the shop's checkout with the shop's own cookie; the token never shows in a URL or a
//! `Referer`. Then the same with the waiting room framed by the shop and third-party cookies
//! blocked.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::header;
use axum::response::Html;
use axum::routing::get;
use axum::{Extension, Router};
use fantoccini::{Client, Locator};
use serde_json::json;
use vestibule_guard::{EntryClaims, EntryGuard};
use vestibule_tests::chromium::{dist_dir, shown_position, wait_for, ChromeDriver};
use vestibule_tests::TestApp;

/// Every request the shop received: method, URL (path and query) and `Referer`.
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

struct Sites {
    vestibule: TestApp,
    shop: String,
    queue: String,
    seen: Seen,
}

impl Sites {
    /// Vestibule on `queue.test`, the room's checkout on the shop; the shop on `shop.test`.
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let shop_port = listener.local_addr().unwrap().port();
        let shop = format!("http://shop.test:{shop_port}");
        let dist = dist_dir().to_string_lossy().to_string();
        let checkout = format!("{shop}/checkout");
        let vestibule = TestApp::spawn_with_url(
            None,
            &[
                "--static-dir",
                &dist,
                "--cors-origins",
                &shop,
                "--checkout-url",
                &checkout,
            ],
        )
        .await;
        let queue_port = vestibule.base.rsplit(':').next().unwrap().to_owned();
        let queue = format!("http://queue.test:{queue_port}");
        let guard = EntryGuard::builder("main", "storefront")
            .jwks_url(vestibule.url("/.well-known/jwks.json"))
            .waiting_room(format!("{queue}/"))
            .secure_cookie(false)
            .build()
            .await
            .unwrap();
        let seen = Seen::default();
        let frame = format!(
            "<!doctype html><title>Shop</title><h1>The shop</h1>\
             <iframe id=\"queue\" title=\"Waiting room\" style=\"width:100%;height:700px;border:0\" \
             src=\"{queue}/?room=main&return=%2Fcheckout%3Fsize%3D7\"></iframe>"
        );
        let recorded = seen.clone();
        let app = Router::new()
            .route(
                "/checkout",
                get(|Extension(entry): Extension<EntryClaims>| async move {
                    Html(format!(
                        "<!doctype html><title>Checkout</title>\
                         <h1 id=\"checkout\">The shop's own checkout</h1><p id=\"shopper\">{}</p>",
                        entry.sub
                    ))
                })
                .layer(guard.clone()),
            )
            .route(
                "/frame",
                get(move || {
                    let frame = frame.clone();
                    async move { Html(frame) }
                }),
            )
            .merge(guard.handoff())
            .layer(axum::middleware::from_fn(
                move |request: Request, next: axum::middleware::Next| {
                    let referer = request
                        .headers()
                        .get(header::REFERER)
                        .and_then(|value| value.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    recorded.lock().unwrap().push((
                        request.method().to_string(),
                        request.uri().to_string(),
                        referer,
                    ));
                    next.run(request)
                },
            ));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            vestibule,
            shop,
            queue,
            seen,
        }
    }

    fn seen(&self) -> Vec<(String, String, String)> {
        self.seen.lock().unwrap().clone()
    }

    async fn browser(&self, driver: &ChromeDriver, dir: &std::path::Path, block: bool) -> Client {
        let rules = "--host-resolver-rules=MAP shop.test 127.0.0.1, MAP queue.test 127.0.0.1";
        let prefs = if block {
            // Third-party cookies blocked, as more and more browsers do by default (the pref and
            // the flag each do it in some Chromium versions).
            json!({ "profile.cookie_controls_mode": 1, "profile.block_third_party_cookies": true })
        } else {
            json!({})
        };
        let mut args = vec![rules];
        if block {
            args.push("--test-third-party-cookie-phaseout");
        }
        driver.browser_with(dir, "en-US", &args, prefs).await
    }

    /// The room paused, so that the shopper waits in line.
    async fn pause(&self, paused: bool) {
        self.vestibule
            .patch_room("main", json!({ "paused": paused }))
            .await;
    }

    /// Waits until the top-level page is the shop's checkout (its content shown).
    async fn on_checkout(&self, browser: &Client, query: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let url = browser.current_url().await.unwrap();
            let want = match query {
                "" => format!("{}/checkout", self.shop),
                query => format!("{}/checkout?{query}", self.shop),
            };
            if url.as_str() == want {
                break;
            }
            assert!(Instant::now() < deadline, "still on {url}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Out of the frame, if the test was in it (the top has navigated).
        let _ = browser.enter_parent_frame().await;
        wait_for(browser, "#checkout", None, Duration::from_secs(5), |text| {
            text == "The shop's own checkout"
        })
        .await;
    }
}

/// The shop's entry cookie in the browser (for `shop.test`): its value, and whether the page's
/// script can read it.
async fn shop_cookie(browser: &Client) -> (Option<String>, bool) {
    let cookie = browser
        .get_named_cookie("vestibule_entry_main")
        .await
        .ok()
        .map(|cookie| cookie.value().to_owned());
    let script_sees: String = browser
        .execute("return document.cookie;", vec![])
        .await
        .unwrap()
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (cookie, script_sees.contains("vestibule_entry_main"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shopper_of_a_shop_on_another_site_lands_on_its_checkout_with_its_own_cookie() {
    let sites = Sites::start().await;
    let driver = ChromeDriver::start();
    let dir = tempfile::tempdir().unwrap();
    let browser = sites.browser(&driver, dir.path(), false).await;
    sites.pause(true).await;

    // The shop sends the shopper to the waiting room on the other site, with its way back.
    browser
        .goto(&format!("{}/checkout?size=42", sites.shop))
        .await
        .unwrap();
    shown_position(&browser).await;
    let url = browser.current_url().await.unwrap();
    assert_eq!(
        url.as_str(),
        format!("{}/?room=main&return=%2Fcheckout%3Fsize%3D42", sites.queue)
    );
    sites.pause(false).await;

    // Admitted: the page posts the token to the shop, which sets its cookie and goes on.
    sites.on_checkout(&browser, "size=42").await;
    let (cookie, script_sees) = shop_cookie(&browser).await;
    let token = cookie.expect("the shop's own cookie");
    assert!(!script_sees, "the cookie is HttpOnly");
    // A reload keeps the checkout (the cookie opens it again).
    browser.refresh().await.unwrap();
    sites.on_checkout(&browser, "size=42").await;

    // The token went in a form body only: in no URL and no Referer the shop saw, nor the
    // browser's own address.
    let seen = sites.seen();
    assert!(
        seen.iter()
            .any(|(method, url, _)| method == "POST" && url.ends_with("/rooms/main/handoff")),
        "{seen:?}"
    );
    for (_, url, referer) in &seen {
        assert!(
            !url.contains(&token) && !referer.contains(&token),
            "{url} {referer}"
        );
    }
    assert!(!browser
        .current_url()
        .await
        .unwrap()
        .as_str()
        .contains(&token));
    browser.close().await.unwrap();
}

/// A shopper who starts on the waiting room (no `return`) lands on the room's checkout URL, the
/// shop's page, with the shop's cookie.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shopper_who_starts_on_the_waiting_room_lands_on_the_shops_checkout() {
    let sites = Sites::start().await;
    let driver = ChromeDriver::start();
    let dir = tempfile::tempdir().unwrap();
    let browser = sites.browser(&driver, dir.path(), false).await;
    browser
        .goto(&format!("{}/?room=main", sites.queue))
        .await
        .unwrap();
    sites.on_checkout(&browser, "").await;
    assert!(shop_cookie(&browser).await.0.is_some());
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_room_framed_cross_site_with_third_party_cookies_blocked_reaches_checkout() {
    let sites = Sites::start().await;
    let driver = ChromeDriver::start();
    let dir = tempfile::tempdir().unwrap();
    let browser = sites.browser(&driver, dir.path(), true).await;
    sites.pause(true).await;

    browser
        .goto(&format!("{}/frame", sites.shop))
        .await
        .unwrap();
    let frame = browser.find(Locator::Id("queue")).await.unwrap();
    frame.enter_frame().await.unwrap();
    shown_position(&browser).await;
    // The frame cannot keep a cookie of its own (a cross-site frame, third-party cookies
    // blocked): what the old hand-off relied on.
    let kept = browser
        .execute(
            "document.cookie = 'probe=1; Path=/'; return document.cookie;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(kept, "", "the frame kept a cookie");
    let waiting = sites.vestibule.get_json("/api/v1/rooms/main").await.1;
    assert_eq!(waiting["waiting"], 1, "{waiting}");
    let before = sites.seen().len();
    sites.pause(false).await;

    // The frame hands off to the top by itself after the turn's announcement; the shopper
    // here clicks "Continue to checkout" as soon as it shows (a browser may want a click before
    // a cross-site frame navigates the top): one hand-off either way, never two.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut clicked = 0;
    loop {
        let url = browser.current_url().await.unwrap();
        if url.path() == "/checkout" {
            break;
        }
        assert!(Instant::now() < deadline, "still on {url}");
        if clicked == 0 {
            if let Ok(button) = browser.find(Locator::Id("handoff-continue")).await {
                if button.click().await.is_ok() {
                    clicked += 1;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(clicked, 1, "the button was there to click");
    sites.on_checkout(&browser, "size=7").await;
    let (cookie, _) = shop_cookie(&browser).await;
    assert!(cookie.is_some(), "the shop's own, first-party cookie");

    // At most two navigations on the shop (the hand-off and its checkout), and no loop: a
    // few seconds later still there, nothing more asked, nobody queued again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after: Vec<_> = sites.seen()[before..]
        .iter()
        .filter(|(_, url, _)| url != "/favicon.ico")
        .cloned()
        .collect();
    assert!(after.len() <= 2, "{after:?}");
    assert_eq!(browser.current_url().await.unwrap().path(), "/checkout");
    let room = sites.vestibule.get_json("/api/v1/rooms/main").await.1;
    assert_eq!(room["waiting"], 0, "{room}");
    browser.close().await.unwrap();
}

/// Gate mode's waiting room framed by a page on another site, third-party cookies blocked: the
/// frame's own session cookie would be dropped, so the admitted frame hands the token to the
/// gate by a top-level form, and the shopper lands on the gated checkout (the origin's content)
/// with a first-party cookie: one hand-off, no loop, nobody queued again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gates_waiting_room_framed_cross_site_hands_off_to_the_top() {
    // The origin behind the gate: its checkout says who it let in.
    let origin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = format!("http://{}", origin.local_addr().unwrap());
    let shop = Router::new().route(
        "/checkout",
        get(|headers: axum::http::HeaderMap| async move {
            let entry = headers
                .get("x-vestibule-entry")
                .and_then(|value| value.to_str().ok())
                .unwrap_or("none")
                .to_owned();
            Html(format!(
                "<!doctype html><title>Checkout</title>\
                 <h1 id=\"checkout\">The shop's own checkout</h1><p id=\"entry\">{entry}</p>"
            ))
        }),
    );
    tokio::spawn(async move { axum::serve(origin, shop).await.unwrap() });
    // The page on another site that frames the waiting room.
    let landing = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let landing_site = format!(
        "http://landing.test:{}",
        landing.local_addr().unwrap().port()
    );
    let dist = dist_dir().to_string_lossy().to_string();
    let gate = TestApp::spawn_with_url(
        None,
        &[
            "--static-dir",
            &dist,
            "--upstream",
            &upstream,
            "--gate",
            "/checkout=main",
            "--cors-origins",
            &landing_site,
        ],
    )
    .await;
    let queue = format!(
        "http://queue.test:{}",
        gate.base.rsplit(':').next().unwrap()
    );
    let frame = format!(
        "<!doctype html><title>Landing</title><h1>Drop day</h1>\
         <iframe id=\"queue\" title=\"Waiting room\" style=\"width:100%;height:700px;border:0\" \
         src=\"{queue}/_vestibule/?room=main&return=%2Fcheckout%3Fitem%3D7\"></iframe>"
    );
    let landing_app = Router::new().route(
        "/",
        get(move || {
            let frame = frame.clone();
            async move { Html(frame) }
        }),
    );
    tokio::spawn(async move { axum::serve(landing, landing_app).await.unwrap() });

    let driver = ChromeDriver::start();
    let dir = tempfile::tempdir().unwrap();
    let rules = "--host-resolver-rules=MAP landing.test 127.0.0.1, MAP queue.test 127.0.0.1";
    let browser = driver
        .browser_with(
            dir.path(),
            "en-US",
            &[rules, "--test-third-party-cookie-phaseout"],
            json!({ "profile.cookie_controls_mode": 1, "profile.block_third_party_cookies": true }),
        )
        .await;
    let pause = |paused: bool| {
        gate.client
            .patch(gate.url("/_vestibule/api/v1/admin/rooms/main"))
            .bearer_auth(vestibule_tests::ADMIN_TOKEN)
            .json(&json!({ "paused": paused }))
            .send()
    };
    assert!(pause(true).await.unwrap().status().is_success());
    browser.goto(&format!("{landing_site}/")).await.unwrap();
    browser
        .find(Locator::Id("queue"))
        .await
        .unwrap()
        .enter_frame()
        .await
        .unwrap();
    shown_position(&browser).await;
    assert!(pause(false).await.unwrap().status().is_success());

    // The page tries the top-level form by itself after the turn's announcement; Chromium keeps
    // a cross-site frame from navigating the top to the frame's own site without a click, so the
    // shopper clicks "Continue to checkout": one click, one hand-off.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut clicked = 0;
    loop {
        let url = browser.current_url().await.unwrap();
        if url.as_str() == format!("{queue}/checkout?item=7") {
            break;
        }
        assert!(Instant::now() < deadline, "still on {url}");
        if clicked == 0 {
            if let Ok(button) = browser.find(Locator::Id("handoff-continue")).await {
                tokio::time::sleep(Duration::from_secs(3)).await;
                if browser.current_url().await.unwrap().as_str() == format!("{landing_site}/") {
                    button.click().await.unwrap();
                    clicked += 1;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(clicked <= 1);
    let _ = browser.enter_parent_frame().await;
    wait_for(
        &browser,
        "#checkout",
        None,
        Duration::from_secs(5),
        |text| text == "The shop's own checkout",
    )
    .await;
    let entry = wait_for(&browser, "#entry", None, Duration::from_secs(5), |_| true).await;
    assert!(entry.contains("\"room\":\"main\""), "{entry}");
    assert!(browser
        .get_named_cookie("vestibule_entry_main")
        .await
        .is_ok());
    // No loop: still there a moment later, and nobody waits in line again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(browser.current_url().await.unwrap().path(), "/checkout");
    let room = gate.get_json("/_vestibule/api/v1/rooms/main").await.1;
    assert_eq!(room["waiting"], 0, "{room}");
    browser.close().await.unwrap();
}
