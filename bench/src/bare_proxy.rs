//! The library's floor for the gate: a reverse proxy with nothing but hyper's server and
//! hyper-util's pooled client, served the way the gate serves (one single-threaded runtime per
//! core, each with its own client), so that the gate stage can tell what the libraries cost from
//! what the gate adds on top of them (routing, rules, forwarding headers, timeouts, metrics).
//!
//! It forwards every request as it came (path and query, headers but `Connection`, the body
//! streamed) and streams the answer back. No timeouts, no header rewriting beyond that: a peer
//! to measure against, not a proxy to deploy.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt as _;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{header, Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};

type Answer = Response<UnsyncBoxBody<Bytes, hyper::Error>>;

/// Serves the proxy to `upstream` (`http://HOST:PORT`) on `bind` until killed, with `threads`
/// serving threads (0: one per core). Prints `bare-proxy listening on http://ADDR` once bound.
///
/// # Errors
/// The address cannot be bound or a thread cannot start.
pub fn serve(bind: SocketAddr, upstream: &str, threads: usize) -> anyhow::Result<()> {
    let authority: Arc<str> = upstream
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .into();
    let listener = std::net::TcpListener::bind(bind).context("binding the bare proxy")?;
    listener.set_nonblocking(true)?;
    println!("bare-proxy listening on http://{}", listener.local_addr()?);
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, usize::from)
    } else {
        threads
    };
    let mut handles = Vec::new();
    for n in 0..threads {
        // Every thread accepts on the same socket; the kernel hands each connection to one.
        let listener = listener.try_clone()?;
        let authority = authority.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("bare-proxy-{n}"))
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("a current-thread runtime");
                    runtime.block_on(serve_thread(listener, authority));
                })?,
        );
    }
    for handle in handles {
        let _ = handle.join();
    }
    Ok(())
}

async fn serve_thread(listener: std::net::TcpListener, authority: Arc<str>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<HttpConnector, Incoming> = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(60))
        .build(connector);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let client = client.clone();
        let authority = authority.clone();
        tokio::spawn(async move {
            let service =
                service_fn(move |request| forward(client.clone(), authority.clone(), request));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn forward(
    client: Client<HttpConnector, Incoming>,
    authority: Arc<str>,
    request: Request<Incoming>,
) -> Result<Answer, std::convert::Infallible> {
    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let Ok(uri) = format!("http://{authority}{path}").parse::<Uri>() else {
        return Ok(status(StatusCode::BAD_REQUEST));
    };
    parts.uri = uri;
    parts.headers.remove(header::CONNECTION);
    match client.request(Request::from_parts(parts, body)).await {
        Ok(response) => Ok(response.map(|body| body.boxed_unsync())),
        Err(_) => Ok(status(StatusCode::BAD_GATEWAY)),
    }
}

fn status(code: StatusCode) -> Answer {
    let mut response = Response::new(
        http_body_util::Empty::new()
            .map_err(|never: std::convert::Infallible| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = code;
    response
}
