//! Debian's headless Chromium driven over WebDriver (chromedriver + fantoccini), and the waits
//! the page tests share (`tests/tests/browser.rs`, `tests/tests/mounted_page.rs`), the DevTools
//! protocol commands they need ([`cdp`]: forced colours, a phone's viewport) and axe-core
//! ([`assert_accessible`]).

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use crate::{free_port, workspace_root, ChildGuard};

/// The built page (`dist/`, with `index.html`).
///
/// # Panics
/// When it is not built: run `scripts/build-page.sh` (scripts/test.sh does).
pub fn dist_dir() -> PathBuf {
    let dist = workspace_root().join("dist");
    assert!(
        dist.join("index.html").is_file(),
        "{} has no built page: run scripts/build-page.sh (scripts/test.sh does)",
        dist.display()
    );
    dist
}

/// `target/screenshots/` (created), where the page tests save their screenshots.
pub fn screenshot_dir() -> PathBuf {
    let dir = workspace_root().join("target").join("screenshots");
    std::fs::create_dir_all(&dir).expect("target/screenshots");
    dir
}

/// A chromedriver process on a free port, killed on drop with the Chromium it started.
pub struct ChromeDriver {
    _child: ChildGuard,
    port: u16,
}

impl ChromeDriver {
    /// Starts `/usr/bin/chromedriver` and waits (up to 15 s) until it listens.
    ///
    /// # Panics
    /// When it is not installed (`scripts/setup-tools.sh --test` installs it) or never listens.
    pub fn start() -> Self {
        let port = free_port().expect("a free port");
        // Its own process group, so that dropping it also ends the Chromium it started.
        let child = Command::new("/usr/bin/chromedriver")
            .process_group(0)
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
        Self {
            _child: ChildGuard::with_group(child),
            port,
        }
    }

    /// A headless Chromium session with its profile in `user_data_dir` and `lang` as the
    /// browser's language (`navigator.language`, e.g. `"ko-KR"`).
    ///
    /// # Panics
    /// When no session can be created.
    pub async fn browser(&self, user_data_dir: &Path, lang: &str) -> Client {
        self.browser_with(user_data_dir, lang, &[], json!({})).await
    }

    /// [`ChromeDriver::browser`] with more command-line `args` (e.g.
    /// `--host-resolver-rules=MAP shop.test 127.0.0.1`) and profile `prefs` (e.g.
    /// `{"profile.cookie_controls_mode": 1}`: third-party cookies blocked).
    ///
    /// # Panics
    /// When no session can be created.
    pub async fn browser_with(
        &self,
        user_data_dir: &Path,
        lang: &str,
        args: &[&str],
        prefs: serde_json::Value,
    ) -> Client {
        let mut all_prefs = json!({ "intl.accept_languages": lang });
        if let (Some(all), Some(more)) = (all_prefs.as_object_mut(), prefs.as_object()) {
            all.extend(more.clone());
        }
        let mut all_args = vec![
            "--headless".to_owned(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=430,900".into(),
            format!("--lang={lang}"),
            format!("--user-data-dir={}", user_data_dir.display()),
        ];
        all_args.extend(args.iter().map(|arg| (*arg).to_owned()));
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": "/usr/bin/chromium",
                "args": all_args,
                // `intl.accept_languages`: what navigator.language reports (the page's default
                // language).
                "prefs": all_prefs,
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

/// Waits until `script` (run with `args`; it returns a string, or null while there is nothing
/// to read) returns a value that satisfies `done`; returns it. A script that fails (a
/// navigation under way) is run again.
///
/// # Panics
/// When no value does within `timeout` (with the last value seen).
pub async fn wait_for_script(
    browser: &Client,
    (script, args): (&str, Vec<Value>),
    timeout: Duration,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + timeout;
    let mut last = None;
    while Instant::now() < deadline {
        if let Ok(value) = browser.execute(script, args.clone()).await {
            if let Some(value) = value.as_str() {
                if done(value) {
                    return value.to_owned();
                }
            }
            last = Some(value);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{script} never returned what was awaited; last value {last:?}");
}

/// Waits until the element's text (or attribute) satisfies `done`; returns it.
///
/// # Panics
/// When it never does within `timeout` (with the last value seen).
pub async fn wait_for(
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

/// The place the page shows once the server answered (a dash stands in until then).
pub async fn shown_position(browser: &Client) -> String {
    wait_for(browser, "#position", None, Duration::from_secs(20), |t| {
        !t.is_empty() && t.chars().all(|c| c.is_ascii_digit())
    })
    .await
}

/// The ticket id the page keeps for `room` in `localStorage`.
///
/// # Panics
/// When there is none.
pub async fn stored_ticket_of(browser: &Client, room: &str) -> String {
    browser
        .execute(
            &format!("return localStorage.getItem('vestibule:{room}:ticket');"),
            vec![],
        )
        .await
        .expect("script runs")
        .as_str()
        .expect("the page stored its ticket id")
        .to_owned()
}

/// The visible text of the element `css` names.
pub async fn text_of(browser: &Client, css: &str) -> String {
    browser
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .unwrap_or_else(|e| panic!("text of {css}: {e}"))
}

/// Clicks the element `css` names.
pub async fn click(browser: &Client, css: &str) {
    browser
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
}

/// Saves a screenshot of the page as `target/screenshots/<name>`.
pub async fn save_screenshot(browser: &Client, name: &str) {
    std::fs::write(
        screenshot_dir().join(name),
        browser.screenshot().await.unwrap(),
    )
    .unwrap();
}

/// The id of the element that has keyboard focus ("" for the page body).
pub async fn focused_id(browser: &Client) -> String {
    // One frame for the page's own focus move.
    tokio::time::sleep(Duration::from_millis(200)).await;
    browser
        .execute(
            "return document.activeElement ? document.activeElement.id : '';",
            vec![],
        )
        .await
        .unwrap()
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Waits until the browser is at `path` (the URL's path only).
///
/// # Panics
/// When it is still elsewhere after `timeout`.
pub async fn wait_for_path(browser: &Client, path: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let url = browser.current_url().await.unwrap();
        if url.path() == path {
            return;
        }
        assert!(Instant::now() < deadline, "still on {url}, not {path}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Chrome DevTools Protocol command sent through chromedriver (`POST
/// /session/{id}/goog/cdp/execute`).
#[derive(Debug)]
struct Cdp {
    cmd: &'static str,
    params: Value,
}

impl WebDriverCompatibleCommand for Cdp {
    fn endpoint(
        &self,
        base_url: &reqwest::Url,
        session_id: Option<&str>,
    ) -> Result<reqwest::Url, <reqwest::Url as std::str::FromStr>::Err> {
        base_url.join(&format!(
            "session/{}/goog/cdp/execute",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &reqwest::Url) -> (reqwest::Method, Option<String>) {
        let body = json!({ "cmd": self.cmd, "params": self.params });
        (reqwest::Method::POST, Some(body.to_string()))
    }
}

/// Runs a DevTools protocol command on the browser's page, e.g.
/// `cdp(&browser, "Emulation.setEmulatedMedia", json!({...}))`; its result.
///
/// # Panics
/// When chromedriver refuses the command.
pub async fn cdp(browser: &Client, cmd: &'static str, params: Value) -> Value {
    browser
        .issue_cmd(Cdp { cmd, params })
        .await
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

/// Emulates Windows high contrast (`forced-colors: active`, light) or turns it off.
pub async fn emulate_forced_colors(browser: &Client, active: bool) {
    let features = if active {
        json!([{ "name": "forced-colors", "value": "active" },
               { "name": "prefers-color-scheme", "value": "light" }])
    } else {
        json!([])
    };
    cdp(
        browser,
        "Emulation.setEmulatedMedia",
        json!({ "features": features }),
    )
    .await;
}

/// A phone's viewport `width` CSS px wide (and 800 tall), the page's `<meta name=viewport>`
/// honoured; `None` clears it (back to the window's size).
pub async fn emulate_viewport(browser: &Client, width: Option<u32>) {
    match width {
        Some(width) => {
            cdp(
                browser,
                "Emulation.setDeviceMetricsOverride",
                json!({ "width": width, "height": 800, "deviceScaleFactor": 1, "mobile": true }),
            )
            .await
        }
        None => cdp(browser, "Emulation.clearDeviceMetricsOverride", json!({})).await,
    };
}

/// axe-core (installed from npm by `scripts/setup-tools.sh --test`).
pub fn axe_source() -> String {
    let path = workspace_root().join(".tools/node_modules/axe-core/axe.min.js");
    std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{} is missing: scripts/setup-tools.sh --test installs axe-core",
            path.display()
        )
    })
}

/// Runs axe-core on the page as it is (open shadow roots included, as axe-core does) and fails
/// with every violation it reports.
pub async fn assert_accessible(browser: &Client, state: &str) {
    browser
        .execute(&format!("{}\nreturn true;", axe_source()), vec![])
        .await
        .expect("axe-core loads");
    let violations = browser
        .execute_async(
            "const done = arguments[arguments.length - 1];
             axe.run(document, { resultTypes: ['violations'] })
               .then(r => done(r.violations.map(v => ({
                   id: v.id, impact: v.impact,
                   nodes: v.nodes.map(n => JSON.stringify(n.target) + ': ' + n.failureSummary) }))))
               .catch(e => done([{ id: 'axe-error', nodes: [String(e)] }]));",
            vec![],
        )
        .await
        .expect("axe.run answers");
    let violations = violations.as_array().cloned().unwrap_or_default();
    assert!(
        violations.is_empty(),
        "axe-core, {state}: {}",
        serde_json::to_string_pretty(&violations).unwrap()
    );
    println!("axe-core: 0 violations ({state})");
}
