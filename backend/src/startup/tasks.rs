//! What runs beside the serving threads: each room's SSE hub and health URL poller, the rooms'
//! sync, the Redis safety watch and the shared key's upkeep (on the main runtime), the
//! schedulers (on a thread of their own), and `/metrics` on `--metrics-bind`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use super::store::own_store;
use super::store_safety::watch_store_safety;
use crate::config::Config;
use crate::http;
use crate::room::auto_rate::health;
use crate::room::ticket_watch::refresh_loop::{self, HubContext};
use crate::room::{scheduler, sync};
use crate::state::AppState;
use crate::store::redis::RedisStore;
use crate::tokens::keys::keep_in_redis;

/// Spawns the tasks of the main runtime: each room's SSE hub and health URL poller (for the
/// rooms running now and every room added later), the rooms' sync, the Redis safety watch, and
/// the upkeep of the signing key this replica keeps in Redis (`shared_key`).
pub(super) fn spawn_room_tasks(
    state: &AppState,
    config: &Config,
    shared_key: Option<(Arc<RedisStore>, String)>,
) -> JoinSet<()> {
    let mut tasks = JoinSet::new();
    // The figures: shared with the other replicas and kept for the history from the start.
    state.admin_feed.start(state);
    // Each room's SSE hub, for the rooms running now and every room added later.
    let context = HubContext {
        store: state.store.clone(),
        options: state.room_options.clone(),
        shutdown: state.shutdown.clone(),
    };
    tasks.spawn(sync::run_each_room(
        state.rooms.clone(),
        state.shutdown.clone(),
        move |room| refresh_loop::run(context.clone(), room),
    ));
    // Each room's health URL poller: idle unless this process leads a room whose `autoRate`
    // names one; here, not on the schedulers' thread, so a slow origin never makes a tick late.
    let shutdown = state.shutdown.clone();
    tasks.spawn(sync::run_each_room(
        state.rooms.clone(),
        state.shutdown.clone(),
        move |room| health::run(room, shutdown.clone()),
    ));
    tasks.spawn(sync::sync_loop(
        state.rooms.clone(),
        state.store.clone(),
        state.tokens.clone(),
        config.tick(),
        state.shutdown.clone(),
    ));
    if state.store.kind() == "redis" {
        tasks.spawn(watch_store_safety(
            state.clone(),
            Duration::from_secs(config.redis_safety_check_secs),
        ));
    }
    if let Some((redis, pem)) = shared_key {
        tasks.spawn(keep_in_redis(redis, pem, state.shutdown.clone()));
    }
    tasks
}

/// Serves `/metrics` alone on `--metrics-bind` until shutdown (no token: the address is meant
/// for the scraper's private network).
pub(super) fn serve_metrics(state: &AppState, listener: TcpListener) {
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, "metrics on http://{address}/metrics");
    }
    let app = axum::Router::new()
        .route(
            vestibule_shared::paths::METRICS,
            axum::routing::get(http::health::metrics_text),
        )
        .with_state(state.clone());
    let mut shutdown = state.shutdown.clone();
    tokio::spawn(async move {
        let stopped = async move {
            let _ = shutdown.wait_for(|stopping| *stopping).await;
        };
        if let Err(error) = axum::serve(listener, app)
            .with_graceful_shutdown(stopped)
            .await
        {
            tracing::warn!(%error, "the metrics listener stopped");
        }
    });
}

/// Runs every room's scheduler on a thread of its own, with its own single-threaded runtime and,
/// on Redis, its own connection: a tick is then never late because request handlers keep the
/// main runtime's workers or the shared connection's pipeline busy (docs/DESIGN.md "Admission": the
/// rate must hold while shoppers stampede). Ends when shutdown is signalled and every scheduler
/// has released its lease.
pub(super) fn spawn_scheduler_thread(
    state: AppState,
    config: Arc<Config>,
) -> anyhow::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("vestibule-scheduler".into())
        .spawn(move || {
            ask_scheduler_priority(config.scheduler_nice);
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    tracing::error!(%error, "cannot start the scheduler runtime; nobody will be admitted");
                    return;
                }
            };
            runtime.block_on(async move {
                let store = own_store(&state, &config, "the schedulers").await;
                state.note_store(&store);
                // The rooms running now and every room added later.
                let each = state.clone();
                sync::run_each_room(state.rooms.clone(), state.shutdown.clone(), move |room| {
                    scheduler::run(
                        store.clone(),
                        each.room_options.clone(),
                        each.shutdown.clone(),
                        room,
                    )
                })
                .await;
            });
        })
        .context("starting the scheduler thread")
}

/// Gives the calling thread (the schedulers') the nice value `nice` (`--scheduler-nice`; 0 leaves
/// it as it is) and publishes the one it has as `vestibule_scheduler_nice`. On Linux a thread's
/// nice value is its own (`setpriority(PRIO_PROCESS, 0, …)` names the calling thread), so the
/// serving threads keep theirs. Refused (no `CAP_SYS_NICE` for a value below the current one):
/// logged once, and the schedulers run on at the process's priority.
fn ask_scheduler_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getpriority_process, setpriority_process};
        if nice != 0 {
            if let Err(error) = setpriority_process(None, nice) {
                // Info, not a warning: most deployments run without CAP_SYS_NICE, and on a box
                // with cores to spare the ticks are on time anyway.
                tracing::info!(
                    nice,
                    %error,
                    "the scheduler thread keeps the process's priority (a nice value below 0 \
                     needs CAP_SYS_NICE): on a busy box its ticks may wake late and a 1-s window \
                     admit less than the rate"
                );
            }
        }
        if let Ok(got) = getpriority_process(None) {
            metrics::gauge!("vestibule_scheduler_nice").set(f64::from(got));
        }
    }
    #[cfg(not(target_os = "linux"))]
    if nice != 0 {
        tracing::info!(nice, "--scheduler-nice applies on Linux only; ignored here");
    }
}
