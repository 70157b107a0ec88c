//! What durability costs the embedded store: joins/s and polls/s at saturation (closed loop)
//! with `--data-dir none` (memory only), the default durable store (journal, `everysec`) and
//! `--data-fsync always`, one after the other in the same run, each on a fresh process.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::capacity::{join_keeping_id, poll_once};
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

/// Runs the embedded-store figures.
///
/// # Errors
/// When a server cannot start or no join succeeds.
pub async fn run(profile: &Profile, vestibule: &Path, report: &mut Report) -> anyhow::Result<()> {
    let scratch = std::env::temp_dir().join(format!("vestibule-bench-{}", std::process::id()));
    let mut all = Vec::new();
    for mode in &MODES {
        let dir = scratch.join(mode.name.replace([' ', '(', ')'], ""));
        let figures = measure(profile, vestibule, mode, &dir).await;
        let _ = std::fs::remove_dir_all(&dir);
        all.push((mode, figures?));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let (_, memory) = &all[0];
    for (mode, figures) in &all {
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
            format!(
                "Embedded store, {}: joins/s, polls/s (closed loop)",
                mode.name
            ),
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
                "{} connections; join p99 {:.1} ms; CPU: {}; journal {}; errors {}",
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
    let ids: Arc<Mutex<Vec<String>>> = Arc::default();
    let join = {
        let (client, ids) = (client.clone(), ids.clone());
        move |worker: usize, n: u64| {
            let (client, ids) = (client.clone(), ids.clone());
            async move { join_keeping_id(&client, ROOM, &format!("emb-{worker}-{n}"), &ids).await }
        }
    };
    // Each of the two loops gets half the profile's capacity time.
    let secs = Profile::secs(profile.capacity_secs / 2.0);
    let cpu = CpuMeter::start(&[("vestibule", server.pid()), ("bench", std::process::id())]);
    let joins = closed_loop(profile.capacity_connections, secs, u64::MAX, join).await;
    let journal_bytes_per_join = mode.durable.map(|_| {
        let bytes = std::fs::metadata(journal_path(dir)).map_or(0, |meta| meta.len());
        bytes as f64 / joins.ok.max(1) as f64
    });
    let ids: Arc<Vec<String>> = Arc::new(std::mem::take(
        &mut *ids.lock().unwrap_or_else(|p| p.into_inner()),
    ));
    if ids.is_empty() {
        anyhow::bail!("{}: no join succeeded: {:?}", mode.name, joins.first_error);
    }
    let poll = move |worker: usize, n: u64| {
        let client = client.clone();
        let pick = n.wrapping_add(worker as u64).wrapping_mul(2_654_435_761);
        let id = ids[(pick % ids.len() as u64) as usize].clone();
        async move { poll_once(&client, ROOM, &id).await }
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
