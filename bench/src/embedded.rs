//! What durability costs the embedded store, all in one run: store calls in-process (see
//! [`embedded_inprocess`]), then joins/s and polls/s at saturation over HTTP (closed loop) with
//! `--data-dir none` (memory only), the default durable store (journal, `everysec`) and
//! `--data-fsync always`, each on a fresh process.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::capacity::{join_keeping_id, poll_once, Joined};
use crate::embedded_inprocess;
use crate::http::{short, HttpClient};
use crate::load::{closed_loop, LoadResult};
use crate::procs::{start_vestibule_on, CpuMeter};
use crate::profile::Profile;
use crate::report::{Report, Verdict};

const ROOM: &str = "cap";

/// One store set-up under test.
struct Mode {
    name: &'static str,
    /// `--data-dir` (None = `none`) and `--data-fsync`.
    durable: Option<&'static str>,
}

const MODES: [Mode; 3] = [
    Mode {
        name: "memory",
        durable: None,
    },
    Mode {
        name: "durable (everysec)",
        durable: Some("everysec"),
    },
    Mode {
        name: "durable (always)",
        durable: Some("always"),
    },
];

/// One mode's figures.
struct Figures {
    joins: LoadResult,
    polls: LoadResult,
    cpu: String,
    journal_bytes_per_join: Option<f64>,
}

/// Runs the embedded-store figures: in-process store calls, snapshot and restart times, then
/// joins/s and polls/s over HTTP in two rounds that alternate the modes (so load from other
/// processes on the machine hits every mode alike); each mode's better round is reported.
///
/// # Errors
/// When a store or server cannot start or no join succeeds.
pub async fn run(profile: &Profile, vestibule: &Path, report: &mut Report) -> anyhow::Result<()> {
    let scratch = std::env::temp_dir().join(format!("vestibule-bench-{}", std::process::id()));
    let outcome = run_in(profile, vestibule, &scratch, report).await;
    let _ = std::fs::remove_dir_all(&scratch);
    outcome
}

async fn run_in(
    profile: &Profile,
    vestibule: &Path,
    scratch: &Path,
    report: &mut Report,
) -> anyhow::Result<()> {
    let window = Profile::secs(profile.capacity_secs / 8.0);
    let calls = embedded_inprocess::call_rates(&scratch.join("calls"), window).await?;
    for rates in &calls {
        let key = rates.mode.replace(' ', "_");
        report.value(
            &format!("inprocess_{key}_joins_per_sec"),
            rates.joins_per_sec,
        );
        report.value(
            &format!("inprocess_{key}_polls_per_sec"),
            rates.polls_per_sec,
        );
        report.row(
            format!("Embedded store in-process, {}: store calls/s", rates.mode),
            format!(
                "{} joins/s ({:.2}× memory), {} polls/s ({:.2}× memory)",
                short(rates.joins_per_sec),
                rates.joins_per_sec / calls[0].joins_per_sec.max(1e-9),
                short(rates.polls_per_sec),
                rates.polls_per_sec / calls[0].polls_per_sec.max(1e-9),
            ),
            "–",
            Verdict::Info,
            "one caller, keyed joins and reads of 2,000 tickets through the Store trait, no HTTP",
        );
    }
    // Half the large position run's queue: the whole stage then stays within a minute.
    let waiting = profile.position_large / 2;
    let restart = embedded_inprocess::restart_cost(&scratch.join("restart"), waiting).await?;
    report.value("restart_from_journal_secs", restart.from_journal_secs);
    report.value("restart_from_snapshot_secs", restart.from_snapshot_secs);
    report.value(
        "background_snapshot_stall_secs",
        restart.background_stall_secs,
    );
    report.row(
        format!("Embedded store, {} waiting: restart, snapshot", restart.waiting),
        format!(
            "restart replaying every join {:.2} s; restart from a snapshot {:.2} s; snapshot {:.0} MB: {:.2} s under the lock, or in the background {:.2} s with changes held {:.3} s",
            restart.from_journal_secs,
            restart.from_snapshot_secs,
            restart.snapshot_bytes as f64 / 1e6,
            restart.snapshot_secs,
            restart.background_secs,
            restart.background_stall_secs,
        ),
        "–",
        Verdict::Info,
        format!(
            "journal {:.0} B per keyed join; the store compacts in the background (held: rename the journal + clone the rooms)",
            restart.journal_bytes_per_join
        ),
    );

    let mut best: Vec<Option<Figures>> = MODES.iter().map(|_| None).collect();
    for round in 0..2 {
        for (mode, slot) in MODES.iter().zip(&mut best) {
            let dir = scratch.join(format!(
                "{round}-{}",
                mode.name.replace([' ', '(', ')'], "")
            ));
            let figures = measure(profile, vestibule, mode, &dir).await?;
            let _ = std::fs::remove_dir_all(&dir);
            let better = slot.as_ref().is_none_or(|kept| {
                figures.joins.rate() + figures.polls.rate() > kept.joins.rate() + kept.polls.rate()
            });
            if better {
                *slot = Some(figures);
            }
        }
    }
    let best: Vec<Figures> = best.into_iter().flatten().collect();
    let memory = &best[0];
    for (mode, figures) in MODES.iter().zip(&best) {
        let key = mode.name.split_whitespace().collect::<Vec<_>>().join("_");
        report.value(
            &format!("embedded_{key}_joins_per_sec"),
            figures.joins.rate(),
        );
        report.value(
            &format!("embedded_{key}_polls_per_sec"),
            figures.polls.rate(),
        );
        let ratio = |of: &LoadResult, base: &LoadResult| of.rate() / base.rate().max(1e-9);
        report.row(
            format!("Embedded store over HTTP, {}: joins/s, polls/s (closed loop)", mode.name),
            format!(
                "{} joins/s ({:.2}× memory), {} polls/s ({:.2}× memory)",
                short(figures.joins.rate()),
                ratio(&figures.joins, &memory.joins),
                short(figures.polls.rate()),
                ratio(&figures.polls, &memory.polls),
            ),
            "–",
            Verdict::Info,
            format!(
                "{} connections, better of 2 rounds; join p99 {:.1} ms; CPU: {}; journal {}; errors {}",
                profile.capacity_connections,
                figures.joins.percentiles().p99_ms,
                figures.cpu,
                figures
                    .journal_bytes_per_join
                    .map_or("none".to_owned(), |bytes| format!("{bytes:.0} B per join")),
                figures.joins.errors + figures.polls.errors,
            ),
        );
    }
    Ok(())
}

async fn measure(
    profile: &Profile,
    vestibule: &Path,
    mode: &Mode,
    dir: &Path,
) -> anyhow::Result<Figures> {
    let dir_arg = dir.to_string_lossy().into_owned();
    let mut store = vec!["--data-dir", "none"];
    if let Some(fsync) = mode.durable {
        store = vec!["--data-dir", &dir_arg, "--data-fsync", fsync];
    }
    let server = start_vestibule_on(vestibule, &store, ROOM, 0.0, profile.tick_ms, &[])?;
    let client = HttpClient::new(&server.base(), profile.capacity_connections);
    let ids: Arc<Mutex<Vec<Joined>>> = Arc::default();
    let join = {
        let (client, ids) = (client.clone(), ids.clone());
        move |worker: usize, n: u64| {
            let (client, ids) = (client.clone(), ids.clone());
            async move { join_keeping_id(&client, ROOM, &format!("emb-{worker}-{n}"), &ids).await }
        }
    };
    // Two rounds of two loops: each loop gets a quarter of the profile's capacity time.
    let secs = Profile::secs(profile.capacity_secs / 4.0);
    let cpu = CpuMeter::start(&[("vestibule", server.pid()), ("bench", std::process::id())]);
    let joins = closed_loop(profile.capacity_connections, secs, u64::MAX, join).await;
    let journal_bytes_per_join = mode.durable.map(|_| {
        let bytes = std::fs::metadata(journal_path(dir)).map_or(0, |meta| meta.len());
        bytes as f64 / joins.ok.max(1) as f64
    });
    let ids: Arc<Vec<Joined>> = Arc::new(std::mem::take(
        &mut *ids.lock().unwrap_or_else(|p| p.into_inner()),
    ));
    if ids.is_empty() {
        anyhow::bail!("{}: no join succeeded: {:?}", mode.name, joins.first_error);
    }
    let poll = move |worker: usize, n: u64| {
        let client = client.clone();
        let pick = n.wrapping_add(worker as u64).wrapping_mul(2_654_435_761);
        let ticket = ids[(pick % ids.len() as u64) as usize].clone();
        async move { poll_once(&client, ROOM, &ticket).await }
    };
    let polls = closed_loop(profile.capacity_connections, secs, u64::MAX, poll).await;
    Ok(Figures {
        joins,
        polls,
        cpu: cpu.summary(),
        journal_bytes_per_join,
    })
}

fn journal_path(dir: &Path) -> PathBuf {
    dir.join("journal.log")
}
