//! A drop run from the console, start to end, in headless Chromium against the real binary: the
//! operator creates a room with display names, a pre-queue and an opening ahead and a stock of
//! 5; the console shows both times with a countdown and a true state ("Not open yet", not
//! "Pre-queue", while joins are refused) and why nobody is admitted; a rate change confirms
//! with its values before → after ("175/s → 35/s", and the 2× note); the operator ends the sale
//! and closes the room, each confirmed with its values. The admin API shows every setting stored.
//! Screenshots: `console-create.png`, `console-schedule.png`, `console-change.png`,
//! `console-sold-out.png`.

use std::time::Duration;

use fantoccini::Client;
use serde_json::{json, Value};
use vestibule_tests::chromium::{
    click, dist_dir, save_screenshot, text_of, wait_for, ChromeDriver,
};
use vestibule_tests::{Backend, TestApp, ADMIN_TOKEN};

use crate::console::{fill, signed_in_console};

/// An 11-character slug: the rooms table must still fit at 1280 px.
const ROOM: &str = "drop-sale-9";

/// Waits for the confirmation the last click opened, accepts it and gives its text.
pub(crate) async fn confirmed(browser: &Client, what: &str) -> String {
    for _ in 0..50 {
        if let Ok(text) = browser.get_alert_text().await {
            browser.accept_alert().await.expect("accept");
            println!("{what} asked: {text:?}");
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} asked for no confirmation");
}

/// The browser's local `datetime-local` value `minutes` from now (whole minutes, so the time
/// shown is the one typed).
async fn local_in(browser: &Client, minutes: i64) -> String {
    let script = "const d = new Date(Date.now() + arguments[0] * 60000); \
                  return new Date(d - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);";
    browser
        .execute(script, vec![json!(minutes)])
        .await
        .expect("local time")
        .as_str()
        .expect("a string")
        .to_owned()
}

async fn settings(app: &TestApp) -> Value {
    app.client
        .get(app.url(&vestibule_shared::paths::admin_room(ROOM)))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("GET the room")
        .json()
        .await
        .expect("settings JSON")
}

fn ms(rfc3339: &Value) -> i128 {
    let text = rfc3339
        .as_str()
        .unwrap_or_else(|| panic!("not a time: {rfc3339}"));
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .expect("RFC 3339")
        .unix_timestamp_nanos()
        / 1_000_000
}

async fn table_overflow(browser: &Client) -> i64 {
    let script = "const w = document.querySelector('.rooms .table-wrap'); \
                  return w.scrollWidth - w.clientWidth;";
    let overflow = browser.execute(script, vec![]).await.unwrap();
    overflow.as_i64().unwrap_or(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_runs_a_drop_from_its_schedule_to_sold_out_and_closed() {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn(Backend::Memory, &["--static-dir", &dist, "--rooms", "main"]).await;
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = signed_in_console(&app, &driver, profile.path(), 1600).await;

    // Create: names, a pre-queue in about 3 min and the sale in about 8, stock 5, 175/s.
    let started_ms = time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
    let (prequeue, opens) = (local_in(&browser, 3).await, local_in(&browser, 8).await);
    fill(&browser, "#new-room", ROOM).await;
    click(&browser, ".create-settings summary").await;
    for (css, value) in [
        ("#new-display-name-en", "Drop 9"),
        ("#new-display-name-ko", "드롭 9"),
        ("#new-prequeue-opens-at", prequeue.as_str()),
        ("#new-opens-at", opens.as_str()),
        ("#new-stock", "5"),
        ("#new-rate", "175"),
        ("#new-sold-out-message-en", "All 5 pairs are gone."),
    ] {
        fill(&browser, css, value).await;
    }
    save_screenshot(&browser, "console-create.png").await;
    click(&browser, ".create button[type=submit]").await;
    let asked = confirmed(&browser, "create").await;
    for line in [
        "drop-sale-9: Create this room?",
        "Stock (units left): 5",
        "Display name (English): \u{201c}Drop 9\u{201d}",
        "Admission rate (people/s): 175/s",
        &format!("Sale opens at: {}", &opens[11..]),
        &format!("Pre-queue opens at: {}", &prequeue[11..]),
        "Shoppers can join from the times set.",
    ] {
        assert!(asked.contains(line), "{line:?} not in {asked:?}");
    }
    wait_for(
        &browser,
        ".rooms [role=status] .outcome",
        None,
        Duration::from_secs(10),
        |t| t == "Room created.",
    )
    .await;

    // The room view: its name, both times with a countdown, a true state and why nobody is
    // admitted; the table shows the name with the slug, and fits.
    wait_for(
        &browser,
        "#room-title",
        None,
        Duration::from_secs(10),
        |t| t.contains("Drop 9") && t.contains(ROOM),
    )
    .await;
    let schedule = wait_for(&browser, "#schedule", None, Duration::from_secs(10), |t| {
        t.starts_with("Pre-queue opens") && t.contains(" min)") && t.contains("· Sale opens")
    })
    .await;
    assert!(
        schedule.contains(&prequeue[11..]) && schedule.contains(&opens[11..]),
        "{schedule}"
    );
    wait_for(&browser, "#fig-state", None, Duration::from_secs(10), |t| {
        t == "Not open yet"
    })
    .await;
    assert_eq!(text_of(&browser, "#fig-stock").await, "5");
    assert_eq!(text_of(&browser, "#fig-sold").await, "0");
    assert_eq!(text_of(&browser, "#fig-outstanding").await, "0");
    assert!(text_of(&browser, "#fig-reason")
        .await
        .contains("not open yet"));
    let row = wait_for(
        &browser,
        &format!("tr[data-room={ROOM}]"),
        None,
        Duration::from_secs(10),
        |t| t.contains("Drop 9") && t.contains("Not open yet"),
    )
    .await;
    assert!(row.contains(ROOM), "the slug stays visible: {row}");
    let overflow = table_overflow(&browser).await;
    let widths = "return [...document.querySelectorAll('.rooms tr:last-child > *')] \
                  .map(c => c.tagName + ':' + c.getBoundingClientRect().width.toFixed(0) \
                  + ':' + c.textContent.trim().slice(0, 20)).join(' | ') + ' wrap ' \
                  + document.querySelector('.rooms .table-wrap').clientWidth;";
    let widths = browser.execute(widths, vec![]).await.unwrap();
    assert!(
        overflow <= 0,
        "the rooms table scrolls sideways at 1280 px by {overflow} px: {widths}"
    );
    let top = "window.scrollTo(0, 0); document.activeElement.blur(); return true;";
    browser.execute(top, vec![]).await.unwrap();
    save_screenshot(&browser, "console-schedule.png").await;

    // 175/s → 35/s: 5× less, so the confirmation has the values and the 2× note.
    wait_for(&browser, "#stock", None, Duration::from_secs(10), |_| true).await;
    fill(&browser, "#rate", "35").await;
    click(&browser, "#apply").await;
    let asked = confirmed(&browser, "the rate").await;
    assert!(
        asked.contains("Admission rate (people/s): 175/s → 35/s"),
        "{asked}"
    );
    assert!(asked.contains("more than 2×"), "{asked}");
    let outcome = wait_for(
        &browser,
        "#change-outcome",
        None,
        Duration::from_secs(10),
        |t| t.contains("Applied") && t.contains("admissionRatePerSec"),
    )
    .await;
    assert!(outcome.contains("175/s → 35/s"), "{outcome}");
    save_screenshot(&browser, "console-change.png").await;

    // End the sale: confirmed with what it does; the room reads sold out, and why.
    click(&browser, "#end-sale").await;
    let asked = confirmed(&browser, "ending the sale").await;
    assert!(
        asked.contains("Sold out (the sale ended): no → yes"),
        "{asked}"
    );
    assert!(asked.contains("cannot be undone"), "{asked}");
    wait_for(&browser, "#fig-state", None, Duration::from_secs(10), |t| {
        t == "Sold out"
    })
    .await;
    wait_for(
        &browser,
        "#fig-reason",
        None,
        Duration::from_secs(10),
        |t| t == "sold out",
    )
    .await;
    // Close: confirmed the same way.
    click(&browser, "#close").await;
    let asked = confirmed(&browser, "closing").await;
    assert!(asked.contains("Closed to new joins: no → yes"), "{asked}");
    wait_for(
        &browser,
        "#change-outcome",
        None,
        Duration::from_secs(10),
        |t| t.contains("Closed to new joins: no → yes"),
    )
    .await;
    browser.execute(top, vec![]).await.unwrap();
    save_screenshot(&browser, "console-sold-out.png").await;

    // Everything typed was stored, times as the instants meant.
    let stored = settings(&app).await;
    println!("stored: {stored}");
    assert_eq!(stored["displayNameEn"], "Drop 9");
    assert_eq!(stored["displayNameKo"], "드롭 9");
    assert_eq!(stored["stock"], 5);
    assert_eq!(stored["soldOutMessageEn"], "All 5 pairs are gone.");
    assert_eq!(stored["admissionRatePerSec"], json!(35.0));
    assert_eq!(stored["soldOut"], true);
    assert_eq!(stored["closed"], true);
    let (prequeue_ms, opens_ms) = (ms(&stored["prequeueOpensAt"]), ms(&stored["opensAt"]));
    let minute = 60_000;
    assert!(
        (prequeue_ms - (started_ms + 3 * minute)).abs() <= 2 * minute,
        "pre-queue at {prequeue_ms}, asked for ~{}",
        started_ms + 3 * minute
    );
    assert_eq!(
        opens_ms - prequeue_ms,
        5 * minute,
        "five minutes between the two"
    );
    browser.close().await.unwrap();
}
