//! One phase of an `eta-edges` scenario: its figures on each store and its report rows.

use std::collections::{BTreeMap, HashMap};

use crate::analysis::quantile;
use crate::calibration::calibrate;
use crate::flash_sale::Shopper;
use crate::report::{Report, Verdict};

use super::Store;

/// A token's issue time, Unix ms: its expiry minus the TTL.
pub(super) fn issued_ms(shopper: &Shopper, ttl_secs: u64) -> Option<u64> {
    shopper
        .token_expires_unix_ms
        .map(|expires| expires.saturating_sub(ttl_secs * 1000))
}

/// The figures of one phase on one store.
#[derive(Debug, Default)]
pub(super) struct PhaseFigures {
    /// Shoppers shown an ETA at their join, and the share admitted by their first high estimate
    /// (never admitted counts as late).
    judged: u64,
    within_high: f64,
    /// Admitted at their join (no ETA), and shown an ETA but never admitted.
    instant: u64,
    never: u64,
    /// Real wait ÷ first `etaSeconds` of those admitted.
    ratios: Vec<f64>,
    /// Token seen after its issue, seconds: polling shoppers, SSE shoppers.
    seen_polling: Vec<f64>,
    seen_sse: Vec<f64>,
    /// Shoppers shown each reason at least once.
    reasons: BTreeMap<&'static str, u64>,
    /// Those admitted later than their first high estimate: (first position, first ETA, first
    /// high, real wait in seconds, joined at ms after the phase's first join).
    late: Vec<(u64, u64, u64, f64, u64)>,
}

pub(super) fn phase_figures(shoppers: &[Shopper], ttl_secs: u64) -> PhaseFigures {
    let admitted_at: HashMap<String, u64> = shoppers
        .iter()
        .filter_map(|s| Some((s.ticket_id.clone()?, issued_ms(s, ttl_secs)?)))
        .collect();
    let calibration = calibrate(shoppers, &admitted_at);
    let mut figures = PhaseFigures {
        judged: calibration.judged,
        within_high: calibration.within_high,
        instant: calibration.instant,
        ..PhaseFigures::default()
    };
    let start = first_join_ms(shoppers);
    for shopper in shoppers {
        let issued = issued_ms(shopper, ttl_secs);
        if let Some(eta) = shopper
            .first_eta_secs
            .filter(|_| shopper.first_position.is_some())
        {
            match issued {
                Some(at) => {
                    let real = at.saturating_sub(shopper.join_answered_unix_ms) as f64 / 1000.0;
                    figures.ratios.push(real / eta.max(1) as f64);
                    let high = shopper.first_eta_high_secs.unwrap_or(0);
                    if real > high as f64 {
                        figures.late.push((
                            shopper.first_position.unwrap_or(0),
                            eta,
                            high,
                            real,
                            shopper.join_answered_unix_ms.saturating_sub(start),
                        ));
                    }
                }
                None => figures.never += 1,
            }
        }
        // A token issued at the join is seen with the join's answer: only later ones count.
        if let (Some(at), Some(seen), Some(_)) =
            (issued, shopper.token_seen_unix_ms, shopper.first_position)
        {
            let delay = seen.saturating_sub(at) as f64 / 1000.0;
            if shopper.used_sse {
                figures.seen_sse.push(delay);
            } else {
                figures.seen_polling.push(delay);
            }
        }
        let mut shown: Vec<&'static str> = shopper.reasons.iter().map(|r| r.1.as_str()).collect();
        shown.sort_unstable();
        shown.dedup();
        for reason in shown {
            *figures.reasons.entry(reason).or_default() += 1;
        }
    }
    figures
}

/// `p50 / p90 / max` of `values` with two decimals, or `–` when empty.
pub(super) fn spread(values: &[f64]) -> String {
    if values.is_empty() {
        return "–".into();
    }
    format!(
        "{:.2} / {:.2} / {:.2}",
        quantile(values, 0.5),
        quantile(values, 0.9),
        quantile(values, 1.0)
    )
}

/// Adds one phase's rows; each measured cell holds both stores.
pub(super) fn report_phase(
    report: &mut Report,
    phase: &str,
    ttl_secs: u64,
    figures: &[(Store, PhaseFigures)],
) {
    let key = phase
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("_");
    let both = |cell: &dyn Fn(&PhaseFigures) -> String| -> String {
        figures
            .iter()
            .map(|(store, f)| format!("{}: {}", store.label(), cell(f)))
            .collect::<Vec<_>>()
            .join("; ")
    };
    for (store, f) in figures {
        let store_key = store.label().to_ascii_lowercase();
        report.value(
            &format!("eta_edges_{key}_{store_key}_within_high"),
            f.within_high,
        );
        report.value(
            &format!("eta_edges_{key}_{store_key}_ratio_median"),
            quantile(&f.ratios, 0.5),
        );
        report.value(
            &format!("eta_edges_{key}_{store_key}_seen_polling_max_secs"),
            quantile(&f.seen_polling, 1.0),
        );
        report.value(
            &format!("eta_edges_{key}_{store_key}_seen_sse_max_secs"),
            quantile(&f.seen_sse, 1.0),
        );
    }
    report.row(
        format!("ETA edges, {phase}: admitted by their first etaSecondsHigh"),
        both(&|f| format!("{:.1}% of {}", f.within_high * 100.0, f.judged)),
        "≥ 95%",
        Verdict::from(
            figures
                .iter()
                .all(|(_, f)| f.judged > 0 && f.within_high >= 0.95),
        ),
        format!(
            "admitted at their join (no ETA): {}; shown an ETA, never admitted (late): {}",
            both(&|f| f.instant.to_string()),
            both(&|f| f.never.to_string())
        ),
    );
    report.row(
        format!("ETA edges, {phase}: real wait ÷ first etaSeconds, median / p90 / max"),
        both(&|f| spread(&f.ratios)),
        "median 0.5–1.0",
        Verdict::from(figures.iter().all(|(_, f)| {
            let median = quantile(&f.ratios, 0.5);
            !f.ratios.is_empty() && (0.5..=1.0).contains(&median)
        })),
        "real wait = join answered → token issued (tokenExpiresAt − TTL)",
    );
    let limit_secs = (ttl_secs as f64 * 0.05).max(2.0);
    report.row(
        format!("ETA edges, {phase}: token seen after issue, polling as told, p50 / p90 / max"),
        both(&|f| format!("{} s ({})", spread(&f.seen_polling), f.seen_polling.len())),
        format!("max ≤ {limit_secs:.1} s"),
        Verdict::from(
            figures
                .iter()
                .all(|(_, f)| quantile(&f.seen_polling, 1.0) <= limit_secs),
        ),
        "shoppers admitted after their join; count in brackets",
    );
    report.row(
        format!("ETA edges, {phase}: token seen after issue, SSE, p50 / p90 / max"),
        both(&|f| format!("{} s ({})", spread(&f.seen_sse), f.seen_sse.len())),
        "max ≤ 1 s",
        Verdict::from(
            figures
                .iter()
                .all(|(_, f)| quantile(&f.seen_sse, 1.0) <= 1.0),
        ),
        "the stream re-reads its ticket every 500 ms (--sse-refresh-ms)",
    );
    report.row(
        format!("ETA edges, {phase}: late against the first high (first 12 by join)"),
        both(&|f| {
            let mut late = f.late.clone();
            late.sort_by_key(|l| l.4);
            late.iter()
                .take(12)
                .map(|(position, eta, high, real, at)| {
                    format!(
                        "+{:.1} s #{position} {eta}–{high} s took {real:.1} s",
                        *at as f64 / 1000.0
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        }),
        "–",
        Verdict::Info,
        "join time from the phase's first join, first position, first ETA range, real wait",
    );
    report.row(
        format!("ETA edges, {phase}: reasons shown (shoppers shown each)"),
        both(&|f| {
            if f.reasons.is_empty() {
                "none".into()
            } else {
                f.reasons
                    .iter()
                    .map(|(reason, count)| format!("{reason} {count}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        }),
        "–",
        Verdict::Info,
        "",
    );
}

/// When the first join was answered, Unix ms: the origin of a run's times.
pub(super) fn first_join_ms(shoppers: &[Shopper]) -> u64 {
    shoppers
        .iter()
        .map(|s| s.join_answered_unix_ms)
        .filter(|&ms| ms > 0)
        .min()
        .unwrap_or(0)
}

/// Seconds from `from` (Unix ms) to `to`, signed, as `+1.2 s`.
pub(super) fn offset(from: u64, to: u64) -> String {
    format!("{:+.1} s", (to as f64 - from as f64) / 1000.0)
}
