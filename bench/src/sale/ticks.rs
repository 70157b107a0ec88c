//! Admissions per tick, from the store's own timestamps: the rate against the configured one
//! (over the whole sale and once arrivals ended), and the largest tick against its quota.

use std::collections::HashMap;

use crate::analysis::{rate_fit, ticks, RateFit};
use crate::flash_sale::Shopper;
use crate::profile::Profile;
use crate::report::{Report, Verdict};

use super::{metric_value, Observed, ROOM};

/// The ticks that admitted, fitted against the configured rate.
struct TickFigures {
    /// (tick time Unix ms, shoppers admitted), in time order.
    ticks: Vec<(u64, u64)>,
    fit: RateFit,
    /// Shoppers a tick admits at the rate, rounded down: where the backlog is full.
    full_tick: u64,
    /// ⌈rate × tick⌉: the most a tick may admit.
    nominal_quota: u64,
    largest_tick: u64,
    above_quota: usize,
}

impl TickFigures {
    fn of(profile: &Profile, admitted_at: &HashMap<String, u64>) -> Self {
        let ticks = ticks(admitted_at.values().copied().collect());
        let per_tick = profile.admission_rate * profile.tick_ms as f64 / 1000.0;
        let full_tick = per_tick.floor() as u64;
        let nominal_quota = per_tick.ceil() as u64;
        Self {
            fit: rate_fit(&ticks, profile.admission_rate, full_tick),
            full_tick,
            nominal_quota,
            largest_tick: ticks.iter().map(|t| t.1).max().unwrap_or(0),
            above_quota: ticks.iter().filter(|t| t.1 > nominal_quota).count(),
            ticks,
        }
    }
}

/// The server's own view of its ticks, from its metrics.
struct ServerTicks {
    largest: f64,
    /// Ticks that started 5 ms or more behind the grid.
    late: f64,
    largest_lateness_ms: f64,
    scheduler_nice: f64,
}

impl ServerTicks {
    fn from_metrics(metrics: &str) -> Self {
        let room_metric = |name: &str| metric_value(metrics, &format!("{name}{{room=\"{ROOM}\"}}"));
        Self {
            largest: room_metric("vestibule_largest_tick_admissions"),
            late: room_metric("vestibule_late_ticks_total"),
            largest_lateness_ms: room_metric("vestibule_largest_tick_lateness_ms"),
            scheduler_nice: metric_value(metrics, "vestibule_scheduler_nice"),
        }
    }
}

/// The admission rows: the rate over the sale, once the arrivals ended, and the largest burst.
pub(super) fn report_admissions(
    profile: &Profile,
    observed: &Observed,
    admitted_at: &HashMap<String, u64>,
    metrics: &str,
    report: &mut Report,
) {
    let figures = TickFigures::of(profile, admitted_at);
    let server = ServerTicks::from_metrics(metrics);
    report_admission_rate(profile, &figures, &server, &observed.others_percent, report);
    report_quiet_admissions(profile, &figures, &observed.sale.shoppers, report);
    report_tick_bursts(&figures, &server, report);
}

/// Other processes' CPU (percent of one core) over the sale, and around its worst 1-s window.
struct OthersCpu {
    peak: f64,
    at_worst: f64,
}

impl OthersCpu {
    fn around(others_percent: &[(u64, f64)], worst_start: u64) -> Self {
        // The sampling intervals that overlap the window.
        let at_worst = others_percent
            .iter()
            .filter(|(end, _)| *end + 1000 >= worst_start && *end <= worst_start + 2000)
            .map(|o| o.1)
            .fold(0.0, f64::max);
        Self {
            peak: others_percent.iter().map(|o| o.1).fold(0.0, f64::max),
            at_worst,
        }
    }
}

/// The figures behind the admission rows, for tools and the smoke test.
fn report_tick_values(
    figures: &TickFigures,
    server: &ServerTicks,
    others: &OthersCpu,
    report: &mut Report,
) {
    let fit = &figures.fit;
    report.value("late_ticks", server.late);
    report.value("largest_tick_lateness_ms", server.largest_lateness_ms);
    report.value("sale_other_processes_cpu_peak", others.peak);
    report.value("sale_other_processes_cpu_at_worst_window", others.at_worst);
    report.value("admissions_overall_rate", fit.overall_rate);
    report.value("admissions_max_deviation_1s", fit.max_deviation_1s);
    report.value("largest_tick", figures.largest_tick);
    report.value("nominal_tick_quota", figures.nominal_quota);
    report.value("ticks_above_quota", figures.above_quota as u64);
    report.value("ticks_above_own_quota", fit.ticks_above_own_quota);
    report.value("largest_tick_gap_ms", fit.largest_tick_gap_ms);
}

/// Admissions per second against the configured rate over 1-s and 10-s windows, with the CPU
/// the rest of the machine used around the worst window.
fn report_admission_rate(
    profile: &Profile,
    figures: &TickFigures,
    server: &ServerTicks,
    others_percent: &[(u64, f64)],
    report: &mut Report,
) {
    let fit = &figures.fit;
    let others = OthersCpu::around(others_percent, fit.worst_window_unix_ms);
    report_tick_values(figures, server, &others, report);
    let (late_ticks, largest_lateness_ms) = (server.late, server.largest_lateness_ms);
    let scheduler_nice = server.scheduler_nice;
    let off_rate = fit.overall_rate / profile.admission_rate - 1.0;
    report.row(
        "Admissions per second vs configured",
        format!(
            "{:.2} /s over {:.0} s vs {} /s ({:+.2}%); max deviation {:.2}% over 1-s windows, {:.2}% over 10-s",
            fit.overall_rate,
            fit.span_secs,
            profile.admission_rate,
            off_rate * 100.0,
            fit.max_deviation_1s * 100.0,
            fit.max_deviation_10s * 100.0
        ),
        "within ±1%",
        Verdict::from(fit.windows_1s > 0 && fit.max_deviation_1s <= 0.01 && off_rate.abs() <= 0.01),
        format!(
            "{} ticks while backlogged (from the first full tick); worst 1-s window at +{:.1} s ({} admitted in {} ticks for {:.1} owed), when other processes on the box used {:.0}% CPU (peak over the sale {:.0}%); longest gap between ticks {} ms (nominal {} ms); the server counts {late_ticks:.0} ticks ≥ 5 ms behind the grid, the latest {largest_lateness_ms:.1} ms (scheduler thread nice {scheduler_nice:.0}); windows run tick to tick",
            figures.ticks.len().saturating_sub(1),
            fit.worst_window_at_secs,
            fit.worst_window.0,
            fit.worst_window.1,
            fit.worst_window.2,
            others.at_worst,
            others.peak,
            fit.largest_tick_gap_ms,
            profile.tick_ms
        ),
    );
}

/// The same 1-s windows once every shopper has joined (a second after the last join was
/// answered): the load generator then only polls, so the box is as quiet as this bench gets.
fn report_quiet_admissions(
    profile: &Profile,
    figures: &TickFigures,
    shoppers: &[Shopper],
    report: &mut Report,
) {
    let arrivals_end = shoppers
        .iter()
        .map(|shopper| shopper.join_answered_unix_ms)
        .max()
        .unwrap_or(0);
    let quiet_ticks: Vec<(u64, u64)> = figures
        .ticks
        .iter()
        .copied()
        .filter(|(at, _)| *at >= arrivals_end + 1000)
        .collect();
    let quiet = rate_fit(&quiet_ticks, profile.admission_rate, figures.full_tick);
    report.value(
        "admissions_max_deviation_1s_after_arrivals",
        quiet.max_deviation_1s,
    );
    report.row(
        "Admissions, 1-s windows once the arrivals ended",
        format!(
            "max deviation {:.2}% over {} windows ({:.0} s from +1 s after the last join)",
            quiet.max_deviation_1s * 100.0,
            quiet.windows_1s,
            quiet.span_secs
        ),
        "within ±1% on a quiet box",
        Verdict::from(quiet.windows_1s > 0 && quiet.max_deviation_1s <= 0.01),
        "the load generator only polls by then (the spike's joins are over); the row above includes the spike",
    );
}

fn report_tick_bursts(figures: &TickFigures, server: &ServerTicks, report: &mut Report) {
    let (largest_tick, nominal_quota) = (figures.largest_tick, figures.nominal_quota);
    report.row(
        "Largest tick burst",
        format!(
            "{largest_tick} (server gauge {:.0}); ticks above ⌈rate × tick⌉ = {nominal_quota}: {}; above rate × own elapsed + 1: {}",
            server.largest,
            figures.above_quota,
            figures.fit.ticks_above_own_quota
        ),
        "no tick above its quota",
        Verdict::from(largest_tick > 0 && largest_tick <= nominal_quota),
        "quota = rate × elapsed + carry, capped at ⌈rate × tick⌉; ticks on a fixed grid, so a late tick's share is paid by the next, early one (carry at most a quarter tick); longer stalls are not caught up",
    );
}
