//! The shoppers and the operator of the `auto-rate` stage: joining, the first ETA after the
//! opening, watching the front of the line and checking out through the gate, and the admin
//! calls (under gate mode's prefix).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hyper::Method;
use serde_json::Value;
use vestibule_shared::{TicketState, TicketStatus};

use super::{FRONT, PREFIX, ROOM, ROUND};
use crate::http::HttpClient;
use crate::procs::ADMIN_TOKEN;

/// A shopper in line: its ticket, and for the sampled ones when (seconds since the opening)
/// they first saw an `etaSecondsHigh` and what it said.
pub(super) struct InLine {
    pub(super) ticket: String,
    pub(super) first_eta: Option<(f64, u64)>,
}

pub(super) async fn admin(
    client: &HttpClient,
    method: Method,
    body: Option<String>,
) -> anyhow::Result<Value> {
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    let body: Option<&'static str> = body.map(|b| &*Box::leak(b.into_boxed_str()));
    let path = format!("{PREFIX}/api/v1/admin/rooms/{ROOM}");
    let answer = client
        .send(method, &path, &[("authorization", &bearer)], body)
        .await?;
    anyhow::ensure!(
        answer.status.is_success(),
        "admin answered {}",
        answer.status
    );
    Ok(serde_json::from_slice(&answer.body)?)
}

/// The loop's moves from the audit log, on stderr: seconds into the run, from → to, reason.
pub(super) async fn print_moves(client: &HttpClient, epoch_ms: u64) {
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    let path = format!("{PREFIX}/api/v1/admin/rooms/{ROOM}/audit?limit=1000");
    let Ok(answer) = client
        .send(Method::GET, &path, &[("authorization", &bearer)], None)
        .await
    else {
        return;
    };
    let audit: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    let mut moves: Vec<String> = audit["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let reason = entry["replica"].as_str()?.split("autoRate ").nth(1)?;
            let at = entry["atMs"].as_u64()?.saturating_sub(epoch_ms) as f64 / 1000.0;
            Some(format!(
                "{at:.0}s {}→{} {reason}",
                entry["old"], entry["new"]
            ))
        })
        .collect();
    moves.sort_by(|a, b| {
        let secs = |m: &str| m.split('s').next().and_then(|s| s.parse::<f64>().ok());
        secs(a)
            .partial_cmp(&secs(b))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    eprintln!("[bench] auto-rate moves: {}", moves.join(", "));
}

pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Every 10th shopper polls once: (shopper, (seconds since the opening, its `etaSecondsHigh`))
/// for those still waiting.
pub(super) async fn sample_first_eta(
    client: &HttpClient,
    tickets: Vec<String>,
    started: Instant,
) -> Vec<(usize, (f64, u64))> {
    let sampled: Vec<usize> = (0..tickets.len()).step_by(10).collect();
    let mut seen = Vec::new();
    for chunk in sampled.chunks(128) {
        let polls = chunk.iter().map(|n| {
            let path = format!("{PREFIX}/api/v1/rooms/{ROOM}/tickets/{}", tickets[*n]);
            let client = client.clone();
            async move {
                let answer = client.get(&path).await.ok()?;
                let status: TicketStatus = serde_json::from_slice(&answer.body).ok()?;
                let high = status.eta_seconds_high?;
                Some((*n, (started.elapsed().as_secs_f64(), high)))
            }
        });
        seen.extend(
            futures_util::future::join_all(polls)
                .await
                .into_iter()
                .flatten(),
        );
    }
    seen
}

/// Joins `shoppers` as fast as 256 at a time go; returns them in the queue's order (the joins of
/// one batch land in any order, and a front watched in the order they were sent would miss the
/// tickets of the next batch admitted ahead of its own, then find them all at once).
///
/// # Errors
/// A join not answered with a ticket, or one without a position (the room is paused: each
/// waits).
pub(super) async fn join_all(client: &HttpClient, shoppers: usize) -> anyhow::Result<Vec<InLine>> {
    let path = format!("{PREFIX}/api/v1/rooms/{ROOM}/tickets");
    let mut line = Vec::with_capacity(shoppers);
    for chunk in (0..shoppers).collect::<Vec<_>>().chunks(256) {
        let joins = chunk.iter().map(|_| {
            let (client, path) = (client.clone(), path.clone());
            async move {
                let answer = client.send(Method::POST, &path, &[], None).await?;
                let status: TicketStatus = serde_json::from_slice(&answer.body)
                    .with_context(|| format!("join answered {}", answer.status))?;
                let position = status.position.context("a join without a position")?;
                let ticket = InLine {
                    ticket: status.ticket_id,
                    first_eta: None,
                };
                anyhow::Ok((position, ticket))
            }
        });
        for joined in futures_util::future::join_all(joins).await {
            line.push(joined?);
        }
    }
    line.sort_by_key(|(position, _)| *position);
    Ok(line.into_iter().map(|(_, ticket)| ticket).collect())
}

/// Polls the front of the line until every shopper is admitted (or 600 s pass); each admitted
/// shopper sends its checkout through the gate. Returns (shopper, seconds since start) for each
/// admission.
pub(super) async fn watch_front(
    (client, checkout_client): (&HttpClient, &HttpClient),
    line: &[InLine],
    started: Instant,
    checkouts: Arc<Mutex<(u64, u64)>>,
    shoppers: usize,
) -> Vec<(usize, f64)> {
    let mut admitted = Vec::with_capacity(shoppers);
    let mut seen = vec![false; line.len()];
    let mut front = 0;
    // Rounds start every ROUND whatever a round's polls took, as pages polling on their own
    // clocks do.
    let mut rounds = tokio::time::interval(ROUND);
    rounds.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_round = Instant::now();
    let mut slow_rounds = 0_usize;
    while front < line.len() && started.elapsed() < Duration::from_secs(600) {
        rounds.tick().await;
        // What this round finds was admitted since the last one began: ROUND, or longer when
        // a round's polls overran (a busy box).
        let since_last = last_round.elapsed().max(ROUND);
        last_round = Instant::now();
        slow_rounds += usize::from(since_last > ROUND + ROUND / 2);
        let window: Vec<usize> = (front..line.len().min(front + FRONT))
            .filter(|n| !seen[*n])
            .collect();
        let polls = window.iter().map(|n| {
            let path = format!("{PREFIX}/api/v1/rooms/{ROOM}/tickets/{}", line[*n].ticket);
            let client = client.clone();
            async move {
                let answer = client.get(&path).await.ok()?;
                let status: TicketStatus = serde_json::from_slice(&answer.body).ok()?;
                (status.status == TicketState::TokenIssued)
                    .then_some(status.entry_token)
                    .flatten()
            }
        });
        let tokens = futures_util::future::join_all(polls).await;
        let now = started.elapsed().as_secs_f64();
        let found: Vec<(usize, String)> = window
            .iter()
            .zip(tokens)
            .filter_map(|(n, token)| Some((*n, token?)))
            .collect();
        // Each shopper checks out at its own moment over as long as the round took to come
        // round, as pages polling on their own clocks do, not all at the instant this round
        // found them (a late round's finds in one round's time would be a burst the harness
        // made, not the shoppers).
        let spread = since_last.as_secs_f64() / found.len().max(1) as f64;
        for (k, (n, token)) in found.into_iter().enumerate() {
            seen[n] = true;
            admitted.push((n, now));
            let (client, checkouts) = (checkout_client.clone(), checkouts.clone());
            let delay = Duration::from_secs_f64(spread * k as f64);
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let answer = client
                    .send(Method::GET, "/checkout", &[("x-entry-token", &token)], None)
                    .await;
                let failed = answer.map_or(true, |a| a.status.is_server_error());
                let mut counts = checkouts.lock().expect("checkouts");
                counts.0 += 1;
                counts.1 += u64::from(failed);
            });
        }
        while front < seen.len() && seen[front] {
            front += 1;
        }
    }
    eprintln!(
        "[bench] auto-rate: {slow_rounds} rounds came over {} ms after the one before",
        (ROUND + ROUND / 2).as_millis()
    );
    admitted
}
