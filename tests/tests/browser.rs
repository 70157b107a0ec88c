//! The waiting-room page in Debian's headless Chromium (chromedriver + fantoccini), against the
//! real binary serving the release build in `dist/`.
//!
//! For each transport: the page joins a paused room and shows position and ETA; a reload keeps
//! the ticket and place; the room resumes through the admin API; the page reaches checkout by
//! itself and the order succeeds. The server's per-ticket poll log shows the page polls exactly by
//! `nextPollAfterMs` (within 20 %) and not at all over SSE. Screenshots go to
//! `target/screenshots/`.
//!
//! Under real conditions: behind a [`LinkProxy`] that hangs the link, the page says so, and
//! recovers within 10 s of the link coming back, also when it was admitted meanwhile; an order
//! double-clicked or whose answer is lost is placed once and shows one receipt, also after a
//! reload; axe-core finds no violation in any state (waiting, retrying, offline, checkout,
//! receipt); the first answer moves nothing on screen. Each module of `browser/` is a feature
//! (the hung link and lost orders in `real_conditions.rs`, compressed page files in
//! `page_files.rs`, the console in `console*.rs`, …).

#[path = "browser/bots.rs"]
mod bots;
#[path = "browser/console.rs"]
mod console;
#[path = "browser/console_auto_rate.rs"]
mod console_auto_rate;
#[path = "browser/console_sale.rs"]
mod console_sale;
#[path = "browser/console_summary.rs"]
mod console_summary;
#[path = "browser/message.rs"]
mod message;
#[path = "browser/no_line.rs"]
mod no_line;
#[path = "browser/opening.rs"]
mod opening;
#[path = "browser/page_files.rs"]
mod page_files;
#[path = "browser/presence.rs"]
mod presence;
#[path = "browser/readable.rs"]
mod readable;
#[path = "browser/real_conditions.rs"]
mod real_conditions;
#[path = "browser/refusals.rs"]
mod refusals;
#[path = "browser/sale.rs"]
mod sale;
#[path = "browser/sale_day.rs"]
mod sale_day;

use std::time::{Duration, Instant};

use fantoccini::{Client, Locator};
use serde_json::json;
use vestibule_shared::paths;
use vestibule_tests::chromium::{
    assert_accessible, click, dist_dir, focused_id, save_screenshot, screenshot_dir,
    shown_position, stored_ticket_of, text_of, wait_for, wait_for_path, ChromeDriver,
};
use vestibule_tests::{Backend, LinkProxy, LinkState, TestApp};

async fn stored_ticket(browser: &Client) -> String {
    stored_ticket_of(browser, "main").await
}

/// The SHA-256 tag the server logs for a ticket (first 12 hex digits).
fn log_tag(ticket_id: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(ticket_id.as_bytes())
        .iter()
        .take(6)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// One `vestibule::poll_log` line: (seconds since midnight UTC, message, hint).
fn poll_log(log: &str, tag: &str) -> Vec<(f64, String, Option<u64>)> {
    log.lines()
        .filter(|line| {
            line.contains("poll_log")
                || line.contains("ticket polled")
                || line.contains("ticket stream opened")
        })
        .filter(|line| line.contains(&format!("ticket={tag}")))
        .filter_map(|line| {
            // 2026-11-30T00:14:01.338964Z DEBUG …
            let time = line.split_whitespace().next()?;
            let clock = time.split('T').nth(1)?.trim_end_matches('Z');
            let mut parts = clock.split(':');
            let h: f64 = parts.next()?.parse().ok()?;
            let m: f64 = parts.next()?.parse().ok()?;
            let s: f64 = parts.next()?.parse().ok()?;
            let message = if line.contains("ticket polled") {
                "polled"
            } else {
                "stream"
            };
            let hint = line
                .split("next_poll_after_ms=")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok());
            Some((h * 3600.0 + m * 60.0 + s, message.to_owned(), hint))
        })
        .collect()
}

async fn sale_through_the_page(transport: &str) {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn_logging(
        None,
        &["--static-dir", &dist, "--admission-rate", "50"],
        "info,vestibule::poll_log=debug",
    )
    .await;
    app.patch_room("main", json!({"paused": true})).await;
    // Two shoppers ahead of the browser.
    app.join("main", None).await;
    app.join("main", None).await;

    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "en-US").await;
    browser
        .goto(&app.url(&format!("/?room=main&transport={transport}&lang=en")))
        .await
        .expect("page loads");
    let position = shown_position(&browser).await;
    assert_eq!(position, "3", "the page took the third place");
    let eta = wait_for(&browser, "#eta", None, Duration::from_secs(5), |t| {
        !t.is_empty() && t != "–"
    })
    .await;
    wait_for(
        &browser,
        "#status",
        Some("data-room-state"),
        Duration::from_secs(5),
        |s| s == "PAUSED",
    )
    .await;
    wait_for(
        &browser,
        "#connection",
        Some("data-transport"),
        Duration::from_secs(5),
        |t| t == transport,
    )
    .await;
    println!("{transport}: paused room shows position {position}, ETA {eta:?}");
    let ticket = stored_ticket(&browser).await;

    // A slow open room: a real ETA in words, the place still 3.
    app.patch_room(
        "main",
        json!({"paused": false, "admissionRatePerSec": 0.001}),
    )
    .await;
    let eta = wait_for(
        &browser,
        "#eta",
        Some("data-seconds"),
        Duration::from_secs(15),
        |s| !s.is_empty(),
    )
    .await;
    let eta_words = text_of(&browser, "#eta").await;
    assert_eq!(eta, "3600", "3 ÷ 0.001/s × 1.2 = 3600 s");
    assert!(eta_words.chars().any(|c| c.is_ascii_digit()), "{eta_words}");

    // Reload while waiting: same ticket, same place.
    browser.refresh().await.unwrap();
    let position = shown_position(&browser).await;
    assert_eq!(position, "3");
    assert_eq!(
        stored_ticket(&browser).await,
        ticket,
        "a reload keeps the ticket"
    );
    let reloaded = Instant::now();
    if transport == "poll" {
        std::fs::write(
            screenshot_dir().join("waiting-en.png"),
            browser.screenshot().await.unwrap(),
        )
        .unwrap();
    }
    // Watch the transport for a while: polls land exactly by their hints; SSE makes none.
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(reloaded.elapsed())).await;
    let log = poll_log(&app.log(), &log_tag(&ticket));
    match transport {
        "poll" => {
            let polls: Vec<_> = log.iter().filter(|(_, m, _)| m == "polled").collect();
            let recent: Vec<_> = polls.iter().rev().take(4).rev().collect();
            assert!(
                recent.len() >= 3,
                "only {} polls in 10 s: {log:?}",
                recent.len()
            );
            for pair in recent.windows(2) {
                let (t0, _, hint) = pair[0];
                let (t1, _, _) = pair[1];
                let gap_ms = (t1 - t0) * 1000.0;
                let hint = hint.expect("the poll log gives the hint") as f64;
                println!("poll gap {gap_ms:.0} ms for hint {hint:.0} ms");
                assert!(
                    (gap_ms - hint).abs() <= 0.2 * hint,
                    "gap {gap_ms:.0} ms vs hint {hint} ms"
                );
            }
        }
        _ => {
            let opened = log
                .iter()
                .rposition(|(_, m, _)| m == "stream")
                .expect("the page opened a stream");
            let polls_after = log[opened..]
                .iter()
                .filter(|(_, m, _)| m == "polled")
                .count();
            assert_eq!(polls_after, 0, "SSE mode polled: {log:?}");
            println!(
                "sse: 0 polls while the stream was open ({} poll-log lines for this ticket)",
                log.len()
            );
        }
    }

    // Resume: the page goes to checkout by itself and the order succeeds.
    app.patch_room("main", json!({"admissionRatePerSec": 50}))
        .await;
    let outcome_ready = Instant::now();
    let url = loop {
        let url = browser.current_url().await.unwrap();
        if url.path() == "/checkout" {
            break url;
        }
        assert!(
            outcome_ready.elapsed() < Duration::from_secs(30),
            "still on {url}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!("{transport}: at {url} after {:?}", outcome_ready.elapsed());
    let button = wait_for(
        &browser,
        "#place-order",
        None,
        Duration::from_secs(10),
        |t| !t.is_empty(),
    )
    .await;
    assert!(!button.is_empty());
    browser
        .find(Locator::Css("#place-order"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let outcome = wait_for(
        &browser,
        "#checkout-result",
        Some("data-outcome"),
        Duration::from_secs(10),
        |o| !o.is_empty() && o != "pending",
    )
    .await;
    assert_eq!(outcome, "ordered");
    if transport == "poll" {
        std::fs::write(
            screenshot_dir().join("checkout-en.png"),
            browser.screenshot().await.unwrap(),
        )
        .unwrap();
    }
    assert_eq!(
        app.poll("main", &ticket).await.status,
        vestibule_shared::TicketState::Completed
    );
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shopper_waits_and_checks_out_with_polling() {
    sale_through_the_page("poll").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shopper_waits_and_checks_out_with_server_sent_events() {
    sale_through_the_page("sse").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_view_speaks_korean_and_a_shopper_can_leave() {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn(
        Backend::Memory,
        &["--static-dir", &dist, "--admission-rate", "0.01"],
    )
    .await;
    for _ in 0..41 {
        app.join("main", None).await;
    }
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "ko-KR").await;
    // No ?lang: the browser's language decides.
    browser.goto(&app.url("/?room=main")).await.unwrap();
    let position = shown_position(&browser).await;
    assert_eq!(position, "42");
    let lang = browser
        .execute("return document.documentElement.lang;", vec![])
        .await
        .unwrap();
    assert_eq!(lang, "ko");
    let text = text_of(&browser, "main").await;
    assert!(
        text.chars().any(|c| ('\u{AC00}'..='\u{D7A3}').contains(&c)),
        "no Hangul on the page: {text}"
    );
    std::fs::write(
        screenshot_dir().join("waiting-ko.png"),
        browser.screenshot().await.unwrap(),
    )
    .unwrap();
    assert_no_layout_shift(&browser).await;
    assert_accessible(&browser, "waiting (ko)").await;

    // The browser's `offline` event is acted on at once, and `online` brings updates back.
    browser
        .execute("window.dispatchEvent(new Event('offline'));", vec![])
        .await
        .unwrap();
    wait_for_link(&browser, Duration::from_secs(1), |s| s == "offline").await;
    assert_accessible(&browser, "offline (ko)").await;
    save_screenshot(&browser, "offline-ko.png").await;
    browser
        .execute("window.dispatchEvent(new Event('online'));", vec![])
        .await
        .unwrap();
    wait_for_link(&browser, Duration::from_secs(10), |s| s == "live").await;

    // Leaving asks first; "Stay in line" keeps the place.
    click(&browser, "#leave-line").await;
    assert_eq!(focused_id(&browser).await, "leave-question");
    save_screenshot(&browser, "leave-confirm-ko.png").await;
    click(&browser, "#leave-cancel").await;
    wait_for(&browser, "#leave-line", None, Duration::from_secs(5), |t| {
        !t.is_empty()
    })
    .await;
    assert_eq!(app.get_json(&paths::room("main")).await.1["waiting"], 42);
    // Leaving gives the place up on the server and offers to join again.
    click(&browser, "#leave-line").await;
    click(&browser, "#leave-confirm").await;
    wait_for_ticket_state(&browser, "LEFT", Duration::from_secs(10)).await;
    assert_eq!(app.get_json(&paths::room("main")).await.1["waiting"], 41);
    // Joining again takes the last place; focus goes to the status it changes.
    click(&browser, "#join-again").await;
    assert_eq!(focused_id(&browser).await, "status");
    wait_for_ticket_state(&browser, "WAITING", Duration::from_secs(10)).await;
    assert_eq!(shown_position(&browser).await, "42");
    // Checkout without a token says so and offers no order button, only the way back.
    browser
        .goto(&app.url("/checkout?room=main&lang=en"))
        .await
        .unwrap();
    wait_for(&browser, "#no-token", None, Duration::from_secs(10), |t| {
        !t.is_empty()
    })
    .await;
    let title = text_of(&browser, "#checkout-title").await;
    assert!(!title.contains("You're in"), "{title}");
    let button = browser.find(Locator::Css("#place-order")).await.unwrap();
    assert!(
        !button.is_displayed().await.unwrap(),
        "an order button without a token"
    );
    browser.close().await.unwrap();
}

/// Fails when the page's layout shifted (cumulative layout shift over 0.01) so far.
async fn assert_no_layout_shift(browser: &Client) {
    let shifts = browser
        .execute_async(
            "const done = arguments[arguments.length - 1];
             const shifts = { total: 0, moved: [] };
             new PerformanceObserver(list => {
               for (const e of list.getEntries()) {
                 if (e.hadRecentInput) continue;
                 shifts.total += e.value;
                 for (const s of e.sources || []) {
                   const n = s.node;
                   shifts.moved.push(n ? (n.id || n.className || n.nodeName) : '?');
                 }
               }
             }).observe({ type: 'layout-shift', buffered: true });
             setTimeout(() => done(shifts), 200);",
            vec![],
        )
        .await
        .expect("layout shifts");
    let total = shifts["total"].as_f64().expect("a number");
    println!("cumulative layout shift {total:.4} ({})", shifts["moved"]);
    assert!(total <= 0.01, "the layout shifted: {shifts}");
}

/// Opens `url` (a room with a free place) and waits until the page has moved to checkout by
/// itself and offers the order.
async fn reach_checkout(browser: &Client, url: &str) {
    browser.goto(url).await.unwrap();
    arrive_at_checkout(browser, Duration::from_secs(20)).await;
}

/// Waits until the page moved to checkout (within `timeout`) and offers the order.
async fn arrive_at_checkout(browser: &Client, timeout: Duration) {
    wait_for_path(browser, "/checkout", timeout).await;
    wait_for(
        browser,
        "#place-order",
        None,
        Duration::from_secs(10),
        |t| !t.is_empty(),
    )
    .await;
}

/// Waits for the order's final outcome (`ordered`, `used` or `error`).
async fn final_outcome(browser: &Client, timeout: Duration) -> String {
    wait_for(
        browser,
        "#checkout-result",
        Some("data-outcome"),
        timeout,
        |o| o == "ordered" || o == "used" || o == "error",
    )
    .await
}

/// Waits until the view shows the ticket in `state` (`#status[data-status]`), e.g. `"LEFT"`.
async fn wait_for_ticket_state(browser: &Client, state: &str, timeout: Duration) {
    wait_for(browser, "#status", Some("data-status"), timeout, |s| {
        s == state
    })
    .await;
}

/// Waits until `#connection[data-state]` satisfies `done`.
async fn wait_for_link(browser: &Client, timeout: Duration, done: impl Fn(&str) -> bool) {
    wait_for(browser, "#connection", Some("data-state"), timeout, done).await;
}
