//! The operator console (`/console/`) in headless Chromium against the real binary: a refused
//! token shows the sign-in again; signed in, the operator creates a room (confirmed), shoppers
//! join it (a test client) and its numbers and charts move; a message to waiters posted in the
//! console shows on a shopper's page; resuming and a 4× rate change ask for confirmation; after
//! the change admissions follow the new rate (within 10 % over 5 s); axe-core finds no violation
//! (sign-in, room view in both languages).
//! Screenshots: `console-en.png` (1280 px), `console-ko.png`, `console-phone-ko.png`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fantoccini::{Client, Locator};
use serde_json::json;
use vestibule_tests::chromium::{
    click, dist_dir, save_screenshot, text_of, wait_for, wait_for_script, ChromeDriver,
};
use vestibule_tests::{Backend, TestApp, ADMIN_TOKEN};

/// The room the operator creates in the console and runs the sale in.
const ROOM: &str = "drop-8";
/// The message to waiters posted through the console.
const MESSAGE: &str = "Sizes 42–44 are sold out";

/// Types `value` into the input `css` as a person would (the console listens to `input`).
/// Waits up to 10 s for the input to be rendered first (the console's WASM may still load).
pub(crate) async fn fill(browser: &Client, css: &str, value: &str) {
    let present = "return document.querySelector(arguments[0]) ? 'present' : null;";
    let args = vec![json!(css)];
    wait_for_script(browser, (present, args), Duration::from_secs(10), |v| {
        v == "present"
    })
    .await;
    browser
        .execute(
            "const e = document.querySelector(arguments[0]); e.focus(); e.value = arguments[1]; \
             e.dispatchEvent(new Event('input', {bubbles: true}));",
            vec![json!(css), json!(value)],
        )
        .await
        .unwrap_or_else(|e| panic!("fill {css}: {e}"));
}

/// A browser on `app`'s console in English, `height` px tall at 1280 px, signed in with the
/// admin token and its stream live. `dist/console/` must be built.
pub(crate) async fn signed_in_console(
    app: &TestApp,
    driver: &ChromeDriver,
    profile: &std::path::Path,
    height: u32,
) -> Client {
    assert!(
        dist_dir().join("console").join("index.html").is_file(),
        "dist/console/ is not built: run scripts/build-page.sh"
    );
    let browser = driver.browser(profile, "en-US").await;
    browser
        .set_window_size(1280, height)
        .await
        .expect("1280 px");
    browser
        .goto(&app.url("/console/?lang=en"))
        .await
        .expect("console loads");
    fill(&browser, "#admin-token", ADMIN_TOKEN).await;
    click(&browser, "#sign-in").await;
    wait_for(&browser, "#link", None, Duration::from_secs(10), |t| {
        t.contains("Live")
    })
    .await;
    browser
}

/// Shows `room` in the room view once the rooms list has it (within 10 s).
pub(crate) async fn pick_room(browser: &Client, room: &str) {
    let link = format!("tr[data-room={room}] button.link");
    wait_for(browser, &link, None, Duration::from_secs(10), |_| true).await;
    click(browser, &link).await;
}

/// Accepts the confirmation the last click opened (fails when none opened).
pub(crate) async fn accept_confirmation(browser: &Client, what: &str) {
    for _ in 0..30 {
        if browser.get_alert_text().await.is_ok() {
            browser.accept_alert().await.expect("accept");
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} asked for no confirmation");
}

/// The number of points the first line of the chart `n` (1-based) draws.
async fn chart_points(browser: &Client, n: usize) -> usize {
    let css = format!(".chart:nth-of-type({n}) polyline");
    match browser.find(Locator::Css(&css)).await {
        Ok(line) => line
            .attr("points")
            .await
            .ok()
            .flatten()
            .map_or(0, |points| points.split_whitespace().count()),
        Err(_) => 0,
    }
}

fn number_in(text: &str) -> u64 {
    text.chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_shows_a_room_live_and_admissions_follow_its_rate() {
    let dist = dist_dir().to_string_lossy().to_string();
    assert!(
        dist_dir().join("console").join("index.html").is_file(),
        "dist/console/ is not built: run scripts/build-page.sh"
    );
    let app = Arc::new(
        TestApp::spawn(
            Backend::Memory,
            &[
                "--static-dir",
                &dist,
                "--rooms",
                "main",
                "--admission-rate",
                "5",
            ],
        )
        .await,
    );

    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "en-US").await;
    browser.set_window_size(1280, 1500).await.expect("1280 px");
    // `/console` redirects to the folder, where the relative asset and API URLs resolve.
    browser
        .goto(&app.url("/console?lang=en"))
        .await
        .expect("console loads");

    crate::assert_accessible(&browser, "console sign-in").await;
    // A wrong token: refused, the sign-in again with the reason.
    fill(&browser, "#admin-token", "not-the-token").await;
    click(&browser, "#sign-in").await;
    wait_for(
        &browser,
        ".sign-in [role=alert]",
        None,
        Duration::from_secs(10),
        |t| t.contains("refused"),
    )
    .await;
    fill(&browser, "#admin-token", ADMIN_TOKEN).await;
    click(&browser, "#sign-in").await;
    wait_for(&browser, "#link", None, Duration::from_secs(10), |t| {
        t.contains("Live")
    })
    .await;
    let rooms = text_of(&browser, ".rooms tbody").await;
    assert!(rooms.contains("main"), "{rooms}");

    // The operator creates the sale's room (it asks first); it joins the list from the stream.
    fill(&browser, "#new-room", ROOM).await;
    click(&browser, ".create button[type=submit]").await;
    accept_confirmation(&browser, "creating a room").await;
    let created = wait_for(
        &browser,
        ".rooms [role=status] .outcome",
        None,
        Duration::from_secs(10),
        |t| !t.is_empty(),
    )
    .await;
    println!("create: {created}");
    assert_eq!(created, "Room created.");
    wait_for(
        &browser,
        ".rooms tbody",
        None,
        Duration::from_secs(5),
        |t| t.contains(ROOM),
    )
    .await;
    let created: serde_json::Value = app
        .client
        .get(app.url(&vestibule_shared::paths::admin_room(ROOM)))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("GET the new room")
        .json()
        .await
        .expect("settings JSON");
    assert!(created["admissionRatePerSec"].is_number(), "{created}");

    // Shoppers (a test client) line up in the new room, paused at 5/s, and keep joining, 10 a
    // second, while the operator watches.
    app.patch_room(ROOM, json!({"paused": true, "admissionRatePerSec": 5}))
        .await;
    for _ in 0..300 {
        app.join(ROOM, None).await;
    }
    let joining = Arc::new(AtomicBool::new(true));
    let shoppers = {
        let (app, joining) = (app.clone(), joining.clone());
        tokio::spawn(async move {
            while joining.load(Ordering::Relaxed) {
                app.join(ROOM, None).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    click(&browser, &format!("tr[data-room={ROOM}] button.link")).await;
    assert_eq!(
        vestibule_tests::chromium::focused_id(&browser).await,
        "room-title",
        "picking a room takes focus to it"
    );
    let first = wait_for(
        &browser,
        "#fig-waiting",
        None,
        Duration::from_secs(10),
        |t| number_in(t) >= 300,
    )
    .await;
    let later = wait_for(
        &browser,
        "#fig-waiting",
        None,
        Duration::from_secs(10),
        |t| number_in(t) > number_in(&first) + 5,
    )
    .await;
    println!("waiting {first} → {later}");
    assert_eq!(text_of(&browser, "#fig-state").await, "Paused");
    let drawn = chart_points(&browser, 1).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        chart_points(&browser, 1).await > drawn,
        "the chart draws on"
    );

    // A message to waiters, posted in the console, shows above a waiting shopper's place (a
    // shopper's page in another browser, in line behind the others while the room is paused).
    let shopper_profile = tempfile::tempdir().unwrap();
    let shopper = driver.browser(shopper_profile.path(), "en-US").await;
    shopper
        .goto(&app.url(&format!("/?room={ROOM}&transport=sse")))
        .await
        .expect("the page loads");
    wait_for(
        &shopper,
        "#waiter-message",
        Some("hidden"),
        Duration::from_secs(10),
        |hidden| hidden == "true",
    )
    .await;
    wait_for(
        &browser,
        "#message-en",
        None,
        Duration::from_secs(10),
        |_| true,
    )
    .await;
    fill(&browser, "#message-en", MESSAGE).await;
    let posted = std::time::Instant::now();
    click(&browser, "#apply").await;
    // Every change is confirmed, with its values before → after.
    accept_confirmation(&browser, "a message to waiters").await;
    let outcome = wait_for(
        &browser,
        "#change-outcome",
        None,
        Duration::from_secs(10),
        |t| t.contains("Applied") && t.contains("messageEn"),
    )
    .await;
    println!("message outcome: {outcome}");
    wait_for(
        &shopper,
        "#waiter-message",
        None,
        Duration::from_secs(10),
        |t| t == MESSAGE,
    )
    .await;
    println!(
        "the message reached the shopper's page in {:?}",
        posted.elapsed()
    );
    shopper.close().await.unwrap();

    // Resuming changes admission from nothing: it asks first.
    // The controls show the settings in force.
    let mut rate_shown = String::new();
    for _ in 0..50 {
        rate_shown = browser
            .execute("return document.querySelector('#rate').value;", vec![])
            .await
            .unwrap()
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if rate_shown == "5" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(rate_shown, "5");
    click(&browser, "#pause").await;
    accept_confirmation(&browser, "resume").await;
    wait_for(&browser, "#fig-state", None, Duration::from_secs(10), |t| {
        t == "Open"
    })
    .await;

    // 5/s → 20/s is 4×: it asks, then shows what it did.
    fill(&browser, "#rate", "20").await;
    click(&browser, "#apply").await;
    accept_confirmation(&browser, "a 4× rate").await;
    let outcome = wait_for(
        &browser,
        "#change-outcome",
        None,
        Duration::from_secs(10),
        |t| t.contains("Applied"),
    )
    .await;
    println!("change outcome: {outcome}");
    let settings: serde_json::Value = app
        .client
        .get(app.url(&vestibule_shared::paths::admin_room(ROOM)))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("GET settings")
        .json()
        .await
        .expect("settings JSON");
    assert_eq!(settings["admissionRatePerSec"], json!(20.0));

    // Admissions follow: 20/s within 10 % over 5 s (after a second to settle).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let series = format!("vestibule_admissions_total{{room=\"{ROOM}\"}}");
    let series = series.as_str();
    let before = app.metric(series).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rate = (app.metric(series).await - before) / 5.0;
    println!("admitted {rate:.1}/s after the change to 20/s");
    assert!((18.0..=22.0).contains(&rate), "admitted {rate}/s");
    wait_for(
        &browser,
        "#fig-admitted",
        None,
        Duration::from_secs(5),
        |t| t.starts_with("2") || t.starts_with("19") || t.starts_with("18"),
    )
    .await;
    assert!(chart_points(&browser, 2).await > 3, "the rate chart draws");
    // The screenshots show the page from its top (the form fields took focus further down).
    let top = "window.scrollTo(0, 0); document.activeElement.blur(); return true;";
    browser.execute(top, vec![]).await.unwrap();
    save_screenshot(&browser, "console-en.png").await;
    // At 1280 px the rooms table fits beside the room (no sideways scrolling inside it).
    let table_overflow = browser
        .execute(
            "const w = document.querySelector('.rooms .table-wrap'); \
             return w.scrollWidth - w.clientWidth;",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        table_overflow.as_i64().unwrap_or(1) <= 0,
        "the rooms table scrolls sideways at 1280 px: {table_overflow}"
    );
    crate::assert_accessible(&browser, "console room view").await;

    // Korean, at 1280 px and on a phone.
    click(&browser, "#language").await;
    wait_for(&browser, "#fig-state", None, Duration::from_secs(5), |t| {
        t == "진행 중"
    })
    .await;
    let lang = browser
        .execute("return document.documentElement.lang;", vec![])
        .await
        .unwrap();
    assert_eq!(lang, json!("ko"));
    browser.execute(top, vec![]).await.unwrap();
    save_screenshot(&browser, "console-ko.png").await;
    crate::assert_accessible(&browser, "console room view (ko)").await;
    browser.set_window_size(430, 900).await.expect("phone");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let overflow = browser
        .execute(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth;",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        overflow.as_i64().unwrap_or(1) <= 0,
        "no sideways scrolling on a phone: {overflow}"
    );
    browser.execute(top, vec![]).await.unwrap();
    save_screenshot(&browser, "console-phone-ko.png").await;

    let link = browser
        .find(Locator::Css("#link"))
        .await
        .unwrap()
        .attr("class")
        .await
        .unwrap();
    assert_eq!(link.as_deref(), Some("link live"), "the stream goes on");
    joining.store(false, Ordering::Relaxed);
    shoppers.await.unwrap();
    browser.close().await.unwrap();
}

/// The console is served at `{base}console/` (HTML `no-cache`, assets immutable and compressed),
/// `{base}console` redirects there relatively, at the root and under gate mode's mount prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_in_its_folder_at_the_root_and_under_the_mount_prefix() {
    let dist = dist_dir().to_string_lossy().to_string();
    let plain = TestApp::spawn(Backend::Memory, &["--static-dir", &dist]).await;
    // Nothing listens upstream: only Vestibule's own paths are asked for.
    let gated = TestApp::spawn(
        Backend::Memory,
        &["--static-dir", &dist, "--upstream", "http://127.0.0.1:9"],
    )
    .await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for (app, prefix) in [(&plain, ""), (&gated, "/_vestibule")] {
        let moved = client
            .get(app.url(&format!("{prefix}/console")))
            .send()
            .await
            .unwrap();
        assert!(
            moved.status().is_redirection(),
            "{prefix}: {}",
            moved.status()
        );
        assert_eq!(moved.headers()["location"], "console/");
        let page = client
            .get(app.url(&format!("{prefix}/console/")))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200, "{prefix}");
        assert_eq!(page.headers()["cache-control"], "no-cache");
        let html = page.text().await.unwrap();
        let script = html
            .split(['"', '\''])
            .find(|part| part.starts_with("./vestibule-console-") && part.ends_with(".js"))
            .unwrap_or_else(|| panic!("no console script in {html}"))
            .trim_start_matches("./")
            .to_owned();
        let asset = client
            .get(app.url(&format!("{prefix}/console/{script}")))
            .header("accept-encoding", "br")
            .send()
            .await
            .unwrap();
        assert_eq!(asset.status(), 200, "{prefix}/console/{script}");
        assert_eq!(asset.headers()["content-encoding"], "br");
        assert!(asset.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable"));
    }
}
