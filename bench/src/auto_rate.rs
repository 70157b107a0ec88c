//! The closed loop against a storefront with a true capacity (stage `auto-rate`, issue 48's
//! figures): a sale of `shoppers` through gate mode in front of the origin model
//! (`vestibule_tests::origin_model`: 30 workers, 150 requests/s, a second of queue, 503 past it),
//! whose capacity is halved to 75/s at one third of the sale and restored at two thirds. Each
//! admitted shopper sends one checkout through the gate with its entry token.
//!
//! Three runs, same arrivals and schedule: the calculator's fixed 175/s, the rate an oracle
//! would set for each phase (90% of the capacity: 135 → 67.5 → 135, changed at the instant the
//! capacity changes; at 100% any burst leaves a queue that never drains), and
//! `autoRate` (min 10, max 400, target p95 500 ms, max 1% errors, from 175/s). The oracle is the
//! ceiling the others are read against.
//!
//! The line is watched from its front (admission is FIFO): the first few hundred waiting tickets
//! are polled every 200 ms, so a token is seen within about 0.2–0.4 s of its issue. The shoppers
//! join a paused room and the sale opens for all at once; every 10th polls once 1.5 s after the
//! opening, and its `etaSecondsHigh` then is the first it saw of a running sale.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hyper::Method;
use vestibule_tests::origin_model::{OriginFigures, OriginModel, OriginShape};

use crate::http::HttpClient;
use crate::procs::start_vestibule_on;
use crate::report::{Report, Verdict};

mod shoppers;
use shoppers::{admin, join_all, now_ms, print_moves, sample_first_eta, watch_front};

const ROOM: &str = "main";
const PREFIX: &str = "/_vestibule";
/// The origin's true capacity outside the halved third, requests/s.
const CAPACITY: f64 = 150.0;
/// The calculator's rate (pool ÷ checkout time × utilization), above the true capacity.
const CALCULATED_RATE: f64 = 175.0;
const TARGET_P95_MS: f64 = 500.0;
const MAX_ERROR_RATE: f64 = 0.01;
/// The oracle's rate, a share of the true capacity.
const ORACLE_SHARE: f64 = 0.9;
/// How often the front of the line is polled.
const ROUND: Duration = Duration::from_millis(200);
/// Tickets at the front of the line polled each round.
const FRONT: usize = 200;

/// How the admission rate is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Fixed,
    Oracle,
    Auto,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Self::Fixed => "fixed 175/s",
            Self::Oracle => "oracle",
            Self::Auto => "autoRate",
        }
    }
}

/// One run's figures.
#[derive(Debug, Default)]
struct Outcome {
    /// Shoppers admitted per second in each phase.
    admitted: [f64; 3],
    /// Checkouts the origin served (2xx) per second in each phase.
    served: [f64; 3],
    /// Share of the sale's seconds whose origin p95 was within the target.
    p95_within: f64,
    /// Share of the checkouts answered 5xx (by the origin or the gate) or not at all.
    errors: f64,
    /// Seconds from the halving until the rate was ≤ 110% of 75/s.
    reaction_down: Option<f64>,
    /// Seconds from the restoration until the rate was ≥ 90% of 150/s.
    reaction_up: Option<f64>,
    /// Share of the sampled shoppers admitted by their first `etaSecondsHigh`.
    by_eta_high: f64,
    /// Shoppers sampled for it (every 10th that still waited 1.5 s after the opening).
    eta_sampled: usize,
    /// Admitted shoppers.
    admitted_total: usize,
    /// From the first join to the last admission, s.
    duration: f64,
}

/// Runs the three modes and reports them against the oracle.
///
/// # Errors
/// When a process cannot start.
pub async fn run(vestibule: &Path, shoppers: usize, report: &mut Report) -> anyhow::Result<()> {
    // The phases last a third of the oracle's sale each: shoppers ÷ the mean capacity.
    let third = shoppers as f64 / ((CAPACITY + CAPACITY / 2.0 + CAPACITY) / 3.0) / 3.0;
    let mut outcomes = Vec::new();
    for mode in [Mode::Oracle, Mode::Fixed, Mode::Auto] {
        eprintln!("[bench] auto-rate: {} ({shoppers} shoppers)", mode.name());
        let outcome = run_one(vestibule, mode, shoppers, third).await?;
        eprintln!("[bench] auto-rate: {} → {outcome:?}", mode.name());
        outcomes.push((mode, outcome));
    }
    let oracle = &outcomes[0].1;
    for (mode, outcome) in &outcomes {
        let name = mode.name();
        let ratios: Vec<String> = (0..3)
            .map(|p| {
                format!(
                    "{:.0}%",
                    100.0 * outcome.served[p] / oracle.served[p].max(1e-9)
                )
            })
            .collect();
        let throughput_ok = (0..3).all(|p| outcome.served[p] >= 0.9 * oracle.served[p]);
        report.row(
            format!("{name}: origin served per phase (150 → 75 → 150/s)"),
            format!(
                "{:.1} / {:.1} / {:.1} /s (admitted {:.1} / {:.1} / {:.1} /s)",
                outcome.served[0],
                outcome.served[1],
                outcome.served[2],
                outcome.admitted[0],
                outcome.admitted[1],
                outcome.admitted[2]
            ),
            "≥ 90% of the oracle's in every phase",
            if *mode == Mode::Oracle {
                Verdict::Info
            } else {
                Verdict::from(throughput_ok)
            },
            format!("{} of the oracle's", ratios.join(" / ")),
        );
        report.row(
            format!("{name}: origin p95 within 500 ms; 5xx of checkouts"),
            format!(
                "{:.1}% of seconds; {:.2}%",
                outcome.p95_within * 100.0,
                outcome.errors * 100.0
            ),
            "≥ 95% of seconds; ≤ 1%",
            Verdict::from(outcome.p95_within >= 0.95 && outcome.errors <= 0.01),
            format!(
                "{} admitted in {:.0} s",
                outcome.admitted_total, outcome.duration
            ),
        );
        report.row(
            format!("{name}: admitted by their first etaSecondsHigh"),
            format!("{:.1}%", outcome.by_eta_high * 100.0),
            "≥ 90%",
            Verdict::from(outcome.by_eta_high >= 0.9),
            format!(
                "{} sampled: the first ETA after the opening, before the capacity moved",
                outcome.eta_sampled
            ),
        );
        if *mode == Mode::Auto {
            let secs = |s: Option<f64>| s.map_or("never".to_owned(), |s| format!("{s:.1} s"));
            report.row(
                "autoRate: reaction to the halving; to the restoration",
                format!(
                    "{}; {}",
                    secs(outcome.reaction_down),
                    secs(outcome.reaction_up)
                ),
                "≤ 10 s; ≤ 30 s",
                Verdict::from(
                    outcome.reaction_down.is_some_and(|s| s <= 10.0)
                        && outcome.reaction_up.is_some_and(|s| s <= 30.0),
                ),
                "rate ≤ 82.5/s after the halving; ≥ 135/s after the restoration",
            );
        }
        let key = match mode {
            Mode::Fixed => "fixed",
            Mode::Oracle => "oracle",
            Mode::Auto => "auto",
        };
        report.value(&format!("auto_rate_{key}_served"), outcome.served.to_vec());
        report.value(&format!("auto_rate_{key}_p95_within"), outcome.p95_within);
        report.value(&format!("auto_rate_{key}_errors"), outcome.errors);
        report.value(&format!("auto_rate_{key}_by_eta_high"), outcome.by_eta_high);
    }
    Ok(())
}

async fn run_one(
    vestibule: &Path,
    mode: Mode,
    shoppers: usize,
    third: f64,
) -> anyhow::Result<Outcome> {
    let origin = Arc::new(
        OriginModel::start(OriginShape {
            workers: 30,
            capacity_per_sec: CAPACITY,
            queue_limit: CAPACITY as usize,
        })
        .await,
    );
    let start_rate = if mode == Mode::Oracle {
        CAPACITY * ORACLE_SHARE
    } else {
        CALCULATED_RATE
    };
    let upstream = origin.url();
    let gate = start_vestibule_on(
        vestibule,
        &["--data-dir", "none"],
        ROOM,
        start_rate,
        100,
        &[
            "--upstream",
            &upstream,
            "--gate",
            "/checkout=main",
            "--token-ttl-secs",
            "900",
            "--upstream-timeout-secs",
            "10",
        ],
    )?;
    let client = HttpClient::new(&gate.base(), 512);
    if mode == Mode::Auto {
        let body = format!(
            r#"{{"autoRate":{{"min":10,"max":400,"targetP95Ms":{TARGET_P95_MS},"maxErrorRate":{MAX_ERROR_RATE}}}}}"#
        );
        admin(&client, Method::PATCH, Some(body))
            .await
            .context("autoRate on")?;
    }
    // The shoppers wait in a paused room (as in a pre-queue), and the sale starts at once for
    // all of them: the clock and the capacity schedule start then.
    admin(&client, Method::PATCH, Some(r#"{"paused":true}"#.into()))
        .await
        .context("pause")?;
    let joining = Instant::now();
    let mut line = join_all(&client, shoppers).await?;
    eprintln!(
        "[bench] auto-rate: {} joined in {:.1} s",
        line.len(),
        joining.elapsed().as_secs_f64()
    );
    admin(&client, Method::PATCH, Some(r#"{"paused":false}"#.into()))
        .await
        .context("resume")?;
    let started = Instant::now();
    let epoch_ms = now_ms();
    // The first ETA each shopper sees once the sale runs: every 10th shopper polls once, 1.5 s
    // after the opening (the pace the ETA reads is measured by then), while the front is watched.
    let sampling = {
        let (client, tickets) = (
            client.clone(),
            line.iter().map(|s| s.ticket.clone()).collect(),
        );
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            sample_first_eta(&client, tickets, started).await
        })
    };

    // The capacity schedule (and the oracle's rate), and the rate as it moves.
    let rates = Arc::new(Mutex::new(Vec::<(f64, f64)>::new()));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let schedule = {
        let (origin, client, rates, done) =
            (origin.clone(), client.clone(), rates.clone(), done.clone());
        tokio::spawn(async move {
            let mut changed = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let t = started.elapsed().as_secs_f64();
                let due = [(third, CAPACITY / 2.0), (2.0 * third, CAPACITY)];
                if changed < 2 && t >= due[changed].0 {
                    origin.set_capacity(due[changed].1);
                    if mode == Mode::Oracle {
                        let rate = due[changed].1 * ORACLE_SHARE;
                        let body = format!(r#"{{"admissionRatePerSec":{rate}}}"#);
                        let _ = admin(&client, Method::PATCH, Some(body)).await;
                    }
                    changed += 1;
                }
                if let Ok(settings) = admin(&client, Method::GET, None).await {
                    if let Some(rate) = settings["admissionRatePerSec"].as_f64() {
                        rates.lock().expect("rates").push((t, rate));
                    }
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };

    let checkouts = Arc::new(Mutex::new((0_u64, 0_u64)));
    // Checkouts go out on connections of their own: a shopper's checkout never waits for a
    // connection the watcher's polls hold (nor the polls for a slow origin's checkouts).
    let checkout_client = HttpClient::new(&gate.base(), 512);
    let admitted = watch_front(
        (&client, &checkout_client),
        &line,
        started,
        checkouts.clone(),
        shoppers,
    )
    .await;
    for (n, first) in sampling.await.unwrap_or_default() {
        line[n].first_eta = Some(first);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = schedule.await;
    if mode == Mode::Auto {
        print_moves(&client, epoch_ms).await;
    }
    if std::env::var_os("VESTIBULE_BENCH_RUST_LOG").is_some() {
        eprintln!(
            "[bench] auto-rate: {}'s log:\n{}",
            mode.name(),
            gate.log_tail()
        );
    }
    drop(gate);

    let duration = admitted.iter().map(|(_, at)| *at).fold(0.0, f64::max);
    let phases = [
        (0.0, third),
        (third, 2.0 * third),
        (2.0 * third, duration.max(2.0 * third + 1.0)),
    ];
    let mut outcome = Outcome {
        admitted_total: admitted.len(),
        duration,
        ..Outcome::default()
    };
    for (p, (from, to)) in phases.iter().enumerate() {
        let count = admitted
            .iter()
            .filter(|(_, at)| (from..to).contains(&at))
            .count();
        outcome.admitted[p] = count as f64 / (to - from);
        let at = |secs: f64| epoch_ms + (secs * 1000.0) as u64;
        let figures = origin.figures_between(at(*from), at(*to));
        outcome.served[p] = (figures.requests - figures.errors) as f64 / (to - from);
    }
    let seconds: Vec<OriginFigures> = (0..duration.ceil() as u64)
        .map(|s| origin.figures_between(epoch_ms + s * 1000, epoch_ms + (s + 1) * 1000))
        .filter(|f| f.requests > 0)
        .collect();
    outcome.p95_within = seconds.iter().filter(|f| f.p95_ms <= TARGET_P95_MS).count() as f64
        / seconds.len().max(1) as f64;
    let (sent, failed) = *checkouts.lock().expect("checkouts");
    outcome.errors = failed as f64 / sent.max(1) as f64;
    let sampled: Vec<bool> = admitted
        .iter()
        .filter_map(|(n, at)| {
            let (seen_at, high) = line[*n].first_eta?;
            Some(*at <= seen_at + high as f64)
        })
        .collect();
    outcome.by_eta_high =
        sampled.iter().filter(|ok| **ok).count() as f64 / sampled.len().max(1) as f64;
    outcome.eta_sampled = sampled.len();
    let rates = rates.lock().expect("rates").clone();
    if mode == Mode::Auto {
        // Each second: the rate in force at its start, what the origin served, its p95.
        let trace: Vec<String> = (0..duration.ceil() as u64)
            .map(|s| {
                let rate = rates
                    .iter()
                    .rev()
                    .find(|(t, _)| *t <= s as f64)
                    .map_or(0.0, |(_, r)| *r);
                let f = origin.figures_between(epoch_ms + s * 1000, epoch_ms + (s + 1) * 1000);
                format!("{s}:{rate:.0}/{}/{:.0}", f.requests - f.errors, f.p95_ms)
            })
            .collect();
        eprintln!(
            "[bench] auto-rate trace (s:rate/served/p95): {}",
            trace.join(" ")
        );
    }
    let first = |from: f64, ok: &dyn Fn(f64) -> bool| {
        rates
            .iter()
            .find(|(t, r)| *t >= from && ok(*r))
            .map(|(t, _)| t - from)
    };
    outcome.reaction_down = first(third, &|r| r <= CAPACITY / 2.0 * 1.1);
    outcome.reaction_up = first(2.0 * third, &|r| r >= CAPACITY * 0.9);
    Ok(outcome)
}
