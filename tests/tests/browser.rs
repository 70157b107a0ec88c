//! The waiting-room page in Debian's headless Chromium (chromedriver + fantoccini), against the
//! real binary serving the release build in `dist/`.
//!
//! For each transport: the page joins a paused room and shows position and ETA; a reload keeps
//! the ticket and place; the room resumes through the admin API; the page reaches checkout by
//! itself and the order succeeds. The server's per-ticket poll log shows the page polls exactly by
//! `nextPollAfterMs` (within 20 %) and not at all over SSE. Screenshots go to
//! `target/screenshots/`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use vestibule_tests::{Backend, TestApp};

/// The workspace root (this crate lives in `tests/`).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn dist_dir() -> PathBuf {
    let dist = workspace_root().join("dist");
    assert!(
        dist.join("index.html").is_file(),
        "{} has no built page: run scripts/build-page.sh (scripts/test.sh does)",
        dist.display()
    );
    dist
}

fn screenshot_dir() -> PathBuf {
    let dir = workspace_root().join("target").join("screenshots");
    std::fs::create_dir_all(&dir).expect("target/screenshots");
    dir
}

/// A chromedriver process on a free port, killed on drop.
struct ChromeDriver {
    child: Child,
    port: u16,
}

impl ChromeDriver {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "/usr/bin/chromedriver (scripts/setup-tools.sh --test installs chromium-driver)",
            );
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { child, port }
    }

    async fn browser(&self, user_data_dir: &Path, lang: &str) -> Client {
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=430,900",
                    format!("--lang={lang}"),
                    format!("--user-data-dir={}", user_data_dir.display()),
                ],
                // What navigator.language reports (the page's default language).
                "prefs": { "intl.accept_languages": lang },
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("a Chromium session")
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the element's text (or attribute) satisfies `done`; returns it.
async fn wait_for(
    browser: &Client,
    css: &str,
    attribute: Option<&str>,
    timeout: Duration,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(element) = browser.find(Locator::Css(css)).await {
            let value = match attribute {
                Some(name) => element.attr(name).await.ok().flatten(),
                None => element.text().await.ok(),
            };
            if let Some(value) = value {
                if done(&value) {
                    return value;
                }
                last = value;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{css} {attribute:?} never matched; last value {last:?}");
}

async fn stored_ticket(browser: &Client) -> String {
    browser
        .execute(
            "return localStorage.getItem('vestibule:main:ticket');",
            vec![],
        )
        .await
        .expect("script runs")
        .as_str()
        .expect("the page stored its ticket id")
        .to_owned()
}

/// The SHA-256 tag the server logs for a ticket (first 12 hex digits).
fn log_tag(ticket_id: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(ticket_id.as_bytes())
        .iter()
        .take(6)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// One `vestibule::poll_log` line: (seconds since midnight UTC, message, hint).
fn poll_log(log: &str, tag: &str) -> Vec<(f64, String, Option<u64>)> {
    log.lines()
        .filter(|line| {
            line.contains("poll_log")
                || line.contains("ticket polled")
                || line.contains("ticket stream opened")
        })
        .filter(|line| line.contains(&format!("ticket={tag}")))
        .filter_map(|line| {
            // 2026-11-30T00:14:01.338964Z DEBUG …
            let time = line.split_whitespace().next()?;
            let clock = time.split('T').nth(1)?.trim_end_matches('Z');
            let mut parts = clock.split(':');
            let h: f64 = parts.next()?.parse().ok()?;
            let m: f64 = parts.next()?.parse().ok()?;
            let s: f64 = parts.next()?.parse().ok()?;
            let message = if line.contains("ticket polled") {
                "polled"
            } else {
                "stream"
            };
            let hint = line
                .split("next_poll_after_ms=")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok());
            Some((h * 3600.0 + m * 60.0 + s, message.to_owned(), hint))
        })
        .collect()
}

async fn sale_through_the_page(transport: &str) {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn_logging(
        None,
        &["--static-dir", &dist, "--admission-rate", "50"],
        "info,vestibule::poll_log=debug",
    )
    .await;
    app.patch_room("main", json!({"paused": true})).await;
    // Two shoppers ahead of the browser.
    app.join("main", None).await;
    app.join("main", None).await;

    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "en-US").await;
    browser
        .goto(&app.url(&format!("/?room=main&transport={transport}&lang=en")))
        .await
        .expect("page loads");
    let position = wait_for(&browser, "#position", None, Duration::from_secs(20), |t| {
        !t.is_empty()
    })
    .await;
    assert_eq!(position, "3", "the page took the third place");
    let eta = wait_for(&browser, "#eta", None, Duration::from_secs(5), |t| {
        !t.is_empty()
    })
    .await;
    wait_for(
        &browser,
        "#status",
        Some("data-room-state"),
        Duration::from_secs(5),
        |s| s == "PAUSED",
    )
    .await;
    wait_for(
        &browser,
        "#connection",
        Some("data-transport"),
        Duration::from_secs(5),
        |t| t == transport,
    )
    .await;
    println!("{transport}: paused room shows position {position}, ETA {eta:?}");
    let ticket = stored_ticket(&browser).await;

    // A slow open room: a real ETA in words, the place still 3.
    app.patch_room(
        "main",
        json!({"paused": false, "admissionRatePerSec": 0.001}),
    )
    .await;
    let eta = wait_for(
        &browser,
        "#eta",
        Some("data-seconds"),
        Duration::from_secs(15),
        |s| !s.is_empty(),
    )
    .await;
    let eta_words = browser
        .find(Locator::Css("#eta"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(eta, "3600", "3 ÷ 0.001/s × 1.2 = 3600 s");
    assert!(eta_words.chars().any(|c| c.is_ascii_digit()), "{eta_words}");

    // Reload while waiting: same ticket, same place.
    browser.refresh().await.unwrap();
    let position = wait_for(&browser, "#position", None, Duration::from_secs(20), |t| {
        !t.is_empty()
    })
    .await;
    assert_eq!(position, "3");
    assert_eq!(
        stored_ticket(&browser).await,
        ticket,
        "a reload keeps the ticket"
    );
    let reloaded = Instant::now();
    if transport == "poll" {
        std::fs::write(
            screenshot_dir().join("waiting-en.png"),
            browser.screenshot().await.unwrap(),
        )
        .unwrap();
    }
    // Watch the transport for a while: polls land exactly by their hints; SSE makes none.
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(reloaded.elapsed())).await;
    let log = poll_log(&app.log(), &log_tag(&ticket));
    match transport {
        "poll" => {
            let polls: Vec<_> = log.iter().filter(|(_, m, _)| m == "polled").collect();
            let recent: Vec<_> = polls.iter().rev().take(4).rev().collect();
            assert!(
                recent.len() >= 3,
                "only {} polls in 10 s: {log:?}",
                recent.len()
            );
            for pair in recent.windows(2) {
                let (t0, _, hint) = pair[0];
                let (t1, _, _) = pair[1];
                let gap_ms = (t1 - t0) * 1000.0;
                let hint = hint.expect("the poll log gives the hint") as f64;
                println!("poll gap {gap_ms:.0} ms for hint {hint:.0} ms");
                assert!(
                    (gap_ms - hint).abs() <= 0.2 * hint,
                    "gap {gap_ms:.0} ms vs hint {hint} ms"
                );
            }
        }
        _ => {
            let opened = log
                .iter()
                .rposition(|(_, m, _)| m == "stream")
                .expect("the page opened a stream");
            let polls_after = log[opened..]
                .iter()
                .filter(|(_, m, _)| m == "polled")
                .count();
            assert_eq!(polls_after, 0, "SSE mode polled: {log:?}");
            println!(
                "sse: 0 polls while the stream was open ({} poll-log lines for this ticket)",
                log.len()
            );
        }
    }

    // Resume: the page goes to checkout by itself and the order succeeds.
    app.patch_room("main", json!({"admissionRatePerSec": 50}))
        .await;
    let outcome_ready = Instant::now();
    let url = loop {
        let url = browser.current_url().await.unwrap();
        if url.path() == "/checkout" {
            break url;
        }
        assert!(
            outcome_ready.elapsed() < Duration::from_secs(30),
            "still on {url}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!("{transport}: at {url} after {:?}", outcome_ready.elapsed());
    let button = wait_for(
        &browser,
        "#place-order",
        None,
        Duration::from_secs(10),
        |t| !t.is_empty(),
    )
    .await;
    assert!(!button.is_empty());
    browser
        .find(Locator::Css("#place-order"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let outcome = wait_for(
        &browser,
        "#checkout-result",
        Some("data-outcome"),
        Duration::from_secs(10),
        |o| !o.is_empty() && o != "pending",
    )
    .await;
    assert_eq!(outcome, "ordered");
    if transport == "poll" {
        std::fs::write(
            screenshot_dir().join("checkout-en.png"),
            browser.screenshot().await.unwrap(),
        )
        .unwrap();
    }
    assert_eq!(
        app.poll("main", &ticket).await.status,
        vestibule_shared::TicketState::Completed
    );
    browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shopper_waits_and_checks_out_with_polling() {
    sale_through_the_page("poll").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shopper_waits_and_checks_out_with_server_sent_events() {
    sale_through_the_page("sse").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_view_speaks_korean_and_a_shopper_can_leave() {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn(
        Backend::Memory,
        &["--static-dir", &dist, "--admission-rate", "0.01"],
    )
    .await;
    for _ in 0..41 {
        app.join("main", None).await;
    }
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "ko-KR").await;
    // No ?lang: the browser's language decides.
    browser.goto(&app.url("/?room=main")).await.unwrap();
    let position = wait_for(&browser, "#position", None, Duration::from_secs(20), |t| {
        !t.is_empty()
    })
    .await;
    assert_eq!(position, "42");
    let lang = browser
        .execute("return document.documentElement.lang;", vec![])
        .await
        .unwrap();
    assert_eq!(lang, "ko");
    let text = browser
        .find(Locator::Css("main"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.chars().any(|c| ('\u{AC00}'..='\u{D7A3}').contains(&c)),
        "no Hangul on the page: {text}"
    );
    std::fs::write(
        screenshot_dir().join("waiting-ko.png"),
        browser.screenshot().await.unwrap(),
    )
    .unwrap();
    // Leaving gives the place up on the server and offers to join again.
    browser
        .find(Locator::Css("#leave-line"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(
        &browser,
        "#status",
        Some("data-status"),
        Duration::from_secs(10),
        |s| s == "LEFT",
    )
    .await;
    browser
        .find(Locator::Css("#join-again"))
        .await
        .expect("a way back into the line");
    assert_eq!(app.get_json("/api/v1/rooms/main").await.1["waiting"], 41);
    // Checkout without a token says so and offers no order button, only the way back.
    browser
        .goto(&app.url("/checkout?room=main&lang=en"))
        .await
        .unwrap();
    wait_for(&browser, "#no-token", None, Duration::from_secs(10), |t| {
        !t.is_empty()
    })
    .await;
    let title = browser
        .find(Locator::Css("#checkout-title"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!title.contains("You're in"), "{title}");
    let button = browser.find(Locator::Css("#place-order")).await.unwrap();
    assert!(
        !button.is_displayed().await.unwrap(),
        "an order button without a token"
    );
    browser.close().await.unwrap();
}
