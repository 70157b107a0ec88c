//! Sold out in the browser (docs/DESIGN.md "Stock and sold out"): an open waiting page learns
//! that the room sold out within one poll (English, polling) or one SSE refresh (Korean, SSE), and
//! shows the room's own message in its language (axe-core finds no violation); a page that joins
//! a sold-out room says so.
//! Screenshots: `target/screenshots/sold-out-{en,ko}.png` (docs/embedding.md shows copies).

use std::time::{Duration, Instant};

use fantoccini::Client;
use serde_json::json;
use vestibule_tests::chromium::{
    dist_dir, save_screenshot, shown_position, text_of, wait_for, ChromeDriver,
};
use vestibule_tests::{Backend, TestApp};

const MESSAGE_EN: &str = "All 100 pairs of the Aurora 1 are gone. Thank you for waiting!";
const MESSAGE_KO: &str = "오로라 1 100켤레가 모두 판매되었습니다. 기다려 주셔서 감사합니다!";

/// Waits for `#status[data-status=SOLD_OUT]`; returns how long it took.
async fn sold_out_seen(browser: &Client, within: Duration) -> Duration {
    let start = Instant::now();
    wait_for(browser, "#status", Some("data-status"), within, |s| {
        s == "SOLD_OUT"
    })
    .await;
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sold_out_reaches_open_pages_within_one_cycle_in_both_languages() {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn(Backend::Memory, &["--static-dir", &dist]).await;
    app.patch_room(
        "main",
        json!({"paused": true, "stock": 100,
               "soldOutMessageEn": MESSAGE_EN, "soldOutMessageKo": MESSAGE_KO}),
    )
    .await;
    let driver = ChromeDriver::start();
    let (en_profile, ko_profile, late_profile) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let english = driver.browser(en_profile.path(), "en-US").await;
    english
        .goto(&app.url("/?room=main&transport=poll"))
        .await
        .unwrap();
    assert_eq!(shown_position(&english).await, "1");
    let korean = driver.browser(ko_profile.path(), "ko-KR").await;
    korean
        .goto(&app.url("/?room=main&lang=ko&transport=sse"))
        .await
        .unwrap();
    assert_eq!(shown_position(&korean).await, "2");
    // The English page's next poll comes within its hint (3 s at places 1–10 while paused).
    let (_, status) = app
        .get_json(&vestibule_shared::paths::ticket(
            "main",
            &vestibule_tests::chromium::stored_ticket_of(&english, "main").await,
        ))
        .await;
    let hint = Duration::from_millis(status["nextPollAfterMs"].as_u64().expect("a hint"));

    app.patch_room("main", json!({"soldOut": true})).await;
    let (korean_took, english_took) = tokio::join!(
        sold_out_seen(&korean, Duration::from_secs(10)),
        sold_out_seen(&english, Duration::from_secs(10)),
    );
    println!(
        "sold out seen: SSE page {korean_took:?}, polling page {english_took:?} (hint {hint:?})"
    );
    // One SSE refresh (500 ms) after the settings tick (100 ms), plus the checks' own 100 ms.
    assert!(
        korean_took <= Duration::from_secs(2),
        "SSE page took {korean_took:?}"
    );
    assert!(
        english_took <= hint + Duration::from_millis(1500),
        "polling page took {english_took:?} with a {hint:?} hint"
    );
    assert_eq!(text_of(&english, "#status .headline").await, "Sold out");
    assert_eq!(text_of(&english, "#status .detail").await, MESSAGE_EN);
    assert_eq!(
        text_of(&korean, "#status .headline").await,
        "품절되었습니다"
    );
    assert_eq!(text_of(&korean, "#status .detail").await, MESSAGE_KO);
    let place = text_of(&english, "#position").await;
    assert!(
        !place.chars().any(|c| c.is_ascii_digit()),
        "no place is shown any more: {place:?}"
    );
    // Nothing left to do: no "Leave" and no "Join again".
    assert!(english
        .find(fantoccini::Locator::Css("#join-again"))
        .await
        .is_err());
    assert!(english
        .find(fantoccini::Locator::Css("#leave-line"))
        .await
        .is_err());
    super::assert_accessible(&english, "sold out").await;
    super::assert_accessible(&korean, "sold out (ko)").await;
    save_screenshot(&english, "sold-out-en.png").await;
    save_screenshot(&korean, "sold-out-ko.png").await;

    // A shopper arriving now gets no place, in words.
    let late = driver.browser(late_profile.path(), "en-US").await;
    late.goto(&app.url("/?room=main")).await.unwrap();
    wait_for(
        &late,
        "#status",
        Some("data-room-state"),
        Duration::from_secs(10),
        |s| s == "SOLD_OUT",
    )
    .await;
    assert_eq!(text_of(&late, "#status .headline").await, "Sold out");
    for browser in [english, korean, late] {
        browser.close().await.unwrap();
    }
}
