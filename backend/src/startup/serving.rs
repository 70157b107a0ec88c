//! What the serving threads serve, and within which bounds: the connection limits from the
//! configuration, the application each thread builds on its own runtime, and the signals that
//! stop it.

use std::sync::Arc;
use std::time::Duration;

use super::store::own_store;
use crate::config::Config;
use crate::http;
use crate::server::{ConnectionLimits, MakeApp};
use crate::state::AppState;

/// The bounds on every client connection, from the configuration.
pub(super) fn connection_limits(config: &Config) -> ConnectionLimits {
    ConnectionLimits {
        header_read_timeout: Duration::from_secs(config.limits.header_read_timeout_secs),
        write_timeout: config.write_timeout(),
        http2_max_streams: config.limits.http2_max_streams,
        shutdown_grace: config.shutdown_grace(),
        http2_stall: ConnectionLimits::http2_stall_for(
            config.write_timeout(),
            Duration::from_secs(config.limits.request_timeout_secs),
            // Only gate mode waits on an origin.
            if config.gate.enabled() {
                config.gate.upstream_timeout()
            } else {
                Duration::ZERO
            },
            Duration::from_secs(http::events::KEEP_ALIVE_SECS),
        ),
    }
}

/// Each serving thread's application: the same state with the thread's own store connection
/// (and, in gate mode, its own origin client), made on the thread's runtime.
pub(super) fn make_app(state: AppState, config: Arc<Config>) -> MakeApp {
    Arc::new(move || {
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
    })
}

/// Resolves on Ctrl-C or SIGTERM.
pub(super) async fn shutdown_signal() {
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
