//! The room's closed loop (`autoRate`) fed by the guard, black box: a Vestibule with an origin
//! API key and a room with `autoRate` on; a storefront (axum over TCP) whose checkout sits
//! behind the guard with `report_signals`, and whose handler's latency the test sets; admitted
//! shoppers send their checkout through it with real entry tokens. The room's admin figures show
//! the guard's signals; a slow handler (p95 far over the target) makes the loop cut the rate
//! (`autoRate LATENCY_HIGH` in the audit log); once the storefront and its guard are gone the
//! signals go stale.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use serde_json::json;
use vestibule_guard::EntryGuard;
use vestibule_shared::admin_events::RoomFigures;
use vestibule_shared::auto_rate::AutoRateReason;
use vestibule_tests::{Served, TestApp};

const ORIGIN_KEY: &str = "origin-key-for-the-guards-loop-0123456789";
const TARGET_P95_MS: u64 = 300;

/// The storefront: `/checkout` behind the guard, answering after `delay_ms`.
struct Storefront {
    server: Served,
    /// The checkout's latency, ms.
    delay_ms: Arc<AtomicU64>,
}

impl Storefront {
    async fn start(guard: EntryGuard) -> Self {
        let delay_ms = Arc::new(AtomicU64::new(20));
        let app = Router::new()
            .route(
                "/checkout",
                get(|State(delay): State<Arc<AtomicU64>>| async move {
                    let ms = delay.load(Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    "checked out"
                }),
            )
            .with_state(delay_ms.clone())
            .layer(guard);
        Self {
            server: Served::start(app).await,
            delay_ms,
        }
    }

    fn checkout_url(&self) -> String {
        format!("{}/checkout", self.server.url())
    }
}

/// Shoppers holding `tokens` send a checkout every 25 ms (about 40/s, each on its own task so
/// a slow answer does not slow the next) until `stop`, counting answers other than 200 in
/// `refused`.
async fn shoppers(
    url: String,
    tokens: Vec<String>,
    stop: Arc<AtomicBool>,
    refused: Arc<AtomicU64>,
) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut sent = 0_usize;
    while !stop.load(Ordering::Relaxed) {
        let request = client
            .get(&url)
            .header("x-entry-token", &tokens[sent % tokens.len()]);
        let refused = refused.clone();
        tokio::spawn(async move {
            // A request cut off by the shutdown at the end is no answer.
            if let Ok(response) = request.send().await {
                if response.status() != reqwest::StatusCode::OK {
                    refused.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        sent += 1;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The loop's reason in `figures`.
fn reason(figures: &RoomFigures) -> Option<AutoRateReason> {
    figures.auto_rate.as_ref().and_then(|auto| auto.reason)
}

/// Reads the figures every 300 ms until `ok` (panics after `within`).
async fn figures_until(
    vestibule: &TestApp,
    within: Duration,
    what: &str,
    ok: impl Fn(&RoomFigures) -> bool,
) -> RoomFigures {
    let deadline = Instant::now() + within;
    loop {
        let figures = vestibule.room_figures("main").await;
        if ok(&figures) {
            return figures;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {within:?}; last {figures:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rooms_loop_follows_the_origin_the_guard_measures() {
    let vestibule = TestApp::spawn_with_url(
        None,
        &["--origin-api-key", ORIGIN_KEY, "--admission-rate", "20"],
    )
    .await;
    vestibule
        .patch_room(
            "main",
            json!({"autoRate": {"min": 2, "max": 40, "targetP95Ms": TARGET_P95_MS,
                                 "maxErrorRate": 0.05}}),
        )
        .await;
    let mut tokens = Vec::new();
    for _ in 0..4 {
        tokens.push(vestibule.admitted("main").await.1);
    }
    let guard = EntryGuard::builder("main", "storefront")
        .jwks_url(vestibule.url("/.well-known/jwks.json"))
        .report_signals(&vestibule.base, ORIGIN_KEY)
        .build()
        .await
        .unwrap();
    let mut storefront = Storefront::start(guard.clone()).await;
    let stop = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(AtomicU64::new(0));
    let load = tokio::spawn(shoppers(
        storefront.checkout_url(),
        tokens,
        stop.clone(),
        refused.clone(),
    ));

    // A quick checkout: the room shows the guard's signals (it measures what it sent, too),
    // and the leader's loop steps on them (no longer on stale signals, as before the first
    // report).
    let quick = figures_until(&vestibule, Duration::from_secs(8), "quick signals", |f| {
        let fresh = reason(f).is_some_and(|reason| {
            !matches!(
                reason,
                AutoRateReason::SignalsStale | AutoRateReason::SignalsLost
            )
        });
        fresh
            && f.origin
                .is_some_and(|o| o.requests >= 20 && o.p95_ms < 100.0)
    })
    .await;
    let origin = quick.origin.unwrap();
    assert!(origin.sent.is_some_and(|sent| sent >= 20), "{quick:?}");
    assert!(origin.error_rate == 0.0, "{quick:?}");
    let rate_before = quick.admission_rate_per_sec;

    // The checkout slows to three times the target: the loop cuts the rate.
    storefront.delay_ms.store(900, Ordering::Relaxed);
    let slowed = Instant::now();
    let slow = figures_until(&vestibule, Duration::from_secs(10), "a cut", |f| {
        f.admission_rate_per_sec < rate_before && f.origin.is_some_and(|o| o.p95_ms >= 900.0)
    })
    .await;
    let cut = slow.admission_rate_per_sec;
    eprintln!(
        "quick: {:?} at {rate_before}/s; cut to {cut}/s {:?} after the slowdown on {:?}",
        quick.origin,
        slowed.elapsed(),
        slow.origin
    );
    assert!(cut <= rate_before * 0.85, "{rate_before} → {slow:?}");
    let (_, audit) = vestibule.admin_get("/api/v1/admin/rooms/main/audit").await;
    assert!(
        audit.to_string().contains("autoRate LATENCY_HIGH"),
        "the cut is audited with its reason: {audit}"
    );
    let (_, settings) = vestibule.admin_get("/api/v1/admin/rooms/main").await;
    assert!(
        settings["admissionRatePerSec"].as_f64() <= Some(cut),
        "the settings carry the cut: {settings}"
    );

    // The shoppers stop and the storefront goes, its guard with it: the signals go stale.
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();
    // Stopped, the server drops the app and the guard's layer in it.
    storefront.server.stop().await;
    assert_eq!(refused.load(Ordering::Relaxed), 0, "every shopper passed");
    drop(guard);
    let dropped = Instant::now();
    let stale = figures_until(&vestibule, Duration::from_secs(15), "stale signals", |f| {
        f.origin.is_none()
            && matches!(
                reason(f),
                Some(AutoRateReason::SignalsStale | AutoRateReason::SignalsLost)
            )
    })
    .await;
    eprintln!(
        "stale {:?} after the guard was dropped: {:?}",
        dropped.elapsed(),
        reason(&stale)
    );
}
