//! Building and running the application: store, rooms, schedulers, SSE hubs and the server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use secrecy::SecretString;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::bots::Bots;
use crate::config::{Config, InvalidConfig};
use crate::http;
use crate::ids::random_id;
use crate::room::ticket_watch::refresh_loop::{self, HubContext};
use crate::room::{scheduler, sync};
use crate::room::{RoomRuntime, Rooms};
use crate::server::{serve, ConnectionLimits, MakeApp};
use crate::state::{AppState, AppStateParts};
use crate::store::durable::{DurableOptions, DurableStore};
use crate::store::memory::MemoryStore;
use crate::store::redis::RedisStore;
use crate::store::{RoomDoc, Store, StoreSafety};
use crate::telemetry;
use crate::tokens::keys::{keep_in_redis, SharedKey};
use crate::tokens::{KeyRing, TokenService};

/// A built application: bound socket, state and background tasks, ready to serve.
pub struct Application {
    /// The whole configuration (the layers got their parts of it).
    config: Arc<Config>,
    listener: TcpListener,
    /// `--metrics-bind`: `/metrics` alone, no token.
    metrics_listener: Option<TcpListener>,
    state: AppState,
    shutdown: watch::Sender<bool>,
    generated_admin_token: Option<String>,
    /// Redis and the generated signing key this replica keeps there (no key file).
    shared_key: Option<(Arc<RedisStore>, String)>,
}

/// The embedded store: durable in `--data-dir`, or memory only with `--data-dir none`.
fn embedded_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    let Some(dir) = &config.data_dir.0 else {
        tracing::info!(
            "embedded store in memory only (--data-dir none): a restart forgets the queue"
        );
        return Ok(Arc::new(MemoryStore::new()));
    };
    let options = DurableOptions {
        fsync: config.data_fsync,
        ..DurableOptions::default()
    };
    Ok(Arc::new(DurableStore::open(dir, options)?))
}

impl Application {
    /// Connects the store, initialises the rooms and binds the socket.
    ///
    /// # Errors
    /// Invalid config, an unreachable Redis, or a socket that cannot be bound.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        config.validate().map_err(InvalidConfig)?;
        let mut redis_handle = None;
        let (store, keys, challenge_key): (Arc<dyn Store>, _, _) = match config.redis_target() {
            Some(target) => {
                let redis = RedisStore::open(&target, config.store_timeout())
                    .await
                    .with_context(|| {
                        format!(
                            "connecting to Redis at {}",
                            config.redis_url_for_logs().unwrap_or_default()
                        )
                    })?;
                let keys = KeyRing::load(&config.tokens, SharedKey::Redis(&redis)).await;
                let challenge_key = Bots::key_in_redis(&redis)
                    .await
                    .context("loading the shared proof-of-work challenge key")?;
                let redis = Arc::new(redis);
                redis_handle = Some(redis.clone());
                (redis as Arc<dyn Store>, keys, challenge_key)
            }
            None => {
                let store = embedded_store(&config)?;
                let shared = config
                    .data_dir
                    .0
                    .as_deref()
                    .map_or(SharedKey::Memory, SharedKey::DataDir);
                let keys = KeyRing::load(&config.tokens, shared).await;
                (store, keys, Bots::key_in_memory())
            }
        };
        let keys = keys.context("loading the entry-token signing keys")?;
        let shared_key = redis_handle.zip(keys.shared_pem().map(str::to_owned));
        tracing::info!(
            kid = keys.current_kid(),
            "entry tokens signed with this key"
        );
        let tokens = Arc::new(TokenService::new(
            keys,
            &config.tokens.token_issuer,
            &config.tokens.token_audience,
        ));
        let metrics = telemetry::metrics_handle();
        let safety = check_store_safety(store.as_ref(), config.require_safe_redis).await?;
        warn_if_page_missing(&config.static_dir);
        // `--rooms` seeds the rooms that do not exist yet; every room in the store runs
        // (issue 14: rooms created at run time are data, like the settings).
        for room in &config.rooms {
            store
                .seed_room(room, &config.default_settings_for(room))
                .await
                .with_context(|| format!("initialising room {room}"))?;
        }
        let mut rooms = Vec::new();
        let listed = store.list_rooms().await.context("listing the rooms")?;
        for room in listed {
            // The document decides; a slug the index still names after a deletion (or whose
            // document the store lost) starts nothing: the first sync mends the index.
            let doc = store
                .room_doc(&room)
                .await
                .with_context(|| format!("reading the document of room {room}"))?;
            if let Some(RoomDoc::Live(in_force)) = doc {
                rooms.push(Arc::new(RoomRuntime::new(room, in_force, tokens.clone())));
            }
        }
        let (admin_token, generated_admin_token) = match (&config.admin_token, config.disable_admin)
        {
            (_, true) => (None, None),
            (Some(token), false) => (Some(Arc::new(token.clone())), None),
            (None, false) => {
                let token = format!("vst_{}", random_id());
                (
                    Some(Arc::new(SecretString::from(token.as_str()))),
                    Some(token),
                )
            }
        };
        let listener = TcpListener::bind(config.bind)
            .await
            .with_context(|| format!("binding {}", config.bind))?;
        let metrics_listener = match config.gate.metrics_bind {
            Some(address) => Some(
                TcpListener::bind(address)
                    .await
                    .with_context(|| format!("binding --metrics-bind {address}"))?,
            ),
            None => None,
        };
        let (shutdown, shutdown_rx) = watch::channel(false);
        let bots = Arc::new(Bots::new(challenge_key));
        let state = AppState::new(AppStateParts {
            store_handles: Arc::new(std::sync::RwLock::new(vec![store.clone()])),
            store,
            store_safety: Arc::new(std::sync::RwLock::new(safety)),
            room_options: Arc::new(config.room_options()),
            config: Arc::new(config.http_config()),
            rooms: Arc::new(Rooms::new(rooms)),
            admin_token,
            tokens,
            metrics,
            shutdown: shutdown_rx,
            bots,
            admin_feed: Arc::default(),
        });
        Ok(Self {
            config: Arc::new(config),
            listener,
            metrics_listener,
            state,
            shutdown,
            generated_admin_token,
            shared_key,
        })
    }

    /// Turns `true` when the server starts shutting down (for tasks beside it, e.g. the demo's
    /// shoppers).
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.state.shutdown.clone()
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The admin token generated at start, if none was configured (print it once).
    pub fn generated_admin_token(&self) -> Option<&str> {
        self.generated_admin_token.as_deref()
    }

    /// The store kind in use.
    pub fn store_kind(&self) -> &'static str {
        self.state.store.kind()
    }

    /// Serves until `stop` resolves; then ends SSE streams, stops the schedulers (releasing their
    /// leases) and finishes in-flight requests.
    ///
    /// # Errors
    /// A fatal server error.
    pub async fn run_until(
        self,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let Self {
            config,
            listener,
            metrics_listener,
            state,
            shutdown,
            shared_key,
            ..
        } = self;
        if let Some(metrics_listener) = metrics_listener {
            serve_metrics(&state, metrics_listener);
        }
        let schedulers = spawn_scheduler_thread(state.clone(), config.clone())?;
        let mut tasks = JoinSet::new();
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
        let limits = ConnectionLimits {
            header_read_timeout: Duration::from_secs(config.header_read_timeout_secs),
            write_timeout: config.write_timeout(),
            http2_max_streams: config.http2_max_streams,
            shutdown_grace: config.shutdown_grace(),
            http2_stall: ConnectionLimits::http2_stall_for(
                config.write_timeout(),
                Duration::from_secs(config.request_timeout_secs),
                // Only gate mode waits on an origin.
                if config.gate.enabled() {
                    config.gate.upstream_timeout()
                } else {
                    Duration::ZERO
                },
                Duration::from_secs(http::events::KEEP_ALIVE_SECS),
            ),
        };
        let threads = config.serving_threads();
        // Each serving thread's application: the same state with the thread's own store
        // connection (and, in gate mode, its own origin client), made on the thread's runtime.
        let make_app: MakeApp = Arc::new(move || {
            let (state, config) = (state.clone(), config.clone());
            Box::pin(async move {
                let state = state.with_store(own_store(&state, &config, "a serving thread").await);
                // The gate's session endpoints are documented with the API, gate mode or not.
                let extra = crate::gate::session::router();
                // Served as it is, or inside gate mode's router.
                Ok(if config.gate.enabled() {
                    let app = http::router(state.clone(), extra);
                    http::App::Routed(crate::gate::router(state, &config.gate, app)?)
                } else {
                    http::App::Own(http::edge(state, extra))
                })
            })
        });
        // The schedulers see the flag first and release their leases while connections drain.
        let signal = async move {
            stop.await;
            tracing::info!("shutting down");
            let _ = shutdown.send(true);
        };
        serve(listener, make_app, threads, signal, limits)
            .await
            .context("serving HTTP")?;
        while tasks.join_next().await.is_some() {}
        tokio::task::spawn_blocking(move || schedulers.join())
            .await
            .context("joining the scheduler thread")?
            .map_err(|_| anyhow::anyhow!("the scheduler thread panicked"))?;
        Ok(())
    }

    /// Serves until Ctrl-C or SIGTERM.
    ///
    /// # Errors
    /// A fatal server error.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        self.run_until(shutdown_signal()).await
    }
}

/// Serves `/metrics` alone on `--metrics-bind` until shutdown (no token: the address is meant
/// for the scraper's private network).
fn serve_metrics(state: &AppState, listener: TcpListener) {
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
fn spawn_scheduler_thread(
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
                // The rooms running now and every room added later (issue 14).
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

/// A connection to Redis of `whose` own (made on the runtime this runs on, whose driver task it
/// then stays on), or the shared store (embedded stores, or when Redis cannot be reached now).
async fn own_store(state: &AppState, config: &Config, whose: &str) -> Arc<dyn Store> {
    let Some(target) = config.redis_target() else {
        return state.store.clone();
    };
    match RedisStore::open(&target, config.store_timeout()).await {
        Ok(store) => Arc::new(store),
        Err(error) => {
            tracing::warn!(%error, "{whose} shares the main connection to Redis");
            state.store.clone()
        }
    }
}

/// Reads how the store is set up where that can lose queue state; warns of each risk, and with
/// `require_safe` refuses a Redis that may evict keys.
///
/// # Errors
/// The store's settings could not be read, or `require_safe` and Redis may evict keys.
async fn check_store_safety(
    store: &dyn Store,
    require_safe: bool,
) -> anyhow::Result<Option<StoreSafety>> {
    let Some(safety) = store
        .safety()
        .await
        .context("reading Redis's eviction and persistence settings")?
    else {
        return Ok(None);
    };
    if require_safe && safety.may_evict() {
        anyhow::bail!(
            "Redis maxmemory-policy is {:?}, which may evict tickets and entry tokens; set it to \
             noeviction (or start without --require-safe-redis)",
            safety.maxmemory_policy
        );
    }
    for warning in safety.warnings() {
        tracing::warn!("{warning}");
    }
    record_safety_metrics(&safety);
    Ok(Some(safety))
}

fn record_safety_metrics(safety: &StoreSafety) {
    metrics::gauge!("vestibule_store_may_evict").set(f64::from(u8::from(safety.may_evict())));
    // Not set while unknown (no AOF, snapshot schedule hidden): absent, not a false 0.
    if let Some(persists) = safety.persists() {
        metrics::gauge!("vestibule_store_persistent").set(f64::from(u8::from(persists)));
    }
}

/// Re-reads Redis's eviction and persistence settings every `--redis-safety-check-secs` (an
/// operator may change them at run time); warns when they turn unsafe. Ends on shutdown.
async fn watch_store_safety(state: AppState, period: Duration) {
    let mut shutdown = state.shutdown.clone();
    loop {
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            _ = shutdown.wait_for(|stopping| *stopping) => return,
        }
        let Ok(Some(safety)) = state.store.safety().await else {
            continue;
        };
        record_safety_metrics(&safety);
        let mut last = state
            .store_safety
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.as_ref() != Some(&safety) {
            for warning in safety.warnings() {
                tracing::warn!("{warning}");
            }
            *last = Some(safety);
        }
    }
}

/// Warns when the page's folder has no `index.html`, naming the folder looked in: started
/// outside the checkout, the relative default `dist` points nowhere and shoppers would see
/// "not built" with no hint in the log.
fn warn_if_page_missing(static_dir: &std::path::Path) {
    if static_dir.join("index.html").is_file() {
        return;
    }
    let looked_in = std::path::absolute(static_dir).unwrap_or_else(|_| static_dir.to_path_buf());
    tracing::warn!(
        folder = %looked_in.display(),
        "the waiting-room page is not served: no index.html in {}; build it with \
         scripts/build-page.sh and pass --static-dir <checkout>/dist (the JSON API works \
         without it)",
        looked_in.display()
    );
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
