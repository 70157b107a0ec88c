//! `vestibule-bench`: `run` the flash-sale benchmark, or serve the `hello` baseline.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use vestibule_bench::procs::vestibule_binary;
use vestibule_bench::profile::Profile;
use vestibule_bench::runner::{self, RunOptions, ONLY_WHEN_NAMED, STAGES};

/// Vestibule's flash-sale benchmark.
#[derive(Debug, Parser)]
#[command(name = "vestibule-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Debug, Subcommand)]
// Parsed once per run: the size of a variant costs nothing.
#[allow(clippy::large_enum_variant)]
enum Commands {
    /// Runs the benchmark and prints the table (Markdown) on stdout.
    Run {
        /// Profile: tiny (seconds), short (≤ 5 min), full (~20 min).
        #[arg(long, default_value = "short")]
        profile: String,
        /// The vestibule binary (default: next to this one).
        #[arg(long)]
        vestibule_bin: Option<PathBuf>,
        /// Comma-separated stages (default all but the last three): baselines, sale,
        /// sale-halved, capacity, embedded, position, sse, sse-h2, gate, ghosts, orders-confirm,
        /// drop (the scheduled drop), eta-edges (issue 43's scenarios on both stores, ~5 min),
        /// auto-rate (the closed loop against the origin model, three runs, ~10 min); the last
        /// three only when named.
        #[arg(long, value_delimiter = ',')]
        stages: Vec<String>,
        /// Spike rate of the arrival curve, joins/s (overrides the profile).
        #[arg(long)]
        spike_per_sec: Option<f64>,
        /// Ramp seconds of the arrival curve (overrides the profile).
        #[arg(long)]
        ramp_secs: Option<f64>,
        /// Seconds the spike holds (overrides the profile).
        #[arg(long)]
        spike_secs: Option<f64>,
        /// Configured admission rate, shoppers/s (overrides the profile).
        #[arg(long)]
        admission_rate: Option<f64>,
        /// SSE stream counts to hold, comma-separated (overrides the profile).
        #[arg(long, value_delimiter = ',')]
        sse_steps: Vec<u64>,
        /// Scheduled drop (stage `drop`): pre-queue sizes, one drop each.
        #[arg(long, value_delimiter = ',', default_values_t = [20_000u64, 100_000])]
        drop_shoppers: Vec<u64>,
        /// Scheduled drop: seconds over which the shoppers join the pre-queue.
        #[arg(long, default_value_t = 60.0)]
        drop_join_secs: f64,
        /// Orders with and without confirmation (stage `orders-confirm`): orders per phase.
        #[arg(long, default_value_t = 3_000)]
        confirm_shoppers: u64,
        /// Orders with and without confirmation: which phase runs first (alternate between runs).
        #[arg(long, value_enum, default_value = "with")]
        confirm_first: vestibule_bench::orders_confirm::First,
        /// The closed loop (stage `auto-rate`): shoppers in each of its three runs.
        #[arg(long, default_value_t = 20_000)]
        auto_rate_shoppers: usize,
        /// Also write the table here (Markdown).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also write every figure here (JSON).
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Serves `GET /` → `hello` (the HTTP-ceiling baseline) until killed.
    Hello {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:0")]
        bind: std::net::SocketAddr,
    },
    /// Serves a reverse proxy of bare hyper (server) and hyper-util (client) to `--upstream`
    /// until killed: the gate stage's library floor.
    BareProxy {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:0")]
        bind: std::net::SocketAddr,
        /// The origin, `http://HOST:PORT`.
        #[arg(long)]
        upstream: String,
        /// Serving threads (0: one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
    },
    /// Serves joins of bare axum with one Redis script call each (`POST
    /// /api/v1/rooms/{room}/tickets`, `Idempotency-Key` required) until killed: the capacity
    /// stage's floor for a join.
    BareJoin {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:0")]
        bind: std::net::SocketAddr,
        /// The Redis URL.
        #[arg(long)]
        redis: String,
        /// What a join asks of Redis: the per-join commands of `join.lua`, or one INCR.
        #[arg(long, value_enum, default_value = "join")]
        script: vestibule_bench::bare_join::FloorScript,
        /// Serving threads (0: one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Commands::BareProxy {
        bind,
        upstream,
        threads,
    } = &cli.command
    {
        // Its own runtimes, one per serving thread, as the gate's.
        return vestibule_bench::bare_proxy::serve(*bind, upstream, *threads);
    }
    if let Commands::BareJoin {
        bind,
        redis,
        script,
        threads,
    } = &cli.command
    {
        // Its own runtimes, one per serving thread, as Vestibule's.
        return vestibule_bench::bare_join::serve(*bind, redis, *script, *threads);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.command {
        Commands::Hello { bind } => runtime.block_on(vestibule_bench::baselines::serve_hello(bind)),
        Commands::BareProxy { .. } | Commands::BareJoin { .. } => unreachable!("served above"),
        Commands::Run {
            profile,
            vestibule_bin,
            stages,
            spike_per_sec,
            ramp_secs,
            spike_secs,
            admission_rate,
            sse_steps,
            drop_shoppers,
            drop_join_secs,
            confirm_shoppers,
            confirm_first,
            auto_rate_shoppers,
            out,
            json,
        } => {
            let mut profile = Profile::named(&profile)?;
            if let Some(rate) = spike_per_sec {
                profile.spike_per_sec = rate;
            }
            if let Some(secs) = ramp_secs {
                profile.ramp_secs = secs;
            }
            if let Some(secs) = spike_secs {
                profile.spike_secs = secs;
            }
            if let Some(rate) = admission_rate {
                profile.admission_rate = rate;
            }
            if !sse_steps.is_empty() {
                profile.sse_steps = sse_steps;
            }
            // The scheduled drop (its joins' minute per size) and the ETA edges (fixed scale,
            // minutes) run only when asked.
            let stages = if stages.is_empty() {
                STAGES
                    .iter()
                    .filter(|s| !ONLY_WHEN_NAMED.contains(s))
                    .map(|s| (*s).to_owned())
                    .collect()
            } else {
                if let Some(unknown) = stages.iter().find(|s| !STAGES.contains(&s.as_str())) {
                    anyhow::bail!("unknown stage {unknown:?}: one of {STAGES:?}");
                }
                stages
            };
            let options = RunOptions {
                profile,
                vestibule: vestibule_binary(vestibule_bin.as_deref())?,
                stages,
                drop_shoppers,
                drop_join_secs,
                confirm_shoppers,
                confirm_first,
                auto_rate_shoppers,
            };
            let report = runtime.block_on(runner::run(&options));
            let table = report.markdown();
            println!("{table}");
            if let Some(path) = out {
                std::fs::write(&path, &table)?;
            }
            if let Some(path) = json {
                std::fs::write(&path, serde_json::to_string_pretty(&report.json())?)?;
            }
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            Ok(())
        }
    }
}
