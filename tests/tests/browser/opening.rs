//! A scheduled opening in the browser (docs/DESIGN.md "Scheduled opening and the
//! draw"), in English and in Korean: the page joins the pre-queue and shows the countdown to the
//! opening, "your place will be drawn at the opening" and its ticket tag; at the opening it shows
//! its drawn place; once the room admits, it goes to checkout by itself. Screenshots of the
//! countdown: `target/screenshots/prequeue-countdown-{en,ko}.png` (copied to `docs/`).

use std::time::Duration;

use serde_json::json;
use vestibule_tests::chromium::{
    dist_dir, save_screenshot, shown_position, text_of, wait_for, wait_for_path, ChromeDriver,
};
use vestibule_tests::{Backend, TestApp};

fn in_ms(ms: i64) -> String {
    let at = time::OffsetDateTime::now_utc() + time::Duration::milliseconds(ms);
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn countdown_then_drawn_place_then_admitted_in_both_languages() {
    let dist = dist_dir().to_string_lossy().to_string();
    // Pre-queue polls every 2 s while the opening is far, so the pages learn the new time soon.
    let app = TestApp::spawn(
        Backend::Memory,
        &["--static-dir", &dist, "--poll-tiers", "*:2000"],
    )
    .await;
    // The opening is far off while the pages join (a slow box must not see it pass before the
    // second page is in the pre-queue); it is brought forward once both are in.
    app.patch_room(
        "main",
        json!({"opensAt": in_ms(600_000), "prequeueOpensAt": in_ms(-1_000), "paused": true}),
    )
    .await;
    let driver = ChromeDriver::start();
    let mut pages = Vec::new();
    for (lang, headline) in [
        ("en", "The sale opens soon"),
        ("ko", "곧 판매가 시작됩니다"),
    ] {
        let profile = tempfile::tempdir().unwrap();
        let browser = driver.browser(profile.path(), "en-US").await;
        browser
            .goto(&app.url(&format!("/?room=main&lang={lang}&transport=poll")))
            .await
            .expect("page loads");
        wait_for(
            &browser,
            "#status",
            Some("data-status"),
            Duration::from_secs(10),
            |s| s == "PRE_QUEUE",
        )
        .await;
        let status = text_of(&browser, "#status").await;
        assert!(status.contains(headline), "{lang}: {status}");
        let countdown = wait_for(
            &browser,
            "#countdown-time",
            None,
            Duration::from_secs(5),
            |t| t.contains(':'),
        )
        .await;
        let tag = text_of(&browser, "#ticket-tag").await;
        assert!(
            tag.len() == 12 && tag.chars().all(|c| c.is_ascii_hexdigit()),
            "{lang}: tag {tag:?}"
        );
        // The countdown ticks.
        let later = wait_for(
            &browser,
            "#countdown-time",
            None,
            Duration::from_secs(3),
            |t| t != countdown,
        )
        .await;
        println!("{lang}: countdown {countdown} → {later}, tag {tag}");
        save_screenshot(&browser, &format!("prequeue-countdown-{lang}.png")).await;
        super::assert_accessible(&browser, &format!("pre-queue ({lang})")).await;
        pages.push((browser, profile, tag));
    }
    // The operator brings the opening forward; the pages follow the new time.
    app.patch_room("main", json!({"opensAt": in_ms(2_000)}))
        .await;
    // At the opening the draw gives each page a place (1 or 2, drawn), shown without a reload.
    let mut places = Vec::new();
    for (browser, _, _) in &pages {
        wait_for(
            browser,
            "#status",
            Some("data-status"),
            Duration::from_secs(25),
            |s| s == "WAITING",
        )
        .await;
        places.push(shown_position(browser).await);
        assert!(browser
            .find(fantoccini::Locator::Css("#countdown"))
            .await
            .is_err());
    }
    places.sort();
    assert_eq!(
        places,
        ["1", "2"],
        "the two pages hold drawn places 1 and 2"
    );
    let (_, draw) = app.get_json("/api/v1/rooms/main/draw").await;
    let published: Vec<String> = serde_json::from_value(draw["tags"].clone()).unwrap();
    let mut tags: Vec<String> = pages.iter().map(|(_, _, tag)| tag.clone()).collect();
    tags.sort();
    let mut sorted = published.clone();
    sorted.sort();
    assert_eq!(sorted, tags, "the draw lists both pages' tags");
    // The room admits: both pages go to checkout by themselves.
    app.patch_room("main", json!({"paused": false})).await;
    for (browser, _, _) in &pages {
        wait_for_path(browser, "/checkout", Duration::from_secs(15)).await;
    }
}
