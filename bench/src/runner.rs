//! The whole benchmark in one call: the stages in order, each on fresh processes, into one report.

use std::path::PathBuf;
use std::process::Command;

use crate::profile::Profile;
use crate::report::Report;
use crate::{
    auto_rate, baselines, calibration, capacity, embedded, eta_edges, gate_overhead, ghosts,
    orders_confirm, position_cost, sale, scheduled_drop, sse_capacity,
};

/// The stages, in the order they run.
pub const STAGES: [&str; 14] = [
    "baselines",
    "sale",
    "sale-halved",
    "capacity",
    "embedded",
    "position",
    "sse",
    "sse-h2",
    "gate",
    "ghosts",
    "orders-confirm",
    "drop",
    "eta-edges",
    "auto-rate",
];

/// The stages that run only when named (minutes each, at a fixed scale).
pub const ONLY_WHEN_NAMED: [&str; 3] = ["drop", "eta-edges", "auto-rate"];

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The profile.
    pub profile: Profile,
    /// The `vestibule` binary.
    pub vestibule: PathBuf,
    /// The stages to run (a subset of [`STAGES`]).
    pub stages: Vec<String>,
    /// The scheduled drop's pre-queue sizes, one drop each (stage `drop`).
    pub drop_shoppers: Vec<u64>,
    /// Seconds over which the drop's shoppers join the pre-queue.
    pub drop_join_secs: f64,
    /// Orders per phase of `orders-confirm`.
    pub confirm_shoppers: u64,
    /// Which phase of `orders-confirm` runs first.
    pub confirm_first: orders_confirm::First,
    /// Shoppers in each run of `auto-rate`.
    pub auto_rate_shoppers: usize,
}

/// Runs the chosen stages and returns the report; a failing stage becomes a note, not an abort,
/// so one broken stage still leaves the others' figures.
pub async fn run(options: &RunOptions) -> Report {
    let mut report = Report::default();
    report.note(machine());
    report.note(format!(
        "profile {}; vestibule binary {}",
        options.profile.name,
        options
            .vestibule
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    let wants = |stage: &str| options.stages.iter().any(|s| s == stage);
    let profile = &options.profile;
    let mut ceilings = baselines::Ceilings::default();
    if wants("baselines") {
        eprintln!("[bench] stage: baselines");
        match baselines::run(profile, &mut report).await {
            Ok(found) => ceilings = found,
            Err(error) => report.note(format!("stage baselines failed: {error:#}")),
        }
    }
    if wants("sale") {
        eprintln!("[bench] stage: flash sale");
        if let Err(error) = sale::run(profile, &options.vestibule, &mut report).await {
            report.note(format!("stage sale failed: {error:#}"));
        }
    }
    if wants("sale-halved") {
        eprintln!("[bench] stage: flash sale with the rate halved mid-sale");
        if let Err(error) = calibration::run_halved(profile, &options.vestibule, &mut report).await
        {
            report.note(format!("stage sale-halved failed: {error:#}"));
        }
    }
    if wants("capacity") {
        eprintln!("[bench] stage: capacity");
        if let Err(error) = capacity::run(profile, &options.vestibule, &ceilings, &mut report).await
        {
            report.note(format!("stage capacity failed: {error:#}"));
        }
    }
    if wants("embedded") {
        eprintln!("[bench] stage: embedded store, memory vs durable");
        if let Err(error) = embedded::run(profile, &options.vestibule, &mut report).await {
            report.note(format!("stage embedded failed: {error:#}"));
        }
    }
    if wants("ghosts") {
        eprintln!("[bench] stage: ghosts (30% vanish mid-line)");
        if let Err(error) = ghosts::run(&options.vestibule, 2000, 50.0, &mut report).await {
            report.note(format!("stage ghosts failed: {error:#}"));
        }
    }
    if wants("orders-confirm") {
        eprintln!("[bench] stage: orders with and without confirmation on a replica");
        if let Err(error) = orders_confirm::run(
            &options.vestibule,
            options.confirm_shoppers,
            options.confirm_first,
            &mut report,
        )
        .await
        {
            report.note(format!("stage orders-confirm failed: {error:#}"));
        }
    }
    if wants("drop") {
        for &shoppers in &options.drop_shoppers {
            eprintln!("[bench] stage: scheduled drop of {shoppers}");
            let join_secs = options.drop_join_secs;
            if let Err(error) =
                scheduled_drop::run(&options.vestibule, shoppers, join_secs, &mut report).await
            {
                report.note(format!("stage drop ({shoppers}) failed: {error:#}"));
            }
        }
    }
    if wants("eta-edges") {
        eprintln!("[bench] stage: ETA at the edges (issue 43), both stores");
        if let Err(error) = eta_edges::run(&options.vestibule, &mut report).await {
            report.note(format!("stage eta-edges failed: {error:#}"));
        }
    }
    if wants("auto-rate") {
        eprintln!("[bench] stage: the closed loop against the origin model (issue 48)");
        let shoppers = options.auto_rate_shoppers;
        if let Err(error) = auto_rate::run(&options.vestibule, shoppers, &mut report).await {
            report.note(format!("stage auto-rate failed: {error:#}"));
        }
    }
    if wants("position") {
        eprintln!("[bench] stage: position cost");
        if let Err(error) = position_cost::run(profile, &options.vestibule, &mut report).await {
            report.note(format!("stage position failed: {error:#}"));
        }
    }
    if wants("sse") {
        eprintln!("[bench] stage: SSE");
        if let Err(error) = sse_capacity::run(
            profile,
            &options.vestibule,
            &mut report,
            sse_capacity::Protocol::Http1,
        )
        .await
        {
            report.note(format!("stage sse failed: {error:#}"));
        }
    }
    if wants("sse-h2") {
        eprintln!("[bench] stage: SSE over HTTP/2");
        if let Err(error) = sse_capacity::run(
            profile,
            &options.vestibule,
            &mut report,
            sse_capacity::Protocol::Http2,
        )
        .await
        {
            report.note(format!("stage sse-h2 failed: {error:#}"));
        }
    }
    if wants("gate") {
        eprintln!("[bench] stage: gate overhead vs nginx");
        if let Err(error) = gate_overhead::run(profile, &options.vestibule, &mut report).await {
            report.note(format!("stage gate failed: {error:#}"));
        }
    }
    report
}

/// One line about the machine: CPU, cores, memory, kernel, Redis.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_owned())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let redis = Command::new("redis-server")
        .arg("--version")
        .output()
        .ok()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .nth(2)
                .unwrap_or("")
                .to_owned()
        })
        .unwrap_or_default();
    format!(
        "machine: {model}, {cores} cores, {memory_gib:.0} GiB, Linux {kernel}, Redis {}",
        redis.trim_start_matches("v=")
    )
}
