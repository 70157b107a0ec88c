//! The message to waiters in the browser (docs/DESIGN.md "Rooms at run time"): an open
//! waiting page shows a message posted through the admin API above the place within one SSE
//! refresh (Korean) or one poll (English), in its own language (the other one when the room wrote
//! only that), in a polite live region; clearing it hides it. axe-core finds no violation.
//! Screenshots: `target/screenshots/message-{en,ko}.png`.

use std::time::{Duration, Instant};

use fantoccini::Client;
use serde_json::json;
use vestibule_tests::chromium::{
    dist_dir, save_screenshot, shown_position, wait_for, ChromeDriver,
};
use vestibule_tests::{Backend, TestApp};

const MESSAGE_EN: &str = "Sizes 42–44 are sold out";
const MESSAGE_KO: &str = "42–44 사이즈는 품절입니다";

/// Waits up to 10 s for the page to show `text` as its message; the time since `since`.
async fn shows(browser: &Client, text: &str, since: Instant) -> Duration {
    wait_for(
        browser,
        "#waiter-message",
        None,
        Duration::from_secs(10),
        |t| t == text,
    )
    .await;
    since.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_to_waiters_reaches_open_pages_in_their_language() {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn(Backend::Memory, &["--static-dir", &dist]).await;
    app.patch_room("main", json!({"paused": true})).await;
    let driver = ChromeDriver::start();
    let (en_profile, ko_profile) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
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
    let hidden = wait_for(
        &korean,
        "#waiter-message",
        Some("hidden"),
        Duration::from_secs(5),
        |_| true,
    )
    .await;
    assert_eq!(hidden, "true", "no message yet: hidden");

    let posted = Instant::now();
    app.patch_room(
        "main",
        json!({"messageEn": MESSAGE_EN, "messageKo": MESSAGE_KO}),
    )
    .await;
    let korean_took = shows(&korean, MESSAGE_KO, posted).await;
    let english_took = shows(&english, MESSAGE_EN, posted).await;
    println!("message seen: SSE page {korean_took:?}, polling page {english_took:?}");
    // One settings tick and one SSE refresh (500 ms), with the checks' own 100 ms.
    assert!(
        korean_took <= Duration::from_secs(2),
        "SSE page took {korean_took:?}"
    );
    let live = wait_for(
        &korean,
        "#waiter-message",
        Some("aria-live"),
        Duration::from_secs(1),
        |_| true,
    )
    .await;
    assert_eq!(live, "polite");
    super::assert_accessible(&english, "message").await;
    super::assert_accessible(&korean, "message (ko)").await;
    save_screenshot(&english, "message-en.png").await;
    save_screenshot(&korean, "message-ko.png").await;

    // English only: the Korean page shows it rather than nothing; cleared: hidden.
    app.patch_room("main", json!({"messageKo": null})).await;
    shows(&korean, MESSAGE_EN, Instant::now()).await;
    app.patch_room("main", json!({"messageEn": null})).await;
    wait_for(
        &korean,
        "#waiter-message",
        Some("hidden"),
        Duration::from_secs(5),
        |hidden| hidden == "true",
    )
    .await;
    english.close().await.unwrap();
    korean.close().await.unwrap();
}
