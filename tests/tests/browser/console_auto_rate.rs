//! The closed loop (`autoRate`) in the console, in headless Chromium against the real binary: a
//! room with autoRate {5–40/s, p95 ≤ 500 ms, errors ≤ 1%} at 20/s hears from its storefront
//! (`POST …/signals` every 500 ms) that the origin's p95 is 900 ms: the console shows the lowered
//! rate, the origin's p95 and the reason of the cut in words; then the p95 falls to 50 ms and the
//! console shows the rate rising with the headroom reason. The origin's charts draw the signals.
//! The operator edits autoRate in the controls (confirmed before → after; stored as typed) and a
//! min above max shows the server's 409 message. In Korean the panel says the same in Korean.
//! Screenshots: `console-auto-rate.png`, `console-auto-rate-ko.png`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fantoccini::Client;
use serde_json::{json, Value};
use vestibule_tests::chromium::{
    click, dist_dir, save_screenshot, text_of, wait_for, wait_for_script, ChromeDriver,
};
use vestibule_tests::{Backend, TestApp, ADMIN_TOKEN};

use crate::console::{fill, pick_room, signed_in_console};
use crate::console_sale::confirmed;

const ROOM: &str = "loop";
const ORIGIN_KEY: &str = "origin-key-for-the-console-0123456789";

/// The rate a `#auto-rate-now` text shows ("11.1/s").
fn rate_in(text: &str) -> f64 {
    text.trim_end_matches("/s").parse().unwrap_or(f64::NAN)
}

async fn stored(app: &TestApp) -> Value {
    app.admin_get(&vestibule_shared::paths::admin_room(ROOM))
        .await
        .1
}

/// Waits up to 5 s for the input `css` to hold `value` (the form is filled from the settings
/// read).
async fn input_holds(browser: &Client, css: &str, value: &str) {
    let script = "const e = document.querySelector(arguments[0]); return e ? e.value : null;";
    let args = vec![json!(css)];
    wait_for_script(browser, (script, args), Duration::from_secs(5), |v| {
        v == value
    })
    .await;
}

/// Waits up to 10 s for the outcome of a change to satisfy `done`.
async fn outcome(browser: &Client, done: impl Fn(&str) -> bool) -> String {
    wait_for(
        browser,
        "#change-outcome",
        None,
        Duration::from_secs(10),
        done,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_the_loop_cut_on_latency_and_rise_on_headroom() {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = Arc::new(
        TestApp::spawn(
            Backend::Memory,
            &[
                "--static-dir",
                &dist,
                "--rooms",
                "main",
                "--origin-api-key",
                ORIGIN_KEY,
            ],
        )
        .await,
    );
    let response = app
        .client
        .post(app.url("/api/v1/admin/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"room": ROOM, "admissionRatePerSec": 20,
            "autoRate": {"min": 5, "max": 40, "targetP95Ms": 500, "maxErrorRate": 0.01}}))
        .send()
        .await
        .expect("create the room");
    assert_eq!(
        response.status().as_u16(),
        201,
        "{:?}",
        response.text().await
    );

    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = signed_in_console(&app, &driver, profile.path(), 1800).await;
    pick_room(&browser, ROOM).await;
    let bounds = wait_for(
        &browser,
        "#auto-bounds",
        None,
        Duration::from_secs(10),
        |t| !t.is_empty(),
    )
    .await;
    assert_eq!(bounds, "5–40/s · p95 ≤ 500 ms · errors ≤ 1%");
    assert_eq!(text_of(&browser, "#auto-rate-now").await, "20/s");

    // The storefront reports every 500 ms, the p95 it is told (ms).
    let p95 = Arc::new(AtomicU64::new(900));
    let reporter = {
        let (app, p95) = (app.clone(), p95.clone());
        tokio::spawn(async move {
            loop {
                let p95 = p95.load(Ordering::Relaxed) as f64;
                let body = json!({"requests": 400, "p50Ms": p95 / 2.0, "p95Ms": p95,
                                  "errorRate": 0.0, "inFlight": 12});
                let _ = app
                    .client
                    .post(app.url(&format!("/api/v1/rooms/{ROOM}/signals")))
                    .bearer_auth(ORIGIN_KEY)
                    .json(&body)
                    .send()
                    .await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };

    // p95 900 ms over a 500 ms target: cut, in words, with the numbers.
    let cut = wait_for(
        &browser,
        "#auto-last-change",
        None,
        Duration::from_secs(15),
        |t| t.starts_with("Cut: origin p95 over target (900 ms > 500 ms) · 20 → "),
    )
    .await;
    println!("cut: {cut}");
    assert_eq!(text_of(&browser, "#origin-p95").await, "900 ms");
    assert_eq!(text_of(&browser, "#origin-p50").await, "450 ms");
    assert_eq!(text_of(&browser, "#origin-errors").await, "0%");
    let lowered = rate_in(
        &wait_for(
            &browser,
            "#auto-rate-now",
            None,
            Duration::from_secs(5),
            |t| rate_in(t) < 20.0,
        )
        .await,
    );
    assert!((5.0..20.0).contains(&lowered), "lowered to {lowered}");
    let step = text_of(&browser, "#auto-step").await;
    assert!(
        step.starts_with("Holding: ") || step.starts_with("Cutting: "),
        "{step}"
    );
    // The origin's charts draw the signals and the target.
    let p95_points = wait_for(
        &browser,
        ".chart:nth-of-type(3)",
        Some("data-points"),
        Duration::from_secs(5),
        |t| t.parse::<u64>().unwrap_or(0) >= 2,
    )
    .await;
    println!("the p95 chart draws {p95_points} points");
    let captions = text_of(&browser, ".charts").await;
    assert!(
        captions.contains("Origin p95 latency and its target")
            && captions.contains("Origin error rate and its limit"),
        "{captions}"
    );
    let show = "document.querySelector('#auto-loop').scrollIntoView(); \
                document.activeElement.blur(); return true;";
    browser.execute(show, vec![]).await.unwrap();
    save_screenshot(&browser, "console-auto-rate.png").await;

    // p95 50 ms: headroom, the rate rises.
    p95.store(50, Ordering::Relaxed);
    let raised = wait_for(
        &browser,
        "#auto-last-change",
        None,
        Duration::from_secs(20),
        |t| t.starts_with("Raised: origin well under its targets (p95 50 ms < 500 ms)"),
    )
    .await;
    println!("raised: {raised}");
    wait_for(&browser, "#origin-p95", None, Duration::from_secs(5), |t| {
        t == "50 ms"
    })
    .await;
    let risen = rate_in(
        &wait_for(
            &browser,
            "#auto-rate-now",
            None,
            Duration::from_secs(5),
            |t| rate_in(t) > lowered,
        )
        .await,
    );
    println!("the rate went {lowered} → {risen}");
    let (_, audit) = app
        .admin_get(&format!("/api/v1/admin/rooms/{ROOM}/audit"))
        .await;
    let audit = audit.to_string();
    for reason in ["autoRate LATENCY_HIGH", "autoRate HEADROOM"] {
        assert!(audit.contains(reason), "{reason} not audited: {audit}");
    }

    // In Korean: the bounds, the last change in words with its numbers, the origin's figures
    // and the charts' captions; then back to English.
    click(&browser, "#language").await;
    let bounds_ko = wait_for(
        &browser,
        "#auto-bounds",
        None,
        Duration::from_secs(5),
        |t| t.contains("오류율"),
    )
    .await;
    assert_eq!(bounds_ko, "5–40/초 · p95 ≤ 500 ms · 오류율 ≤ 1%");
    let change_ko = text_of(&browser, "#auto-last-change").await;
    // Still rising: well under the targets, or slowly near where the origin struggled.
    assert!(
        (change_ko.starts_with("높임: 오리진에 여유 있음 (p95 50 ms, 목표 500 ms) · ")
            || change_ko.starts_with("조금 높임: 오리진이 최근 힘들었던 속도 근처를 탐색 중 · "))
            && change_ko.ends_with(" 전"),
        "{change_ko}"
    );
    assert!(text_of(&browser, "#auto-rate-now").await.ends_with("/초"));
    assert_eq!(text_of(&browser, "#origin-p95").await, "50 ms");
    let captions_ko = text_of(&browser, ".charts").await;
    assert!(
        captions_ko.contains("오리진 p95 지연과 목표")
            && captions_ko.contains("오리진 오류율과 한도"),
        "{captions_ko}"
    );
    browser.execute(show, vec![]).await.unwrap();
    save_screenshot(&browser, "console-auto-rate-ko.png").await;
    crate::assert_accessible(&browser, "console closed loop (ko)").await;
    click(&browser, "#language").await;
    wait_for(
        &browser,
        "#auto-bounds",
        None,
        Duration::from_secs(5),
        |t| t.contains("errors"),
    )
    .await;

    // The operator widens the loop while it runs (the loop's own moves meanwhile are no
    // conflict): confirmed before → after, stored as typed.
    input_holds(&browser, "#auto-max", "40").await;
    fill(&browser, "#auto-max", "60").await;
    fill(&browser, "#auto-max-errors", "2").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    click(&browser, "#apply").await;
    let asked = confirmed(&browser, "the loop's bounds").await;
    assert!(
        asked.contains(
            "Closed-loop admission (autoRate): 5–40/s · p95 ≤ 500 ms · errors ≤ 1% → \
             5–60/s · p95 ≤ 500 ms · errors ≤ 2%"
        ),
        "{asked}"
    );
    let applied = outcome(&browser, |t| t.contains("Applied") || t.contains("Failed")).await;
    assert!(applied.contains("Applied"), "{applied}");
    assert_eq!(
        stored(&app).await["autoRate"],
        json!({"min": 5.0, "max": 60.0, "targetP95Ms": 500, "maxErrorRate": 0.02})
    );
    wait_for(
        &browser,
        "#auto-bounds",
        None,
        Duration::from_secs(5),
        |t| t == "5–60/s · p95 ≤ 500 ms · errors ≤ 2%",
    )
    .await;

    // min above max: the server's 409, in the operator's view.
    fill(&browser, "#auto-min", "80").await;
    click(&browser, "#apply").await;
    confirmed(&browser, "a crossed min and max").await;
    let refused = outcome(&browser, |t| t.contains("409")).await;
    println!("refused: {refused}");
    assert!(
        refused.contains("conflict")
            && refused.contains("autoRate.min (80) must not be above autoRate.max (60)"),
        "{refused}"
    );
    assert_eq!(stored(&app).await["autoRate"]["min"], json!(5.0));

    // Off: null, and the rate stays where the loop left it.
    input_holds(&browser, "#auto-min", "5").await;
    click(&browser, "#auto-rate").await;
    click(&browser, "#apply").await;
    let asked = confirmed(&browser, "turning the loop off").await;
    assert!(
        asked.contains(
            "Closed-loop admission (autoRate): 5–60/s · p95 ≤ 500 ms · errors ≤ 2% → off"
        ),
        "{asked}"
    );
    outcome(&browser, |t| t.contains("Applied")).await;
    assert_eq!(stored(&app).await["autoRate"], Value::Null);
    // The origin still reports: its figures stay, the loop's go.
    wait_for(&browser, "#auto-off", None, Duration::from_secs(5), |t| {
        t.contains("autoRate is off")
    })
    .await;
    assert_eq!(text_of(&browser, "#origin-p95").await, "50 ms");
    reporter.abort();
    crate::assert_accessible(&browser, "console closed loop").await;
    browser.close().await.unwrap();
}
