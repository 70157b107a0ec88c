//! The "ghosts" stage (docs/DESIGN.md "Presence"): a sale where 30% of the shoppers vanish
//! mid-line (stop polling). Reports how many admission slots went to a ghost after the abandon
//! time (target: none), the Redis memory per waiting shopper with presence (≤ 150 B), and the
//! polls and joins per second the shoppers made (not a capacity figure: the `capacity` stage is).

use std::time::{Duration, Instant};

use hyper::Method;
use vestibule_shared::{paths, TicketState, TicketStatus};

use crate::flash_sale::unix_ms;
use crate::http::HttpClient;
use crate::procs::{start_vestibule, RedisProcess, ADMIN_TOKEN};
use crate::redis_probe::{ticket_states, RedisSample};
use crate::report::{Report, Verdict};

const ROOM: &str = "main";
/// The abandon time: `abandonAfterSecs` 3 with one poll tier of 1 s (so 3 s is in force).
const ABANDON_SECS: u64 = 3;
const TOKEN_TTL_MS: u64 = 300_000;

/// The room and the count of the memory figure (large enough that fixed costs do not count).
const MEMORY_ROOM: &str = "memory";
const MEMORY_SHOPPERS: u64 = 20_000;

/// `used_memory` Δ per keyed join over HTTP into a paused room (each with its `seen:` slot).
async fn memory_per_waiting(
    client: &HttpClient,
    probe: &mut redis::Connection,
    admin: &[(&str, &str)],
) -> anyhow::Result<f64> {
    let path = paths::admin_room(MEMORY_ROOM);
    client
        .send(Method::PATCH, &path, admin, Some(r#"{"paused":true}"#))
        .await?;
    let before = RedisSample::take(probe)?;
    let mut joins = tokio::task::JoinSet::new();
    for n in 0..MEMORY_SHOPPERS {
        let client = client.clone();
        joins.spawn(async move {
            let key = format!("memory-bench-{n}");
            let headers = [("idempotency-key", key.as_str())];
            json(
                &client,
                Method::POST,
                &paths::tickets(MEMORY_ROOM),
                &headers,
            )
            .await
        });
    }
    while let Some(joined) = joins.join_next().await {
        joined??;
    }
    let after = RedisSample::take(probe)?;
    Ok(after.used_memory.saturating_sub(before.used_memory) as f64 / MEMORY_SHOPPERS as f64)
}

/// What one shopper did.
struct Shopper {
    id: String,
    ghost: bool,
    /// When a ghost stopped polling, Unix ms.
    vanished_at: Option<u64>,
    polls: u64,
}

async fn json(
    client: &HttpClient,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
) -> anyhow::Result<TicketStatus> {
    let answer = client.send(method, path, headers, None).await?;
    Ok(serde_json::from_slice(&answer.body)?)
}

/// Polls by `nextPollAfterMs` until admitted; a ghost stops after `vanish_after`.
async fn follow(client: HttpClient, mut shopper: Shopper, vanish_after: Duration) -> Shopper {
    let started = Instant::now();
    let path = paths::ticket(ROOM, &shopper.id);
    loop {
        if shopper.ghost && started.elapsed() >= vanish_after {
            shopper.vanished_at = Some(unix_ms());
            return shopper;
        }
        let Ok(status) = json(&client, Method::GET, &path, &[]).await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        shopper.polls += 1;
        if status.status != TicketState::Waiting || started.elapsed() > Duration::from_secs(600) {
            return shopper;
        }
        tokio::time::sleep(Duration::from_millis(status.next_poll_after_ms)).await;
    }
}

/// Runs the stage: `shoppers` join a paused room; admission at `rate`/s; 30% vanish after a
/// fifth of the expected sale.
///
/// # Errors
/// When a process cannot start or Redis does not answer.
pub async fn run(
    vestibule: &std::path::Path,
    shoppers: u64,
    rate: f64,
    report: &mut Report,
) -> anyhow::Result<()> {
    let redis = RedisProcess::start()?;
    let server = start_vestibule(
        vestibule,
        &redis.url(),
        &format!("{ROOM},{MEMORY_ROOM}"),
        rate,
        100,
        &["--poll-tiers", "*:1000"],
    )?;
    let client = HttpClient::new(&server.base(), 256);
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let patch = r#"{"paused":true,"abandonAfterSecs":3,"holdPlaceSecs":600}"#;
    let admin = [("authorization", auth.as_str())];
    client
        .send(Method::PATCH, &paths::admin_room(ROOM), &admin, Some(patch))
        .await?;
    let mut probe = redis.connection()?;
    let per_waiting = memory_per_waiting(&client, &mut probe, &admin).await?;
    let joins_started = Instant::now();
    let mut joins = tokio::task::JoinSet::new();
    for n in 0..shoppers {
        let client = client.clone();
        joins.spawn(async move {
            let key = format!("ghost-bench-{n}");
            let status = json(
                &client,
                Method::POST,
                &paths::tickets(ROOM),
                &[("idempotency-key", &key)],
            )
            .await;
            (n, status.map(|s| s.ticket_id))
        });
    }
    let mut ids = vec![String::new(); shoppers as usize];
    while let Some(joined) = joins.join_next().await {
        let (n, id) = joined?;
        ids[n as usize] = id?;
    }
    let join_secs = joins_started.elapsed().as_secs_f64();

    let resume = r#"{"paused":false}"#;
    client
        .send(
            Method::PATCH,
            &paths::admin_room(ROOM),
            &admin,
            Some(resume),
        )
        .await?;
    let sale_started = Instant::now();
    // Ghosts vanish a fifth of the way through the expected sale.
    let vanish_after = Duration::from_secs_f64(shoppers as f64 / rate / 5.0);
    let mut followers = tokio::task::JoinSet::new();
    for (n, id) in ids.iter().enumerate() {
        let shopper = Shopper {
            id: id.clone(),
            ghost: n % 10 < 3,
            vanished_at: None,
            polls: 0,
        };
        followers.spawn(follow(client.clone(), shopper, vanish_after));
    }
    let mut done = Vec::new();
    while let Some(shopper) = followers.join_next().await {
        done.push(shopper?);
    }
    let sale_secs = sale_started.elapsed().as_secs_f64();
    let polls: u64 = done.iter().map(|s| s.polls).sum();
    let ghosts: Vec<&Shopper> = done.iter().filter(|s| s.ghost).collect();
    let ghost_ids: Vec<String> = ghosts.iter().map(|s| s.id.clone()).collect();
    let stored = ticket_states(&mut probe, ROOM, &ghost_ids)?;
    let mut late = 0;
    let mut early = 0;
    for (ghost, (state, exp)) in ghosts.iter().zip(&stored) {
        // Only an issued token is an admission (a skipped ticket's `exp` is the end of its hold).
        if state.as_deref() != Some("TOKEN_ISSUED") {
            continue;
        }
        let (Some(exp), Some(vanished)) = (exp, ghost.vanished_at) else {
            continue;
        };
        // Last heard at or before `vanished`; whole seconds in Redis, so the skip may take ≤ 1 s more.
        if exp - TOKEN_TTL_MS > vanished + (ABANDON_SECS + 1) * 1000 {
            late += 1;
        } else {
            early += 1;
        }
    }
    let alive_admitted = done.iter().filter(|s| !s.ghost).count();
    report.note(format!(
        "ghosts: {shoppers} keyed shoppers joined a paused room in {join_secs:.1} s ({:.0} joins/s), admission {rate}/s, 30% stop polling after {:.1} s, abandonAfterSecs {ABANDON_SECS} with a 1 s poll tier; the other 70% polled by nextPollAfterMs until admitted ({alive_admitted} admitted in {sale_secs:.1} s, {:.0} polls/s)",
        shoppers as f64 / join_secs,
        vanish_after.as_secs_f64(),
        polls as f64 / sale_secs,
    ));
    report.row(
        "admission slots that went to a ghost after the abandon time",
        format!(
            "{late} of {} ghosts ({early} admitted while still present or within the abandon time)",
            ghosts.len()
        ),
        "0",
        Verdict::from(late == 0),
        "a silent head is skipped in the admission script itself",
    );
    report.row(
        "Redis memory per waiting shopper with presence (keyed joins over HTTP)",
        format!("{per_waiting:.0} B (INFO used_memory Δ / {MEMORY_SHOPPERS}, a paused room)"),
        "≤ 150 B",
        Verdict::from(per_waiting <= 150.0),
        "queue zset member + 4 B of `seen:`",
    );
    drop(server);
    drop(redis);
    Ok(())
}
