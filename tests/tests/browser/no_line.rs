//! An empty room and a short line in the browser: no wait without a line, and an ETA range in
//! both languages with one.

use super::*;

/// No wait when there is no line: in an empty room the page's one join is admitted and the page
/// goes straight to checkout. In a line the ETA is a range ("about 13–19 min"), in both languages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_room_goes_straight_to_checkout_and_a_line_shows_its_eta_range() {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn(Backend::Memory, &["--static-dir", &dist]).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "en-US").await;
    reach_checkout(&browser, &app.url("/?room=main&lang=en")).await;
    let metrics = app.metrics().await;
    let series = |name: &str| -> Vec<String> {
        metrics
            .lines()
            .filter(|line| line.starts_with(&format!("{name}{{")))
            .map(str::to_owned)
            .collect()
    };
    let joins = series("vestibule_joins_total");
    assert!(
        joins.len() == 1 && joins[0].contains("outcome=\"new\"") && joins[0].ends_with(" 1"),
        "one join: {joins:?}"
    );
    // The polls counter appears with the first poll: none, the join answered with the token.
    assert_eq!(series("vestibule_polls_total"), Vec::<String>::new());

    // A line: 30 ahead, 0.05/s → ETA 31 ÷ 0.05 × 1.2 = 744 s, high × 1.5 = 1116 s.
    app.patch_room("main", json!({"paused": true})).await;
    for _ in 0..30 {
        app.join("main", None).await;
    }
    app.patch_room(
        "main",
        json!({"paused": false, "admissionRatePerSec": 0.05}),
    )
    .await;
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "en-US").await;
    browser.goto(&app.url("/?room=main&lang=en")).await.unwrap();
    let high = wait_for(
        &browser,
        "#eta",
        Some("data-seconds-high"),
        Duration::from_secs(10),
        |s| !s.is_empty(),
    )
    .await;
    // 1116 s, or 1117 when 31 ÷ 0.05 × 1.2 × 1.5 lands a hair above in floating point.
    assert!(["1116", "1117"].contains(&high.as_str()), "{high}");
    assert_eq!(text_of(&browser, "#eta").await, "about 13–19 min");
    browser.goto(&app.url("/?room=main&lang=ko")).await.unwrap();
    let korean = wait_for(&browser, "#eta", None, Duration::from_secs(10), |t| {
        t.contains('분')
    })
    .await;
    assert_eq!(korean, "약 13~19분");
}
