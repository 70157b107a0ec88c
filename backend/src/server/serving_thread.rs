//! A serving thread: a single-threaded runtime with its own copy of the application, serving the
//! connections the accept loop hands it, counted in `vestibule_connections_open{thread}`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::Context as _;
use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

use super::accept::MakeApp;
use super::connection::serve_connection;
use super::limits::ConnectionLimits;

/// A connection accepted and on its way to a serving thread.
type Handed = (std::net::TcpStream, SocketAddr);

/// One serving thread as the accept loop sees it.
pub(super) struct ServingThread {
    pub(super) arrivals: mpsc::UnboundedSender<Handed>,
    /// Connections it serves now (the accept loop hands each new one to the least busy).
    pub(super) open: Arc<OpenCount>,
    /// Ends once the thread's connections are all done (after its channel closes).
    pub(super) thread: std::thread::JoinHandle<()>,
}
/// Starts serving thread `index`; the receiver says once its application is built (or why not).
pub(super) fn start_serving_thread(
    index: usize,
    make_app: MakeApp,
    builder: Arc<Builder<TokioExecutor>>,
    limits: ConnectionLimits,
) -> anyhow::Result<(ServingThread, oneshot::Receiver<anyhow::Result<()>>)> {
    let (arrivals, arriving) = mpsc::unbounded_channel();
    let (ready, readiness) = oneshot::channel();
    let open = Arc::new(OpenCount::new(index));
    let counted = open.clone();
    let thread = std::thread::Builder::new()
        .name(format!("vestibule-serve-{index}"))
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    let _ = ready.send(Err(anyhow::Error::new(error)
                        .context(format!("starting the runtime of serving thread {index}"))));
                    return;
                }
            };
            runtime.block_on(async move {
                let app = match make_app().await {
                    Ok(app) => app,
                    Err(error) => {
                        let _ = ready.send(Err(error));
                        return;
                    }
                };
                let _ = ready.send(Ok(()));
                serve_handed(arriving, app, builder, counted, limits).await;
            });
        })
        .with_context(|| format!("starting serving thread {index}"))?;
    Ok((
        ServingThread {
            arrivals,
            open,
            thread,
        },
        readiness,
    ))
}

/// A serving thread's loop: serves each connection handed to it until the accept loop closes the
/// channel, then lets them finish for up to the shutdown grace and closes the rest.
async fn serve_handed(
    mut arrivals: mpsc::UnboundedReceiver<Handed>,
    app: crate::http::App,
    builder: Arc<Builder<TokioExecutor>>,
    open: Arc<OpenCount>,
    limits: ConnectionLimits,
) {
    let (stop, stopping) = watch::channel(false);
    let mut connections = JoinSet::new();
    while let Some((stream, peer)) = arrivals.recv().await {
        while connections.try_join_next().is_some() {}
        let counted = OpenConnection(open.clone());
        let stream = match TcpStream::from_std(stream) {
            Ok(stream) => stream,
            Err(error) => {
                tracing::warn!(%peer, %error, "cannot serve a handed connection");
                continue;
            }
        };
        let serving = serve_connection(
            stream,
            peer,
            builder.clone(),
            app.clone(),
            stopping.clone(),
            limits,
        );
        connections.spawn(async move {
            serving.await;
            drop(counted);
        });
    }
    let _ = stop.send(true);
    let drained = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(limits.shutdown_grace, drained)
        .await
        .is_err()
    {
        tracing::warn!(
            open = connections.len(),
            grace_secs = limits.shutdown_grace.as_secs(),
            "connections still open after the shutdown grace: closing them"
        );
    }
    connections.shutdown().await;
}

/// The connections one serving thread serves now, also shown as the gauge
/// `vestibule_connections_open{thread}`.
pub(super) struct OpenCount {
    count: AtomicUsize,
    gauge: metrics::Gauge,
}

impl OpenCount {
    fn new(thread: usize) -> Self {
        let gauge = metrics::gauge!("vestibule_connections_open", "thread" => thread.to_string());
        gauge.set(0.0);
        Self {
            count: AtomicUsize::new(0),
            gauge,
        }
    }

    pub(super) fn now(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub(super) fn opened(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.gauge.increment(1.0);
    }

    pub(super) fn closed(&self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
        self.gauge.decrement(1.0);
    }
}

/// One connection in a serving thread's count, until dropped.
struct OpenConnection(Arc<OpenCount>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.closed();
    }
}
