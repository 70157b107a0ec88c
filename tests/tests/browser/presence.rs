//! Presence in the browser (docs/DESIGN.md "Presence"): a hidden tab does not poll but sends
//! heartbeats, so it keeps its place; a tab whose heartbeats stop (frozen, asleep) is skipped and,
//! shown again, is told "your place was kept"; a closed tab's ticket takes no admission slot, so
//! the shopper behind it is admitted at once.
//!
//! Hidden is `document.hidden` / `visibilityState` overridden on the page plus a
//! `visibilitychange` event (what the page listens to); frozen is the page's `fetch` refusing
//! its heartbeats.

use std::time::Duration;

use fantoccini::Client;
use serde_json::json;
use vestibule_tests::chromium::{dist_dir, shown_position, wait_for, ChromeDriver};
use vestibule_tests::{Backend, TestApp};

const HIDE: &str = r#"
    for (const [name, value] of [['hidden', () => window.__hidden === true],
        ['visibilityState', () => (window.__hidden ? 'hidden' : 'visible')]]) {
      Object.defineProperty(document, name, { configurable: true, get: value });
    }
    if (!window.__fetch) {
      window.__fetch = window.fetch;
      window.fetch = function (input, init) {
        const url = typeof input === 'string' ? input : input.url;
        if (window.__frozen && url.includes('/heartbeat')) {
          return Promise.reject(new TypeError('frozen'));
        }
        return window.__fetch.call(window, input, init);
      };
    }
    window.__hidden = arguments[0];
    window.__frozen = arguments[1];
    document.dispatchEvent(new Event('visibilitychange'));
"#;

async fn set_hidden(browser: &Client, hidden: bool, frozen: bool) {
    browser
        .execute(HIDE, vec![json!(hidden), json!(frozen)])
        .await
        .expect("visibility script runs");
}

async fn waiting(app: &TestApp) -> u64 {
    let (_, room) = app.get_json(&vestibule_shared::paths::room("main")).await;
    room["waiting"].as_u64().expect("waiting count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hidden_tab_keeps_its_place_and_a_closed_one_takes_no_slot() {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn(
        Backend::Memory,
        &["--static-dir", &dist, "--poll-tiers", "*:1000"],
    )
    .await;
    app.patch_room(
        "main",
        json!({"paused": true, "abandonAfterSecs": 3, "holdPlaceSecs": 600}),
    )
    .await;
    let driver = ChromeDriver::start();
    let (first_profile, second_profile) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let closing = driver.browser(first_profile.path(), "en-US").await;
    closing
        .goto(&app.url("/?room=main&transport=poll"))
        .await
        .unwrap();
    assert_eq!(shown_position(&closing).await, "1");
    let browser = driver.browser(second_profile.path(), "en-US").await;
    browser
        .goto(&app.url("/?room=main&transport=poll"))
        .await
        .unwrap();
    assert_eq!(shown_position(&browser).await, "2");
    closing.close().await.unwrap();

    // Hidden for longer than the abandon time: no polls, heartbeats, the place kept.
    let polls = "vestibule_polls_total{room=\"main\"}";
    let beats = "vestibule_heartbeats_total{room=\"main\"}";
    set_hidden(&browser, true, false).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (polls_before, beats_before) = (app.metric(polls).await, app.metric(beats).await);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        app.metric(polls).await,
        polls_before,
        "a hidden tab does not poll"
    );
    assert!(
        app.metric(beats).await >= beats_before + 3.0,
        "it sends heartbeats"
    );
    assert_eq!(
        waiting(&app).await,
        1,
        "the closed tab was skipped, the hidden one kept"
    );

    // Frozen (no heartbeat arrives) past the abandon time: skipped; shown again: place kept.
    set_hidden(&browser, true, true).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(waiting(&app).await, 0, "the frozen tab was skipped");
    set_hidden(&browser, false, false).await;
    let text = wait_for(&browser, "#place-kept", None, Duration::from_secs(5), |t| {
        !t.is_empty()
    })
    .await;
    assert_eq!(text, "Your place was kept while you were away.");
    assert_eq!(
        shown_position(&browser).await,
        "1",
        "the closed tab is no longer ahead"
    );

    // Admission resumes: the shopper is admitted at once, and the closed tab never is.
    app.patch_room("main", json!({"paused": false, "admissionRatePerSec": 5}))
        .await;
    wait_for(
        &browser,
        "#status",
        Some("data-status"),
        Duration::from_secs(3),
        |s| s == "TOKEN_ISSUED",
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let admitted = app
        .metric("vestibule_admissions_total{room=\"main\"}")
        .await;
    assert_eq!(admitted, 1.0, "no admission slot went to the closed tab");
    browser.close().await.unwrap();
}
