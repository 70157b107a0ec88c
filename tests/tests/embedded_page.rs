//! The waiting room inside a storefront's own page, in headless Chromium.
//!
//! The test serves a storefront from another origin (another port on 127.0.0.1) that
//! - frames the page (`/framed`: an `<iframe>` with `embed=1`, resized by `vestibule:resize`,
//!   the snippet in docs/embedding.md), and
//! - mounts the widget (`/widget`: `<div data-vestibule-room>` + `widget.js`, listening to the
//!   element's `CustomEvent`s and keeping navigation to itself with `preventDefault()`).
//!
//! Without `embed=1` the framed page goes to checkout itself, unless the parent posts
//! `vestibule:navigate-self: false`.
//! Both hear `vestibule:status` and `vestibule:admitted` with the room's `checkoutUrl` (the
//! widget's with the token, its room sharing it), keep their place across a reload of the
//! storefront page, and stay where they are once admitted. A second storefront whose origin is
//! not in `--cors-origins` gets no message, no event, no widget and no API answer.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::response::Html;
use axum::Router;
use fantoccini::{Client, Locator};
use serde_json::{json, Value};
use vestibule_tests::chromium::{assert_accessible, dist_dir, save_screenshot, ChromeDriver};
use vestibule_tests::{Backend, TestApp};

/// A storefront on its own origin: serves `/framed` and `/widget` for the app at `app`, and
/// records every path asked for.
struct Storefront {
    origin: String,
    requests: Arc<Mutex<Vec<String>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Storefront {
    /// Binds first (the app must be started with this origin), serves once `app` is known.
    async fn bind() -> (tokio::net::TcpListener, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        (listener, origin)
    }

    fn serve(listener: tokio::net::TcpListener, origin: String, app: &str) -> Self {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let state = (app.to_owned(), Arc::clone(&requests));
        let router = Router::new().fallback(page).with_state(state);
        let server = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Self {
            origin,
            requests,
            server,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin)
    }

    fn forget_requests(&self) {
        self.requests.lock().unwrap().clear();
    }

    fn asked_for(&self, path: &str) -> bool {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .any(|p| p.starts_with(path))
    }
}

impl Drop for Storefront {
    fn drop(&mut self) {
        self.server.abort();
    }
}

type Shop = (String, Arc<Mutex<Vec<String>>>);

/// The storefront's pages; `?lang=` goes to the framed page.
async fn page(State((app, requests)): State<Shop>, request: Request) -> Html<String> {
    let path = request.uri().path().to_owned();
    requests.lock().unwrap().push(path.clone());
    let lang = request
        .uri()
        .query()
        .and_then(|q| q.strip_prefix("lang="))
        .unwrap_or("en")
        .to_owned();
    let body = match path.as_str() {
        // The auto-resizing snippet of docs/embedding.md (`/framed`); `/framed-plain` leaves
        // navigation to the page; `/framed-ask` asks for it with `vestibule:navigate-self` instead
        // of `embed=1`; `/framed-meddled` too, while a sibling frame (an ad, say) keeps telling the
        // page `true`: only the parent's word counts.
        "/framed" | "/framed-plain" | "/framed-ask" | "/framed-meddled" => {
            let embed = if path == "/framed" { "&embed=1" } else { "" };
            let sibling = if path == "/framed-meddled" {
                r#"<iframe title="ad" style="width:10px;height:10px;border:0" srcdoc="<script>setInterval(function () { parent.frames[0].postMessage({type: 'vestibule:navigate-self', value: true}, '*'); }, 20);</script>"></iframe>"#
            } else {
                ""
            };
            let ask = if path == "/framed-ask" || path == "/framed-meddled" {
                "event.source.postMessage({type: \"vestibule:navigate-self\", value: false}, event.origin);"
            } else {
                ""
            };
            format!(
                r#"<iframe id="queue" src="{app}/?room=main&lang={lang}{embed}" title="Waiting room"
        style="width:100%;height:120px;border:0;display:block"></iframe>{sibling}
<script>
  window.received = [];
  addEventListener("message", function (event) {{
    if (event.origin !== "{app}" || !event.data || typeof event.data.type !== "string") return;
    window.received.push(event.data);
    {ask}
    if (event.data.type === "vestibule:resize") {{
      document.getElementById("queue").style.height = event.data.height + "px";
    }}
  }});
</script>"#
            )
        }
        "/widget" => format!(
            r#"<div id="queue" data-vestibule-room="main" data-vestibule-lang="en"
     style="--accent:#0a7d5a;--card:#fbfffd;--accent-soft:#ecf7f2"></div>
<script>
  window.received = [];
  var queue = document.getElementById("queue");
  ["vestibule:status", "vestibule:admitted", "vestibule:resize"].forEach(function (type) {{
    queue.addEventListener(type, function (event) {{
      window.received.push(event.detail);
      if (type === "vestibule:admitted") event.preventDefault();
    }});
  }});
</script>
<script type="module" src="{app}/widget.js"></script>"#
        ),
        _ => "<p id=\"store-page\">a store page</p>".to_owned(),
    };
    Html(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Shop</title>\
         </head><body style=\"margin:0;font-family:sans-serif;background:#f6f1e7\">\
         <header style=\"padding:8px 16px;background:#2d2a26;color:#fff\">Shop · 상점</header>\
         {body}</body></html>"
    ))
}

/// The messages the storefront page received so far of `kind` (`vestibule:status`, …).
async fn received(browser: &Client, kind: &str) -> Vec<Value> {
    let value = browser
        .execute(
            "var kind = arguments[0]; \
             return (window.received || []).filter(function (m) { return m.type === kind; });",
            vec![json!(kind)],
        )
        .await
        .unwrap();
    value.as_array().cloned().unwrap_or_default()
}

/// Waits (up to 20 s) for a message of `kind` that satisfies `done`.
async fn wait_message(browser: &Client, kind: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let all = received(browser, kind).await;
        if let Some(found) = all.iter().rev().find(|m| done(m)) {
            return found.clone();
        }
        assert!(Instant::now() < deadline, "no matching {kind}; got {all:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A storefront on its own origin and a Vestibule serving the built page with that origin in
/// `--cors-origins`; `main` admits nobody yet (rate 0), its checkout is the storefront's
/// `checkout_path` (returned as a URL) and it shares the token with the embedder or not.
async fn sale(checkout_path: &str, share: bool) -> (TestApp, Storefront, String) {
    let (listener, origin) = Storefront::bind().await;
    let checkout = format!("{origin}{checkout_path}");
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn(
        Backend::Memory,
        &[
            "--static-dir",
            &dist,
            "--cors-origins",
            &origin,
            "--admission-rate",
            "50",
        ],
    )
    .await;
    app.patch_room(
        "main",
        json!({"admissionRatePerSec": 0, "checkoutUrl": checkout, "shareTokenWithEmbedder": share}),
    )
    .await;
    let shop = Storefront::serve(listener, origin, &app.base);
    (app, shop, checkout)
}

async fn waiting(app: &TestApp) -> u64 {
    app.get_json("/api/v1/rooms/main").await.1["waiting"]
        .as_u64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_framed_page_tells_its_storefront_resizes_and_keeps_its_place() {
    let (app, shop, checkout) = sale("/checkout?from=queue", false).await;
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "ko-KR").await;

    browser.goto(&shop.url("/framed?lang=ko")).await.unwrap();
    let status = wait_message(&browser, "vestibule:status", |m| m["position"] == 1).await;
    assert_eq!(status["room"], "main");
    assert_eq!(status["status"], "WAITING");
    // The frame takes the page's height: no inner scrolling.
    wait_message(&browser, "vestibule:resize", |m| {
        m["height"].as_f64() > Some(300.0)
    })
    .await;
    // Let the last change settle, then the frame is as tall as the last height reported.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let last = received(&browser, "vestibule:resize").await;
    let height = last.last().unwrap()["height"].as_f64().unwrap();
    let frame = browser
        .execute(
            "var f = document.getElementById('queue'); \
             return [f.getBoundingClientRect().height, f.contentWindow ? 1 : 0];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(frame[0].as_f64(), Some(height), "{frame}");
    browser.enter_frame(0).await.unwrap();
    let inner = browser
        .execute(
            "return [document.documentElement.lang, document.querySelector('.headline').textContent, \
             document.documentElement.scrollHeight, innerHeight];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(inner[0], "ko", "{inner}");
    assert_eq!(inner[1], "대기 중입니다", "{inner}");
    assert!(
        inner[2].as_f64() <= inner[3].as_f64(),
        "the frame scrolls: {inner}"
    );
    browser.enter_parent_frame().await.unwrap();
    save_screenshot(&browser, "embedded-frame-ko.png").await;

    // A reload of the storefront keeps the place (the frame's storage keeps the ticket).
    browser.refresh().await.unwrap();
    wait_message(&browser, "vestibule:status", |m| m["position"] == 1).await;
    assert_eq!(waiting(&app).await, 1, "a reload joined again");

    app.patch_room("main", json!({"admissionRatePerSec": 50}))
        .await;
    let admitted = wait_message(&browser, "vestibule:admitted", |_| true).await;
    assert_eq!(admitted["checkoutUrl"], checkout.as_str(), "{admitted}");
    assert_eq!(admitted["room"], "main");
    assert!(
        admitted.get("entryToken").is_none(),
        "the room does not share the token: {admitted}"
    );
    // embed=1: the storefront navigates; the frame stays past the turn's announcement.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!shop.asked_for("/checkout"), "the frame went to checkout");
    assert_eq!(browser.current_url().await.unwrap().path(), "/framed");
    browser.close().await.unwrap();
}

/// Without `embed=1` the framed page goes on by itself (a top-level hand-off to the
/// storefront's origin); a parent that posts `vestibule:navigate-self: false` keeps it where it
/// is, whatever another frame says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parent_decides_whether_the_framed_page_navigates() {
    let (app, shop, checkout) = sale("/checkout", false).await;
    let driver = ChromeDriver::start();
    for (path, navigates) in [
        ("/framed-plain", true),
        ("/framed-ask", false),
        ("/framed-meddled", false),
    ] {
        app.patch_room("main", json!({"admissionRatePerSec": 0}))
            .await;
        shop.forget_requests();
        let profile = tempfile::tempdir().unwrap();
        let browser = driver.browser(profile.path(), "en-US").await;
        browser.goto(&shop.url(path)).await.unwrap();
        wait_message(&browser, "vestibule:status", |m| m["status"] == "WAITING").await;
        app.patch_room("main", json!({"admissionRatePerSec": 50}))
            .await;
        let admitted = wait_message(&browser, "vestibule:admitted", |_| true).await;
        assert_eq!(admitted["checkoutUrl"], checkout.as_str(), "{path}");
        // A page that goes on hands the token to the storefront's origin by a top-level form
        // (never the bare checkout URL, which would leave the shop without the token); the
        // others stay and show no form.
        let frame = browser.find(Locator::Id("queue")).await.unwrap();
        frame.enter_frame().await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut button = false;
        while Instant::now() < deadline && !button {
            button = browser.find(Locator::Id("handoff-continue")).await.is_ok();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = browser.enter_parent_frame().await;
        assert_eq!(button, navigates, "{path}: the hand-off's button");
        if navigates {
            // The form goes to the top: the storefront's hand-off route is asked.
            let deadline = Instant::now() + Duration::from_secs(6);
            while !shop.asked_for("/_vestibule/api/v1/rooms/main/handoff") {
                assert!(Instant::now() < deadline, "{path}: no hand-off");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        } else {
            tokio::time::sleep(Duration::from_secs(3)).await;
            assert!(!shop.asked_for("/_vestibule/"), "{path}");
            assert_eq!(browser.current_url().await.unwrap().path(), path);
        }
        assert!(!shop.asked_for("/checkout"), "{path}");
        browser.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_widget_mounts_in_the_storefront_page_and_hands_over_the_token() {
    let (app, shop, checkout) = sale("/checkout", true).await;
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "ko-KR").await;

    browser.goto(&shop.url("/widget")).await.unwrap();
    let status = wait_message(&browser, "vestibule:status", |m| m["position"] == 1).await;
    assert_eq!(status["status"], "WAITING");
    let shown = browser
        .execute(
            "var root = document.getElementById('queue').shadowRoot; \
             return [root.querySelector('#position').textContent, \
                     root.querySelector('.headline').textContent, \
                     getComputedStyle(root.querySelector('.card')).backgroundColor];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(shown[0], "1", "{shown}");
    assert_eq!(
        shown[1], "You're in line",
        "data-vestibule-lang=en: {shown}"
    );
    assert_eq!(
        shown[2], "rgb(251, 255, 253)",
        "--card from the storefront: {shown}"
    );
    let resize = wait_message(&browser, "vestibule:resize", |m| {
        m["height"].as_f64() > Some(200.0)
    })
    .await;
    assert_eq!(resize["room"], "main");
    save_screenshot(&browser, "embedded-widget-en.png").await;

    // The ticket is in the storefront origin's storage: a reload finds it.
    browser.refresh().await.unwrap();
    wait_message(&browser, "vestibule:status", |m| m["position"] == 1).await;
    assert_eq!(waiting(&app).await, 1, "a reload joined again");
    let stored = browser
        .execute(
            "return localStorage.getItem('vestibule:main:ticket');",
            vec![],
        )
        .await
        .unwrap();
    assert!(stored.as_str().is_some_and(|id| !id.is_empty()), "{stored}");

    app.patch_room("main", json!({"admissionRatePerSec": 50}))
        .await;
    let admitted = wait_message(&browser, "vestibule:admitted", |_| true).await;
    assert_eq!(admitted["checkoutUrl"], checkout.as_str(), "{admitted}");
    let token = admitted["entryToken"].as_str().unwrap_or_default();
    assert_eq!(token.split('.').count(), 3, "a JWT: {admitted}");
    // The storefront called preventDefault(): it navigates, the widget stays.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!shop.asked_for("/checkout"));
    assert_eq!(browser.current_url().await.unwrap().path(), "/widget");
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storefront_that_is_not_configured_gets_nothing() {
    let (app, shop, _) = sale("/checkout", true).await;
    let (foreign_listener, foreign_origin) = Storefront::bind().await;
    let foreign = Storefront::serve(foreign_listener, foreign_origin, &app.base);
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "en-US").await;

    let api = app.url("/api/v1/rooms/main/embedding");
    let ask = "var done = arguments[arguments.length - 1]; \
               fetch(arguments[0]).then(function (r) { return r.json(); }) \
                 .then(function (b) { done('answered ' + b.room); }, function () { done('refused'); });";
    browser.goto(&shop.url("/")).await.unwrap();
    let allowed = browser.execute_async(ask, vec![json!(api)]).await.unwrap();
    assert_eq!(allowed, "answered main");

    browser.goto(&foreign.url("/")).await.unwrap();
    let refused = browser.execute_async(ask, vec![json!(api)]).await.unwrap();
    assert_eq!(
        refused, "refused",
        "CORS must refuse an unconfigured origin"
    );

    for path in ["/framed", "/widget"] {
        browser.goto(&foreign.url(path)).await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
        let all = browser
            .execute(
                "var q = document.getElementById('queue'); \
                 return [window.received.length, !!window.vestibuleWidget, !!(q && q.shadowRoot)];",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(all, json!([0, false, false]), "{path}");
    }
    assert_eq!(
        waiting(&app).await,
        0,
        "no ticket for an unconfigured storefront"
    );
    browser.close().await.unwrap();
}

/// Clicks the element `css` names inside the widget's shadow root.
async fn click_in_widget(browser: &Client, css: &str) {
    let clicked = browser
        .execute(
            "var el = document.getElementById('queue').shadowRoot.querySelector(arguments[0]); \
             if (!el) return false; el.click(); return true;",
            vec![json!(css)],
        )
        .await
        .unwrap();
    assert_eq!(clicked, true, "no {css} in the widget");
}

/// The id of the element focused inside the widget's shadow root ("" for none), once the
/// document's focus is on the widget.
async fn focused_in_widget(browser: &Client) -> String {
    // One frame for the page's own focus move.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let focus = browser
        .execute(
            "var host = document.getElementById('queue'); \
             var inside = host.shadowRoot.activeElement; \
             return [document.activeElement === host, inside ? inside.id : ''];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(focus[0], true, "focus left the widget: {focus}");
    focus[1].as_str().unwrap_or_default().to_owned()
}

/// Waits (up to 20 s) until `attribute` of `css` inside the widget is `value`.
async fn wait_in_widget(browser: &Client, css: &str, attribute: &str, value: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen = browser
            .execute(
                "var el = document.getElementById('queue').shadowRoot.querySelector(arguments[0]); \
                 return el ? el.getAttribute(arguments[1]) : null;",
                vec![json!(css), json!(attribute)],
            )
            .await
            .unwrap();
        if seen == value {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{css}[{attribute}] is {seen}, not {value}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_widget_is_accessible_and_moves_focus_to_each_result_inside_its_shadow_root() {
    let (app, shop, _) = sale("/checkout", false).await;
    // Two ahead, so "Join the line again" takes a place behind them.
    app.join("main", None).await;
    app.join("main", None).await;
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "en-US").await;
    browser.goto(&shop.url("/widget")).await.unwrap();
    wait_message(&browser, "vestibule:status", |m| m["position"] == 3).await;
    wait_in_widget(&browser, "#connection", "data-state", "live").await;
    assert_accessible(&browser, "widget: waiting").await;

    // "Leave the line" asks first; focus goes to the question, "Stay in line" brings it back.
    click_in_widget(&browser, "#leave-line").await;
    assert_eq!(focused_in_widget(&browser).await, "leave-question");
    assert_accessible(&browser, "widget: leave the line?").await;
    save_screenshot(&browser, "widget-leave-confirm-en.png").await;
    click_in_widget(&browser, "#leave-cancel").await;
    assert_eq!(focused_in_widget(&browser).await, "leave-line");

    // Leaving: focus on the status that says so; joining again: the same.
    click_in_widget(&browser, "#leave-line").await;
    click_in_widget(&browser, "#leave-confirm").await;
    assert_eq!(focused_in_widget(&browser).await, "status");
    wait_in_widget(&browser, "#status", "data-status", "LEFT").await;
    assert_accessible(&browser, "widget: left").await;
    click_in_widget(&browser, "#join-again").await;
    assert_eq!(focused_in_widget(&browser).await, "status");
    wait_in_widget(&browser, "#status", "data-status", "WAITING").await;

    // Offline: "Retry now" moves focus to the connection line.
    browser
        .execute("window.dispatchEvent(new Event('offline'));", vec![])
        .await
        .unwrap();
    wait_in_widget(&browser, "#connection", "data-state", "offline").await;
    assert_accessible(&browser, "widget: offline").await;
    click_in_widget(&browser, "#retry-now").await;
    assert_eq!(focused_in_widget(&browser).await, "connection");
    wait_in_widget(&browser, "#connection", "data-state", "live").await;
    assert_eq!(waiting(&app).await, 3, "one place for the widget");
    browser.close().await.unwrap();
}

/// A storefront's own fetch-based event-stream client resumes a stream with `Last-Event-ID`
/// (and `Cache-Control`): headers a browser only sends cross-origin after a preflight, which
/// CORS must pass for a configured storefront.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storefronts_fetch_stream_reconnects_with_last_event_id_through_a_preflight() {
    let (app, shop, _) = sale("/checkout", true).await;
    let (_, ticket) = app.join("main", None).await;
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "en-US").await;
    browser.goto(&shop.url("/")).await.unwrap();
    let resume = "var done = arguments[arguments.length - 1]; \
        fetch(arguments[0], {headers: {'Last-Event-ID': '0', 'Cache-Control': 'no-cache'}}) \
          .then(function (r) { \
            var reader = r.body.getReader(); \
            return reader.read().then(function (chunk) { \
              reader.cancel(); \
              done(r.status + ' ' + new TextDecoder().decode(chunk.value)); \
            }); \
          }, function (e) { done('refused: ' + e); });";
    let url = app.url(&format!(
        "/api/v1/rooms/main/tickets/{}/events",
        ticket.ticket_id
    ));
    let answer = browser
        .execute_async(resume, vec![json!(url)])
        .await
        .unwrap();
    let answer = answer.as_str().unwrap_or_default().to_owned();
    assert!(answer.starts_with("200 "), "{answer}");
    assert!(answer.contains("event: status"), "{answer}");
    assert!(answer.contains("\"status\":\"WAITING\""), "{answer}");
    browser.close().await.unwrap();
}
