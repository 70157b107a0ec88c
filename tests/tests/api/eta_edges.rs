//! The ETA and the poll hint at the first seconds of a capped sale (issue 43; the bench's
//! `eta-edges` stage at full size): a room with a cap opens to a line all at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vestibule_shared::{TicketState, WaitReason};
use vestibule_tests::{both_stores, Backend, TestApp};

both_stores!(a_capped_rooms_cold_start_keeps_its_etas_and_poll_hints,);

/// What one shopper saw, Unix ms.
#[derive(Debug)]
struct Outcome {
    joined_ms: u64,
    /// `etaSecondsHigh` shown at the join (None: admitted at once).
    first_high_secs: Option<u64>,
    /// `etaSeconds` shown at the join (None: admitted at once).
    first_eta_secs: Option<u64>,
    /// The token's issue (`tokenExpiresAt` − TTL) and when the shopper saw it; None: never.
    issued_ms: Option<u64>,
    seen_ms: Option<u64>,
    /// When it was first shown `CHECKOUT_SLOW`.
    checkout_slow_ms: Option<u64>,
}

fn now_ms() -> u64 {
    (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as u64
}

/// Cap 5, 5 /s, token TTL 20 s, expected checkout 1 s: 100 shoppers join at once, poll exactly
/// when `nextPollAfterMs` says and order 1 s after they see their token. Every shopper is
/// admitted; nobody is told `CHECKOUT_SLOW` before the first order was placed; every shopper
/// learns of its token within max(2 s, 5% of the TTL) + 0.5 s of its issue (the places past 25
/// once slept through theirs on the 10 s and 30 s tiers); ≥ 90% are admitted by the first high
/// estimate; the median real wait ÷ the first ETA is 0.4–1.1 (the first ETA once assumed every
/// token held for its TTL: 0.07).
async fn a_capped_rooms_cold_start_keeps_its_etas_and_poll_hints(backend: Backend) {
    const TTL_SECS: u64 = 20;
    const SHOPPERS: usize = 100;
    let app = TestApp::spawn(
        backend,
        &[
            "--admission-rate",
            "5",
            "--max-active-users",
            "5",
            "--token-ttl-secs",
            "20",
            "--expected-checkout-secs",
            "1",
        ],
    )
    .await;
    let started = Instant::now();
    let first_order_ms = AtomicU64::new(u64::MAX);
    let shopper = |n: usize| {
        let (app, first_order_ms) = (&app, &first_order_ms);
        async move {
            let (_, mut status) = app.join("main", Some(&format!("cold-start-{n}"))).await;
            let mut me = Outcome {
                joined_ms: now_ms(),
                first_high_secs: status
                    .eta_seconds_high
                    .filter(|_| status.position.is_some()),
                first_eta_secs: status.eta_seconds.filter(|_| status.position.is_some()),
                issued_ms: None,
                seen_ms: None,
                checkout_slow_ms: None,
            };
            while started.elapsed() < Duration::from_secs(90) {
                if status.reason == Some(WaitReason::CheckoutSlow) {
                    me.checkout_slow_ms.get_or_insert(now_ms());
                }
                if status.status == TicketState::TokenIssued {
                    me.seen_ms = Some(now_ms());
                    let expires = status.token_expires_at.as_deref().expect("an expiry");
                    let expires = time::OffsetDateTime::parse(
                        expires,
                        &time::format_description::well_known::Rfc3339,
                    )
                    .expect("RFC 3339");
                    let expires_ms = (expires.unix_timestamp_nanos() / 1_000_000) as u64;
                    me.issued_ms = Some(expires_ms - TTL_SECS * 1000);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    let (code, body) = app.order("main", status.entry_token.as_deref()).await;
                    assert!(code.is_success(), "{body}");
                    first_order_ms.fetch_min(now_ms(), Ordering::Relaxed);
                    break;
                }
                assert_eq!(status.status, TicketState::Waiting, "{status:?}");
                tokio::time::sleep(Duration::from_millis(status.next_poll_after_ms)).await;
                status = app.poll("main", &status.ticket_id).await;
            }
            me
        }
    };
    let outcomes: Vec<Outcome> = futures_util::future::join_all((0..SHOPPERS).map(shopper)).await;
    let first_order_ms = first_order_ms.load(Ordering::Relaxed);

    let mut failures = Vec::new();
    let never = outcomes.iter().filter(|o| o.issued_ms.is_none()).count();
    if never > 0 {
        failures.push(format!(
            "{never} of {SHOPPERS} shoppers not admitted in 90 s"
        ));
    }
    let early_slow: Vec<i64> = outcomes
        .iter()
        .filter_map(|o| o.checkout_slow_ms)
        .filter(|at| *at < first_order_ms)
        .map(|at| at as i64 - first_order_ms as i64)
        .collect();
    if !early_slow.is_empty() {
        failures.push(format!(
            "{} shoppers shown CHECKOUT_SLOW before the first order (ms before it: {early_slow:?})",
            early_slow.len()
        ));
    }
    let limit_ms = ((TTL_SECS * 1000) / 20).max(2000) + 500;
    let delays: Vec<u64> = outcomes
        .iter()
        .filter_map(|o| Some(o.seen_ms?.saturating_sub(o.issued_ms?)))
        .collect();
    let mut late: Vec<u64> = delays.iter().copied().filter(|d| *d > limit_ms).collect();
    late.sort_unstable();
    if !late.is_empty() {
        failures.push(format!(
            "{} shoppers saw their token more than {limit_ms} ms after its issue (ms: {late:?})",
            late.len()
        ));
    }
    let judged: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.first_high_secs.is_some())
        .collect();
    let within = judged
        .iter()
        .filter(|o| {
            o.issued_ms.is_some_and(|at| {
                at.saturating_sub(o.joined_ms) <= o.first_high_secs.unwrap_or(0) * 1000
            })
        })
        .count();
    if (within as f64) < 0.9 * judged.len() as f64 {
        failures.push(format!(
            "{within} of {} admitted by their first etaSecondsHigh (< 90%)",
            judged.len()
        ));
    }
    let mut ratios: Vec<f64> = judged
        .iter()
        .filter_map(|o| {
            let real_ms = o.issued_ms?.saturating_sub(o.joined_ms) as f64;
            Some(real_ms / (o.first_eta_secs?.max(1) * 1000) as f64)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let median = ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN);
    if !(0.4..=1.1).contains(&median) {
        failures.push(format!(
            "median real wait ÷ first ETA {median:.2}, outside 0.4–1.1"
        ));
    }
    eprintln!(
        "cold start under a cap: {within} of {} by the first high estimate; real ÷ first ETA \
         median {median:.2}; token seen at most {} ms after its issue; first order at +{} ms",
        judged.len(),
        delays.iter().max().unwrap_or(&0),
        first_order_ms.saturating_sub(outcomes.iter().map(|o| o.joined_ms).min().unwrap_or(0))
    );
    assert!(failures.is_empty(), "{}", failures.join("; "));
}
