//! Capacity on the Redis store: joins/s and polls/s at saturation (closed loop), poll latency at
//! a fixed 10,000/s (open loop), and Redis memory per waiting shopper as the server writes it.
//! The room admits nobody (rate 0) and nobody leaves, so a waiting ticket's position never moves
//! after its join: every poll answer is checked against the position its join was given (the
//! truth), and a wrong one counts as an error.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt as _};
use hyper::Method;
use vestibule_shared::{paths, TicketState};

use crate::bare_join::FloorScript;
use crate::baselines::Ceilings;
use crate::http::{short, HttpClient};
use crate::load::{at_poll_rate, closed_loop};
use crate::procs::{start_vestibule, CpuMeter, RedisProcess, ServerProcess};
use crate::profile::Profile;
use crate::redis_probe::{key, memory_usage, zcard, RedisSample};
use crate::report::{Report, Verdict};

const ROOM: &str = "cap";

/// Runs the capacity figures.
///
/// # Errors
/// When a process cannot start or Redis does not answer.
pub async fn run(
    profile: &Profile,
    vestibule: &std::path::Path,
    ceilings: &Ceilings,
    report: &mut Report,
) -> anyhow::Result<()> {
    let redis = RedisProcess::start()?;
    let server = start_vestibule(vestibule, &redis.url(), ROOM, 0.0, profile.tick_ms, &[])?;
    let mut probe = redis.connection()?;
    let client = HttpClient::new(&server.base(), profile.capacity_connections);
    let ids: Arc<Mutex<Vec<Joined>>> = Arc::default();
    let join = joiner(&client, "cap", &ids);
    warm_up(profile, &join).await;
    let queue = key(ROOM, "queue");
    let dedup = key(ROOM, "dedup");
    let before = RedisSample::take(&mut probe)?;
    let calls_before = join_calls(&client).await?;
    let waiting_before = zcard(&mut probe, &queue)?;
    let cpu = CpuMeter::start(&[
        ("vestibule", server.pid()),
        ("redis", redis.pid()),
        ("bench", std::process::id()),
    ]);
    let joins = timed_joins(profile, &join).await;
    let after = RedisSample::take(&mut probe)?;
    let cpu_joins = cpu.summary();
    let calls_after = join_calls(&client).await?;
    let per_call = (calls_after.1 - calls_before.1) / (calls_after.0 - calls_before.0).max(1.0);
    let waiting_after = zcard(&mut probe, &queue)?;
    let added = waiting_after.saturating_sub(waiting_before).max(1);
    let per_join_cmds =
        (after.commands.saturating_sub(before.commands + 1)) as f64 / joins.ok.max(1) as f64;
    let joins_p = joins.percentiles();
    report.value("joins_per_sec", joins.rate());
    report.value("joins_per_join_call", per_call);
    report.value("join_p99_ms", joins_p.p99_ms);
    report.row(
        "Joins/s at saturation (closed loop), p50/p99/p99.9",
        format!("{} /s, {}", short(joins.rate()), joins_p.triple()),
        "≥ 20,000 /s",
        Verdict::from(joins.rate() >= 20_000.0),
        format!(
            "{} connections; {}; CPU: {cpu_joins}; Redis {} cmd/s ({:.1} per join, {:.0}% CPU); {:.1} joins per join.lua call; errors {}{}",
            profile.capacity_connections,
            ceilings.share_of_http(joins.rate()),
            short(after.commands_per_sec_since(&before)),
            per_join_cmds,
            after.cpu_percent_since(&before),
            per_call,
            joins.errors,
            joins.first_error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default(),
        ),
    );

    // The stack's floor for a join, against the same Redis (keys of its own), same client.
    for script in [FloorScript::Join, FloorScript::Incr] {
        join_floor(profile, &redis, script, joins.rate(), ceilings, report).await?;
    }

    // Memory per waiting shopper as the server writes it: queue entry plus dedup entry.
    let memory_delta = after.used_memory.saturating_sub(before.used_memory) as f64 / added as f64;
    let queue_bytes = memory_usage(&mut probe, &queue)? as f64 / waiting_after.max(1) as f64;
    let dedup_bytes = memory_usage(&mut probe, &dedup)? as f64 / waiting_after.max(1) as f64;
    report.value("redis_bytes_per_waiting_shopper", memory_delta);
    report.value("redis_queue_bytes_per_shopper", queue_bytes);
    report.value("redis_dedup_bytes_per_shopper", dedup_bytes);
    report.row(
        "Redis memory per waiting shopper (joined over HTTP with an Idempotency-Key)",
        format!(
            "{memory_delta:.0} B (INFO used_memory Δ / {added}); MEMORY USAGE: queue {queue_bytes:.0} B + dedup {dedup_bytes:.0} B"
        ),
        "≤ 150 B",
        Verdict::from(memory_delta <= 150.0),
        "queue ZSET entry (22-char id, skiplist+dict); a keyed first join writes no dedup entry (its id is derived from the key), only a re-join after LEAVE/EXPIRED does",
    );

    let ids: Arc<Vec<Joined>> = Arc::new(std::mem::take(
        &mut *ids.lock().unwrap_or_else(|p| p.into_inner()),
    ));
    if ids.is_empty() {
        anyhow::bail!(
            "no ticket joined in the capacity run: {:?}",
            joins.first_error
        );
    }
    let poll = {
        let client = client.clone();
        let ids = ids.clone();
        move |n: u64| {
            let client = client.clone();
            let ticket = ids[(n.wrapping_mul(2_654_435_761) % ids.len() as u64) as usize].clone();
            async move { poll_once(&client, ROOM, &ticket).await }
        }
    };
    let poll = Arc::new(poll);
    // Warm-up: every ticket polled once, in order. A shopper's first poll is read from the store
    // and anchors the ticket in the room's SSE hub (docs/DESIGN.md "Polls answered from
    // memory"); in a sale each shopper then polls many times, so the timed polls below measure
    // that steady state. Then a second for the hub to read the few it could not anchor.
    let first_polls = {
        let client = client.clone();
        let ids = ids.clone();
        move |_: usize, n: u64| {
            let client = client.clone();
            let ticket = ids[n as usize].clone();
            async move { poll_once(&client, ROOM, &ticket).await }
        }
    };
    let warm = closed_loop(
        profile.capacity_connections,
        Duration::from_secs(120),
        ids.len() as u64,
        first_polls,
    )
    .await;
    report.value("first_polls_per_sec", warm.rate());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = RedisSample::take(&mut probe)?;
    let cpu = CpuMeter::start(&[
        ("vestibule", server.pid()),
        ("redis", redis.pid()),
        ("bench", std::process::id()),
    ]);
    let closed = poll.clone();
    let polls = closed_loop(
        profile.capacity_connections,
        Profile::secs(profile.capacity_secs),
        u64::MAX,
        move |w, n| closed(n.wrapping_add(w as u64)),
    )
    .await;
    let after = RedisSample::take(&mut probe)?;
    let polls_p = polls.percentiles();
    report.value("polls_per_sec", polls.rate());
    report.row(
        "Polls/s at saturation (closed loop), p50/p99/p99.9",
        format!("{} /s, {}", short(polls.rate()), polls_p.triple()),
        "≥ 30,000 /s",
        Verdict::from(polls.rate() >= 30_000.0),
        format!(
            "{} connections, {} waiting, each polled once before (first polls {} /s); {}; CPU: {}; Redis {} cmd/s ({:.0}% CPU); errors {} (every answer checked: WAITING at the position its join was given){}",
            profile.capacity_connections,
            waiting_after,
            short(warm.rate()),
            ceilings.share_of_http(polls.rate()),
            cpu.summary(),
            short(after.commands_per_sec_since(&before)),
            after.cpu_percent_since(&before),
            polls.errors + warm.errors,
            polls.first_error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default(),
        ),
    );

    let cpu = CpuMeter::start(&[
        ("vestibule", server.pid()),
        ("redis", redis.pid()),
        ("bench", std::process::id()),
    ]);
    let open = poll.clone();
    let at_rate = at_poll_rate(profile, move |n| open(n)).await;
    let p = at_rate.percentiles();
    report.value("poll_p99_ms_at_rate", p.p99_ms);
    report.value("poll_rate_offered", profile.poll_rate);
    report.row(
        format!(
            "Poll latency at {} /s (open loop), p50/p99/p99.9",
            short(profile.poll_rate)
        ),
        format!("{} (achieved {} /s)", p.triple(), short(at_rate.rate())),
        "p99 < 10 ms",
        Verdict::from(p.p99_ms < 10.0 && at_rate.dropped == 0),
        format!(
            "latency from the moment each poll was due; CPU: {}; errors {} (answers checked as above){}, not sent {}{}",
            cpu.summary(),
            at_rate.errors,
            at_rate.first_error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default(),
            at_rate.dropped,
            floor(ceilings)
        ),
    );

    // The same open loop while the room admits at the sale's rate: every refresh then moves
    // the streamed tickets, and polled ones are caught up from the hub's log when answered.
    let rate = profile.admission_rate;
    client.set_admission_rate(ROOM, rate).await?;
    let admitting_since = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cpu = CpuMeter::start(&[
        ("vestibule", server.pid()),
        ("redis", redis.pid()),
        ("bench", std::process::id()),
    ]);
    let moving = {
        let client = client.clone();
        let ids = ids.clone();
        move |n: u64| {
            let client = client.clone();
            let ticket = ids[(n.wrapping_mul(2_654_435_761) % ids.len() as u64) as usize].clone();
            async move { poll_admitting(&client, ROOM, &ticket, admitting_since, rate).await }
        }
    };
    let admitting = at_poll_rate(profile, moving).await;
    let p = admitting.percentiles();
    report.value("poll_p99_ms_at_rate_admitting", p.p99_ms);
    report.row(
        format!(
            "Poll latency at {} /s while the room admits {} /s (open loop), p50/p99/p99.9",
            short(profile.poll_rate),
            short(rate)
        ),
        format!("{} (achieved {} /s)", p.triple(), short(admitting.rate())),
        "p99 < 10 ms",
        Verdict::from(p.p99_ms < 10.0 && admitting.dropped == 0),
        format!(
            "{} waiting; latency from the moment each poll was due; CPU: {}; errors {} (answers checked against the admissions' bounds){}, not sent {}{}",
            waiting_after,
            cpu.summary(),
            admitting.errors,
            admitting.first_error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default(),
            admitting.dropped,
            floor(ceilings)
        ),
    );
    Ok(())
}

/// Joins `ROOM` through `client` with the key `{tag}-{worker}-{n}`, keeping each ticket in `ids`.
fn joiner(
    client: &HttpClient,
    tag: &'static str,
    ids: &Arc<Mutex<Vec<Joined>>>,
) -> Arc<impl JoinFn> {
    let client = client.clone();
    let ids = ids.clone();
    Arc::new(move |worker: usize, n: u64| {
        let client = client.clone();
        let ids = ids.clone();
        async move { join_keeping_id(&client, ROOM, &format!("{tag}-{worker}-{n}"), &ids).await }
            .boxed()
    })
}

/// Warm-up of a join loop: connections open, scripts loaded (2,000 joins or 300 ms).
async fn warm_up(profile: &Profile, join: &Arc<impl JoinFn>) {
    let warm = join.clone();
    let _ = closed_loop(
        profile.capacity_connections,
        Duration::from_millis(300),
        2_000,
        move |w, n| warm(w, n),
    )
    .await;
}

/// The timed closed loop of joins (keys past the warm-up's).
async fn timed_joins(profile: &Profile, join: &Arc<impl JoinFn>) -> crate::load::LoadResult {
    let timed = join.clone();
    closed_loop(
        profile.capacity_connections,
        Profile::secs(profile.capacity_secs),
        u64::MAX,
        move |w, n| timed(w, 1_000_000_000 + n),
    )
    .await
}

/// One join of a loop, by worker and request number.
trait JoinFn: Fn(usize, u64) -> BoxFuture<'static, Result<(), String>> + Send + Sync + 'static {}

impl<F> JoinFn for F where
    F: Fn(usize, u64) -> BoxFuture<'static, Result<(), String>> + Send + Sync + 'static
{
}

/// Measures `vestibule-bench bare-join --script SCRIPT` (bare axum, one Redis script call per
/// join) with the joins' closed loop and reports it beside Vestibule's `joins_per_sec`.
///
/// # Errors
/// When the floor does not start.
async fn join_floor(
    profile: &Profile,
    redis: &RedisProcess,
    script: FloorScript,
    joins_per_sec: f64,
    ceilings: &Ceilings,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (name, what) = match script {
        FloorScript::Join => (
            "join",
            "the per-join Redis commands of a keyed first join (7, one call per join)",
        ),
        FloorScript::Incr => ("incr", "one INCR per join"),
    };
    let floor = ServerProcess::start(
        &std::env::current_exe()?,
        &[
            "bare-join".into(),
            "--redis".into(),
            redis.url(),
            "--script".into(),
            name.into(),
        ],
    )?;
    let client = HttpClient::new(&floor.base(), profile.capacity_connections);
    let join = joiner(&client, "floor", &Arc::default());
    warm_up(profile, &join).await;
    let cpu = CpuMeter::start(&[
        ("bare-join", floor.pid()),
        ("redis", redis.pid()),
        ("bench", std::process::id()),
    ]);
    let joins = timed_joins(profile, &join).await;
    report.value(&format!("join_floor_{name}_per_sec"), joins.rate());
    report.row(
        format!("Join floor: bare axum + redis, {what}"),
        format!(
            "{} /s, {}",
            short(joins.rate()),
            joins.percentiles().triple()
        ),
        "peer",
        Verdict::Info,
        format!(
            "{} connections; {}; Vestibule's joins above: {:.0}% of this; CPU: {}; errors {}{}",
            profile.capacity_connections,
            ceilings.share_of_http(joins.rate()),
            joins_per_sec / joins.rate().max(1.0) * 100.0,
            cpu.summary(),
            joins.errors,
            joins
                .first_error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default(),
        ),
    );
    Ok(())
}

/// The baseline to read a poll latency against: bare axum's p99 at the same rate, same run.
fn floor(ceilings: &Ceilings) -> String {
    ceilings
        .http_p99_ms_at_poll_rate
        .map(|p99| format!("; bare axum at the same rate: p99 {p99:.2} ms"))
        .unwrap_or_default()
}

/// Polls one ticket of `room` while it admits `rate` /s since `since` (nobody leaves): a waiting
/// answer lies between the position the join was given and that less every admission possible
/// since (one tick's quota and a refresh of slack); an admitted one was within reach.
///
/// # Errors
/// The request failed, was answered otherwise, or the answer is out of those bounds.
pub async fn poll_admitting(
    client: &HttpClient,
    room: &str,
    ticket: &Joined,
    since: std::time::Instant,
    rate: f64,
) -> Result<(), String> {
    let status = polled(client, room, ticket).await?;
    let reach = (rate * (since.elapsed().as_secs_f64() + 0.3)).ceil() as u64 + 1;
    match (status.status, status.position) {
        (TicketState::Waiting, Some(position))
            if position <= ticket.position && position + reach >= ticket.position =>
        {
            Ok(())
        }
        (TicketState::TokenIssued, _) if ticket.position <= reach => Ok(()),
        (state, position) => Err(format!(
            "answer out of bounds: {} at {position:?}, joined at {}, at most {reach} admitted",
            state.as_str(),
            ticket.position
        )),
    }
}

/// What the bench checks of a join's or a poll's answer, borrowed from its body: a whole
/// [`vestibule_shared::TicketStatus`] (its strings copied out, every field kept) made the load
/// generator's share of a poll ~20% larger than of a bare axum request, on the two cores it
/// shares with the server.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusAnswer<'a> {
    ticket_id: &'a str,
    status: TicketState,
    position: Option<u64>,
}

/// A poll's state and position, as checked by the callers.
struct Polled {
    status: TicketState,
    position: Option<u64>,
}

/// One poll of `ticket` in `room`, answered 200 with a status of that ticket.
async fn polled(client: &HttpClient, room: &str, ticket: &Joined) -> Result<Polled, String> {
    let answer = client
        .get(&paths::ticket(room, &ticket.id))
        .await
        .map_err(|e| format!("{e:#}"))?;
    if !answer.status.is_success() {
        return Err(format!("poll answered {}", answer.status));
    }
    let polled: StatusAnswer<'_> =
        serde_json::from_slice(&answer.body).map_err(|e| e.to_string())?;
    if polled.ticket_id != ticket.id {
        return Err(format!(
            "a poll of {} answered for {}",
            ticket.id, polled.ticket_id
        ));
    }
    Ok(Polled {
        status: polled.status,
        position: polled.position,
    })
}

/// A ticket joined in a room that admits nobody: its id and the position its join was given,
/// which no later answer may differ from while nobody leaves.
#[derive(Clone, Debug)]
pub struct Joined {
    /// The ticket id.
    pub id: String,
    /// The position the join answered.
    pub position: u64,
}

/// Joins `room` with the `Idempotency-Key` `key` (expecting 201 with a waiting position) and keeps
/// the ticket and its position in `ids` (up to 200,000, for polls).
///
/// # Errors
/// The request failed or was not answered 201 with a waiting ticket.
pub async fn join_keeping_id(
    client: &HttpClient,
    room: &str,
    key: &str,
    ids: &Mutex<Vec<Joined>>,
) -> Result<(), String> {
    let path = paths::tickets(room);
    let answer = client
        .send(Method::POST, &path, &[("idempotency-key", key)], None)
        .await
        .map_err(|e| format!("{e:#}"))?;
    if answer.status.as_u16() != 201 {
        return Err(format!("join answered {}", answer.status));
    }
    let ticket: StatusAnswer<'_> =
        serde_json::from_slice(&answer.body).map_err(|e| e.to_string())?;
    let (TicketState::Waiting, Some(position)) = (ticket.status, ticket.position) else {
        return Err(format!(
            "join answered {} without a waiting position",
            ticket.status.as_str()
        ));
    };
    let mut ids = ids.lock().unwrap_or_else(|p| p.into_inner());
    if ids.len() < 200_000 {
        ids.push(Joined {
            id: ticket.ticket_id.to_owned(),
            position,
        });
    }
    Ok(())
}

/// Polls one ticket of `room` (expecting 200, WAITING at the position its join was given: the
/// room admits nobody and nobody leaves).
///
/// # Errors
/// The request failed, was answered otherwise, or the answer is not the truth.
pub async fn poll_once(client: &HttpClient, room: &str, ticket: &Joined) -> Result<(), String> {
    let status = polled(client, room, ticket).await?;
    if status.status != TicketState::Waiting || status.position != Some(ticket.position) {
        return Err(format!(
            "wrong answer: {} at {:?}, truth WAITING at {}",
            status.status.as_str(),
            status.position,
            ticket.position
        ));
    }
    Ok(())
}

/// The server's `join.lua` calls and the joins sent in them so far (`/metrics`; the group commit
/// sends a room's waiting joins together).
async fn join_calls(client: &HttpClient) -> anyhow::Result<(f64, f64)> {
    let answer = client.get(vestibule_shared::paths::METRICS).await?;
    let text = String::from_utf8_lossy(&answer.body);
    let value = |series: &str| {
        text.lines()
            .filter_map(|line| line.split_once(' '))
            .find(|(name, _)| *name == series)
            .and_then(|(_, value)| value.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok((
        value("vestibule_redis_join_calls_total"),
        value("vestibule_redis_joins_sent_total"),
    ))
}
