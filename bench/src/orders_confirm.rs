//! What confirming a token's use on the replicas costs (`orders-confirm`): the Redis store answers
//! an order only once every replica its master lists online has it (`WAIT n t`, see
//! `backend/store/src/redis/confirm.rs`); with no replica there is no `WAIT`. One Vestibule on a
//! Redis master with a second redis-server as its replica; shoppers join a room admitting
//! 2,000 /s, poll until they hold an entry token, then all order at a fixed concurrency (each
//! with its own `Idempotency-Key`). Once with the replica online, once after `REPLICAOF NO ONE`
//! (new shoppers, same room, same server): orders/s and order p50/p99 of each, and the ratio.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use hyper::Method;
use vestibule_shared::{paths, TicketState, TicketStatus, ENTRY_TOKEN_HEADER};

use crate::http::{short, HttpClient, Percentiles};
use crate::load::{closed_loop, LoadResult};
use crate::position_cost::fmt_count;
use crate::procs::{start_vestibule, CpuMeter, RedisProcess, ServerProcess};
use crate::redis_probe::info;
use crate::report::{Report, Verdict};

const ROOM: &str = "confirm";
/// Shoppers admitted per second: high enough that the tokens come in a second or two.
const ADMISSION_RATE: f64 = 2_000.0;
/// Orders in flight at once.
const CONCURRENCY: usize = 32;
/// Orders sent before each measured phase and not counted (connections open, caches warm).
const WARM_UP: u64 = 64;
const ORDER_BODY: &str = r#"{"sku":"sneaker-42","quantity":1}"#;
/// The store re-reads a master's replica count at most once a second (`confirm::RECOUNT`):
/// after the replica comes or goes, wait longer than that before measuring.
const RECOUNT_MARGIN: Duration = Duration::from_millis(1_500);

/// Which phase runs first (alternate it between runs, so drift on a shared box favours neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum First {
    /// With the replica online, then after `REPLICAOF NO ONE`.
    With,
    /// With the replica detached first, then attached (`REPLICAOF`).
    Without,
}

/// One measured phase.
struct Phase {
    replica: bool,
    orders: LoadResult,
    statuses: BTreeMap<String, u64>,
    /// `WAIT` calls the master counted during the orders.
    waits: u64,
    cpu: String,
    load_average: String,
}

impl Phase {
    fn all_created(&self) -> bool {
        self.statuses.len() == 1 && self.statuses.contains_key("201")
    }

    fn statuses(&self) -> String {
        self.statuses
            .iter()
            .map(|(status, count)| format!("{} {status}", fmt_count(*count)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Runs the stage with `shoppers` orders per phase.
///
/// # Errors
/// When a process cannot start, the replica does not come online or Redis does not answer.
pub async fn run(
    vestibule: &Path,
    shoppers: u64,
    first: First,
    report: &mut Report,
) -> anyhow::Result<()> {
    let master = RedisProcess::start()?;
    let replica = RedisProcess::start()?;
    let mut master_probe = master.connection()?;
    let mut replica_probe = replica.connection()?;
    // The full sync goes over the socket, no RDB file on either side (nor a wait of 5 s).
    for (on_replica, name, value) in [
        (false, "repl-diskless-sync", "yes"),
        (false, "repl-diskless-sync-delay", "0"),
        (true, "repl-diskless-load", "swapdb"),
    ] {
        let connection = if on_replica {
            &mut replica_probe
        } else {
            &mut master_probe
        };
        let _: String = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query(connection)
            .with_context(|| format!("CONFIG SET {name}"))?;
    }
    let order = match first {
        First::With => [true, false],
        First::Without => [false, true],
    };
    // The server starts with the replica in the state the first phase needs.
    set_replica(&mut replica_probe, &mut master_probe, master.port, order[0])?;
    let ttl = "300";
    let server = start_vestibule(
        vestibule,
        &master.url(),
        ROOM,
        ADMISSION_RATE,
        100,
        &["--token-ttl-secs", ttl, "--poll-tiers", "*:1000"],
    )?;
    let queue = HttpClient::new(&server.base(), 256);
    let mut phases = Vec::new();
    for (index, &with_replica) in order.iter().enumerate() {
        if index > 0 {
            set_replica(
                &mut replica_probe,
                &mut master_probe,
                master.port,
                with_replica,
            )?;
        }
        // Clients' replica counts are read at most once a second: let the last one expire.
        tokio::time::sleep(RECOUNT_MARGIN).await;
        let label = if with_replica { "with" } else { "without" };
        eprintln!("[bench] orders-confirm: {label} a replica, {shoppers} shoppers");
        let tokens = entry_tokens(&queue, &format!("{label}-{index}"), shoppers + WARM_UP).await?;
        let phase = order_all(
            &server,
            &master,
            &replica,
            &mut master_probe,
            tokens,
            with_replica,
            &format!("{label}-{index}"),
        )
        .await?;
        phases.push(phase);
    }
    let (Some(with), Some(without)) = (
        phases.iter().find(|p| p.replica),
        phases.iter().find(|p| !p.replica),
    ) else {
        bail!("a phase is missing");
    };
    record(report, shoppers, first, with, without);
    drop(server);
    drop(replica);
    drop(master);
    Ok(())
}

/// Attaches the replica (`REPLICAOF 127.0.0.1 <master>`) and waits until the master lists it
/// online, or detaches it (`REPLICAOF NO ONE`) and waits until the master lists none.
fn set_replica(
    replica: &mut redis::Connection,
    master: &mut redis::Connection,
    master_port: u16,
    attached: bool,
) -> anyhow::Result<()> {
    let mut command = redis::cmd("REPLICAOF");
    if attached {
        command.arg("127.0.0.1").arg(master_port);
    } else {
        command.arg("NO").arg("ONE");
    }
    let _: String = command.query(replica).context("REPLICAOF")?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let fields = info(master, "replication")?;
        let online = fields
            .get("slave0")
            .is_some_and(|slave| slave.contains("state=online"));
        let none = fields.get("connected_slaves").map(String::as_str) == Some("0");
        if (attached && online) || (!attached && none) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the master's replication did not settle in 30 s: {fields:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `count` shoppers join (keys `confirm-<tag>-<n>`) and poll until `TOKEN_ISSUED`: their tokens.
async fn entry_tokens(client: &HttpClient, tag: &str, count: u64) -> anyhow::Result<Vec<String>> {
    let started = Instant::now();
    let mut shoppers = tokio::task::JoinSet::new();
    for n in 0..count {
        let client = client.clone();
        let key = format!("confirm-{tag}-{n}");
        shoppers.spawn(async move { (n, entry_token(&client, &key).await) });
    }
    let mut tokens = vec![String::new(); count as usize];
    while let Some(joined) = shoppers.join_next().await {
        let (n, token) = joined?;
        tokens[n as usize] = token?;
    }
    eprintln!(
        "[bench] orders-confirm: {count} tokens in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(tokens)
}

async fn entry_token(client: &HttpClient, key: &str) -> anyhow::Result<String> {
    let headers = [("idempotency-key", key)];
    let joined = client
        .send(Method::POST, &paths::tickets(ROOM), &headers, None)
        .await?;
    let mut status: TicketStatus = serde_json::from_slice(&joined.body)
        .with_context(|| format!("join answered {}", joined.status))?;
    let path = paths::ticket(ROOM, &status.ticket_id);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match status.status {
            TicketState::TokenIssued => return status.entry_token.context("no entry token"),
            TicketState::Waiting => {}
            other => bail!("ticket became {}", other.as_str()),
        }
        if Instant::now() > deadline {
            bail!("no entry token within 120 s");
        }
        tokio::time::sleep(Duration::from_millis(status.next_poll_after_ms)).await;
        let polled = client.get(&path).await?;
        status = serde_json::from_slice(&polled.body)
            .with_context(|| format!("poll answered {}", polled.status))?;
    }
}

/// `WAIT` calls the master has counted (`INFO commandstats`).
fn wait_calls(master: &mut redis::Connection) -> anyhow::Result<u64> {
    let fields = info(master, "commandstats")?;
    Ok(fields
        .get("cmdstat_wait")
        .and_then(|stat| stat.split(',').find_map(|f| f.strip_prefix("calls=")))
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(0))
}

/// The first [`WARM_UP`] tokens order unmeasured, then the rest at [`CONCURRENCY`].
async fn order_all(
    server: &ServerProcess,
    master: &RedisProcess,
    replica: &RedisProcess,
    master_probe: &mut redis::Connection,
    tokens: Vec<String>,
    with_replica: bool,
    tag: &str,
) -> anyhow::Result<Phase> {
    // A client of its own per phase: both phases open their connections in the warm-up.
    let client = HttpClient::new(&server.base(), CONCURRENCY);
    let tokens = Arc::new(tokens);
    let tag: Arc<str> = Arc::from(tag);
    let statuses: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let order = |offset: u64, statuses: Arc<Mutex<BTreeMap<String, u64>>>| {
        let client = client.clone();
        let tokens = tokens.clone();
        let tag = tag.clone();
        move |_worker: usize, n: u64| {
            let client = client.clone();
            let tokens = tokens.clone();
            let statuses = statuses.clone();
            let key = format!("order-{tag}-{}", offset + n);
            async move {
                let token = &tokens[(offset + n) as usize];
                let headers = [
                    (ENTRY_TOKEN_HEADER, token.as_str()),
                    ("idempotency-key", key.as_str()),
                ];
                let answer = client
                    .send(
                        Method::POST,
                        &paths::orders(ROOM),
                        &headers,
                        Some(ORDER_BODY),
                    )
                    .await;
                let status = match &answer {
                    Ok(answer) => answer.status.as_u16().to_string(),
                    Err(_) => "error".to_owned(),
                };
                *statuses
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(status.clone())
                    .or_default() += 1;
                match answer {
                    Ok(answer) if answer.status == hyper::StatusCode::CREATED => Ok(()),
                    Ok(answer) => Err(format!(
                        "order answered {}: {}",
                        answer.status,
                        String::from_utf8_lossy(&answer.body)
                    )),
                    Err(error) => Err(format!("{error:#}")),
                }
            }
        }
    };
    let limit = Duration::from_secs(600);
    let warm: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let warm_up = closed_loop(CONCURRENCY, limit, WARM_UP, order(0, warm)).await;
    if warm_up.errors > 0 {
        bail!("warm-up orders failed: {:?}", warm_up.first_error);
    }
    let measured = tokens.len() as u64 - WARM_UP;
    let waits_before = wait_calls(master_probe)?;
    let meter = CpuMeter::start(&[
        ("vestibule", server.pid()),
        ("redis master", master.pid()),
        ("redis replica", replica.pid()),
        ("bench", std::process::id()),
    ]);
    let orders = closed_loop(
        CONCURRENCY,
        limit,
        measured,
        order(WARM_UP, statuses.clone()),
    )
    .await;
    let cpu = meter.summary();
    let waits = wait_calls(master_probe)?.saturating_sub(waits_before);
    let statuses = statuses.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(Phase {
        replica: with_replica,
        orders,
        statuses,
        waits,
        cpu,
        load_average: load_average(),
    })
}

/// The 1-, 5- and 15-minute load averages of the box.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn record(report: &mut Report, shoppers: u64, first: First, with: &Phase, without: &Phase) {
    let (w, wo) = (with.orders.percentiles(), without.orders.percentiles());
    let rate_ratio = with.orders.rate() / without.orders.rate().max(1e-9);
    let p99_ratio = w.p99_ms / wo.p99_ms.max(1e-6);
    let p50_ratio = w.p50_ms / wo.p50_ms.max(1e-6);
    let first = match first {
        First::With => "with the replica first",
        First::Without => "without the replica first",
    };
    report.note(format!(
        "orders-confirm: one vestibule on a Redis master, a second redis-server as its replica; room admitting {ADMISSION_RATE}/s, {} shoppers per phase take their tokens, then order at concurrency {CONCURRENCY} after {WARM_UP} unmeasured; {first}",
        fmt_count(shoppers)
    ));
    for phase in [with, without] {
        let name = if phase.replica { "with" } else { "without" };
        report.note(format!(
            "orders-confirm {name} a replica: WAIT calls on the master {}; CPU during the orders {}; load average {}",
            fmt_count(phase.waits),
            phase.cpu,
            phase.load_average
        ));
    }
    for (name, phase, p) in [
        ("Orders with the use confirmed on 1 replica (WAIT)", with, w),
        ("Orders with no replica (no WAIT)", without, wo),
    ] {
        let key = if phase.replica { "with" } else { "without" };
        report.value(
            &format!("orders_confirm_{key}_per_sec"),
            phase.orders.rate(),
        );
        report.value(&format!("orders_confirm_{key}_p50_ms"), p.p50_ms);
        report.value(&format!("orders_confirm_{key}_p99_ms"), p.p99_ms);
        report.value(&format!("orders_confirm_{key}_waits"), phase.waits);
        report.row(
            name,
            format!(
                "{} orders/s; p50/p99/p99.9 {}; {}",
                fmt_count(phase.orders.rate().round() as u64),
                p.triple(),
                phase.statuses()
            ),
            "every order 201",
            Verdict::from(phase.all_created() && phase.orders.ok == shoppers),
            order_limit(phase, &p),
        );
    }
    report.value("orders_confirm_rate_ratio", rate_ratio);
    report.value("orders_confirm_p99_ratio", p99_ratio);
    report.row(
        "What confirming a token's use costs (with ÷ without a replica)",
        format!(
            "orders/s {:.0}% ({rate_ratio:.2}×); p50 {p50_ratio:.2}×; p99 {p99_ratio:.2}×",
            rate_ratio * 100.0
        ),
        "≥ 50% of orders/s, ≤ 2× p99",
        Verdict::from(
            rate_ratio >= 0.5 && p99_ratio <= 2.0 && with.all_created() && without.all_created(),
        ),
        format!(
            "WAIT 1 per order with the replica ({} calls), none without ({})",
            fmt_count(with.waits),
            fmt_count(without.waits)
        ),
    );
}

fn order_limit(phase: &Phase, p: &Percentiles) -> String {
    format!(
        "{} orders in {:.2} s, max {} ms; CPU {}",
        fmt_count(phase.orders.ok),
        phase.orders.secs,
        short(p.max_ms),
        phase.cpu
    )
}
