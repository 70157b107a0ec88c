//! Sale day end to end, as the people in it live it, in headless Chromium against the real
//! binary: the operator creates a drop in the console (pre-queue 20 s ahead, the sale 20 s after
//! it, stock 5, names and sold-out messages in both languages); two shoppers (one reading
//! Korean, one English) open the page before the pre-queue and see the countdown, are in the
//! pre-queue by themselves when it opens, and are placed by the draw at the opening with 60 other
//! shoppers; the operator watches the figures move, lowers the rate and posts a message that
//! reaches the waiting pages; every admitted shopper orders until the stock runs out; the pages
//! still waiting show the room's sold-out message, a new visitor sees it too in either language,
//! and the console's sale summary counts 62 joined, 5 ordered, sold out.

use std::time::{Duration, Instant};

use fantoccini::Client;
use serde_json::json;
use vestibule_shared::TicketState;
use vestibule_tests::chromium::{
    click, dist_dir, save_screenshot, stored_ticket_of, text_of, wait_for, wait_for_script,
    ChromeDriver,
};
use vestibule_tests::{Backend, TestApp};

use crate::console::{accept_confirmation, fill, signed_in_console};

const ROOM: &str = "drop-day";
const SOLD_OUT_EN: &str = "All 5 pairs are gone. Thank you for waiting!";
const SOLD_OUT_KO: &str = "5켤레가 모두 판매되었습니다. 기다려 주셔서 감사합니다!";
const MESSAGE_EN: &str = "Limit one pair per shopper";
const MESSAGE_KO: &str = "1인 1켤레 한정";
/// Shoppers joining through the API during the pre-queue, besides the two pages.
const CROWD: usize = 60;

/// The browser's local `datetime-local` value `secs` from now, to the second.
async fn local_in_secs(browser: &Client, secs: i64) -> String {
    let script = "const d = new Date(Date.now() + arguments[0] * 1000); \
                  return new Date(d - d.getTimezoneOffset() * 60000).toISOString().slice(0, 19);";
    let value = browser.execute(script, vec![json!(secs)]).await.unwrap();
    value.as_str().expect("a string").to_owned()
}

/// A shopper's page in `lang`, opened on the room.
async fn shopper(
    app: &TestApp,
    driver: &ChromeDriver,
    profile: &std::path::Path,
    lang: &str,
) -> Client {
    let browser = driver.browser(profile, "en-US").await;
    browser
        .goto(&app.url(&format!("/?room={ROOM}&lang={lang}")))
        .await
        .expect("the page loads");
    browser
}

/// The page's ticket state (`#status[data-status]`) once it satisfies `ok`.
async fn page_state(browser: &Client, timeout: Duration, ok: impl Fn(&str) -> bool) -> String {
    wait_for(browser, "#status", Some("data-status"), timeout, ok).await
}

/// Orders for every admitted ticket of `tickets` not yet served (the page's tickets too: a
/// shopper admitted checks out); returns how many orders were taken.
async fn order_admitted(app: &TestApp, tickets: &mut Vec<String>) -> usize {
    let mut ordered = 0;
    let mut still = Vec::new();
    for ticket in tickets.drain(..) {
        let status = app.poll(ROOM, &ticket).await;
        match (status.status, status.entry_token.as_deref()) {
            (TicketState::TokenIssued, Some(token)) => {
                let (code, body) = app.order(ROOM, Some(token)).await;
                if code.is_success() {
                    ordered += 1;
                } else {
                    println!("order refused {code}: {body}");
                }
            }
            (TicketState::SoldOut, _) => {}
            _ => still.push(ticket),
        }
    }
    *tickets = still;
    ordered
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sale_day_from_the_consoles_schedule_to_the_summary_in_both_languages() {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn(Backend::Memory, &["--static-dir", &dist, "--rooms", "main"]).await;
    let driver = ChromeDriver::start();
    let console_profile = tempfile::tempdir().unwrap();
    let console = signed_in_console(&app, &driver, console_profile.path(), 1600).await;

    // The operator creates the drop: pre-queue in 20 s, the sale 20 s later, stock 5, 2/s.
    let (prequeue, opens) = (
        local_in_secs(&console, 20).await,
        local_in_secs(&console, 40).await,
    );
    let created = Instant::now();
    fill(&console, "#new-room", ROOM).await;
    click(&console, ".create-settings summary").await;
    for (css, value) in [
        ("#new-display-name-en", "Drop Day"),
        ("#new-display-name-ko", "드롭 데이"),
        ("#new-prequeue-opens-at", prequeue.as_str()),
        ("#new-opens-at", opens.as_str()),
        ("#new-stock", "5"),
        ("#new-rate", "2"),
        ("#new-sold-out-message-en", SOLD_OUT_EN),
        ("#new-sold-out-message-ko", SOLD_OUT_KO),
    ] {
        fill(&console, css, value).await;
    }
    click(&console, ".create button[type=submit]").await;
    accept_confirmation(&console, "create").await;
    let schedule = wait_for(&console, "#schedule", None, Duration::from_secs(10), |t| {
        t.starts_with("Pre-queue opens") && t.contains("· Sale opens")
    })
    .await;
    println!("console: {schedule}");
    let prequeue_at = created + Duration::from_secs(20);
    let opens_at = created + Duration::from_secs(40);

    // Two shoppers arrive before the pre-queue: the countdown, in their language, by name.
    let profiles = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut pages = Vec::new();
    for (profile, (lang, name, opens_word)) in profiles.iter().zip([
        ("ko", "드롭 데이", " 오픈 ("),
        ("en", "Drop Day", "Opens at "),
    ]) {
        let page = shopper(&app, &driver, profile.path(), lang).await;
        wait_for(
            &page,
            "#status",
            Some("data-room-state"),
            Duration::from_secs(10),
            |s| s == "NOT_OPEN",
        )
        .await;
        let label = text_of(&page, "#countdown-label").await;
        assert!(label.contains(opens_word), "{lang}: {label}");
        wait_for(&page, "#room-name", None, Duration::from_secs(5), |t| {
            t == name
        })
        .await;
        save_screenshot(&page, &format!("sale-day-countdown-{lang}.png")).await;
        pages.push((lang, page));
    }
    assert!(
        Instant::now() < prequeue_at,
        "the pages must load before the pre-queue opens"
    );

    // The pre-queue opens: both pages are in it by themselves; the crowd joins too.
    for (lang, page) in &pages {
        let left = prequeue_at.saturating_duration_since(Instant::now());
        page_state(page, left + Duration::from_secs(6), |s| s == "PRE_QUEUE").await;
        println!(
            "{lang}: in the pre-queue {:?} after it opened",
            prequeue_at.elapsed()
        );
    }
    let mut tickets = Vec::new();
    for _ in 0..CROWD {
        let (code, status) = app.join(ROOM, None).await;
        assert_eq!((code.as_u16(), status.status), (201, TicketState::PreQueue));
        tickets.push(status.ticket_id);
    }
    for (_, page) in &pages {
        tickets.push(stored_ticket_of(page, ROOM).await);
    }
    assert!(
        Instant::now() < opens_at,
        "the crowd joined before the opening"
    );

    // The opening: the draw places everyone; the console's figures move.
    for (lang, page) in &pages {
        let left = opens_at.saturating_duration_since(Instant::now());
        let state = page_state(page, left + Duration::from_secs(8), |s| s != "PRE_QUEUE").await;
        println!("{lang}: {state} {:?} after the opening", opens_at.elapsed());
        assert!(
            matches!(state.as_str(), "WAITING" | "TOKEN_ISSUED"),
            "{lang}: {state}"
        );
    }
    let waiting = wait_for(
        &console,
        "#fig-waiting",
        None,
        Duration::from_secs(10),
        // "57 people": the number first.
        |t| {
            let number = t.split_whitespace().next().unwrap_or_default();
            number.parse::<u64>().is_ok_and(|n| n > 0)
        },
    )
    .await;
    println!("console: {waiting} waiting after the draw");

    // The operator lowers the rate and posts a message to waiters in both languages.
    fill(&console, "#rate", "1").await;
    fill(&console, "#message-en", MESSAGE_EN).await;
    fill(&console, "#message-ko", MESSAGE_KO).await;
    click(&console, "#apply").await;
    accept_confirmation(&console, "the rate and the message").await;
    let outcome = wait_for(
        &console,
        "#change-outcome",
        None,
        Duration::from_secs(10),
        |t| t.contains("Applied") && t.contains("2/s → 1/s"),
    )
    .await;
    println!("console: {outcome}");

    // Waiting pages get the message first (nobody orders yet, and with stock 5 admission stops
    // at 5 tokens out, so the line stays put until each page has heard, whatever its poll
    // hint); then everyone admitted orders until the stock is gone.
    let mut ordered = 0;
    let mut message_seen = Vec::new();
    let heard_by = Instant::now() + Duration::from_secs(40);
    let mut ordering = false;
    let deadline = Instant::now() + Duration::from_secs(100);
    while ordered < 5 && Instant::now() < deadline {
        if ordering {
            ordered += order_admitted(&app, &mut tickets).await;
        }
        let mut unheard = 0;
        for (lang, page) in &pages {
            let state = text_of_attr(page, "#status", "data-status").await;
            if state == "WAITING" && !message_seen.contains(lang) {
                let shown = text_of(page, "#waiter-message").await;
                let wanted = if *lang == "ko" {
                    MESSAGE_KO
                } else {
                    MESSAGE_EN
                };
                if shown == wanted {
                    message_seen.push(*lang);
                } else {
                    unheard += 1;
                }
            }
        }
        ordering = ordering || unheard == 0 || Instant::now() > heard_by;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(ordered, 5, "the stock of 5 was ordered");
    println!("messages seen by {message_seen:?}");

    // Sold out: every page still waiting shows the room's message in its language.
    let mut waited_to_the_end = 0;
    for (lang, page) in &pages {
        let state = outcome_of(page, Duration::from_secs(10)).await;
        if state != "SOLD_OUT" {
            println!("{lang}: admitted before the stock ran out ({state})");
            continue;
        }
        waited_to_the_end += 1;
        assert!(
            message_seen.contains(lang),
            "{lang}: the waiter message never showed"
        );
        let wanted = if *lang == "ko" {
            SOLD_OUT_KO
        } else {
            SOLD_OUT_EN
        };
        assert_eq!(text_of(page, "#status .detail").await, wanted, "{lang}");
        save_screenshot(page, &format!("sale-day-sold-out-{lang}.png")).await;
    }
    // 2 of 62 in a draw for 5 units: both admitted is a 1-in-190 draw.
    assert!(waited_to_the_end >= 1, "no page waited to the end");

    // A new visitor, in either language, gets the room's own words.
    for (lang, wanted) in [("ko", SOLD_OUT_KO), ("en", SOLD_OUT_EN)] {
        let profile = tempfile::tempdir().unwrap();
        let page = shopper(&app, &driver, profile.path(), lang).await;
        wait_for(
            &page,
            "#status",
            Some("data-room-state"),
            Duration::from_secs(10),
            |s| s == "SOLD_OUT",
        )
        .await;
        assert_eq!(
            text_of(&page, "#status .detail").await,
            wanted,
            "new visitor ({lang})"
        );
        page.close().await.unwrap();
    }

    // The console: stock 0, sold 5, sold out, and the summary's counts.
    wait_for(&console, "#fig-sold", None, Duration::from_secs(10), |t| {
        t == "5"
    })
    .await;
    wait_for(&console, "#fig-state", None, Duration::from_secs(10), |t| {
        t == "Sold out"
    })
    .await;
    let joined = wait_for(
        &console,
        "#sum-joined",
        None,
        Duration::from_secs(10),
        |t| t == (CROWD + 2).to_string(),
    )
    .await;
    // The summary's counts come with the figures a second apart: wait for the orders too.
    let ordered_shown = wait_for(
        &console,
        "#sum-ordered",
        None,
        Duration::from_secs(10),
        |t| t == "5",
    )
    .await;
    let sold_out_at = text_of(&console, "#sum-sold-out").await;
    assert!(
        sold_out_at.contains(':'),
        "sold out at a time: {sold_out_at}"
    );
    println!("summary: joined {joined}, ordered {ordered_shown}, sold out at {sold_out_at}");
    let top = "window.scrollTo(0, 0); document.activeElement.blur(); return true;";
    console.execute(top, vec![]).await.unwrap();
    save_screenshot(&console, "sale-day-console.png").await;
    for (_, page) in pages {
        page.close().await.unwrap();
    }
    console.close().await.unwrap();
}

/// The attribute `attr` of the first `css` element now ("" when absent).
async fn text_of_attr(browser: &Client, css: &str, attr: &str) -> String {
    let script = "const e = document.querySelector(arguments[0]); \
                  return e ? (e.getAttribute(arguments[1]) || '') : '';";
    let value = browser
        .execute(script, vec![json!(css), json!(attr)])
        .await
        .unwrap();
    value.as_str().unwrap_or_default().to_owned()
}

/// How a shopper's page ended the sale: its ticket state once final (`SOLD_OUT`,
/// `TOKEN_ISSUED`, `COMPLETED`), or `LEFT_FOR_CHECKOUT` once an admitted page has gone on to the
/// checkout page (two seconds after its turn), where the waiting room's `#status` is no more.
///
/// # Panics
/// When neither shows within `timeout`.
async fn outcome_of(page: &Client, timeout: Duration) -> String {
    let script = "const e = document.querySelector('#status'); \
                  if (!e && location.pathname !== '/') return 'LEFT_FOR_CHECKOUT'; \
                  return e ? (e.getAttribute('data-status') || '') : '';";
    wait_for_script(page, (script, vec![]), timeout, |state| {
        matches!(
            state,
            "SOLD_OUT" | "TOKEN_ISSUED" | "COMPLETED" | "LEFT_FOR_CHECKOUT"
        )
    })
    .await
}
