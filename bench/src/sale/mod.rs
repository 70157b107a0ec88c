//! The flash-sale stage: the shopper model against a fresh server on a fresh Redis, then the
//! figures read off what shoppers saw and what the store recorded.
//!
//! [`run`] goes in steps: start the processes, run the sale while sampling Redis and the
//! machine's CPU (`Observed`), read each ticket's admission time from the store, then the
//! report's rows by concern: `shoppers` (joins, polls, FIFO order, ETA, outcomes), `ticks`
//! (admissions against the configured rate), and Redis's load here.

mod shoppers;
mod ticks;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use vestibule_shared::paths;

use crate::flash_sale::{self, FlashSalePlan, FlashSaleRun};
use crate::http::{short, HttpClient};
use crate::position_cost::fmt_count;
use crate::procs::{
    cpu_secs, machine_busy_secs, start_vestibule, CpuMeter, RedisProcess, ServerProcess,
};
use crate::profile::Profile;
use crate::redis_probe::{admission_times, key, zcard, RedisSample};
use crate::report::{Report, Verdict};

use shoppers::{report_fifo, report_joins, report_polls, EtaHonesty, ShopperCounts};
use ticks::report_admissions;

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
    note_plan(profile, &plan, report);
    let observed = observe_sale(&plan, &redis, &server).await?;
    let shoppers = &observed.sale.shoppers;
    let admitted_at = admission_times(&mut redis.connection()?, ROOM, shoppers, TOKEN_TTL_SECS)?;
    let metrics = HttpClient::new(&server.base(), 2)
        .get(paths::METRICS)
        .await?;
    let metrics = String::from_utf8_lossy(&metrics.body).into_owned();

    let counts = ShopperCounts::of(shoppers, &admitted_at);
    counts.report_values(report);
    report_joins(profile, &observed, &counts, report);
    report_polls(&observed.sale, report);
    report_admissions(profile, &observed, &admitted_at, &metrics, report);
    report_fifo(shoppers, &admitted_at, report);
    EtaHonesty::of(shoppers, &admitted_at).report(report);
    crate::calibration::report(
        report,
        "steady",
        &crate::calibration::calibrate(shoppers, &admitted_at),
    );
    counts.report_outcomes(report);
    report_redis(&observed, report);
    Ok(())
}

fn note_plan(profile: &Profile, plan: &FlashSalePlan, report: &mut Report) {
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
}

/// The sale and what was measured around it.
struct Observed {
    sale: FlashSaleRun,
    /// CPU while shoppers arrived (the spike).
    spike_cpu: String,
    /// CPU over the whole sale.
    cpu_summary: String,
    /// Redis counters and the queue's length, once a second.
    redis_samples: Vec<(RedisSample, u64)>,
    /// Other processes' CPU (percent of one core) per sampling interval: (interval end, percent).
    others_percent: Vec<(u64, f64)>,
}

/// Runs the sale with the Redis sampler and the CPU meters around it.
async fn observe_sale(
    plan: &FlashSalePlan,
    redis: &RedisProcess,
    server: &ServerProcess,
) -> anyhow::Result<Observed> {
    let sampler = Sampler::start(redis, [server.pid(), redis.pid(), std::process::id()])?;
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
    let sale = flash_sale::run(plan, server.addr).await;
    let spike_cpu = spike_cpu.await.unwrap_or_default();
    let (redis_samples, others) = sampler.finish();
    Ok(Observed {
        sale,
        spike_cpu,
        others_percent: percent_per_interval(&others),
        cpu_summary: cpu.summary(),
        redis_samples,
    })
}

/// What the sampler thread collects: Redis counters with the queue's length, and (Unix ms, CPU
/// seconds used by processes other than ours).
type Samples = (Vec<(RedisSample, u64)>, Vec<(u64, f64)>);

/// Redis counters once a second, on a thread of its own, until the sale ends; also the CPU the
/// rest of the machine used, to tell a late tick caused by a neighbour's build from one of our
/// own.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Samples>,
}

impl Sampler {
    /// Starts sampling; `ours` are the processes whose CPU is not "other".
    fn start(redis: &RedisProcess, ours: [u32; 3]) -> anyhow::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut connection = redis.connection()?;
        let queue_key = key(ROOM, "queue");
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut samples = Vec::new();
            let mut others = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                if let Ok(sample) = RedisSample::take(&mut connection) {
                    let waiting = zcard(&mut connection, &queue_key).unwrap_or(0);
                    samples.push((sample, waiting));
                }
                let own: f64 = ours.iter().map(|pid| cpu_secs(*pid)).sum();
                others.push((flash_sale::unix_ms(), machine_busy_secs() - own));
                std::thread::sleep(Duration::from_millis(1000));
            }
            (samples, others)
        });
        Ok(Self { stop, thread })
    }

    fn finish(self) -> Samples {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// CPU seconds at each sample into percent of one core per interval: (interval end, percent).
fn percent_per_interval(others: &[(u64, f64)]) -> Vec<(u64, f64)> {
    others
        .windows(2)
        .map(|w| {
            let secs = (w[1].0.saturating_sub(w[0].0)) as f64 / 1000.0;
            (
                w[1].0,
                ((w[1].1 - w[0].1) / secs.max(1e-3) * 100.0).max(0.0),
            )
        })
        .collect()
}

/// Redis during the sale: commands per second, its CPU, the queue and its memory at their peak.
fn report_redis(observed: &Observed, report: &mut Report) {
    let samples = &observed.redis_samples;
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
    let mean_cmds = match (samples.first(), samples.last()) {
        (Some(first), Some(last)) if samples.len() >= 2 => last.0.commands_per_sec_since(&first.0),
        _ => 0.0,
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
            observed.sale.secs,
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
}
