//! The console after a reload, in headless Chromium against the real binary: a small sale made
//! through the API (four joins, one admitted, one order) shows in the room's sale summary
//! (joined 4, admitted 1, ordered 1, refreshed by itself); after a reload the charts show the
//! server's history at once (points read before the reload, drawn as soon as the room is shown)
//! and go on with the live stream, with no point drawn twice.
//! Screenshot: `console-summary.png`.

use std::time::{Duration, Instant};

use fantoccini::Client;
use serde_json::json;
use vestibule_shared::admin_events::FigureHistory;
use vestibule_shared::paths;
use vestibule_tests::chromium::{
    click, dist_dir, save_screenshot, text_of, wait_for, ChromeDriver,
};
use vestibule_tests::{Backend, TestApp, ADMIN_TOKEN};

use crate::console::{pick_room, signed_in_console};

const ROOM: &str = "main";

/// The first chart's drawing: `data-points`, `data-first-ms` and the x of every point of its
/// first line.
async fn first_chart(browser: &Client) -> (usize, Option<u64>, Vec<f64>) {
    // One script reads the count, the first time and the line together: read one by one, a
    // live point drawn in between makes them disagree.
    let read = browser
        .execute(
            "const chart = document.querySelector('.chart');
             const line = document.querySelector('.chart polyline');
             return [chart && chart.getAttribute('data-points'),
                     chart && chart.getAttribute('data-first-ms'),
                     line && line.getAttribute('points')];",
            vec![],
        )
        .await
        .expect("the chart read");
    let attr = |index: usize| read[index].as_str().unwrap_or_default().to_owned();
    let points = attr(0).parse().unwrap_or(0);
    let first_ms = attr(1).parse().ok();
    let xs = attr(2)
        .split_whitespace()
        .filter_map(|point| point.split_once(',')?.0.parse().ok())
        .collect();
    (points, first_ms, xs)
}

fn strictly_increasing(xs: &[f64]) -> bool {
    xs.windows(2).all(|pair| pair[0] < pair[1])
}

/// The server's history of the room: its points' times.
async fn server_history(app: &TestApp) -> Vec<u64> {
    let history: FigureHistory = app
        .client
        .get(app.url(&paths::admin_room_history(ROOM)))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("GET history")
        .json()
        .await
        .expect("history JSON");
    history.points.iter().map(|point| point.at_ms).collect()
}

/// Waits up to 10 s for the summary panel to show `joined` joins.
async fn summary_shows(browser: &Client, joined: &str) {
    wait_for(browser, "#sum-joined", None, Duration::from_secs(10), |t| {
        t == joined
    })
    .await;
}

async fn now_ms(browser: &Client) -> u64 {
    let now = browser.execute("return Date.now();", vec![]).await.unwrap();
    now.as_f64().expect("a number") as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_reload_the_console_shows_history_at_once_and_the_sale_summary() {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn(
        Backend::Memory,
        &[
            "--static-dir",
            &dist,
            "--rooms",
            ROOM,
            "--admission-rate",
            "5",
        ],
    )
    .await;
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = signed_in_console(&app, &driver, profile.path(), 1500).await;
    pick_room(&browser, ROOM).await;
    summary_shows(&browser, "0").await;

    // A small sale: one shopper admitted at once orders; then, paused, three wait in line.
    let (_, token) = app.admitted(ROOM).await;
    let (status, body) = app.order(ROOM, Some(&token)).await;
    assert!(status.is_success(), "order answered {status}: {body}");
    app.patch_room(ROOM, json!({"paused": true})).await;
    for _ in 0..3 {
        app.join(ROOM, None).await;
    }
    // The panel reads the summary again by itself (every 5 s).
    let refreshed = Instant::now();
    summary_shows(&browser, "4").await;
    println!("the summary showed the joins in {:?}", refreshed.elapsed());
    assert_eq!(text_of(&browser, "#sum-ordered").await, "1");
    assert_eq!(text_of(&browser, "#sum-admitted").await, "1");
    assert_eq!(text_of(&browser, "#sum-sold-out").await, "not sold out");

    // The server keeps a point every 5 s: wait for four, then reload.
    let deadline = Instant::now() + Duration::from_secs(30);
    while server_history(&app).await.len() < 4 {
        assert!(Instant::now() < deadline, "the server kept no history");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let kept = server_history(&app).await;
    let reloaded_at = now_ms(&browser).await;
    browser.refresh().await.expect("reload");
    // The tab kept its token: signed in at once; the operator picks the room again.
    pick_room(&browser, ROOM).await;
    let shown = Instant::now();
    // At once: the points from before the reload are drawn within 2 s of the room showing
    // (the live stream alone would have none older than the reload).
    let mut drawn = (0, None, Vec::new());
    while shown.elapsed() < Duration::from_secs(2) {
        drawn = first_chart(&browser).await;
        if drawn.1.is_some_and(|first| first < reloaded_at) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (points, first_ms, xs) = drawn;
    println!(
        "after the reload, in {:?}: {points} points, the first {} ms before it (server kept {})",
        shown.elapsed(),
        reloaded_at.saturating_sub(first_ms.unwrap_or(reloaded_at)),
        kept.len()
    );
    assert_eq!(
        first_ms,
        kept.first().copied(),
        "the chart begins with the history"
    );
    assert!(points >= kept.len(), "{points} points, {} kept", kept.len());
    assert_eq!(xs.len(), points);
    assert!(strictly_increasing(&xs), "a point drawn twice: {xs:?}");

    // The stream goes on from there, without drawing a point twice.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (later, later_first, xs) = first_chart(&browser).await;
    assert!(
        later >= points + 2,
        "the stream adds points: {points} → {later}"
    );
    assert_eq!(later_first, first_ms);
    assert!(strictly_increasing(&xs), "a point drawn twice: {xs:?}");
    summary_shows(&browser, "4").await;
    assert_eq!(text_of(&browser, "#sum-ordered").await, "1");
    assert!(text_of(&browser, "#sum-peak").await.parse::<u64>().unwrap() >= 3);

    let show = "document.querySelector('.charts').scrollIntoView(); \
                document.activeElement.blur(); return true;";
    browser.execute(show, vec![]).await.unwrap();
    save_screenshot(&browser, "console-summary.png").await;
    crate::assert_accessible(&browser, "console sale summary").await;

    // In Korean, the panel's words change and its counts stay.
    click(&browser, "#language").await;
    wait_for(
        &browser,
        "#summary-title",
        None,
        Duration::from_secs(5),
        |t| t == "판매 요약",
    )
    .await;
    assert_eq!(text_of(&browser, "#sum-sold-out").await, "품절 전");
    assert_eq!(text_of(&browser, "#sum-joined").await, "4");
    browser.close().await.unwrap();
}
