//! Rooms at run time raced on two replicas of one Redis: creates, deletes, creates again, changes
//! and joins from several clients at once, in random interleavings, for a minute (override with
//! `VESTIBULE_RACE_SECS`; the seed is printed and can be set with `VESTIBULE_RACE_SEED`).
//!
//! Each creation of a slug is numbered by the test and carries its number in its display name
//! (`c17`) and in its message to waiters (`c17-p0`, then `c17-p3` after the test's third change
//! of it, made with `If-Match` so that it can only land on that creation). Readers poll the
//! public room view of each replica all along. What must hold:
//! - no answer is a 5xx;
//! - no join answered after its room's deletion was acknowledged lands in the deleted room;
//! - every replica serves a creation within a bound of its acknowledgement (ten sync ticks: slack
//!   for a loaded machine), the median within one tick, and stops serving a deleted one within
//!   the same bound;
//! - a replica never shows an older creation after a newer one, nor an older change of a
//!   creation after a newer one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use vestibule_shared::paths;
use vestibule_tests::{RedisServer, TestApp};

use crate::rooms::{admin, create};

const SLUGS: [&str; 2] = ["race-a", "race-b"];
/// The scheduler tick of both replicas (the default).
const TICK: Duration = Duration::from_millis(100);
/// How long after an acknowledgement a replica may still serve what it replaced: ten ticks of
/// the sync loop (which reads the documents every tick). Unloaded, the lag is about a tick
/// (p99 ~105 ms); on a two-core machine that also runs the rest of the suite, builds and both
/// replicas, single lags of 410–450 ms were seen, so the bound is not tighter: it is there to
/// catch a replica that never converges or goes back, not to time the sync.
const BOUND: Duration = Duration::from_millis(1_000);

/// A small deterministic generator (SplitMix64): the interleavings follow from the seed.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A creation and change number read from a marker (`c17` or `c17-p3`).
fn marker(text: Option<&str>) -> Option<(u64, u64)> {
    let text = text?.strip_prefix('c')?;
    let (creation, change) = text.split_once("-p").unwrap_or((text, "0"));
    Some((creation.parse().ok()?, change.parse().ok()?))
}

#[derive(Debug, Clone)]
// The fields are read through `Debug`, in the violation reports.
#[allow(dead_code)]
enum Op {
    Create { creation: u64 },
    Delete,
    Change { creation: u64, change: u64 },
    Join,
    Read,
}

#[derive(Debug, Clone)]
struct Event {
    op: Op,
    replica: usize,
    slug: &'static str,
    sent: Instant,
    answered: Instant,
    status: StatusCode,
    /// The creation and change the answer shows (join, read), or that a delete removed.
    seen: Option<(u64, u64)>,
    body: String,
}

#[derive(Default)]
struct Journal(Mutex<Vec<Event>>);

impl Journal {
    fn push(&self, event: Event) {
        self.0.lock().unwrap().push(event);
    }
}

async fn one_op(
    apps: &[TestApp; 2],
    dice: &mut Dice,
    creations: &AtomicU64,
    changes: &AtomicU64,
    journal: &Journal,
) {
    let slug = SLUGS[dice.below(2) as usize];
    let replica = dice.below(2) as usize;
    let app = &apps[replica];
    let roll = dice.below(100);
    let sent = Instant::now();
    let (op, status, seen, body) = if roll < 20 {
        let creation = creations.fetch_add(1, Ordering::SeqCst) + 1;
        let (status, _, body) = create(
            app,
            json!({"room": slug, "paused": true, "displayNameEn": format!("c{creation}"),
                   "messageEn": format!("c{creation}-p0")}),
        )
        .await;
        (Op::Create { creation }, status, None, body.to_string())
    } else if roll < 35 {
        // Which creation it removes is known only from a read just before (best effort: the
        // check below only uses deletes whose creation the read named).
        let (_, before) = app.get_json(&paths::room(slug)).await;
        let shown = marker(before["displayNameEn"].as_str());
        let (status, _, body) = admin(
            app,
            reqwest::Method::DELETE,
            &format!("{}?force=true", paths::admin_room(slug)),
            None,
        )
        .await;
        (Op::Delete, status, shown, body.to_string())
    } else if roll < 55 {
        let (status, headers, current) =
            admin(app, reqwest::Method::GET, &paths::admin_room(slug), None).await;
        let Some((creation, _)) = marker(current["displayNameEn"].as_str()) else {
            journal.push(Event {
                op: Op::Read,
                replica,
                slug,
                sent,
                answered: Instant::now(),
                status,
                seen: None,
                body: current.to_string(),
            });
            return;
        };
        let etag = headers
            .get("etag")
            .and_then(|etag| etag.to_str().ok())
            .unwrap_or("\"0\"")
            .to_owned();
        let change = changes.fetch_add(1, Ordering::SeqCst) + 1;
        let response = app
            .client
            .patch(app.url(&paths::admin_room(slug)))
            .bearer_auth(vestibule_tests::ADMIN_TOKEN)
            .header("If-Match", etag)
            .json(&json!({"messageEn": format!("c{creation}-p{change}")}))
            .send()
            .await
            .expect("patch");
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        (
            Op::Change { creation, change },
            status,
            None,
            body.to_string(),
        )
    } else {
        let response = app.join_request(slug).send().await.expect("join");
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let seen = marker(body["messageEn"].as_str());
        (Op::Join, status, seen, body.to_string())
    };
    journal.push(Event {
        op,
        replica,
        slug,
        sent,
        answered: Instant::now(),
        status,
        seen,
        body,
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rooms_raced_on_two_replicas_converge_on_the_latest_creation() {
    let seed = std::env::var("VESTIBULE_RACE_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(20_261_205_u64);
    let secs = std::env::var("VESTIBULE_RACE_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .unwrap_or(60u64);
    eprintln!("race: seed {seed} (VESTIBULE_RACE_SEED), {secs} s (VESTIBULE_RACE_SECS)");
    let redis = RedisServer::start();
    let apps = Arc::new([
        TestApp::spawn_with_url(Some(&redis.url()), &[]).await,
        TestApp::spawn_with_url(Some(&redis.url()), &[]).await,
    ]);
    let journal = Arc::new(Journal::default());
    let creations = Arc::new(AtomicU64::new(0));
    let changes = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for worker in 0..4u64 {
        let (apps, journal) = (apps.clone(), journal.clone());
        let (creations, changes) = (creations.clone(), changes.clone());
        tasks.push(tokio::spawn(async move {
            let mut dice = Dice(seed.wrapping_mul(31).wrapping_add(worker));
            while Instant::now() < deadline {
                one_op(&apps, &mut dice, &creations, &changes, &journal).await;
                let pause = dice.below(40);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        }));
    }
    for replica in 0..2usize {
        for slug in SLUGS {
            let (apps, journal) = (apps.clone(), journal.clone());
            tasks.push(tokio::spawn(async move {
                let app = &apps[replica];
                while Instant::now() < deadline {
                    let sent = Instant::now();
                    let (status, body) = app.get_json(&paths::room(slug)).await;
                    let creation = marker(body["displayNameEn"].as_str());
                    let change = marker(body["messageEn"].as_str());
                    let seen = creation.map(|(c, _)| (c, change.map_or(0, |(_, k)| k)));
                    journal.push(Event {
                        op: Op::Read,
                        replica,
                        slug,
                        sent,
                        answered: Instant::now(),
                        status,
                        seen,
                        body: body.to_string(),
                    });
                    tokio::time::sleep(Duration::from_millis(15)).await;
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("race task");
    }
    let events = journal.0.lock().unwrap().clone();
    let report = check(&events);
    eprintln!("{}", report.summary);
    assert!(
        report.violations.is_empty(),
        "seed {seed}: {} violations, the first ones:\n{}",
        report.violations.len(),
        report.violations[..report.violations.len().min(12)].join("\n")
    );
}

struct Report {
    summary: String,
    violations: Vec<String>,
}

/// Checks the journal against the four rules of the module's docs.
fn check(events: &[Event]) -> Report {
    let mut violations = Vec::new();
    let start = events
        .iter()
        .map(|e| e.sent)
        .min()
        .unwrap_or_else(Instant::now);
    let at = |t: Instant| t.saturating_duration_since(start).as_millis();
    // 1. No 5xx.
    for e in events.iter().filter(|e| e.status.is_server_error()) {
        violations.push(format!(
            "{:?} on replica {} of {} at {} ms answered {}: {}",
            e.op,
            e.replica,
            e.slug,
            at(e.sent),
            e.status,
            e.body
        ));
    }
    // When each creation was acknowledged, and when its deletion was sent and acknowledged.
    let mut created: Vec<(u64, &'static str, Instant)> = Vec::new();
    for e in events {
        if let (Op::Create { creation }, StatusCode::CREATED) = (&e.op, e.status) {
            created.push((*creation, e.slug, e.answered));
        }
    }
    let deletion = |creation: u64| -> Option<(Instant, Instant)> {
        events
            .iter()
            .filter(|e| {
                matches!(e.op, Op::Delete)
                    && e.status == StatusCode::NO_CONTENT
                    && e.seen.map(|(c, _)| c) == Some(creation)
            })
            .map(|e| (e.sent, e.answered))
            .min()
    };
    // The first delete sent after a creation's ack ends its sure life (whichever creation the
    // deleting client saw, a delete can only remove the live one).
    let life_end = |slug: &str, from: Instant| -> Option<Instant> {
        events
            .iter()
            .filter(|e| matches!(e.op, Op::Delete) && e.slug == slug && e.sent >= from)
            .map(|e| e.sent)
            .min()
    };
    // 2. No join answered 2xx in a creation whose deletion had been acknowledged before it was sent.
    for e in events.iter().filter(|e| matches!(e.op, Op::Join)) {
        let Some((creation, _)) = e.seen else {
            continue;
        };
        if !e.status.is_success() {
            continue;
        }
        if let Some((_, acked)) = deletion(creation) {
            if e.sent > acked {
                violations.push(format!(
                    "a join on replica {} sent at {} ms landed in c{creation}, deleted at {} ms",
                    e.replica,
                    at(e.sent),
                    at(acked)
                ));
            }
        }
    }
    // 3. Each replica serves each creation within BOUND of its ack, until its deletion is sent;
    // and stops serving it within BOUND of its deletion's ack.
    let mut lags: Vec<u128> = Vec::new();
    for &(creation, slug, acked) in &created {
        let end = life_end(slug, acked);
        for replica in 0..2 {
            let reads: Vec<&Event> = events
                .iter()
                .filter(|e| {
                    matches!(e.op, Op::Read)
                        && e.replica == replica
                        && e.slug == slug
                        && e.sent >= acked
                        && end.is_none_or(|end| e.answered < end)
                })
                .collect();
            if let Some(first) = reads
                .iter()
                .find(|e| e.seen.map(|(c, _)| c) == Some(creation))
            {
                lags.push(first.sent.saturating_duration_since(acked).as_millis());
            }
            for e in reads.iter().filter(|e| e.sent >= acked + BOUND) {
                if e.seen.map(|(c, _)| c) != Some(creation) {
                    violations.push(format!(
                        "replica {replica} answered {} {} for {slug} at {} ms, {} ms after c{creation} was created",
                        e.status,
                        e.body,
                        at(e.sent),
                        e.sent.saturating_duration_since(acked).as_millis()
                    ));
                }
            }
        }
        if let Some((_, deleted)) = deletion(creation) {
            for e in events.iter().filter(|e| {
                matches!(e.op, Op::Read)
                    && e.slug == slug
                    && e.sent >= deleted + BOUND
                    && e.seen.map(|(c, _)| c) == Some(creation)
            }) {
                violations.push(format!(
                    "replica {} still served c{creation} at {} ms, {} ms after its deletion",
                    e.replica,
                    at(e.sent),
                    e.sent.saturating_duration_since(deleted).as_millis()
                ));
            }
        }
    }
    // 4. Per replica and slug, reads in the order sent never go back to an older creation or an
    // older change of the same creation.
    let mut regressions = 0;
    for replica in 0..2 {
        for slug in SLUGS {
            let mut last: Option<(u64, u64, u128)> = None;
            for e in events
                .iter()
                .filter(|e| matches!(e.op, Op::Read) && e.replica == replica && e.slug == slug)
            {
                let Some((creation, change)) = e.seen else {
                    continue;
                };
                if let Some((c, k, when)) = last {
                    if (creation, change) < (c, k) {
                        regressions += 1;
                        violations.push(format!(
                            "replica {replica} showed {slug} as c{creation}-p{change} at {} ms after c{c}-p{k} at {when} ms",
                            at(e.sent)
                        ));
                    }
                }
                last = Some((creation, change, at(e.sent)));
            }
        }
    }
    lags.sort_unstable();
    let pick = |q: f64| {
        lags.get(((lags.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    // Typically a replica serves a creation within one tick of its ack: the median lag must be
    // under a tick (outliers on a loaded machine are held to BOUND above).
    if pick(0.5) > TICK.as_millis() {
        violations.push(format!(
            "the median lag from a create's ack to a replica serving it is {} ms, over a tick",
            pick(0.5)
        ));
    }
    let count = |f: &dyn Fn(&Event) -> bool| events.iter().filter(|e| f(e)).count();
    let summary = format!(
        "race: {} events: {} creates ({} created), {} deletes ({} done), {} changes ({} applied), \
         {} joins ({} admitted to a line), {} reads; lag from a create's ack to each replica \
         serving it: p50 {} ms, p99 {} ms, max {} ms over {} (tick {} ms, bound {} ms); \
         {} regressions; {} violations",
        events.len(),
        count(&|e| matches!(e.op, Op::Create { .. })),
        created.len(),
        count(&|e| matches!(e.op, Op::Delete)),
        count(&|e| matches!(e.op, Op::Delete) && e.status == StatusCode::NO_CONTENT),
        count(&|e| matches!(e.op, Op::Change { .. })),
        count(&|e| matches!(e.op, Op::Change { .. }) && e.status == StatusCode::OK),
        count(&|e| matches!(e.op, Op::Join)),
        count(&|e| matches!(e.op, Op::Join) && e.status.is_success()),
        count(&|e| matches!(e.op, Op::Read)),
        pick(0.5),
        pick(0.99),
        lags.last().copied().unwrap_or(0),
        lags.len(),
        TICK.as_millis(),
        BOUND.as_millis(),
        regressions,
        violations.len()
    );
    Report {
        summary,
        violations,
    }
}
