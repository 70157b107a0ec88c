//! The accept loop: each accepted connection goes to the serving thread serving the fewest, and
//! shutdown waits for every thread to finish its connections.

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use super::limits::{protocols, ConnectionLimits};
use super::serving_thread::start_serving_thread;

/// How a serving thread builds the application it serves, on its own runtime (so that the store
/// connection and the origin client it makes live there). Called once per serving thread.
pub type MakeApp = Arc<
    dyn Fn() -> futures_util::future::BoxFuture<'static, anyhow::Result<crate::http::App>>
        + Send
        + Sync,
>;
/// Serves HTTP/1.1 and HTTP/2 (h2c, prior knowledge) on `listener` until `signal` resolves, then
/// lets open connections finish for up to the shutdown grace and closes the rest.
///
/// Like `axum::serve`, plus what it does not expose, so that every wait on a client has a bound
/// (see the module's documentation). Each request carries the peer address as
/// `ConnectInfo<SocketAddr>`.
///
/// Thread per core: `threads` threads each run a single-threaded runtime with the application
/// `make_app` builds there. This task accepts, and hands each connection to the thread serving
/// the fewest; the connection's requests, their tasks and their store and origin round trips then
/// never wake another thread (with one multi-threaded runtime, a proxied request crossed threads
/// at each of its three tasks: BENCHMARKS.md "Thread per core").
///
/// # Errors
/// A serving thread could not start, or `make_app` failed on it. Accept errors are logged and
/// retried.
pub async fn serve(
    listener: TcpListener,
    make_app: MakeApp,
    threads: usize,
    signal: impl std::future::Future<Output = ()> + Send + 'static,
    limits: ConnectionLimits,
) -> anyhow::Result<()> {
    let builder = Arc::new(protocols(limits));
    let mut serving = Vec::with_capacity(threads);
    let mut readiness = Vec::with_capacity(threads);
    for index in 0..threads.max(1) {
        let (thread, ready) =
            start_serving_thread(index, make_app.clone(), builder.clone(), limits)?;
        serving.push(thread);
        readiness.push(ready);
    }
    // All threads build their application at once; a failure stops the start (the threads
    // started end when their channels close).
    for (index, ready) in readiness.into_iter().enumerate() {
        match ready.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(error),
            Err(_) => anyhow::bail!("serving thread {index} ended while starting"),
        }
    }
    let mut signal = pin!(signal);
    let mut next = 0_usize;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut signal => break,
        };
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(error) => {
                tracing::debug!(%peer, %error, "accepted connection lost before its hand-off");
                continue;
            }
        };
        // The least busy thread; ties go round the threads.
        next = next.wrapping_add(1);
        let count = serving.len();
        let chosen = (0..count)
            .map(|offset| (next + offset) % count)
            .min_by_key(|&index| serving[index].open.now())
            .unwrap_or(0);
        serving[chosen].open.opened();
        if serving[chosen].arrivals.send((stream, peer)).is_err() {
            serving[chosen].open.closed();
            tracing::error!(
                thread = chosen,
                "a serving thread has stopped; connection dropped"
            );
        }
    }
    drop(listener);
    // Each thread sees its channel close, tells its connections to finish and waits for them
    // for up to the shutdown grace; all of them at once.
    let ended: Vec<_> = serving
        .into_iter()
        .map(|serving| {
            drop(serving.arrivals);
            serving.thread
        })
        .collect();
    tokio::task::spawn_blocking(move || {
        for thread in ended {
            let _ = thread.join();
        }
    })
    .await
    .map_err(|error| anyhow::anyhow!("joining the serving threads: {error}"))?;
    Ok(())
}
