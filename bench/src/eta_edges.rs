//! ETA at the edges of a sale (issue 43, docs/DESIGN.md "ETA and poll hints"): three scenarios
//! replayed on the embedded store and on Redis (the two at once, each on its own server), judged
//! per phase by the join time.
//!
//! 1. **Cold start** of a capped room (cap 20, 20 /s, token TTL 60 s): 300 shoppers join at once
//!    and each orders 3 s after it sees its token.
//! 2. **Checkout slows mid-sale**: the same room; 7 joins/s for 60 s (a little above the cap's
//!    pace at 3 s, so a line forms), each shopper ordering 3 s after it sees its token; from
//!    +60 s on checkout takes 10 s, and joins fall to 2 /s for another 60 s (about the slowed
//!    pace, so the line neither empties nor runs away).
//! 3. **Stock held by unused tokens**: 5 /s, stock 3, token TTL 30 s; 43 shoppers join at once,
//!    the first three admitted never use their tokens; what the shopper at place ~37 is told
//!    until those tokens expire, and whether anyone is admitted meanwhile.
//!
//! Shoppers poll exactly as `nextPollAfterMs` says, 20% hold the SSE stream instead (all of them
//! in scenario 3, so every status is seen as it changes). A token's issue time is its
//! `tokenExpiresAt` minus the TTL (both stores store expiry = admission tick + TTL, to the ms).
//! Targets: ≥ 95% admitted by their first `etaSecondsHigh` in every phase; median real wait ÷
//! first `etaSeconds` within 0.5–1.0; token seen ≤ max(2 s, 5% of the TTL) after its issue at
//! the max (SSE ≤ 1 s); no `CHECKOUT_SLOW` before the first order.

use std::path::Path;
use std::time::Duration;

use vestibule_shared::{TicketState, WaitReason};

use crate::flash_sale::{self, FlashSalePlan, Shopper};
use crate::http::HttpClient;
use crate::procs::{start_vestibule, start_vestibule_on, RedisProcess, ServerProcess};
use crate::report::{Report, Verdict};

mod phase;
use phase::{first_join_ms, issued_ms, offset, phase_figures, report_phase, PhaseFigures};

const ROOM: &str = "main";
const TICK_MS: u64 = 100;

/// Which store a server runs on.
#[derive(Debug, Clone, Copy)]
enum Store {
    Embedded,
    Redis,
}

impl Store {
    fn label(self) -> &'static str {
        match self {
            Self::Embedded => "embedded",
            Self::Redis => "Redis",
        }
    }
}

/// A server under test, with its private Redis when it runs on one.
struct Target {
    server: ServerProcess,
    _redis: Option<RedisProcess>,
}

fn start(vestibule: &Path, store: Store, rate: f64, extra: &[&str]) -> anyhow::Result<Target> {
    Ok(match store {
        Store::Embedded => Target {
            server: start_vestibule_on(
                vestibule,
                &["--data-dir", "none"],
                ROOM,
                rate,
                TICK_MS,
                extra,
            )?,
            _redis: None,
        },
        Store::Redis => {
            let redis = RedisProcess::start()?;
            Target {
                server: start_vestibule(vestibule, &redis.url(), ROOM, rate, TICK_MS, extra)?,
                _redis: Some(redis),
            }
        }
    })
}

/// Runs `plan` on a fresh server of each store, both at once; the shoppers of each, embedded
/// first. `setup` is a room `PATCH` sent before the sale (none: `""`).
async fn on_both_stores(
    vestibule: &Path,
    rate: f64,
    extra: &[&str],
    setup: &str,
    plan: &FlashSalePlan,
) -> anyhow::Result<[(Store, Vec<Shopper>); 2]> {
    let embedded = start(vestibule, Store::Embedded, rate, extra)?;
    let redis = start(vestibule, Store::Redis, rate, extra)?;
    for target in [&embedded, &redis] {
        if !setup.is_empty() {
            HttpClient::new(&target.server.base(), 1)
                .patch_room(ROOM, setup)
                .await?;
        }
    }
    let (on_embedded, on_redis) = tokio::join!(
        flash_sale::run(plan, embedded.server.addr),
        flash_sale::run(plan, redis.server.addr)
    );
    Ok([
        (Store::Embedded, on_embedded.shoppers),
        (Store::Redis, on_redis.shoppers),
    ])
}

/// The capped room of scenarios 1 and 2: cap 20, TTL 60 s, checkouts expected to take 3 s.
const CAPPED_ROOM: [&str; 6] = [
    "--max-active-users",
    "20",
    "--token-ttl-secs",
    "60",
    "--expected-checkout-secs",
    "3",
];

/// Scenario 1: the cold start of a capped room.
async fn cold_start(vestibule: &Path, report: &mut Report) -> anyhow::Result<()> {
    const TTL_SECS: u64 = 60;
    let mut plan = FlashSalePlan::burst(ROOM, 300, 0.5, Duration::from_secs(120));
    plan.sse_share = 0.2;
    plan.checkout = vec![(0.0, Duration::from_secs(3))];
    report.note(
        "ETA edges, cold start: cap 20, 20 /s, token TTL 60 s, expected checkout 3 s; 300 shoppers join within 0.5 s, \
         20% on SSE, each orders 3 s after it sees its token",
    );
    let extra = CAPPED_ROOM;
    let runs = on_both_stores(vestibule, 20.0, &extra, "", &plan).await?;
    let mut figures = Vec::new();
    let mut early = Vec::new();
    for (store, shoppers) in &runs {
        figures.push((*store, phase_figures(shoppers, TTL_SECS)));
        let start = first_join_ms(shoppers);
        let first_order = shoppers.iter().filter_map(|s| s.ordered_unix_ms).min();
        let slow: Vec<u64> = shoppers
            .iter()
            .filter_map(|s| {
                s.reasons
                    .iter()
                    .find(|(_, reason)| *reason == WaitReason::CheckoutSlow)
                    .map(|(at, _)| *at)
            })
            .filter(|at| first_order.is_none_or(|first| *at < first))
            .collect();
        early.push((*store, start, first_order, slow));
    }
    report_phase(report, "cold start", TTL_SECS, &figures);
    report.row(
        "ETA edges, cold start: shoppers shown CHECKOUT_SLOW before the first order",
        early
            .iter()
            .map(|(store, start, first_order, slow)| {
                let first = slow.iter().min().map_or(String::new(), |at| {
                    format!(", the first at {}", offset(*start, *at))
                });
                let order = first_order.map_or("no order".into(), |at| {
                    format!("first order at {}", offset(*start, at))
                });
                format!("{}: {}{first} ({order})", store.label(), slow.len())
            })
            .collect::<Vec<_>>()
            .join("; "),
        "none",
        Verdict::from(early.iter().all(|(_, _, _, slow)| slow.is_empty())),
        "times from the first join answered",
    );
    Ok(())
}

/// Scenario 2: checkout slows from 3 s to 10 s mid-sale.
async fn checkout_slows(vestibule: &Path, report: &mut Report) -> anyhow::Result<()> {
    const TTL_SECS: u64 = 60;
    const SLOWS_AT_SECS: f64 = 60.0;
    let mut plan = FlashSalePlan::burst(ROOM, 420, SLOWS_AT_SECS, Duration::from_secs(90));
    plan.then = vec![(2.0, 60.0)];
    plan.sse_share = 0.2;
    plan.checkout = vec![
        (0.0, Duration::from_secs(3)),
        (SLOWS_AT_SECS, Duration::from_secs(10)),
    ];
    report.note(
        "ETA edges, checkout slows: cap 20, 20 /s, token TTL 60 s, expected checkout 3 s; 7 joins/s for 60 s, then \
         2 /s for 60 s; 20% on SSE; a shopper orders 3 s after it sees its token, 10 s when it \
         sees it from +60 s on; phases by join time",
    );
    let extra = CAPPED_ROOM;
    let runs = on_both_stores(vestibule, 20.0, &extra, "", &plan).await?;
    for (phase, slowed) in [
        ("steady (3 s)", false),
        ("minute after slowdown (10 s)", true),
    ] {
        let figures: Vec<(Store, PhaseFigures)> = runs
            .iter()
            .map(|(store, shoppers)| {
                let part: Vec<Shopper> = shoppers
                    .iter()
                    .filter(|s| (s.join_sent_us as f64 / 1e6 >= SLOWS_AT_SECS) == slowed)
                    .cloned()
                    .collect();
                (*store, phase_figures(&part, TTL_SECS))
            })
            .collect();
        report_phase(report, phase, TTL_SECS, &figures);
    }
    Ok(())
}

/// What one status of the timeline says, compactly: `#37, 9–14 s, CAP_REACHED`.
fn told(seen: &flash_sale::Seen) -> String {
    if seen.state != TicketState::Waiting {
        return seen.state.as_str().to_owned();
    }
    let eta = match seen.eta_secs {
        (Some(median), Some(high)) => format!("{median}–{high} s"),
        (Some(median), None) => format!("{median} s"),
        _ => "no ETA".into(),
    };
    let reason = seen.reason.map_or("no reason", WaitReason::as_str);
    format!(
        "#{}, {eta}, {reason}",
        seen.position.map_or("?".into(), |p| p.to_string())
    )
}

/// Scenario 3: the stock held by tokens nobody uses.
async fn stock_held(vestibule: &Path, report: &mut Report) -> anyhow::Result<()> {
    const TTL_SECS: u64 = 30;
    const PLACE: u64 = 37;
    let mut plan = FlashSalePlan::burst(ROOM, 43, 0.2, Duration::from_secs(50));
    plan.sse_share = 1.0;
    plan.unused_tokens = 3;
    plan.checkout = vec![(0.0, Duration::from_secs(3))];
    plan.keep_timeline = true;
    report.note(
        "ETA edges, stock held: 5 /s, stock 3, token TTL 30 s; 43 shoppers join within 0.2 s, \
         all on SSE; the first three admitted never use their tokens, the others order 3 s \
         after they see theirs",
    );
    let extra = ["--token-ttl-secs", "30"];
    let runs = on_both_stores(vestibule, 5.0, &extra, r#"{"stock":3}"#, &plan).await?;
    let mut held = Vec::new();
    for (store, shoppers) in &runs {
        let start = first_join_ms(shoppers);
        let mut issued: Vec<u64> = shoppers
            .iter()
            .filter_map(|s| issued_ms(s, TTL_SECS))
            .collect();
        issued.sort_unstable();
        // The three unused tokens are the first three issued: all out from the third's issue
        // until the first's expiry.
        let window = issued
            .get(2)
            .zip(issued.first())
            .map(|(third, first)| (*third, first + TTL_SECS * 1000));
        let meanwhile = window.map_or(0, |(from, until)| {
            issued
                .iter()
                .skip(3)
                .filter(|at| (from..until).contains(*at))
                .count()
        });
        let after = window.and_then(|(_, until)| issued.iter().skip(3).find(|at| **at >= until));
        let held_until = window.map(|(_, until)| until);
        let watched = shoppers
            .iter()
            .filter(|s| s.first_position.is_some())
            .min_by_key(|s| s.first_position.unwrap_or(0).abs_diff(PLACE));
        let timeline = watched.map_or("no shopper waited".into(), |shopper| {
            let from = shopper.join_answered_unix_ms;
            let end = shopper.timeline.last().map_or(from, |s| s.unix_ms);
            let mut lines = Vec::new();
            let mut at = from;
            loop {
                // The first status is kept once its stream is open: it stands for the join.
                let seen = shopper.timeline.iter().rev().find(|s| s.unix_ms <= at);
                if let Some(seen) = seen.or(shopper.timeline.first()) {
                    lines.push(format!("{}: {}", offset(from, at), told(seen)));
                }
                if at >= end {
                    break;
                }
                at = (at + 5000).min(end);
            }
            lines.join("; ")
        });
        report.row(
            format!(
                "ETA edges, stock held ({}): what place ~{PLACE} is told, every 5 s",
                store.label()
            ),
            timeline,
            "–",
            Verdict::Info,
            "from its join; SSE, every status kept",
        );
        held.push((*store, start, held_until, meanwhile, after.copied()));
    }
    report.row(
        "ETA edges, stock held: admitted while the three unused tokens were out",
        held.iter()
            .map(|(store, start, until, meanwhile, after)| {
                let until = until.map_or("never issued".into(), |at| offset(*start, at));
                let next = after.map_or("none".into(), |at| offset(*start, at));
                format!(
                    "{}: {meanwhile} (the first expired at {until}; next admission {next})",
                    store.label()
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
        "–",
        Verdict::Info,
        "times from the first join answered; admission never leaves more tokens out than units left",
    );
    Ok(())
}

/// Runs the three scenarios, each on both stores at once.
///
/// # Errors
/// When a process cannot start.
pub async fn run(vestibule: &Path, report: &mut Report) -> anyhow::Result<()> {
    report.note(
        "ETA edges: each scenario runs on the embedded store (--data-dir none) and on a private \
         redis-server at the same time, each with its own server",
    );
    cold_start(vestibule, report).await?;
    checkout_slows(vestibule, report).await?;
    stock_held(vestibule, report).await?;
    Ok(())
}
