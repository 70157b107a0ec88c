//! The page for every shopper, in every state it has — waiting (with the room's
//! message, random order and too little stock), paused, offline, retrying, "Leave the line?",
//! left, the pre-queue's countdown, sold out, closed, no such room, checkout and the receipt —
//! in English and in Korean:
//! - **forced colours** (Windows high contrast, emulated with `forced-colors: active`): the
//!   progress bar's track, its fill and the connection sign each keep a border or a system colour
//!   that differs from the background (else they take the background's colour and vanish), and the
//!   sign's shape differs by state; screenshots `target/screenshots/forced-{state}-{lang}.png`;
//! - **200 % text** (the root's font size doubled) on phones 390 and 320 CSS px wide: nothing is
//!   wider than the screen (`scrollWidth <= clientWidth`, no element past its edge), no word is
//!   broken across two lines, and a figure box is at least 6 rem wide or takes its whole line
//!   (Korean is not squeezed to two syllables a line); screenshots
//!   `target/screenshots/large-text-{state}-{lang}-{width}.png`.

use std::time::Duration;

use fantoccini::Client;
use serde_json::{json, Value};
use vestibule_tests::chromium::{
    click, dist_dir, emulate_forced_colors, emulate_viewport, save_screenshot, shown_position,
    wait_for, wait_for_path, ChromeDriver,
};
use vestibule_tests::{Backend, LinkProxy, LinkState, TestApp};

/// Every state of the page, in the order they are visited.
const STATES: &[&str] = &[
    "waiting",
    "paused",
    "offline",
    "leave-confirm",
    "retrying",
    "left",
    "pre-queue",
    "sold-out",
    "closed",
    "not-found",
    "checkout",
    "receipt",
];

/// The states whose view has the progress bar and the connection line.
const WITH_BAR_AND_SIGN: &[&str] = &["waiting", "paused", "offline", "leave-confirm", "retrying"];

fn in_ms(ms: i64) -> String {
    let at = time::OffsetDateTime::now_utc() + time::Duration::milliseconds(ms);
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

/// A server with a room for each state, and a link proxy in front of it for "retrying".
struct Rooms {
    app: TestApp,
    proxy: LinkProxy,
}

async fn rooms() -> Rooms {
    let dist = dist_dir().to_string_lossy().to_string();
    let app = TestApp::spawn(
        Backend::Memory,
        &[
            "--static-dir",
            &dist,
            "--admission-rate",
            "50",
            "--rooms",
            "line,hold,soon,gone,shut,quit-en,quit-ko,shop-en,shop-ko",
        ],
    )
    .await;
    // 30 ahead, slow: an ETA range; a message, random order and too little stock add their lines.
    app.patch_room("line", json!({"paused": true})).await;
    for _ in 0..30 {
        app.join("line", None).await;
    }
    app.patch_room(
        "line",
        json!({
            "paused": false, "admissionRatePerSec": 0.01, "stock": 5, "queueingMethod": "random",
            "messageEn": "Sizes 42 to 44 of the Aurora running shoe are sold out; every other size is still available.",
            "messageKo": "오로라 러닝화 42~44 사이즈는 품절되었습니다. 다른 사이즈는 아직 구매하실 수 있습니다."
        }),
    )
    .await;
    app.patch_room("hold", json!({"paused": true})).await;
    for _ in 0..3 {
        app.join("hold", None).await;
    }
    app.patch_room(
        "soon",
        json!({"opensAt": in_ms(3_600_000), "prequeueOpensAt": in_ms(-1_000), "paused": true}),
    )
    .await;
    app.patch_room(
        "gone",
        json!({"soldOut": true,
               "soldOutMessageEn": "All 100 pairs of the Aurora 1 are gone. Thank you for waiting!",
               "soldOutMessageKo": "오로라 1 100켤레가 모두 판매되었습니다. 기다려 주셔서 감사합니다!"}),
    )
    .await;
    app.patch_room("shut", json!({"closed": true})).await;
    for lang in ["en", "ko"] {
        app.patch_room(&format!("quit-{lang}"), json!({"admissionRatePerSec": 0}))
            .await;
    }
    let proxy = LinkProxy::start(&app.base).await;
    Rooms { app, proxy }
}

async fn wait_attr(browser: &Client, css: &str, attribute: &str, value: &str) {
    wait_for(
        browser,
        css,
        Some(attribute),
        Duration::from_secs(20),
        |v| v == value,
    )
    .await;
}

/// Brings the browser to `state` in `lang`.
async fn visit(browser: &Client, rooms: &Rooms, state: &str, lang: &str) {
    let Rooms { app, proxy, .. } = rooms;
    let page = |room: &str| app.url(&format!("/?room={room}&lang={lang}&transport=poll"));
    match state {
        "waiting" | "offline" | "leave-confirm" => {
            browser.goto(&page("line")).await.unwrap();
            shown_position(browser).await;
            wait_for(
                browser,
                "#eta",
                Some("data-seconds-high"),
                Duration::from_secs(20),
                |s| !s.is_empty(),
            )
            .await;
            wait_for(
                browser,
                "#waiter-message",
                None,
                Duration::from_secs(5),
                |t| !t.is_empty(),
            )
            .await;
            if state == "offline" {
                browser
                    .execute("window.dispatchEvent(new Event('offline'));", vec![])
                    .await
                    .unwrap();
                wait_attr(browser, "#connection", "data-state", "offline").await;
            }
            if state == "leave-confirm" {
                click(browser, "#leave-line").await;
                wait_for(
                    browser,
                    "#leave-question",
                    None,
                    Duration::from_secs(5),
                    |t| !t.is_empty(),
                )
                .await;
            }
        }
        "paused" => {
            browser.goto(&page("hold")).await.unwrap();
            let place: u64 = shown_position(browser).await.parse().unwrap();
            wait_attr(browser, "#status", "data-room-state", "PAUSED").await;
            // As if the shopper had come in at twice the place: the bar is half full.
            browser
                .execute(
                    "var id = localStorage.getItem('vestibule:hold:ticket'); \
                     localStorage.setItem('vestibule:hold:start', id + ' ' + arguments[0]);",
                    vec![json!(place * 2)],
                )
                .await
                .unwrap();
            browser.refresh().await.unwrap();
            wait_attr(browser, "#progress", "aria-valuenow", "50").await;
        }
        "retrying" => {
            proxy.set(LinkState::Up);
            browser
                .goto(&proxy.url(&format!("/?room=line&lang={lang}&transport=poll")))
                .await
                .unwrap();
            shown_position(browser).await;
            proxy.set(LinkState::Down);
            wait_attr(browser, "#connection", "data-state", "retrying").await;
        }
        "left" => {
            browser.goto(&page(&format!("quit-{lang}"))).await.unwrap();
            shown_position(browser).await;
            click(browser, "#leave-line").await;
            click(browser, "#leave-confirm").await;
            wait_attr(browser, "#status", "data-status", "LEFT").await;
        }
        "pre-queue" => {
            browser.goto(&page("soon")).await.unwrap();
            wait_attr(browser, "#status", "data-status", "PRE_QUEUE").await;
            wait_for(
                browser,
                "#countdown-time",
                None,
                Duration::from_secs(5),
                |t| t.contains(':'),
            )
            .await;
        }
        "sold-out" => {
            browser.goto(&page("gone")).await.unwrap();
            wait_attr(browser, "#status", "data-room-state", "SOLD_OUT").await;
        }
        "closed" => {
            browser.goto(&page("shut")).await.unwrap();
            wait_attr(browser, "#status", "data-room-state", "CLOSED").await;
        }
        "not-found" => {
            browser.goto(&page("nosuch")).await.unwrap();
            wait_attr(browser, "#status", "data-room-state", "NOT_FOUND").await;
        }
        "checkout" => {
            browser.goto(&page(&format!("shop-{lang}"))).await.unwrap();
            wait_for_path(browser, "/checkout", Duration::from_secs(20)).await;
            wait_for(
                browser,
                "#place-order",
                None,
                Duration::from_secs(10),
                |t| !t.is_empty(),
            )
            .await;
        }
        "receipt" => {
            // Right after "checkout": the order is placed from there.
            click(browser, "#place-order").await;
            wait_attr(browser, "#checkout-result", "data-outcome", "ordered").await;
        }
        _ => unreachable!("{state}"),
    }
    // Let the view settle (a transition, the last re-render).
    tokio::time::sleep(Duration::from_millis(700)).await;
}

/// Undoes what `visit` did to the browser or the link, if anything.
async fn leave(browser: &Client, proxy: &LinkProxy, state: &str) {
    match state {
        "offline" => {
            browser
                .execute("window.dispatchEvent(new Event('online'));", vec![])
                .await
                .unwrap();
            wait_attr(browser, "#connection", "data-state", "live").await;
        }
        "leave-confirm" => click(browser, "#leave-cancel").await,
        "retrying" => proxy.set(LinkState::Up),
        _ => {}
    }
}

/// What the forced-colours check reads: whether forced colours are on, the page's background,
/// and for the track, the fill and the sign whether each is there and how it is drawn.
const FORCED_COLOURS_PROBE: &str = r#"
    const background = getComputedStyle(document.body).backgroundColor;
    const clear = c => c === 'transparent' || c === 'rgba(0, 0, 0, 0)';
    const drawn = el => {
      const cs = getComputedStyle(el);
      const border = ['Top', 'Right', 'Bottom', 'Left'].some(side =>
        parseFloat(cs['border' + side + 'Width']) > 0 && cs['border' + side + 'Style'] !== 'none'
          && cs['border' + side + 'Color'] !== background && !clear(cs['border' + side + 'Color']));
      const fill = cs.backgroundColor !== background && !clear(cs.backgroundColor);
      return { border, fill, background: cs.backgroundColor, borderColor: cs.borderTopColor,
               radius: cs.borderTopLeftRadius,
               shown: !el.closest('[hidden]') && el.getBoundingClientRect().height > 0 };
    };
    const part = css => { const el = document.querySelector(css); return el ? drawn(el) : null; };
    return {
      forced: matchMedia('(forced-colors: active)').matches,
      background,
      track: part('#progress'),
      fill: part('.progress-fill'),
      sign: part('#connection .dot'),
      state: (document.querySelector('#connection') || {}).dataset?.state || null,
    };
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_forced_colours_the_bar_its_fill_and_the_connection_sign_stay_visible() {
    let rooms = rooms().await;
    let driver = ChromeDriver::start();
    for lang in ["en", "ko"] {
        let profile = tempfile::tempdir().unwrap();
        let browser = driver.browser(profile.path(), "en-US").await;
        emulate_viewport(&browser, Some(390)).await;
        for &state in STATES {
            visit(&browser, &rooms, state, lang).await;
            emulate_forced_colors(&browser, true).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let probe = browser.execute(FORCED_COLOURS_PROBE, vec![]).await.unwrap();
            save_screenshot(&browser, &format!("forced-{state}-{lang}.png")).await;
            println!("forced colours, {state} ({lang}): {probe}");
            assert_eq!(probe["forced"], true, "{state} {lang}: {probe}");
            let must = WITH_BAR_AND_SIGN.contains(&state);
            for (part, needs) in [("track", "border"), ("fill", "fill"), ("sign", "either")] {
                let seen = &probe[part];
                if seen.is_null() || seen["shown"] == false && part != "fill" {
                    assert!(!must, "{state} {lang}: no {part} shown: {probe}");
                    continue;
                }
                let visible = match needs {
                    "border" => seen["border"] == true,
                    "fill" => seen["fill"] == true,
                    _ => seen["border"] == true || seen["fill"] == true,
                };
                assert!(
                    visible,
                    "{state} {lang}: the {part} has the background's colour and no border: {probe}"
                );
            }
            emulate_forced_colors(&browser, false).await;
            leave(&browser, &rooms.proxy, state).await;
        }
        browser.close().await.unwrap();
    }
}

/// The sign's shape tells the states apart without colour: a circle while live, a square while
/// the link is lost (and the words say it too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_sign_has_a_shape_for_each_state_not_only_a_colour() {
    let rooms = rooms().await;
    let driver = ChromeDriver::start();
    let profile = tempfile::tempdir().unwrap();
    let browser = driver.browser(profile.path(), "en-US").await;
    emulate_forced_colors(&browser, true).await;
    let mut shapes = Vec::new();
    for state in ["waiting", "offline"] {
        visit(&browser, &rooms, state, "en").await;
        let probe = browser.execute(FORCED_COLOURS_PROBE, vec![]).await.unwrap();
        let text = browser
            .execute(
                "return document.querySelector('#connection .connection-text').textContent",
                vec![],
            )
            .await
            .unwrap();
        assert!(
            text.as_str().is_some_and(|t| !t.trim().is_empty()),
            "{state}: no words for the link: {probe}"
        );
        shapes.push((
            probe["sign"]["radius"].clone(),
            probe["sign"]["fill"].clone(),
        ));
        leave(&browser, &rooms.proxy, state).await;
    }
    assert_ne!(
        shapes[0], shapes[1],
        "live and offline look alike: {shapes:?}"
    );
    browser.close().await.unwrap();
}

/// What the large-text check reads at the current size: the page's and the screen's widths,
/// elements past the screen's edge, words broken across lines, figure boxes narrower than
/// 6 rem that do not take their whole line.
const LARGE_TEXT_PROBE: &str = r#"
    const done = arguments[arguments.length - 1];
    const root = document.documentElement;
    root.style.fontSize = '200%';
    requestAnimationFrame(() => requestAnimationFrame(() => {
      const width = root.clientWidth;
      const rem = parseFloat(getComputedStyle(root).fontSize);
      const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
        + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '');
      const skip = el => el.closest('.visually-hidden, [hidden], noscript, head');
      const past = [];
      for (const el of document.body.querySelectorAll('*')) {
        if (skip(el)) continue;
        const r = el.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) continue;
        if (r.right > width + 0.5 || r.left < -0.5) past.push(name(el) + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
      }
      const broken = [];
      const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      while (walker.nextNode()) {
        const node = walker.currentNode;
        const parent = node.parentElement;
        if (!parent || skip(parent) || parent.closest('#order-id, #ticket-tag, code, script, style')) continue;
        const words = /[\p{L}\p{N}'’]+/gu;
        let m;
        while ((m = words.exec(node.data))) {
          if (m[0].length < 2) continue;
          const range = document.createRange();
          range.setStart(node, m.index);
          range.setEnd(node, m.index + m[0].length);
          const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
          if (lines.size > 1) broken.push(m[0]);
        }
      }
      const squeezed = [];
      for (const el of document.querySelectorAll('.stat, .countdown')) {
        if (skip(el)) continue;
        const w = el.getBoundingClientRect().width;
        const line = el.parentElement.getBoundingClientRect().width;
        if (w < 6 * rem - 1 && w < line - 1) squeezed.push(name(el) + ' ' + Math.round(w));
      }
      const result = { scrollWidth: root.scrollWidth, clientWidth: width,
                       bodyScrollWidth: document.body.scrollWidth, rem, past, broken, squeezed };
      root.style.fontSize = '';
      done(result);
    }));
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_200_percent_text_every_state_fits_phones_of_390_and_320_px_in_both_languages() {
    let rooms = rooms().await;
    let driver = ChromeDriver::start();
    let mut failures: Vec<String> = Vec::new();
    for lang in ["en", "ko"] {
        let profile = tempfile::tempdir().unwrap();
        let browser = driver.browser(profile.path(), "en-US").await;
        emulate_viewport(&browser, Some(390)).await;
        for &state in STATES {
            visit(&browser, &rooms, state, lang).await;
            for width in [390, 320] {
                emulate_viewport(&browser, Some(width)).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                let probe: Value = browser
                    .execute_async(LARGE_TEXT_PROBE, vec![])
                    .await
                    .unwrap();
                // The screenshot at 200 %, taken with the size the probe measured.
                browser
                    .execute("document.documentElement.style.fontSize = '200%';", vec![])
                    .await
                    .unwrap();
                save_screenshot(&browser, &format!("large-text-{state}-{lang}-{width}.png")).await;
                browser
                    .execute("document.documentElement.style.fontSize = '';", vec![])
                    .await
                    .unwrap();
                println!("200 % text, {state} ({lang}, {width} px): {probe}");
                assert_eq!(probe["clientWidth"], width, "{state} {lang}: {probe}");
                assert_eq!(probe["rem"].as_f64(), Some(32.0), "{state} {lang}: {probe}");
                let fits = probe["scrollWidth"].as_u64() <= probe["clientWidth"].as_u64()
                    && probe["bodyScrollWidth"].as_u64() <= probe["clientWidth"].as_u64();
                for (ok, what) in [
                    (fits, "wider than the screen"),
                    (
                        probe["past"] == json!([]),
                        "elements past the screen's edge",
                    ),
                    (probe["broken"] == json!([]), "words broken across lines"),
                    (probe["squeezed"] == json!([]), "figure boxes squeezed"),
                ] {
                    if !ok {
                        failures.push(format!("{state} ({lang}, {width} px): {what}: {probe}"));
                    }
                }
            }
            emulate_viewport(&browser, Some(390)).await;
            leave(&browser, &rooms.proxy, state).await;
        }
        browser.close().await.unwrap();
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
