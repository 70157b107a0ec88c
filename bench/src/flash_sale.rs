//! The shopper model: arrivals on a ramp-then-spike curve; each shopper joins (with an
//! `Idempotency-Key`, retrying like the page does), then polls by `nextPollAfterMs` or holds an SSE
//! stream, and when admitted takes its entry token to the order endpoint once.
//!
//! What each shopper saw is kept; admission times come from the store afterwards (a ticket's
//! token expiry minus the token TTL is the tick time that admitted it, to the millisecond).
//!
//! A plan may also add arrival segments after the spike, make shoppers take a while to check out
//! (by when they see their token), have the first few admitted never use their token, and keep
//! every status each shopper saw (the `eta-edges` stage).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hyper::Method;
use vestibule_shared::{paths, TicketState, TicketStatus, WaitReason};

use crate::http::{HttpClient, SharedHistogram};
use crate::sse::SseStream;

/// The arrival curve and shopper behaviour of one flash sale.
#[derive(Debug, Clone)]
pub struct FlashSalePlan {
    /// Room slug.
    pub room: String,
    /// Seconds of the linear ramp from 0 to the spike rate.
    pub ramp_secs: f64,
    /// Joins per second at the spike.
    pub spike_per_sec: f64,
    /// Seconds the spike holds.
    pub spike_secs: f64,
    /// Share of shoppers (0–1) that hold an SSE stream instead of polling.
    pub sse_share: f64,
    /// How long shoppers wait for admission after the last arrival before giving up.
    pub drain_timeout: Duration,
    /// Requests in flight at most (= connections the client opens).
    pub connections: usize,
    /// Arrival segments after the spike, `(joins/s, seconds)` each.
    pub then: Vec<(f64, f64)>,
    /// How long a shopper takes to check out once it sees its token: `(from, delay)` pairs, in
    /// order, `from` in seconds since the start (when the token is seen); none = orders at once.
    pub checkout: Vec<(f64, Duration)>,
    /// The first this many shoppers to see their token never use it.
    pub unused_tokens: u64,
    /// Whether each shopper keeps every status it saw ([`Shopper::timeline`]).
    pub keep_timeline: bool,
}

impl FlashSalePlan {
    /// The profile's arrival curve into `room`, over 512 connections.
    pub fn from_profile(profile: &crate::profile::Profile, room: &str) -> Self {
        Self {
            room: room.into(),
            ramp_secs: profile.ramp_secs,
            spike_per_sec: profile.spike_per_sec,
            spike_secs: profile.spike_secs,
            sse_share: profile.sse_share,
            drain_timeout: crate::profile::Profile::secs(profile.drain_timeout_secs),
            connections: 512,
            then: Vec::new(),
            checkout: Vec::new(),
            unused_tokens: 0,
            keep_timeline: false,
        }
    }

    /// `count` shoppers all arriving within `secs` (evenly), nothing more.
    pub fn burst(room: &str, count: u64, secs: f64, drain_timeout: Duration) -> Self {
        Self {
            room: room.into(),
            ramp_secs: 0.0,
            spike_per_sec: count as f64 / secs,
            spike_secs: secs,
            sse_share: 0.0,
            drain_timeout,
            connections: 512,
            then: Vec::new(),
            checkout: Vec::new(),
            unused_tokens: 0,
            keep_timeline: false,
        }
    }

    /// Shoppers of the ramp and the spike.
    fn in_curve(&self) -> u64 {
        (self.spike_per_sec * (self.ramp_secs / 2.0 + self.spike_secs)).round() as u64
    }

    /// Shoppers the curve brings (with the segments after it).
    pub fn shoppers(&self) -> u64 {
        self.in_curve()
            + self
                .then
                .iter()
                .map(|(rate, secs)| (rate * secs).round() as u64)
                .sum::<u64>()
    }

    /// When shopper `n` (0-based) arrives, seconds from the start.
    pub fn arrival_secs(&self, n: u64) -> f64 {
        let in_curve = self.in_curve();
        if n >= in_curve {
            let (mut start, mut first) = (self.ramp_secs + self.spike_secs, in_curve);
            for (rate, secs) in &self.then {
                let count = (rate * secs).round() as u64;
                if n < first + count {
                    return start + ((n - first) as f64 + 0.5) / rate;
                }
                start += secs;
                first += count;
            }
            return start;
        }
        let k = n as f64 + 0.5;
        let in_ramp = self.spike_per_sec * self.ramp_secs / 2.0;
        if k < in_ramp {
            (2.0 * self.ramp_secs * k / self.spike_per_sec).sqrt()
        } else {
            self.ramp_secs + (k - in_ramp) / self.spike_per_sec
        }
    }

    /// Seconds from the first arrival to the last.
    pub fn arrival_span_secs(&self) -> f64 {
        self.ramp_secs + self.spike_secs + self.then.iter().map(|(_, secs)| secs).sum::<f64>()
    }

    /// How long a shopper who sees its token `at_secs` after the start takes to check out.
    fn checkout_delay(&self, at_secs: f64) -> Duration {
        self.checkout
            .iter()
            .take_while(|(from, _)| *from <= at_secs)
            .last()
            .map_or(Duration::ZERO, |(_, delay)| *delay)
    }
}

/// One status a shopper saw ([`FlashSalePlan::keep_timeline`]).
#[derive(Debug, Clone)]
pub struct Seen {
    /// When, Unix ms.
    pub unix_ms: u64,
    /// The ticket's state.
    pub state: TicketState,
    /// Its position (waiting).
    pub position: Option<u64>,
    /// `etaSeconds` and `etaSecondsHigh`.
    pub eta_secs: (Option<u64>, Option<u64>),
    /// `reason`.
    pub reason: Option<WaitReason>,
}

/// What one shopper saw.
#[derive(Debug, Clone, Default)]
pub struct Shopper {
    /// Join sent, µs from the start (the first attempt).
    pub join_sent_us: u64,
    /// Join answered, µs from the start.
    pub join_answered_us: u64,
    /// Join answered, Unix ms.
    pub join_answered_unix_ms: u64,
    /// The ticket, once joined.
    pub ticket_id: Option<String>,
    /// The ETA shown at join, seconds.
    pub first_eta_secs: Option<u64>,
    /// The high (90th-percentile) ETA shown at join, seconds.
    pub first_eta_high_secs: Option<u64>,
    /// The position shown at join (`None` when the join admitted at once).
    pub first_position: Option<u64>,
    /// Whether any later status showed a larger position than an earlier one.
    pub position_rose: bool,
    /// Polls sent.
    pub polls: u64,
    /// Whether it held an SSE stream.
    pub used_sse: bool,
    /// When it first saw its token, Unix ms.
    pub token_seen_unix_ms: Option<u64>,
    /// The token's expiry (`tokenExpiresAt`), Unix ms: minus the token TTL, when it was issued.
    pub token_expires_unix_ms: Option<u64>,
    /// When its order was answered, Unix ms.
    pub ordered_unix_ms: Option<u64>,
    /// Each `reason` it was shown, Unix ms: when first shown, and again each time it followed
    /// another reason.
    pub reasons: Vec<(u64, WaitReason)>,
    /// Every status it saw, when the plan keeps them.
    pub timeline: Vec<Seen>,
    /// The order endpoint's status code.
    pub order_status: Option<u16>,
    /// Why it stopped early.
    pub error: Option<String>,
}

/// Counters shared by all shoppers of a run.
pub struct Shared {
    client: HttpClient,
    server: std::net::SocketAddr,
    room: String,
    started: Instant,
    deadline: Instant,
    /// Join latency from the moment the shopper arrived, µs.
    pub joins: SharedHistogram,
    /// Poll latency, µs.
    pub polls: SharedHistogram,
    /// Order latency, µs.
    pub orders: SharedHistogram,
    /// Joins answered per second since the start.
    pub joins_per_sec: Vec<AtomicU64>,
    /// Polls answered per second since the start.
    pub polls_per_sec: Vec<AtomicU64>,
    /// The plan (its shopper behaviour).
    plan: FlashSalePlan,
    /// Shoppers that have seen their token so far.
    tokens_seen: AtomicU64,
}

impl Shared {
    fn count(&self, series: &[AtomicU64]) {
        let second = self.started.elapsed().as_secs() as usize;
        if let Some(slot) = series.get(second) {
            slot.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn micros(&self) -> u64 {
        self.started.elapsed().as_micros() as u64
    }
}

/// Unix milliseconds now.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The result of a flash sale: every shopper, and the shared histograms.
pub struct FlashSaleRun {
    /// Shoppers in arrival order.
    pub shoppers: Vec<Shopper>,
    /// Histograms and per-second counters.
    pub shared: Arc<Shared>,
    /// Seconds from the start until the last shopper finished.
    pub secs: f64,
}

/// Runs the plan against `server` (bounded: arrivals end with the curve, shoppers give up at the
/// drain deadline).
pub async fn run(plan: &FlashSalePlan, server: std::net::SocketAddr) -> FlashSaleRun {
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(plan.arrival_span_secs()) + plan.drain_timeout;
    let seconds = (plan.arrival_span_secs() + plan.drain_timeout.as_secs_f64()) as usize + 30;
    let shared = Arc::new(Shared {
        client: HttpClient::new(&format!("http://{server}"), plan.connections),
        server,
        room: plan.room.clone(),
        started,
        deadline,
        joins: SharedHistogram::default(),
        polls: SharedHistogram::default(),
        orders: SharedHistogram::default(),
        joins_per_sec: (0..seconds).map(|_| AtomicU64::new(0)).collect(),
        polls_per_sec: (0..seconds).map(|_| AtomicU64::new(0)).collect(),
        plan: plan.clone(),
        tokens_seen: AtomicU64::new(0),
    });
    let total = plan.shoppers();
    let sse_every = if plan.sse_share > 0.0 {
        (1.0 / plan.sse_share).round().max(1.0) as u64
    } else {
        u64::MAX
    };
    let mut tasks = Vec::with_capacity(total as usize);
    let mut n = 0;
    while n < total {
        let elapsed = started.elapsed().as_secs_f64();
        while n < total && plan.arrival_secs(n) <= elapsed {
            let due = started + Duration::from_secs_f64(plan.arrival_secs(n));
            let use_sse = n % sse_every == sse_every - 1;
            tasks.push(tokio::spawn(shopper(shared.clone(), n, due, use_sse)));
            n += 1;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut shoppers = Vec::with_capacity(tasks.len());
    for task in tasks {
        shoppers.push(task.await.unwrap_or_else(|error| Shopper {
            error: Some(format!("shopper task failed: {error}")),
            ..Shopper::default()
        }));
    }
    FlashSaleRun {
        shoppers,
        secs: started.elapsed().as_secs_f64(),
        shared,
    }
}

async fn shopper(shared: Arc<Shared>, n: u64, due: Instant, use_sse: bool) -> Shopper {
    let mut me = Shopper {
        used_sse: use_sse,
        ..Shopper::default()
    };
    let key = format!("bench-shopper-{n}");
    let path = paths::tickets(&shared.room);
    me.join_sent_us = shared.micros();
    let mut status: Option<TicketStatus> = None;
    let mut last_error = String::new();
    // The page retries a failed join with the same key: the same place comes back.
    for attempt in 0..3 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(250 * attempt)).await;
        }
        match shared
            .client
            .send(Method::POST, &path, &[("idempotency-key", &key)], None)
            .await
        {
            Ok(answer) if answer.status.is_success() => {
                match serde_json::from_slice::<TicketStatus>(&answer.body) {
                    Ok(ticket) => {
                        status = Some(ticket);
                        break;
                    }
                    Err(error) => last_error = format!("join body: {error}"),
                }
            }
            Ok(answer) => last_error = format!("join answered {}", answer.status),
            Err(error) => last_error = format!("join: {error:#}"),
        }
    }
    let Some(mut status) = status else {
        me.error = Some(last_error);
        return me;
    };
    shared.joins.record_since(due);
    shared.count(&shared.joins_per_sec);
    me.join_answered_us = shared.micros();
    me.join_answered_unix_ms = unix_ms();
    me.ticket_id = Some(status.ticket_id.clone());
    me.first_eta_secs = status.eta_seconds;
    me.first_eta_high_secs = status.eta_seconds_high;
    me.first_position = status.position;
    let ticket_path = format!("{path}/{}", status.ticket_id);
    let mut stream = if use_sse {
        let events = format!("{ticket_path}/events");
        match SseStream::open(shared.server, None, &events).await {
            Ok(stream) => Some(stream),
            Err(error) => {
                me.error = Some(format!("SSE: {error:#} (fell back to polling)"));
                None
            }
        }
    } else {
        None
    };
    me.used_sse = stream.is_some();
    let mut last_position = status.position;
    loop {
        let now_ms = unix_ms();
        if status.reason.is_some() && me.reasons.last().map(|r| r.1) != status.reason {
            me.reasons
                .extend(status.reason.map(|reason| (now_ms, reason)));
        }
        if shared.plan.keep_timeline {
            me.timeline.push(Seen {
                unix_ms: now_ms,
                state: status.status,
                position: status.position,
                eta_secs: (status.eta_seconds, status.eta_seconds_high),
                reason: status.reason,
            });
        }
        if let (Some(before), Some(now)) = (last_position, status.position) {
            if now > before {
                me.position_rose = true;
            }
        }
        last_position = status.position.or(last_position);
        match status.status {
            TicketState::Waiting => {}
            TicketState::TokenIssued => {
                me.token_seen_unix_ms = Some(now_ms);
                me.token_expires_unix_ms = status.token_expires_at.as_deref().and_then(|at| {
                    let at = time::OffsetDateTime::parse(
                        at,
                        &time::format_description::well_known::Rfc3339,
                    )
                    .ok()?;
                    Some((at.unix_timestamp_nanos() / 1_000_000) as u64)
                });
                if shared.tokens_seen.fetch_add(1, Ordering::Relaxed) < shared.plan.unused_tokens {
                    return me;
                }
                let delay = shared
                    .plan
                    .checkout_delay(shared.started.elapsed().as_secs_f64());
                tokio::time::sleep(delay).await;
                let token = status.entry_token.clone().unwrap_or_default();
                let sent = Instant::now();
                let order = shared
                    .client
                    .send(
                        Method::POST,
                        &paths::orders(&shared.room),
                        &[("x-entry-token", &token)],
                        Some(r#"{"sku":"bench-item","quantity":1}"#),
                    )
                    .await;
                match order {
                    Ok(answer) => {
                        shared.orders.record_since(sent);
                        me.order_status = Some(answer.status.as_u16());
                        me.ordered_unix_ms = Some(unix_ms());
                    }
                    Err(error) => me.error = Some(format!("order: {error:#}")),
                }
                return me;
            }
            other => {
                me.error = Some(format!("ticket became {}", other.as_str()));
                return me;
            }
        }
        if Instant::now() >= shared.deadline {
            return me;
        }
        let next = match stream.as_mut() {
            Some(events) => {
                match tokio::time::timeout_at(shared.deadline.into(), events.next_status()).await {
                    Err(_) => return me,
                    Ok(Ok(Some(next))) => next,
                    Ok(Ok(None)) => {
                        me.error = Some("SSE stream ended while waiting".into());
                        return me;
                    }
                    Ok(Err(error)) => {
                        me.error = Some(format!("SSE: {error:#}"));
                        return me;
                    }
                }
            }
            None => {
                let wake = Instant::now() + Duration::from_millis(status.next_poll_after_ms);
                tokio::time::sleep_until(wake.min(shared.deadline).into()).await;
                if Instant::now() >= shared.deadline {
                    return me;
                }
                let sent = Instant::now();
                me.polls += 1;
                match shared.client.get(&ticket_path).await {
                    Ok(answer) if answer.status.is_success() => {
                        shared.polls.record_since(sent);
                        shared.count(&shared.polls_per_sec);
                        match serde_json::from_slice(&answer.body) {
                            Ok(next) => next,
                            Err(error) => {
                                me.error = Some(format!("poll body: {error}"));
                                return me;
                            }
                        }
                    }
                    // A failed poll is retried at the next hint, as the page does.
                    Ok(_) | Err(_) => continue,
                }
            }
        };
        status = next;
    }
}

#[cfg(test)]
mod tests;
