//! Proof of work in the browser (docs/bots.md): the page joins a room
//! that asks for proof of work, says "Checking your browser…" while it solves, and the page
//! stays responsive meanwhile — a timer chain and `requestAnimationFrame` keep running, with no
//! gap of a quarter second, through a solve of at least a second.

use fantoccini::Client;
use serde_json::{json, Value};
use vestibule_tests::chromium::{dist_dir, shown_position, ChromeDriver};
use vestibule_tests::{Backend, TestApp};

/// Difficulty of the room: about 2^20 hashes, a second or more in the page on this box.
const DIFFICULTY: u8 = 20;

/// Installs counters: a 10 ms timer chain and animation frames, each noting the longest gap
/// between two of its runs while `#checking-browser` is shown, and how long it was shown.
const WATCH: &str = r#"
    const w = window.__watch = { timerGap: 0, frameGap: 0, frames: 0, ticks: 0,
                                 first: null, last: null, lastTick: null, lastFrame: null };
    const shown = () => document.getElementById('checking-browser') !== null;
    const tick = () => {
      const now = performance.now();
      if (shown()) {
        w.text = document.getElementById('checking-browser').textContent;
        if (w.first === null) w.first = now;
        w.last = now;
        if (w.lastTick !== null) w.timerGap = Math.max(w.timerGap, now - w.lastTick);
        w.ticks++;
        w.lastTick = now;
      } else {
        w.lastTick = null;
      }
      setTimeout(tick, 10);
    };
    const frame = (now) => {
      if (shown()) {
        if (w.lastFrame !== null) w.frameGap = Math.max(w.frameGap, now - w.lastFrame);
        w.frames++;
        w.lastFrame = now;
      } else {
        w.lastFrame = null;
      }
      requestAnimationFrame(frame);
    };
    tick();
    requestAnimationFrame(frame);
"#;

async fn watch(browser: &Client) -> Value {
    browser
        .execute("return window.__watch;", vec![])
        .await
        .expect("watch readable")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_solves_the_proof_of_work_without_freezing_and_joins() {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn(Backend::Memory, &["--static-dir", &dist]).await;
    app.patch_room(
        "main",
        json!({"paused": true, "proofOfWorkDifficulty": DIFFICULTY}),
    )
    .await;
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "en-US").await;
    // A solve can be short by luck (the work is geometric); a few fresh shoppers give one of a
    // second or more to watch.
    let mut watched = None;
    for attempt in 0..6 {
        browser
            .goto(&app.url("/?room=main&lang=en"))
            .await
            .expect("page loads");
        browser
            .execute(WATCH, vec![])
            .await
            .expect("watch installs");
        let position = shown_position(&browser).await;
        assert_eq!(position, (attempt + 1).to_string(), "one place per solve");
        let seen = watch(&browser).await;
        let shown_ms = match (seen["first"].as_f64(), seen["last"].as_f64()) {
            (Some(first), Some(last)) => last - first,
            _ => 0.0,
        };
        eprintln!("attempt {attempt}: checking shown {shown_ms:.0} ms, {seen}");
        if shown_ms >= 1_000.0 {
            watched = Some((shown_ms, seen));
            break;
        }
        // Another shopper, at one more bit (a fast, idle box solves 20 bits in a few hundred ms
        // or less): forget this one's ticket and key.
        let difficulty = DIFFICULTY + 1 + attempt as u8;
        app.patch_room("main", json!({"proofOfWorkDifficulty": difficulty}))
            .await;
        browser
            .execute("localStorage.clear(); sessionStorage.clear();", vec![])
            .await
            .expect("storage cleared");
    }
    let (shown_ms, seen) = watched.expect("one of six solves took a second or more");
    let timer_gap = seen["timerGap"].as_f64().unwrap();
    let ticks = seen["ticks"].as_f64().unwrap();
    let frames = seen["frames"].as_f64().unwrap();
    assert!(
        timer_gap < 250.0,
        "a timer waited {timer_gap} ms while solving"
    );
    assert!(
        ticks >= shown_ms / 100.0,
        "{ticks} timer runs in {shown_ms} ms"
    );
    assert!(
        frames >= shown_ms / 250.0,
        "{frames} frames in {shown_ms} ms"
    );
    let waiting = app.get_json("/api/v1/rooms/main").await.1["waiting"].clone();
    assert!(waiting.as_u64().unwrap() >= 1);
    assert_eq!(
        app.metric(
            "vestibule_joins_refused_total{room=\"main\",reason=\"proof_of_work\",kind=\"reused\"}"
        )
        .await,
        0.0
    );
    assert_eq!(seen["text"], "Checking your browser…");
}

/// BENCHMARKS.md "Issue 16": the page's solve time at each difficulty in this box's Chromium
/// (time "Checking your browser…" is shown, from the first to the last 10 ms timer run that saw
/// it; solves under a timer period read as 0). Run by hand:
/// `cargo test -p vestibule-tests --test browser page_solve_times -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check: run by hand for BENCHMARKS.md"]
async fn page_solve_times() {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn(Backend::Memory, &["--static-dir", &dist]).await;
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "en-US").await;
    println!("| bits | solves | mean ms | max ms |");
    for bits in [12u8, 14, 16, 18, 20, 22] {
        app.patch_room(
            "main",
            json!({"paused": true, "proofOfWorkDifficulty": bits}),
        )
        .await;
        let solves = if bits >= 22 { 4 } else { 8 };
        let mut times = Vec::new();
        for _ in 0..solves {
            browser
                .execute("localStorage.clear(); sessionStorage.clear();", vec![])
                .await
                .ok();
            browser
                .goto(&app.url("/?room=main&lang=en"))
                .await
                .expect("page loads");
            browser
                .execute(WATCH, vec![])
                .await
                .expect("watch installs");
            shown_position(&browser).await;
            let seen = watch(&browser).await;
            let shown = match (seen["first"].as_f64(), seen["last"].as_f64()) {
                (Some(first), Some(last)) => last - first,
                _ => 0.0,
            };
            times.push(shown);
        }
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        let max = times.iter().copied().fold(0.0, f64::max);
        println!("| {bits} | {} | {mean:.0} | {max:.0} |", times.len());
    }
}
