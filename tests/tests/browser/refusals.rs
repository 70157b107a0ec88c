//! Every answer of a join that gives no place has its own calm view, in English and in Korean
//! (docs/DESIGN.md "Scheduled opening and the draw", "Stock and sold out"): never "Something
//! went wrong".
//!
//! - 409 `room_not_open`: "Not open yet", "Opens at HH:MM (in N min)" and a ticking countdown;
//!   the page joins by itself when the pre-queue opens (within a few seconds of it) and shows
//!   the shopper in the pre-queue.
//! - 409 `room_closed`: "The line is closed".
//! - 409 `sold_out`: the room's own sold-out message, to a visitor who never waited.
//! - 404 `room_not_found`: "This waiting room isn't open".
//!
//! The heading (the `main` landmark's label) and the title show the room's display name in the
//! page's language. Screenshots: `target/screenshots/{not-open,closed,sold-out-new-visitor,
//! unknown-room}-{en,ko}.png`.

use std::time::{Duration, Instant};

use fantoccini::Client;
use serde_json::{json, Value};
use vestibule_tests::chromium::{dist_dir, save_screenshot, text_of, wait_for, ChromeDriver};
use vestibule_tests::{Backend, TestApp, ADMIN_TOKEN};

const SOLD_OUT_EN: &str = "All 50 jackets are gone. See you at the next drop!";
const SOLD_OUT_KO: &str = "재킷 50벌이 모두 판매되었습니다. 다음 드롭에서 만나요!";

/// One language's expected words.
struct Words {
    lang: &'static str,
    name: &'static str,
    not_open: &'static str,
    opens_at: &'static str,
    closed: &'static str,
    sold_out: &'static str,
    sold_out_message: &'static str,
    unknown: &'static str,
    in_pre_queue: &'static str,
}

const LANGUAGES: [Words; 2] = [
    Words {
        lang: "en",
        name: "Drop 7",
        not_open: "Not open yet",
        opens_at: "Opens at ",
        closed: "The line is closed",
        sold_out: "Sold out",
        sold_out_message: SOLD_OUT_EN,
        unknown: "This waiting room isn't open",
        in_pre_queue: "The sale opens soon",
    },
    Words {
        lang: "ko",
        name: "드롭 7",
        not_open: "아직 열리지 않았습니다",
        opens_at: " 오픈 (",
        closed: "대기열이 마감되었습니다",
        sold_out: "품절되었습니다",
        sold_out_message: SOLD_OUT_KO,
        unknown: "열려 있지 않은 대기실입니다",
        in_pre_queue: "곧 판매가 시작됩니다",
    },
];

fn at(from_now_ms: i64) -> String {
    let at = time::OffsetDateTime::now_utc() + time::Duration::milliseconds(from_now_ms);
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

/// Creates `room` with `settings` through the admin API.
async fn create_room(app: &TestApp, room: &str, settings: Value) {
    let mut body = settings;
    body["room"] = json!(room);
    let response = app
        .client
        .post(app.url("/api/v1/admin/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .expect("create");
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
}

/// Opens `room` in `lang` and waits for `#status[data-room-state] = state`; returns the status
/// section's text.
async fn visit(app: &TestApp, browser: &Client, room: &str, lang: &str, state: &str) -> String {
    browser
        .goto(&app.url(&format!("/?room={room}&lang={lang}")))
        .await
        .expect("page loads");
    wait_for(
        browser,
        "#status",
        Some("data-room-state"),
        Duration::from_secs(10),
        |s| s == state,
    )
    .await;
    let status = text_of(browser, "#status").await;
    assert!(!status.contains("Something went wrong"), "{status}");
    assert!(!status.contains("문제가 발생했습니다"), "{status}");
    status
}

/// The heading, which labels the `main` landmark, and the title name the room for people.
async fn assert_named(browser: &Client, name: &str, what: &str) {
    let heading = wait_for(browser, "#room-name", None, Duration::from_secs(5), |t| {
        t == name
    })
    .await;
    assert_eq!(heading, name, "{what}: heading");
    let title = browser.title().await.unwrap();
    assert!(title.starts_with(name), "{what}: title {title:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refused_join_has_its_own_view_in_both_languages() {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn(Backend::Memory, &["--static-dir", &dist]).await;
    let names = json!({"displayNameEn": "Drop 7", "displayNameKo": "드롭 7"});
    // The pre-queue opens in 30 s: time for both pages to load and be looked at first.
    let prequeue_in = Duration::from_secs(30);
    let mut not_open = names.clone();
    not_open["opensAt"] = json!(at(600_000));
    not_open["prequeueOpensAt"] = json!(at(prequeue_in.as_millis() as i64));
    let prequeue_opens = Instant::now() + prequeue_in;
    app.patch_room("main", not_open).await;
    create_room(&app, "shut", names.clone()).await;
    app.patch_room("shut", json!({"closed": true})).await;
    let mut gone = names.clone();
    gone["soldOutMessageEn"] = json!(SOLD_OUT_EN);
    gone["soldOutMessageKo"] = json!(SOLD_OUT_KO);
    create_room(&app, "gone", gone).await;
    app.patch_room("gone", json!({"soldOut": true})).await;

    let driver = ChromeDriver::start();
    let mut pages = Vec::new();
    // Before the pre-queue opens: the countdown, and nothing joined.
    for words in &LANGUAGES {
        let lang = words.lang;
        let profile = tempfile::tempdir().unwrap();
        let browser = driver.browser(profile.path(), "en-US").await;
        let status = visit(&app, &browser, "main", lang, "NOT_OPEN").await;
        assert!(status.contains(words.not_open), "{lang}: {status}");
        let label = text_of(&browser, "#countdown-label").await;
        assert!(label.contains(words.opens_at), "{lang}: {label}");
        let shown = text_of(&browser, "#countdown-time").await;
        let later = wait_for(
            &browser,
            "#countdown-time",
            None,
            Duration::from_secs(3),
            |t| t != shown,
        )
        .await;
        println!("{lang}: {label}, countdown {shown} → {later}");
        let connection = text_of(&browser, "#connection").await;
        assert!(!connection.contains("stopped"), "{lang}: {connection}");
        assert_named(&browser, words.name, &format!("not open ({lang})")).await;
        save_screenshot(&browser, &format!("not-open-{lang}.png")).await;
        super::assert_accessible(&browser, &format!("not open ({lang})")).await;
        pages.push((browser, profile));
    }
    let (_, waiting) = app.get_json("/api/v1/rooms/main").await;
    assert_eq!(waiting["waiting"], 0, "nobody joined before the pre-queue");

    // The pre-queue opens: each page joins by itself within a few seconds.
    for ((browser, _), words) in pages.iter().zip(&LANGUAGES) {
        let left = prequeue_opens.saturating_duration_since(Instant::now());
        wait_for(
            browser,
            "#status",
            Some("data-status"),
            left + Duration::from_secs(10),
            |s| s == "PRE_QUEUE",
        )
        .await;
        let late = Instant::now().saturating_duration_since(prequeue_opens);
        println!("{}: in the pre-queue {late:?} after it opened", words.lang);
        assert!(
            late <= Duration::from_secs(4),
            "{}: joined {late:?} after the opening",
            words.lang
        );
        let status = text_of(browser, "#status").await;
        assert!(status.contains(words.in_pre_queue), "{status}");
        assert_named(browser, words.name, "pre-queue").await;
    }

    // Closed, sold out (to a new visitor), unknown: each its own view.
    for ((browser, _), words) in pages.iter().zip(&LANGUAGES) {
        let lang = words.lang;
        let status = visit(&app, browser, "shut", lang, "CLOSED").await;
        assert!(status.contains(words.closed), "{lang}: {status}");
        assert_named(browser, words.name, &format!("closed ({lang})")).await;
        save_screenshot(browser, &format!("closed-{lang}.png")).await;

        visit(&app, browser, "gone", lang, "SOLD_OUT").await;
        assert_eq!(text_of(browser, "#status .headline").await, words.sold_out);
        assert_eq!(
            text_of(browser, "#status .detail").await,
            words.sold_out_message,
            "{lang}: the room's own message reaches a new visitor"
        );
        assert_named(browser, words.name, &format!("sold out ({lang})")).await;
        save_screenshot(browser, &format!("sold-out-new-visitor-{lang}.png")).await;
        super::assert_accessible(browser, &format!("sold out, new visitor ({lang})")).await;

        let status = visit(&app, browser, "no-such-room", lang, "NOT_FOUND").await;
        assert!(status.contains(words.unknown), "{lang}: {status}");
        // No name to show: the slug.
        assert_named(browser, "no-such-room", &format!("unknown ({lang})")).await;
        save_screenshot(browser, &format!("unknown-room-{lang}.png")).await;
    }
    for (browser, _) in pages {
        browser.close().await.unwrap();
    }
}
