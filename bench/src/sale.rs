//! The flash-sale stage: the shopper model against a fresh server on a fresh Redis, then the
//! figures read off what shoppers saw and what the store recorded.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use vestibule_shared::paths;

use crate::analysis::{fifo_discordance, quantile, rate_fit, ticks};
use crate::flash_sale::{self, FlashSalePlan};
use crate::http::{short, HttpClient, Percentiles};
use crate::position_cost::fmt_count;
use crate::procs::{cpu_secs, machine_busy_secs, start_vestibule, CpuMeter, RedisProcess};
use crate::profile::Profile;
use crate::redis_probe::{key, ticket_states, zcard, RedisSample};
use crate::report::{Report, Verdict};

const ROOM: &str = "main";
/// Token TTL the server is started with, seconds (the default).
const TOKEN_TTL_SECS: u64 = 300;

pub use vestibule_tests::metric_value;

/// Runs the flash sale and reports its figures.
///
/// # Errors
/// When a process cannot start or Redis does not answer.
pub async fn run(
    profile: &Profile,
    vestibule: &std::path::Path,
    report: &mut Report,
) -> anyhow::Result<()> {
    let redis = RedisProcess::start()?;
    let ttl = TOKEN_TTL_SECS.to_string();
    let server = start_vestibule(
        vestibule,
        &redis.url(),
        ROOM,
        profile.admission_rate,
        profile.tick_ms,
        &["--token-ttl-secs", &ttl],
    )?;
    let plan = FlashSalePlan::from_profile(profile, ROOM);
    report.note(format!(
        "flash sale: ramp {} s to {} joins/s, spike {} s ({} shoppers, {:.0}% on SSE), admission {} /s, tick {} ms",
        profile.ramp_secs,
        short(profile.spike_per_sec),
        profile.spike_secs,
        fmt_count(plan.shoppers()),
        profile.sse_share * 100.0,
        profile.admission_rate,
        profile.tick_ms
    ));

    // Redis counters once a second, on a thread of its own, until the sale ends.
    let stop = Arc::new(AtomicBool::new(false));
    let mut sampler_connection = redis.connection()?;
    let queue_key = key(ROOM, "queue");
    // Also the CPU the rest of the machine used, to tell a late tick caused by a neighbour's
    // build from one of our own.
    let ours = [server.pid(), redis.pid(), std::process::id()];
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut samples = Vec::new();
            let mut others = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if let Ok(sample) = RedisSample::take(&mut sampler_connection) {
                    let waiting = zcard(&mut sampler_connection, &queue_key).unwrap_or(0);
                    samples.push((sample, waiting));
                }
                let own: f64 = ours.iter().map(|pid| cpu_secs(*pid)).sum();
                others.push((flash_sale::unix_ms(), machine_busy_secs() - own));
                std::thread::sleep(Duration::from_millis(1000));
            }
            (samples, others)
        })
    };
    let cpu = CpuMeter::start(&[
        ("vestibule", server.pid()),
        ("redis", redis.pid()),
        ("bench", std::process::id()),
    ]);
    // CPU while shoppers arrive (the spike), apart from the whole run's.
    let spike_cpu = {
        let cpu = cpu.clone();
        let arrivals = Profile::secs(plan.arrival_span_secs() + 0.2);
        tokio::spawn(async move {
            tokio::time::sleep(arrivals).await;
            cpu.summary()
        })
    };
    let sale = flash_sale::run(&plan, server.addr).await;
    let spike_cpu = spike_cpu.await.unwrap_or_default();
    stop.store(true, Ordering::Relaxed);
    let (samples, others) = sampler.join().unwrap_or_default();
    // Other processes' CPU (percent of one core) per sampling interval: (interval end, percent).
    let others_percent: Vec<(u64, f64)> = others
        .windows(2)
        .map(|w| {
            let secs = (w[1].0.saturating_sub(w[0].0)) as f64 / 1000.0;
            (
                w[1].0,
                ((w[1].1 - w[0].1) / secs.max(1e-3) * 100.0).max(0.0),
            )
        })
        .collect();
    let others_peak = others_percent.iter().map(|o| o.1).fold(0.0, f64::max);
    let cpu_summary = cpu.summary();

    let mut probe = redis.connection()?;
    let ids: Vec<String> = sale
        .shoppers
        .iter()
        .filter_map(|s| s.ticket_id.clone())
        .collect();
    let stored = ticket_states(&mut probe, ROOM, &ids)?;
    let ttl_ms = TOKEN_TTL_SECS * 1000;
    let mut admitted_at = std::collections::HashMap::new();
    for (id, (_, exp)) in ids.iter().zip(&stored) {
        if let Some(exp) = exp {
            admitted_at.insert(id.as_str(), exp - ttl_ms);
        }
    }
    let metrics = HttpClient::new(&server.base(), 2)
        .get(paths::METRICS)
        .await?;
    let metrics = String::from_utf8_lossy(&metrics.body).into_owned();

    let shoppers = &sale.shoppers;
    let total = shoppers.len() as u64;
    let joined = shoppers.iter().filter(|s| s.ticket_id.is_some()).count() as u64;
    let admitted = admitted_at.len() as u64;
    let ordered = shoppers
        .iter()
        .filter(|s| s.order_status == Some(201))
        .count() as u64;
    let rose = shoppers.iter().filter(|s| s.position_rose).count() as u64;
    let sse_shoppers = shoppers.iter().filter(|s| s.used_sse).count() as u64;
    let first_error = shoppers.iter().find_map(|s| s.error.clone());
    report.value("shoppers", total);
    report.value("shoppers_joined", joined);
    report.value("shoppers_admitted", admitted);
    report.value("shoppers_ordered", ordered);
    report.value("shoppers_position_rose", rose);
    report.value("shoppers_sse", sse_shoppers);

    // Joins during the spike: answered per second, at the curve's peak.
    let join_series: Vec<u64> = sale
        .shared
        .joins_per_sec
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    let peak_joins = join_series.iter().copied().max().unwrap_or(0);
    let join_p = Percentiles::of(&sale.shared.joins.snapshot());
    report.value("sale_peak_joins_per_sec", peak_joins);
    report.value("sale_join_p99_ms", join_p.p99_ms);
    report.row(
        "Flash sale: joins answered per second at the spike, p50/p99/p99.9",
        format!(
            "{} /s at peak (offered {} /s), {}",
            fmt_count(peak_joins),
            fmt_count(profile.spike_per_sec as u64),
            join_p.triple()
        ),
        format!("keeps up with {} /s", fmt_count(profile.spike_per_sec as u64)),
        Verdict::from(joined == total && peak_joins as f64 >= 0.95 * profile.spike_per_sec.min(total as f64)),
        format!(
            "{}/{} shoppers got a ticket; latency counted from each shopper's arrival; CPU while arriving: {spike_cpu}; whole run: {cpu_summary}",
            fmt_count(joined),
            fmt_count(total)
        ),
    );
    let poll_series: Vec<u64> = sale
        .shared
        .polls_per_sec
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    let poll_total: u64 = poll_series.iter().sum();
    let poll_peak = poll_series.iter().copied().max().unwrap_or(0);
    let poll_p = Percentiles::of(&sale.shared.polls.snapshot());
    report.value("sale_polls", poll_total);
    report.row(
        "Flash sale: polls by nextPollAfterMs, p50/p99/p99.9",
        format!(
            "{} polls, {} /s mean, {} /s peak, {}",
            fmt_count(poll_total),
            short(poll_total as f64 / sale.secs.max(1.0)),
            fmt_count(poll_peak),
            poll_p.triple()
        ),
        "–",
        Verdict::Info,
        "the shopper model polls as told (30 s far back, ≥ 1 s near the front): the hint keeps poll load low; capacity is measured below",
    );

    // Admissions per tick, from the store's own timestamps.
    let admitted_times: Vec<u64> = admitted_at.values().copied().collect();
    let tick_list = ticks(admitted_times);
    let full_tick = (profile.admission_rate * profile.tick_ms as f64 / 1000.0).floor() as u64;
    let fit = rate_fit(&tick_list, profile.admission_rate, full_tick);
    let nominal_quota = (profile.admission_rate * profile.tick_ms as f64 / 1000.0).ceil() as u64;
    let largest_tick = tick_list.iter().map(|t| t.1).max().unwrap_or(0);
    let above_quota = tick_list.iter().filter(|t| t.1 > nominal_quota).count();
    let server_largest = metric_value(
        &metrics,
        &format!("vestibule_largest_tick_admissions{{room=\"{ROOM}\"}}"),
    );
    // The server's own view of its ticks: how many started 5 ms or more behind the grid.
    let late_ticks = metric_value(
        &metrics,
        &format!("vestibule_late_ticks_total{{room=\"{ROOM}\"}}"),
    );
    let largest_lateness_ms = metric_value(
        &metrics,
        &format!("vestibule_largest_tick_lateness_ms{{room=\"{ROOM}\"}}"),
    );
    let scheduler_nice = metric_value(&metrics, "vestibule_scheduler_nice");
    report.value("late_ticks", late_ticks);
    report.value("largest_tick_lateness_ms", largest_lateness_ms);
    // Other processes around the worst window (the intervals that overlap it).
    let worst_start = fit.worst_window_unix_ms;
    let others_at_worst = others_percent
        .iter()
        .filter(|(end, _)| *end + 1000 >= worst_start && *end <= worst_start + 2000)
        .map(|o| o.1)
        .fold(0.0, f64::max);
    report.value("sale_other_processes_cpu_peak", others_peak);
    report.value("sale_other_processes_cpu_at_worst_window", others_at_worst);
    report.value("admissions_overall_rate", fit.overall_rate);
    report.value("admissions_max_deviation_1s", fit.max_deviation_1s);
    report.value("largest_tick", largest_tick);
    report.value("nominal_tick_quota", nominal_quota);
    report.value("ticks_above_quota", above_quota as u64);
    report.value("ticks_above_own_quota", fit.ticks_above_own_quota);
    report.value("largest_tick_gap_ms", fit.largest_tick_gap_ms);
    report.row(
        "Admissions per second vs configured",
        format!(
            "{:.2} /s over {:.0} s vs {} /s ({:+.2}%); max deviation {:.2}% over 1-s windows, {:.2}% over 10-s",
            fit.overall_rate,
            fit.span_secs,
            profile.admission_rate,
            (fit.overall_rate / profile.admission_rate - 1.0) * 100.0,
            fit.max_deviation_1s * 100.0,
            fit.max_deviation_10s * 100.0
        ),
        "within ±1%",
        Verdict::from(
            fit.windows_1s > 0
                && fit.max_deviation_1s <= 0.01
                && (fit.overall_rate / profile.admission_rate - 1.0).abs() <= 0.01,
        ),
        format!(
            "{} ticks while backlogged (from the first full tick); worst 1-s window at +{:.1} s ({} admitted in {} ticks for {:.1} owed), when other processes on the box used {:.0}% CPU (peak over the sale {:.0}%); longest gap between ticks {} ms (nominal {} ms); the server counts {late_ticks:.0} ticks ≥ 5 ms behind the grid, the latest {largest_lateness_ms:.1} ms (scheduler thread nice {scheduler_nice:.0}); windows run tick to tick",
            tick_list.len().saturating_sub(1),
            fit.worst_window_at_secs,
            fit.worst_window.0,
            fit.worst_window.1,
            fit.worst_window.2,
            others_at_worst,
            others_peak,
            fit.largest_tick_gap_ms,
            profile.tick_ms
        ),
    );
    // The same 1-s windows once every shopper has joined (a second after the last join was
    // answered): the load generator then only polls, so the box is as quiet as this bench gets.
    let arrivals_end = shoppers
        .iter()
        .map(|shopper| shopper.join_answered_unix_ms)
        .max()
        .unwrap_or(0);
    let quiet_ticks: Vec<(u64, u64)> = tick_list
        .iter()
        .copied()
        .filter(|(at, _)| *at >= arrivals_end + 1000)
        .collect();
    let quiet = rate_fit(&quiet_ticks, profile.admission_rate, full_tick);
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
    report.row(
        "Largest tick burst",
        format!(
            "{largest_tick} (server gauge {server_largest:.0}); ticks above ⌈rate × tick⌉ = {nominal_quota}: {above_quota}; above rate × own elapsed + 1: {}",
            fit.ticks_above_own_quota
        ),
        "no tick above its quota",
        Verdict::from(largest_tick > 0 && largest_tick <= nominal_quota),
        "quota = rate × elapsed + carry, capped at ⌈rate × tick⌉; ticks on a fixed grid, so a late tick's share is paid by the next, early one (carry at most a quarter tick); longer stalls are not caught up",
    );

    // FIFO: arrival (join answered before the other was sent) vs admission order.
    let order: Vec<(u64, u64, u64)> = shoppers
        .iter()
        .filter(|s| s.ticket_id.is_some())
        .map(|s| {
            let at = s
                .ticket_id
                .as_deref()
                .and_then(|id| admitted_at.get(id).copied())
                .unwrap_or(u64::MAX);
            (s.join_sent_us, s.join_answered_us, at)
        })
        .collect();
    let (discordant, comparable) = fifo_discordance(&order);
    report.value("kendall_tau_discordant", discordant);
    report.value("kendall_tau_comparable", comparable);
    report.row(
        "Kendall-tau distance, arrival vs admission order",
        format!(
            "{} discordant of {} ordered pairs ({:.2e})",
            fmt_count(discordant),
            fmt_count(comparable),
            discordant as f64 / comparable.max(1) as f64
        ),
        "0 (FIFO room)",
        Verdict::from(discordant == 0 && comparable > 0),
        "pairs ordered when one join was answered before the other was sent; same-tick admissions tie",
    );

    // ETA honesty: the first ETA each shopper was shown against its actual wait.
    let mut on_time = 0u64;
    let mut judged = 0u64;
    let mut ratios = Vec::new();
    let (mut waited_sum, mut shown_sum) = (0.0, 0.0);
    for shopper in shoppers {
        let (Some(id), Some(eta)) = (&shopper.ticket_id, shopper.first_eta_secs) else {
            continue;
        };
        let shown_ms = eta as f64 * 1000.0;
        match admitted_at.get(id.as_str()) {
            Some(&at) => {
                let waited = at.saturating_sub(shopper.join_answered_unix_ms) as f64;
                judged += 1;
                if waited <= shown_ms {
                    on_time += 1;
                }
                if shown_ms > 0.0 {
                    ratios.push(waited / shown_ms);
                }
                waited_sum += waited;
                shown_sum += shown_ms;
            }
            // Never admitted: late (the drain outlasted its ETA, or it gave up).
            None => judged += 1,
        }
    }
    let share = on_time as f64 / judged.max(1) as f64;
    let median_ratio = quantile(&ratios, 0.5);
    let aggregate_ratio = waited_sum / shown_sum.max(1.0);
    report.value("eta_on_time_share", share);
    report.value("eta_ratio_median", median_ratio);
    report.value("eta_ratio_aggregate", aggregate_ratio);
    report.row(
        "Shoppers admitted no later than the first ETA shown",
        format!(
            "{:.1}% ({} of {})",
            share * 100.0,
            fmt_count(on_time),
            fmt_count(judged)
        ),
        "≥ 95%",
        Verdict::from(share >= 0.95),
        "ETA (median) = position ÷ effective rate × 1.2, rounded up to whole seconds",
    );
    report.row(
        "Actual / shown wait",
        format!(
            "median {:.2}, p10 {:.2}, p90 {:.2}; Σactual/Σshown {:.2}",
            median_ratio,
            quantile(&ratios, 0.1),
            quantile(&ratios, 0.9),
            aggregate_ratio
        ),
        "≥ 0.7",
        Verdict::from(median_ratio >= 0.7 && aggregate_ratio >= 0.7),
        "1/(1 + margin) = 0.83 expected at a steady rate; the front of the queue waits < 1 s but is shown ≥ 1 s",
    );
    let admitted_owned: std::collections::HashMap<String, u64> = admitted_at
        .iter()
        .map(|(id, at)| ((*id).to_owned(), *at))
        .collect();
    crate::calibration::report(
        report,
        "steady",
        &crate::calibration::calibrate(shoppers, &admitted_owned),
    );
    report.row(
        "Shoppers whose position ever rose",
        format!("{} of {}", fmt_count(rose), fmt_count(joined)),
        "none",
        Verdict::from(rose == 0),
        format!(
            "every poll and SSE event compared with the last one ({} on SSE)",
            fmt_count(sse_shoppers)
        ),
    );
    report.row(
        "Admitted shoppers whose order went through (token used once)",
        format!("{} of {} admitted", fmt_count(ordered), fmt_count(admitted)),
        "all",
        Verdict::from(ordered == admitted && admitted == joined),
        first_error
            .map(|e| format!("first shopper error: {e}"))
            .unwrap_or_else(|| "no shopper error".into()),
    );

    // Redis during the sale.
    let rates: Vec<(f64, f64)> = samples
        .windows(2)
        .map(|w| {
            (
                w[1].0.commands_per_sec_since(&w[0].0),
                w[1].0.cpu_percent_since(&w[0].0),
            )
        })
        .collect();
    let peak_cmds = rates.iter().map(|r| r.0).fold(0.0, f64::max);
    let mean_cmds = if samples.len() >= 2 {
        samples[samples.len() - 1]
            .0
            .commands_per_sec_since(&samples[0].0)
    } else {
        0.0
    };
    let peak_cpu = rates.iter().map(|r| r.1).fold(0.0, f64::max);
    let peak_waiting = samples.iter().map(|s| s.1).max().unwrap_or(0);
    let peak_memory = samples.iter().map(|s| s.0.used_memory).max().unwrap_or(0);
    report.value("sale_redis_peak_commands_per_sec", peak_cmds);
    report.value("sale_redis_mean_commands_per_sec", mean_cmds);
    report.row(
        "Redis commands/s during the flash sale",
        format!(
            "peak {} /s (spike), mean {} /s over {:.0} s; peak Redis CPU {:.0}%",
            short(peak_cmds),
            short(mean_cmds),
            sale.secs,
            peak_cpu
        ),
        "–",
        Verdict::Info,
        format!(
            "commands inside scripts count; peak waiting {}; peak used_memory {:.1} MB",
            fmt_count(peak_waiting),
            peak_memory as f64 / 1e6
        ),
    );
    Ok(())
}
