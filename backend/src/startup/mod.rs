//! Building and running the application: store, rooms, schedulers, SSE hubs and the server.
//!
//! [`Application::build`] and [`Application::run_until`] are each a list of named steps, made in
//! the files of this folder:
//! - `store`: the store (Redis or embedded) with the keys beside it, and each thread's own
//!   connection to Redis.
//! - `store_safety`: Redis's eviction and persistence settings, checked at start and watched.
//! - `rooms`: the rooms of `--rooms` seeded, and every live room started.
//! - `tasks`: what runs beside the serving threads: SSE hubs, the rooms' sync, the schedulers'
//!   thread, `/metrics` on `--metrics-bind`.
//! - `serving`: the connection limits, each serving thread's application, the stop signals.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use secrecy::SecretString;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::bots::Bots;
use crate::config::{Config, InvalidConfig};
use crate::ids::random_id;
use crate::room::Rooms;
use crate::server::serve;
use crate::state::{AppState, AppStateParts};
use crate::store::redis::RedisStore;
use crate::telemetry;

mod rooms;
mod serving;
mod store;
mod store_safety;
mod tasks;

use rooms::start_rooms;
use serving::{connection_limits, make_app, shutdown_signal};
use store::{open_store, token_service, OpenedStore};
use store_safety::check_store_safety;
use tasks::{serve_metrics, spawn_room_tasks, spawn_scheduler_thread};

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

impl Application {
    /// Connects the store, initialises the rooms and binds the socket.
    ///
    /// # Errors
    /// Invalid config, an unreachable Redis, or a socket that cannot be bound.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        config.validate().map_err(InvalidConfig)?;
        let OpenedStore {
            store,
            keys,
            challenge_key,
            redis,
        } = open_store(&config).await?;
        tracing::info!("mode: {}", mode(&config));
        let keys = keys.context("loading the entry-token signing keys")?;
        let shared_key = redis.zip(keys.shared_pem().map(str::to_owned));
        let tokens = token_service(keys, &config);
        let metrics = telemetry::metrics_handle();
        let safety = check_store_safety(store.as_ref(), config.require_safe_redis).await?;
        warn_if_page_missing(&config.static_dir);
        let rooms = start_rooms(store.as_ref(), &config, &tokens).await?;
        let (admin_token, generated_admin_token) = admin_token(&config);
        let (listener, metrics_listener) = bind(&config).await?;
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
        let mut tasks = spawn_room_tasks(&state, &config, shared_key);
        let limits = connection_limits(&config);
        let threads = config.serving_threads();
        let make_app = make_app(state, config);
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

/// The admin API's token: `--admin-token`, or one generated now (returned second, to be printed
/// once); none with `--disable-admin`.
fn admin_token(config: &Config) -> (Option<Arc<SecretString>>, Option<String>) {
    match (&config.admin_token, config.disable_admin) {
        (_, true) => (None, None),
        (Some(token), false) => (Some(Arc::new(token.clone())), None),
        (None, false) => {
            let token = format!("vst_{}", random_id());
            (
                Some(Arc::new(SecretString::from(token.as_str()))),
                Some(token),
            )
        }
    }
}

/// Binds `--bind`, and `--metrics-bind` when set.
///
/// # Errors
/// An address that cannot be bound.
async fn bind(config: &Config) -> anyhow::Result<(TcpListener, Option<TcpListener>)> {
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
    Ok((listener, metrics_listener))
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

/// What the server runs as, for the operator's first log line: the store and, in gate mode, the
/// origin it guards.
fn mode(config: &Config) -> String {
    let store = match config.redis_target() {
        Some(crate::config::RedisTarget::Single(_)) => {
            format!(
                "Redis at {}",
                config.redis_url_for_logs().unwrap_or_default()
            )
        }
        Some(crate::config::RedisTarget::Cluster(seeds)) => format!(
            "Redis Cluster ({} seed nodes: {})",
            seeds.len(),
            config.redis_url_for_logs().unwrap_or_default()
        ),
        None => match &config.data_dir.0 {
            Some(dir) => format!("embedded store in {}", dir.display()),
            None => "embedded store in memory only".to_owned(),
        },
    };
    match &config.gate.upstream {
        Some(upstream) => format!("gate in front of {upstream}, {store}"),
        None => format!("waiting room and API, {store}"),
    }
}
