//! Ceilings measured in the same run, so figures can be read as ratios on a noisy machine: a bare
//! axum "hello" route (the HTTP ceiling of this box with this load generator) and
//! `redis-benchmark` ZADD/ZRANK (the store ceiling).

use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context as _};
use axum::routing::get;
use axum::Router;

use crate::http::{short, HttpClient};
use crate::load::{at_poll_rate, closed_loop, LoadResult};
use crate::procs::{CpuMeter, RedisProcess, ServerProcess};
use crate::profile::Profile;
use crate::report::{Report, Verdict};

/// Serves the baselines on `bind` until killed (the `hello` subcommand): `GET /` (and any other
/// path) → `hello`, and
/// `GET /sse` → one `status` event (a fixed waiting TicketStatus), then keep-alives: the floor
/// of what an axum SSE stream costs, to read the server's RSS per stream against.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve_hello(bind: std::net::SocketAddr) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(bind).await?;
    println!("hello listening on http://{}", listener.local_addr()?);
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/sse", get(bare_sse))
        // Any other path answers the same: the origin behind the gate benchmark.
        .fallback(get(|| async { "hello" }));
    axum::serve(listener, app).await?;
    Ok(())
}

async fn bare_sse() -> impl axum::response::IntoResponse {
    use axum::response::sse::{Event, KeepAlive, Sse};
    use futures_util::StreamExt as _;
    let status = waiting_status(
        "AAAAAAAAAAAAAAAAAAAAAA".into(),
        "sse".into(),
        1,
        vestibule_shared::RoomState::Paused,
        30_000,
    );
    let first = Event::default()
        .event("status")
        .id("0")
        .data(serde_json::to_string(&status).unwrap_or_default());
    let events =
        futures_util::stream::once(async move { Ok::<_, std::convert::Infallible>(first) })
            .chain(futures_util::stream::pending());
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// A waiting ticket's status with nothing else set: what the bench's peers answer (the SSE floor's
/// first event, the join floor's answer), about the size of Vestibule's own.
pub fn waiting_status(
    ticket_id: String,
    room: String,
    position: u64,
    room_state: vestibule_shared::RoomState,
    next_poll_after_ms: u64,
) -> vestibule_shared::TicketStatus {
    vestibule_shared::TicketStatus {
        ticket_id,
        room,
        status: vestibule_shared::TicketState::Waiting,
        position: Some(position),
        eta_seconds: None,
        eta_seconds_high: None,
        reason: None,
        eta_basis: None,
        next_poll_after_ms,
        entry_token: None,
        token_expires_at: None,
        checkout_url: None,
        room_state,
        place_kept: false,
        heartbeat_after_ms: None,
        sold_out_message: None,
        opens_at: None,
        ticket_tag: None,
        message_en: None,
        message_ko: None,
        beyond_stock: false,
        queueing_method: None,
        display_name_en: None,
        display_name_ko: None,
    }
}

/// What the ceilings came to.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ceilings {
    /// Hello requests per second.
    pub http_per_sec: f64,
    /// ZADD per second (50 clients, no pipelining).
    pub zadd_per_sec: f64,
    /// ZRANK per second on a 200k ZSET.
    pub zrank_per_sec: f64,
    /// p99 of the hello route at the capacity stage's poll rate (open loop), ms: the floor of
    /// the poll latency figures on this box today.
    pub http_p99_ms_at_poll_rate: Option<f64>,
}

impl Ceilings {
    /// `rate` as a share of the bare-axum ceiling ("37% of the HTTP ceiling"), or a note that this
    /// run measured none (stage `baselines` not run).
    pub fn share_of_http(&self, rate: f64) -> String {
        if self.http_per_sec > 0.0 {
            format!(
                "{:.0}% of the HTTP ceiling",
                rate / self.http_per_sec * 100.0
            )
        } else {
            "no HTTP ceiling in this run (stage baselines not run)".to_owned()
        }
    }
}

/// Measures both ceilings.
///
/// # Errors
/// When a process cannot start.
pub async fn run(profile: &Profile, report: &mut Report) -> anyhow::Result<Ceilings> {
    let mut ceilings = Ceilings::default();
    let exe = std::env::current_exe()?;
    let hello = ServerProcess::start(
        &exe,
        &["hello".into(), "--bind".into(), "127.0.0.1:0".into()],
    )?;
    let client = HttpClient::new(&hello.base(), profile.capacity_connections);
    // Warm the pool.
    let _ = closed_loop(
        profile.capacity_connections,
        Duration::from_millis(300),
        10_000,
        hello_request(client.clone()),
    )
    .await;
    let cpu = CpuMeter::start(&[("hello", hello.pid()), ("bench", std::process::id())]);
    let result: LoadResult = closed_loop(
        profile.capacity_connections,
        Profile::secs(profile.baseline_secs),
        u64::MAX,
        hello_request(client),
    )
    .await;
    ceilings.http_per_sec = result.rate();
    report.value("http_ceiling_per_sec", result.rate());
    report.row(
        "HTTP ceiling: bare axum `GET /` (closed loop)",
        format!(
            "{} req/s, {}",
            short(result.rate()),
            result.percentiles().triple()
        ),
        "baseline",
        Verdict::Info,
        format!(
            "{} connections; CPU: {}; errors {}",
            profile.capacity_connections,
            cpu.summary(),
            result.errors
        ),
    );
    // The same open loop as the capacity stage's timed polls, at the same rate: what latency
    // the box, the load generator and axum alone give at that rate.
    let open = hello_request(HttpClient::new(&hello.base(), profile.capacity_connections));
    let cpu = CpuMeter::start(&[("hello", hello.pid()), ("bench", std::process::id())]);
    let at_rate = at_poll_rate(profile, move |n| open(0, n)).await;
    let p = at_rate.percentiles();
    ceilings.http_p99_ms_at_poll_rate = Some(p.p99_ms);
    report.value("http_p99_ms_at_poll_rate", p.p99_ms);
    report.row(
        format!(
            "HTTP floor: bare axum `GET /` at {} /s (open loop), p50/p99/p99.9",
            short(profile.poll_rate)
        ),
        format!("{} (achieved {} /s)", p.triple(), short(at_rate.rate())),
        "baseline",
        Verdict::Info,
        format!(
            "latency from the moment each request was due; CPU: {}; errors {}, not sent {}",
            cpu.summary(),
            at_rate.errors,
            at_rate.dropped
        ),
    );
    drop(hello);

    let redis = RedisProcess::start()?;
    let n = profile.redis_benchmark_requests;
    match redis_benchmark(
        redis.port,
        n,
        &["ZADD", "bench:zset", "__rand_int__", "m:__rand_int__"],
    ) {
        Ok((rps, p50, p99)) => {
            ceilings.zadd_per_sec = rps;
            report.value("redis_zadd_per_sec", rps);
            report.row(
                "Store ceiling: redis-benchmark ZADD",
                format!("{} ops/s, p50 {p50} / p99 {p99} ms", short(rps)),
                "baseline",
                Verdict::Info,
                format!("50 clients, no pipelining, {n} requests, random members of 1M"),
            );
        }
        Err(error) => report.note(format!("redis-benchmark ZADD failed: {error:#}")),
    }
    match redis_benchmark(redis.port, n, &["ZRANK", "bench:zset", "m:__rand_int__"]) {
        Ok((rps, p50, p99)) => {
            ceilings.zrank_per_sec = rps;
            report.value("redis_zrank_per_sec", rps);
            report.row(
                "Store ceiling: redis-benchmark ZRANK",
                format!("{} ops/s, p50 {p50} / p99 {p99} ms", short(rps)),
                "baseline",
                Verdict::Info,
                "50 clients, no pipelining, on the ZSET the ZADD run filled",
            );
        }
        Err(error) => report.note(format!("redis-benchmark ZRANK failed: {error:#}")),
    }
    Ok(ceilings)
}

fn hello_request(
    client: HttpClient,
) -> impl Fn(
    usize,
    u64,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>
       + Send
       + Sync
       + 'static {
    move |_, _| {
        let client = client.clone();
        Box::pin(async move {
            match client.get("/").await {
                Ok(answer) if answer.status.is_success() => Ok(()),
                Ok(answer) => Err(format!("hello answered {}", answer.status)),
                Err(error) => Err(format!("{error:#}")),
            }
        })
    }
}

/// Runs `redis-benchmark … --csv <command>` and returns (ops/s, p50 ms, p99 ms).
fn redis_benchmark(
    port: u16,
    requests: u64,
    command: &[&str],
) -> anyhow::Result<(f64, String, String)> {
    let output = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args([
            "-c",
            "50",
            "-n",
            &requests.to_string(),
            "-r",
            "1000000",
            "--csv",
        ])
        .args(command)
        .output()
        .context("redis-benchmark must be installed (it comes with redis-tools)")?;
    let text = String::from_utf8_lossy(&output.stdout);
    // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms",…
    let Some(line) = text
        .lines()
        .filter(|l| !l.starts_with("\"test\""))
        .find(|l| l.contains(','))
    else {
        bail!(
            "no CSV line in redis-benchmark output: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let fields: Vec<String> = line
        .split("\",\"")
        .map(|f| f.trim_matches('"').to_owned())
        .collect();
    let rps: f64 = fields
        .get(1)
        .and_then(|f| f.parse().ok())
        .with_context(|| format!("rps in {line}"))?;
    let p50 = fields.get(4).cloned().unwrap_or_default();
    let p99 = fields.get(6).cloned().unwrap_or_default();
    Ok((rps, p50, p99))
}
