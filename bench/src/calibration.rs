//! ETA calibration: the range each shopper was first shown (`etaSeconds`–`etaSecondsHigh`)
//! against when the store admitted it, per decile of the position first shown; for the steady
//! flash sale and for one where the operator halves the admission rate mid-sale
//! (docs/DESIGN.md "ETA and poll hints": target ≥ 95% admitted no later than the high
//! estimate first shown, in both).

use std::collections::HashMap;
use std::time::Duration;

use crate::analysis::quantile;
use crate::flash_sale::{self, FlashSalePlan, Shopper};
use crate::http::HttpClient;
use crate::position_cost::fmt_count;
use crate::procs::{start_vestibule, RedisProcess};
use crate::profile::Profile;
use crate::redis_probe::admission_times;
use crate::report::{Report, Verdict};

/// One decile of first positions.
#[derive(Debug, Clone, Default)]
pub struct Decile {
    /// Smallest and largest first position in the decile.
    pub positions: (u64, u64),
    /// Median of the median ETAs first shown, seconds.
    pub shown_secs: f64,
    /// Median of the high ETAs first shown, seconds.
    pub shown_high_secs: f64,
    /// Median actual wait (join answered → admitted), seconds.
    pub actual_secs: f64,
    /// 90th percentile of the actual wait, seconds.
    pub actual_p90_secs: f64,
    /// Share admitted no later than the high estimate first shown.
    pub within_high: f64,
}

/// The calibration of one sale.
#[derive(Debug, Clone, Default)]
pub struct Calibration {
    /// Deciles by first position, front first.
    pub deciles: Vec<Decile>,
    /// Shoppers judged (shown an ETA when they joined); never admitted counts as late.
    pub judged: u64,
    /// Share admitted no later than the median / the high estimate first shown.
    pub within_median: f64,
    /// See `within_median`.
    pub within_high: f64,
    /// Shoppers admitted by their join (no ETA to judge).
    pub instant: u64,
}

/// Judges every shopper that was shown an ETA at its join; `admitted_at` is the store's
/// admission time (Unix ms) by ticket id.
pub fn calibrate(shoppers: &[Shopper], admitted_at: &HashMap<String, u64>) -> Calibration {
    // (first position, shown, shown high, actual wait or ∞), seconds.
    let mut judged: Vec<(u64, f64, f64, f64)> = Vec::new();
    let mut instant = 0;
    for shopper in shoppers {
        let Some(id) = &shopper.ticket_id else {
            continue;
        };
        let (Some(position), Some(eta), Some(high)) = (
            shopper.first_position,
            shopper.first_eta_secs,
            shopper.first_eta_high_secs,
        ) else {
            instant += u64::from(shopper.first_position.is_none());
            continue;
        };
        let actual = admitted_at.get(id).map_or(f64::INFINITY, |at| {
            at.saturating_sub(shopper.join_answered_unix_ms) as f64 / 1000.0
        });
        judged.push((position, eta as f64, high as f64, actual));
    }
    judged.sort_by_key(|entry| entry.0);
    let count = judged.len();
    let share = |entries: &[(u64, f64, f64, f64)], pick: fn(&(u64, f64, f64, f64)) -> f64| {
        entries.iter().filter(|e| e.3 <= pick(e)).count() as f64 / entries.len().max(1) as f64
    };
    let deciles = (0..10)
        .filter_map(|d| {
            let part = &judged[count * d / 10..count * (d + 1) / 10];
            let first = part.first()?;
            let column = |pick: fn(&(u64, f64, f64, f64)) -> f64| -> Vec<f64> {
                part.iter().map(pick).filter(|v| v.is_finite()).collect()
            };
            let actual = column(|e| e.3);
            Some(Decile {
                positions: (first.0, part.last().map_or(first.0, |e| e.0)),
                shown_secs: quantile(&column(|e| e.1), 0.5),
                shown_high_secs: quantile(&column(|e| e.2), 0.5),
                actual_secs: quantile(&actual, 0.5),
                actual_p90_secs: quantile(&actual, 0.9),
                within_high: share(part, |e| e.2),
            })
        })
        .collect();
    Calibration {
        deciles,
        judged: count as u64,
        within_median: share(&judged, |e| e.1),
        within_high: share(&judged, |e| e.2),
        instant,
    }
}

/// Adds the calibration's rows (`label`: "steady", "rate halved mid-sale").
pub fn report(report: &mut Report, label: &str, calibration: &Calibration) {
    let key = label.replace([' ', '-'], "_");
    report.value(&format!("eta_within_high_{key}"), calibration.within_high);
    report.value(
        &format!("eta_within_median_{key}"),
        calibration.within_median,
    );
    report.row(
        format!("ETA calibration ({label}): admitted no later than the high estimate first shown"),
        format!(
            "{:.1}% of {} (median estimate: {:.1}%)",
            calibration.within_high * 100.0,
            fmt_count(calibration.judged),
            calibration.within_median * 100.0
        ),
        "≥ 95%",
        Verdict::from(calibration.within_high >= 0.95 && calibration.judged > 0),
        format!(
            "{} admitted by their join (no ETA to judge); a shopper never admitted counts as late",
            fmt_count(calibration.instant)
        ),
    );
    let deciles: Vec<String> = calibration
        .deciles
        .iter()
        .map(|d| {
            format!(
                "{}–{}: shown {:.0}–{:.0} s, actual {:.0} s (p90 {:.0}), {:.0}% ≤ high",
                d.positions.0,
                d.positions.1,
                d.shown_secs,
                d.shown_high_secs,
                d.actual_secs,
                d.actual_p90_secs,
                d.within_high * 100.0
            )
        })
        .collect();
    report.row(
        format!("ETA per decile of position ({label}): median shown–high vs actual wait"),
        deciles.join("; "),
        "actual within the range",
        Verdict::Info,
        "medians per decile of the first position shown",
    );
}

/// The flash sale with the operator halving the admission rate mid-sale (when half of the
/// steady sale's drain time has passed), calibrated like the steady one.
///
/// # Errors
/// When a process cannot start or Redis does not answer.
pub async fn run_halved(
    profile: &Profile,
    vestibule: &std::path::Path,
    report_to: &mut Report,
) -> anyhow::Result<()> {
    const ROOM: &str = "main";
    const TTL_SECS: u64 = 300;
    let redis = RedisProcess::start()?;
    let server = start_vestibule(
        vestibule,
        &redis.url(),
        ROOM,
        profile.admission_rate,
        profile.tick_ms,
        &["--token-ttl-secs", &TTL_SECS.to_string()],
    )?;
    let mut plan = FlashSalePlan::from_profile(profile, ROOM);
    let steady_drain = plan.shoppers() as f64 / profile.admission_rate;
    let halve_at = steady_drain / 2.0;
    // After halving, the rest takes twice as long: give the drain that much more.
    plan.drain_timeout += Profile::secs(steady_drain);
    let halved = profile.admission_rate / 2.0;
    report_to.note(format!(
        "flash sale with the rate halved: {} shoppers, {} /s, halved to {halved} /s at +{halve_at:.0} s",
        fmt_count(plan.shoppers()),
        profile.admission_rate
    ));
    let admin = HttpClient::new(&server.base(), 2);
    let operator = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs_f64(halve_at)).await;
        admin.set_admission_rate(ROOM, halved).await
    });
    let sale = flash_sale::run(&plan, server.addr).await;
    operator
        .await?
        .map_err(|error| error.context("halving the rate"))?;
    let admitted_at = admission_times(&mut redis.connection()?, ROOM, &sale.shoppers, TTL_SECS)?;
    report(
        report_to,
        "rate halved mid-sale",
        &calibrate(&sale.shoppers, &admitted_at),
    );
    Ok(())
}
