//! SSE capacity: how many concurrent SSE shoppers one backend process holds, its RSS per stream,
//! and the Redis load they cause as their number grows, over HTTP/1.1 (a connection per stream,
//! as browsers reaching the server directly) or HTTP/2 (h2c, [`STREAMS_PER_CONNECTION`] streams
//! per connection, as a CDN or proxy in front). HTTP/1.1 streams come from several 127.0.0.x
//! source addresses so that 50,000 of them do not run out of ephemeral ports.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use vestibule_shared::{paths, TicketState};

use crate::http::{short, HttpClient};
use crate::position_cost::fmt_count;
use crate::procs::{
    open_files_limit, raise_open_files_limit, rss_bytes, start_vestibule, RedisProcess,
};
use crate::profile::Profile;
use crate::redis_probe::{bulk_load, RedisSample};
use crate::report::{Report, Verdict};
use crate::sse::{H2Connection, SseStream};

const ROOM: &str = "sse";
/// Streams per source address (the ephemeral range holds ~28,000 ports per address pair).
const STREAMS_PER_SOURCE: u64 = 20_000;
/// Streams being opened at once.
const OPENING_AT_ONCE: usize = 256;
/// HTTP/2 streams per connection: hyper's default limit, so the bare axum floor (which cannot
/// change it) carries the same shape; Vestibule allows 1,000 by default (`--http2-max-streams`).
pub const STREAMS_PER_CONNECTION: u64 = 200;
/// How long a stream may take to answer its first event before it counts as failed (a stream
/// the server never opens must not hold its opening permit forever).
const FIRST_EVENT_WITHIN: Duration = Duration::from_secs(30);

/// How the streams reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// A TCP connection per stream.
    Http1,
    /// [`STREAMS_PER_CONNECTION`] streams per h2c connection.
    Http2,
}

impl Protocol {
    /// Prefix of this protocol's report values.
    fn key(self) -> &'static str {
        match self {
            Self::Http1 => "sse",
            Self::Http2 => "sse_h2",
        }
    }

    /// Name in report rows.
    fn label(self) -> &'static str {
        match self {
            Self::Http1 => "HTTP/1.1",
            Self::Http2 => "HTTP/2",
        }
    }
}

/// Opens streams by `protocol`, keeping the HTTP/2 connection being filled.
struct Opener {
    protocol: Protocol,
    server: std::net::SocketAddr,
    /// The HTTP/2 connection new streams go to, and how many it carries.
    current: Option<(H2Connection, u64)>,
    /// Source address for the `n`th stream or connection: HTTP/1.1 runs and the bare floor use
    /// different ranges, whose ports may still be in TIME_WAIT.
    first_source: u8,
}

impl Opener {
    fn source(&self, n: u64) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(
            127,
            0,
            0,
            self.first_source + (n / STREAMS_PER_SOURCE) as u8,
        ))
    }

    /// The future that opens stream `n` on `path`.
    async fn open(
        &mut self,
        n: u64,
        path: String,
    ) -> anyhow::Result<
        std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<SseStream>> + Send>>,
    > {
        let server = self.server;
        match self.protocol {
            Protocol::Http1 => {
                let source = self.source(n);
                Ok(Box::pin(async move {
                    SseStream::open(server, Some(source), &path).await
                }))
            }
            Protocol::Http2 => {
                let full = self
                    .current
                    .as_ref()
                    .is_none_or(|(_, carried)| *carried >= STREAMS_PER_CONNECTION);
                if full {
                    let connection = H2Connection::connect(server, Some(self.source(n))).await?;
                    self.current = Some((connection, 0));
                }
                let (connection, carried) = self.current.as_mut().expect("a connection");
                *carried += 1;
                let connection = connection.clone();
                Ok(Box::pin(async move { connection.open_stream(&path).await }))
            }
        }
    }
}

#[derive(Default)]
struct Counts {
    alive: AtomicU64,
    failed: AtomicU64,
    /// Status events received after the first, by all streams.
    updates: AtomicU64,
    /// Streams that saw their position rise.
    rose: AtomicU64,
    first_error: Mutex<Option<String>>,
}

/// One measured step.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Step {
    /// Streams asked for.
    pub target: u64,
    /// Streams open and answered.
    pub held: u64,
    /// Streams the server counts.
    pub server_streams: f64,
    /// Streams that failed to open or ended.
    pub failed: u64,
    /// Server RSS growth per stream, bytes.
    pub rss_per_stream: f64,
    /// Redis commands per second while held.
    pub redis_commands_per_sec: f64,
    /// Redis CPU while held, percent of a core.
    pub redis_cpu_percent: f64,
    /// Server CPU while held, percent of a core.
    pub server_cpu_percent: f64,
    /// Streams opened per second.
    pub open_rate: f64,
    /// Status updates the streams received per second while held (positions move with every
    /// admission).
    pub updates_per_sec: f64,
}

/// Runs the SSE steps.
///
/// # Errors
/// When a process cannot start or Redis does not answer.
pub async fn run(
    profile: &Profile,
    vestibule: &std::path::Path,
    report: &mut Report,
    protocol: Protocol,
) -> anyhow::Result<Vec<Step>> {
    let key = protocol.key();
    let wanted_max = profile.sse_steps.iter().copied().max().unwrap_or(0);
    // Each HTTP/1.1 stream costs one descriptor here and one in the server; keep room for the
    // rest.
    let limit = raise_open_files_limit(wanted_max + 10_000);
    let fits = match protocol {
        Protocol::Http1 => limit.saturating_sub(2_000),
        Protocol::Http2 => u64::MAX,
    };
    // Scaled in proportion when the limit is lower, so the growth between steps stays the same.
    let steps: Vec<u64> = if wanted_max > fits {
        let scaled = profile
            .sse_steps
            .iter()
            .map(|&n| (n as f64 * fits as f64 / wanted_max as f64) as u64)
            .collect::<Vec<_>>();
        report.note(format!(
            "SSE steps scaled from {:?} to {scaled:?}: this process may open {} files and cannot raise its hard limit (needs CAP_SYS_RESOURCE, or `ulimit -n 200000` as a root that has it)",
            profile.sse_steps,
            open_files_limit()
        ));
        scaled
    } else {
        profile.sse_steps.clone()
    };
    let max = steps.iter().copied().max().unwrap_or(0);
    let redis = RedisProcess::start()?;
    // The room admits at the profile's rate, so every streamed position moves with each tick as
    // in a real sale; enough shoppers are loaded ahead that no streamed one is admitted.
    let server = start_vestibule(
        vestibule,
        &redis.url(),
        ROOM,
        profile.admission_rate,
        profile.tick_ms,
        &[],
    )?;
    let mut probe = redis.connection()?;
    let stage_secs = 30.0 + max as f64 / 500.0 + steps.len() as f64 * (profile.sse_hold_secs + 5.0);
    let ahead = (profile.admission_rate * stage_secs * 2.0) as u64;
    bulk_load(&mut probe, ROOM, ahead, 4)?;
    let (ids, _) = bulk_load(&mut probe, ROOM, max, 3)?;
    let ids = Arc::new(ids);
    let metrics_client = HttpClient::new(&server.base(), 2);
    let counts = Arc::new(Counts::default());
    let opening = Arc::new(Semaphore::new(OPENING_AT_ONCE));
    let mut streams = JoinSet::new();
    // Let the server settle before its baseline RSS.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_base = rss_bytes(server.pid());
    let idle_before = RedisSample::take(&mut probe)?;
    tokio::time::sleep(Profile::secs(profile.sse_hold_secs.min(3.0))).await;
    let idle_after = RedisSample::take(&mut probe)?;
    let idle_commands = idle_after.commands_per_sec_since(&idle_before);
    let mut opened = 0u64;
    let mut results = Vec::new();
    let mut opener = Opener {
        protocol,
        server: server.addr,
        current: None,
        first_source: 2,
    };
    for &target in &steps {
        let started = Instant::now();
        let from = opened;
        while opened < target {
            let permit = opening.clone().acquire_owned().await?;
            let n = opened;
            let path = paths::events(ROOM, &ids[n as usize]);
            let counts = counts.clone();
            let open = opener.open(n, path).await?;
            streams.spawn(async move {
                hold_stream(open, permit, counts).await;
            });
            opened += 1;
        }
        // Every stream of this step has answered (or failed) once its opening permit is back.
        drop(opening.acquire_many(OPENING_AT_ONCE as u32).await?);
        let open_secs = started.elapsed().as_secs_f64();
        // Let the hub's refresh loop see every new stream before measuring.
        tokio::time::sleep(Profile::secs(profile.sse_hold_secs.min(1.0))).await;
        let before = RedisSample::take(&mut probe)?;
        let updates_before = counts.updates.load(Ordering::Relaxed);
        let cpu_server = crate::procs::cpu_secs(server.pid());
        let hold_started = Instant::now();
        tokio::time::sleep(Profile::secs(profile.sse_hold_secs)).await;
        let after = RedisSample::take(&mut probe)?;
        let server_cpu = (crate::procs::cpu_secs(server.pid()) - cpu_server)
            / hold_started.elapsed().as_secs_f64()
            * 100.0;
        let updates = counts.updates.load(Ordering::Relaxed) - updates_before;
        let updates_per_sec = updates as f64 / hold_started.elapsed().as_secs_f64();
        let held = counts.alive.load(Ordering::Relaxed);
        let rss = rss_bytes(server.pid());
        let server_streams = server_stream_gauge(&metrics_client).await;
        let step = Step {
            target,
            held,
            server_streams,
            failed: counts.failed.load(Ordering::Relaxed),
            rss_per_stream: rss.saturating_sub(rss_base) as f64 / held.max(1) as f64,
            redis_commands_per_sec: after.commands_per_sec_since(&before),
            redis_cpu_percent: after.cpu_percent_since(&before),
            server_cpu_percent: server_cpu,
            open_rate: (target - from) as f64 / open_secs.max(1e-3),
            updates_per_sec,
        };
        eprintln!("[bench] SSE ({}) step {step:?}", protocol.label());
        results.push(step);
    }
    streams.abort_all();
    while streams.join_next().await.is_some() {}
    drop(server);
    drop(opener);
    let floor = bare_axum_floor(max, protocol).await;
    if let Ok((held, per_stream)) = &floor {
        report.value(
            &format!("{key}_bare_axum_rss_per_stream_bytes"),
            *per_stream,
        );
        report.value(&format!("{key}_bare_axum_held"), *held);
    }
    let last = results.last().cloned();
    let first = results.first().cloned();
    let error = counts
        .first_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if let (Some(first), Some(last)) = (first, last) {
        let per_step = results
            .iter()
            .map(|s| {
                format!(
                    "{}: {} held, {:.1} KB/stream, Redis {} cmd/s ({:.0}% CPU), server {:.0}% CPU, {} updates/s",
                    fmt_count(s.target),
                    fmt_count(s.held),
                    s.rss_per_stream / 1024.0,
                    short(s.redis_commands_per_sec),
                    s.redis_cpu_percent,
                    s.server_cpu_percent,
                    short(s.updates_per_sec)
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        report.value(&format!("{key}_held"), last.held);
        report.value(
            &format!("{key}_position_rose"),
            counts.rose.load(Ordering::Relaxed),
        );
        report.value(&format!("{key}_updates_per_sec"), last.updates_per_sec);
        report.value(&format!("{key}_rss_per_stream_bytes"), last.rss_per_stream);
        report.value(&format!("{key}_rss_base_bytes"), rss_base);
        report.value(&format!("{key}_steps"), serde_json::to_value(&results)?);
        let fifty_k = profile.sse_steps.iter().copied().max().unwrap_or(0);
        report.row(
            format!("SSE shoppers held by one process ({})", protocol.label()),
            format!(
                "{} of {} (server counts {:.0}); failed {}",
                fmt_count(last.held),
                fmt_count(last.target),
                last.server_streams,
                last.failed
            ),
            format!("≥ {}", fmt_count(fifty_k.max(50_000))),
            if last.target < 50_000 {
                Verdict::Info
            } else {
                Verdict::from(last.held >= 50_000)
            },
            format!(
                "{}; opened at ~{} /s{}",
                match protocol {
                    Protocol::Http1 => format!(
                        "a connection per stream from 127.0.0.2+ ({} per address)",
                        fmt_count(STREAMS_PER_SOURCE)
                    ),
                    Protocol::Http2 => format!(
                        "h2c, {} streams per connection ({} connections)",
                        fmt_count(STREAMS_PER_CONNECTION),
                        fmt_count(last.target.div_ceil(STREAMS_PER_CONNECTION))
                    ),
                },
                short(last.open_rate.max(0.0)),
                error
                    .map(|e| format!("; first failure: {e}"))
                    .unwrap_or_default()
            ),
        );
        let floor_text = match &floor {
            Ok((held, per_stream)) => format!(
                "bare axum SSE floor (same client, {} streams): {:.1} KB/stream",
                fmt_count(*held),
                per_stream / 1024.0
            ),
            Err(error) => format!("bare axum SSE floor not measured: {error:#}"),
        };
        report.row(
            format!("Server RSS per SSE stream ({})", protocol.label()),
            format!("{:.1} KB ({floor_text})", last.rss_per_stream / 1024.0),
            "≤ 10 KB",
            Verdict::from(last.rss_per_stream <= 10.0 * 1024.0),
            match protocol {
                Protocol::Http1 => "VmRSS growth from the idle server / streams held: the HTTP/1.1 connection (hyper's buffers, task, body stream, keep-alive timer) plus the hub's per-ticket state; see PROPOSALS.md",
                Protocol::Http2 => "VmRSS growth from the idle server / streams held: the h2 stream state and send buffer, the body stream and keep-alive timer, plus the hub's per-ticket state; connection buffers shared by its streams",
            },
        );
        let growth = last.redis_commands_per_sec / first.redis_commands_per_sec.max(1.0);
        let stream_growth = last.held as f64 / first.held.max(1) as f64;
        report.value(&format!("{key}_redis_commands_growth"), growth);
        report.row(
            format!("Redis load as SSE streams grow ({})", protocol.label()),
            per_step,
            "flat in the number of streams",
            Verdict::from(growth <= 1.2 || stream_growth < 1.5),
            format!(
                "room admitting at {} /s, so positions move every tick; without streams: {} cmd/s; {:.1}× the commands for {:.1}× the streams; streams whose position rose: {}",
                profile.admission_rate,
                short(idle_commands),
                growth,
                stream_growth,
                counts.rose.load(Ordering::Relaxed)
            ),
        );
        let cpu_per_1k = last.server_cpu_percent / (last.held.max(1) as f64 / 1000.0);
        report.value(
            &format!("{key}_server_cpu_percent_per_1k_streams"),
            cpu_per_1k,
        );
        report.row(
            format!("Server CPU for SSE updates ({})", protocol.label()),
            format!(
                "{:.1}% of a core per 1,000 streams ({:.0}% at {}), {} updates/s delivered",
                cpu_per_1k,
                last.server_cpu_percent,
                fmt_count(last.held),
                short(last.updates_per_sec)
            ),
            "–",
            Verdict::Info,
            "every admission moves every waiting position, so each stream gets an update per refresh; this CPU grows with the streams even when Redis load does not",
        );
    }
    Ok(results)
}

async fn hold_stream(
    open: impl std::future::Future<Output = anyhow::Result<SseStream>>,
    permit: tokio::sync::OwnedSemaphorePermit,
    counts: Arc<Counts>,
) {
    let fail = |error: String| {
        counts.failed.fetch_add(1, Ordering::Relaxed);
        let mut first = counts.first_error.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert(error);
    };
    let opened = tokio::time::timeout(FIRST_EVENT_WITHIN, async {
        let mut stream = open.await?;
        let first = stream.next_status().await;
        anyhow::Ok((stream, first))
    })
    .await;
    let (mut stream, first) = match opened {
        Ok(Ok(opened)) => opened,
        Ok(Err(error)) => {
            drop(permit);
            fail(format!("{error:#}"));
            return;
        }
        Err(_) => {
            drop(permit);
            fail(format!(
                "no first event within {} s",
                FIRST_EVENT_WITHIN.as_secs()
            ));
            return;
        }
    };
    let mut last_position = match first {
        Ok(Some(status)) if status.status == TicketState::Waiting && status.position.is_some() => {
            status.position
        }
        other => {
            drop(permit);
            fail(format!("first event: {other:?}"));
            return;
        }
    };
    counts.alive.fetch_add(1, Ordering::Relaxed);
    drop(permit);
    // Hold until the server ends the stream (or the run aborts this task).
    let mut rose = false;
    while let Ok(Some(status)) = stream.next_status().await {
        counts.updates.fetch_add(1, Ordering::Relaxed);
        if let (Some(before), Some(now)) = (last_position, status.position) {
            if now > before && !rose {
                rose = true;
                counts.rose.fetch_add(1, Ordering::Relaxed);
            }
        }
        last_position = status.position.or(last_position);
    }
    counts.alive.fetch_sub(1, Ordering::Relaxed);
    fail("stream ended early".into());
}

/// RSS per stream of the bare axum SSE baseline holding `count` streams over `protocol`:
/// (held, bytes/stream).
async fn bare_axum_floor(count: u64, protocol: Protocol) -> anyhow::Result<(u64, f64)> {
    let exe = std::env::current_exe()?;
    let hello = crate::procs::ServerProcess::start(
        &exe,
        &["hello".into(), "--bind".into(), "127.0.0.1:0".into()],
    )?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let base = rss_bytes(hello.pid());
    let counts = Arc::new(Counts::default());
    let opening = Arc::new(Semaphore::new(OPENING_AT_ONCE));
    let mut streams = JoinSet::new();
    let mut opener = Opener {
        protocol,
        server: hello.addr,
        current: None,
        first_source: 20,
    };
    for n in 0..count {
        let permit = opening.clone().acquire_owned().await?;
        let counts = counts.clone();
        let open = opener.open(n, "/sse".into()).await?;
        streams.spawn(async move {
            hold_stream(open, permit, counts).await;
        });
    }
    drop(opener);
    drop(opening.acquire_many(OPENING_AT_ONCE as u32).await?);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = counts.alive.load(Ordering::Relaxed);
    let per_stream = rss_bytes(hello.pid()).saturating_sub(base) as f64 / held.max(1) as f64;
    streams.abort_all();
    while streams.join_next().await.is_some() {}
    Ok((held, per_stream))
}

async fn server_stream_gauge(client: &HttpClient) -> f64 {
    let Ok(answer) = client.get(paths::METRICS).await else {
        return 0.0;
    };
    let text = String::from_utf8_lossy(&answer.body);
    crate::sale::metric_value(&text, &format!("vestibule_sse_streams{{room=\"{ROOM}\"}}"))
}
