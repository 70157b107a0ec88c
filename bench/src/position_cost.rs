//! Position cost: poll latency for shoppers at the back of a queue of 1,000 and of 1,000,000
//! (bulk-loaded straight into Redis in the server's layout), and the ratio. Also Redis memory per
//! waiting shopper for the queue entry alone.

use std::sync::Arc;
use vestibule_shared::paths;

use crate::http::{short, HttpClient};
use crate::load::{open_loop, LoadResult};
use crate::procs::{start_vestibule, RedisProcess};
use crate::profile::Profile;
use crate::redis_probe::{bulk_load, key, memory_usage, zcard, RedisSample};
use crate::report::{Report, Verdict};

const ROOM: &str = "pos";

/// Runs the position-cost figures.
///
/// # Errors
/// When a process cannot start or Redis does not answer.
pub async fn run(
    profile: &Profile,
    vestibule: &std::path::Path,
    report: &mut Report,
) -> anyhow::Result<()> {
    let redis = RedisProcess::start()?;
    let server = start_vestibule(vestibule, &redis.url(), ROOM, 0.0, profile.tick_ms, &[])?;
    let mut probe = redis.connection()?;
    let client = HttpClient::new(&server.base(), 64);

    let (small_ids, _) = bulk_load(&mut probe, ROOM, profile.position_small, 1)?;
    let small = probe_back(profile, &client, &small_ids).await;
    let before = RedisSample::take(&mut probe)?;
    let extra = profile.position_large - profile.position_small;
    let (large_ids, load_time) = bulk_load(&mut probe, ROOM, extra, 2)?;
    let after = RedisSample::take(&mut probe)?;
    let waiting = zcard(&mut probe, &key(ROOM, "queue"))?;
    let large = probe_back(profile, &client, &large_ids).await;

    let (s, l) = (small.percentiles(), large.percentiles());
    let ratio_p50 = l.p50_ms / s.p50_ms.max(1e-6);
    let ratio_p99 = l.p99_ms / s.p99_ms.max(1e-6);
    report.value("position_small_p50_ms", s.p50_ms);
    report.value("position_large_p50_ms", l.p50_ms);
    report.value("position_ratio_p50", ratio_p50);
    report.value("position_ratio_p99", ratio_p99);
    report.value("position_large_waiting", waiting);
    report.row(
        format!(
            "Poll latency with {} vs {} waiting (back of the queue), p50/p99/p99.9",
            fmt_count(profile.position_small),
            fmt_count(waiting)
        ),
        format!(
            "{}: {}; {}: {}; ratio p50 {:.2}×, p99 {:.2}×",
            fmt_count(profile.position_small),
            s.triple(),
            fmt_count(waiting),
            l.triple(),
            ratio_p50,
            ratio_p99
        ),
        "≤ 1.5×",
        Verdict::from(ratio_p50 <= 1.5 && errors_free(&small, &large)),
        format!(
            "open loop {} polls/s for {} s each over the last 100 tickets; bulk-load of {} took {:.1} s; errors {}+{}",
            short(profile.position_probe_rate),
            profile.position_probe_secs,
            fmt_count(extra),
            load_time.as_secs_f64(),
            small.errors,
            large.errors
        ),
    );
    let queue_bytes = memory_usage(&mut probe, &key(ROOM, "queue"))? as f64 / waiting.max(1) as f64;
    let delta = after.used_memory.saturating_sub(before.used_memory) as f64 / extra.max(1) as f64;
    report.value("redis_queue_only_bytes_per_shopper", delta);
    report.row(
        format!(
            "Redis memory per waiting shopper, queue entry only ({} bulk-loaded)",
            fmt_count(waiting)
        ),
        format!("{delta:.0} B (used_memory Δ); MEMORY USAGE queue {queue_bytes:.0} B"),
        "≤ 150 B",
        Verdict::from(delta <= 150.0),
        "ZSET skiplist node + dict entry + 22-char member; the ticket HASH is written only at admission",
    );
    Ok(())
}

fn errors_free(a: &LoadResult, b: &LoadResult) -> bool {
    a.errors == 0 && b.errors == 0 && a.ok > 0 && b.ok > 0
}

/// Polls the last 100 tickets round robin at the profile's probe rate.
async fn probe_back(profile: &Profile, client: &HttpClient, ids: &[String]) -> LoadResult {
    let back: Arc<Vec<String>> = Arc::new(ids[ids.len().saturating_sub(100)..].to_vec());
    // Warm-up: connections open, caches hot.
    let warm_rate = profile.position_probe_rate.min(1_000.0);
    let _ = open_loop(warm_rate, Profile::secs(0.3), 1_024, poll(client, &back)).await;
    open_loop(
        profile.position_probe_rate,
        Profile::secs(profile.position_probe_secs),
        1_024,
        poll(client, &back),
    )
    .await
}

fn poll(
    client: &HttpClient,
    ids: &Arc<Vec<String>>,
) -> impl Fn(u64) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>
       + Send
       + Sync
       + 'static {
    let client = client.clone();
    let ids = ids.clone();
    move |n| {
        let client = client.clone();
        let id = ids[n as usize % ids.len()].clone();
        Box::pin(async move {
            let answer = client
                .get(&paths::ticket(ROOM, &id))
                .await
                .map_err(|e| format!("{e:#}"))?;
            if !answer.status.is_success() {
                return Err(format!("poll answered {}", answer.status));
            }
            let status: vestibule_shared::TicketStatus =
                serde_json::from_slice(&answer.body).map_err(|e| e.to_string())?;
            match status.position {
                Some(_) => Ok(()),
                None => Err(format!("ticket is {} not waiting", status.status.as_str())),
            }
        })
    }
}

/// `1,000,000`-style.
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
