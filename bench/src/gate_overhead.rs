//! What gate mode costs: the same origin (the `hello` baseline server) reached straight, through
//! Debian's nginx as a plain reverse proxy, and through Vestibule's gate (a path no rule names,
//! and a gated path carrying a valid entry token), in one run. Each is measured twice: a closed
//! loop (requests/s at saturation) and an open loop at a fixed rate (latency counted from when
//! each request was due, so the added p99 is not hidden by coordinated omission).
//!
//! The target: the gate's overhead no worse than nginx's. Two figures say it: the p99
//! latency each proxy adds at a fixed rate (the verdict), and the CPU time each proxy process
//! spends per request during the closed loop (nginx's master and workers summed): CPU time per
//! request moves far less than requests/s when other work shares the two cores.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use hyper::Method;
use vestibule_shared::{paths, TicketStatus};
use vestibule_tests::nginx::Nginx;

use crate::http::{short, HttpClient, Percentiles};
use crate::load::{closed_loop, open_loop, LoadResult};
use crate::procs::{start_vestibule_on, tree_cpu_secs, CpuMeter, ServerProcess};
use crate::profile::Profile;
use crate::report::{Report, Verdict};

const ROOM: &str = "main";
const PREFIX: &str = "/_vestibule";
/// The open loop's rate, requests/s: well under every path's saturation on a 2-core box.
const FIXED_RATE: f64 = 2_000.0;

/// One way to reach the origin.
struct Route {
    name: &'static str,
    /// Its figures' key in the JSON report (`gate_{key}_per_sec`, …).
    key: &'static str,
    client: HttpClient,
    path: &'static str,
    headers: Vec<(&'static str, String)>,
    /// The proxy's process (with its children), if a proxy is in the way.
    proxy_pid: Option<u32>,
}

/// Runs the gate-overhead figures.
///
/// # Errors
/// When a process cannot start (nginx missing: `apt-get install nginx-light`).
pub async fn run(profile: &Profile, vestibule: &Path, report: &mut Report) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let origin = ServerProcess::start(
        &exe,
        &["hello".into(), "--bind".into(), "127.0.0.1:0".into()],
    )?;
    let nginx = Nginx::start(&origin.base(), false)?;
    // The libraries' floor: hyper's server and hyper-util's client with nothing of the gate's.
    let bare = ServerProcess::start(
        &exe,
        &[
            "bare-proxy".into(),
            "--bind".into(),
            "127.0.0.1:0".into(),
            "--upstream".into(),
            origin.base(),
        ],
    )?;
    let gate = start_vestibule_on(
        vestibule,
        &["--data-dir", "none"],
        ROOM,
        1_000.0,
        profile.tick_ms,
        &[
            "--upstream",
            &origin.base(),
            "--gate",
            "/checkout=main",
            "--token-ttl-secs",
            "3600",
        ],
    )?;
    let token = entry_token(&HttpClient::new(&gate.base(), 1)).await?;
    let connections = profile.capacity_connections;
    let routes = [
        Route {
            name: "straight to the origin",
            key: "straight",
            client: HttpClient::new(&origin.base(), connections),
            path: "/checkout",
            headers: vec![],
            proxy_pid: None,
        },
        Route {
            name: "through nginx (proxy_pass, keepalive upstream)",
            key: "nginx",
            client: HttpClient::new(&nginx.base(), connections),
            path: "/checkout",
            headers: vec![],
            proxy_pid: Some(nginx.pid()),
        },
        Route {
            name:
                "through a bare hyper proxy (hyper server + hyper-util client, a runtime per core)",
            key: "bare_hyper",
            client: HttpClient::new(&bare.base(), connections),
            path: "/checkout",
            headers: vec![],
            proxy_pid: Some(bare.pid()),
        },
        Route {
            name: "through the gate, a path no rule names",
            key: "ungated",
            client: HttpClient::new(&gate.base(), connections),
            path: "/",
            headers: vec![],
            proxy_pid: Some(gate.pid()),
        },
        Route {
            name: "through the gate, gated path with X-Entry-Token",
            key: "gated",
            client: HttpClient::new(&gate.base(), connections),
            path: "/checkout",
            headers: vec![("x-entry-token", token)],
            proxy_pid: Some(gate.pid()),
        },
    ];
    let secs = Profile::secs(profile.capacity_secs / 2.0);
    let mut fixed: Vec<Percentiles> = Vec::new();
    let mut cpu_per_request: Vec<f64> = Vec::new();
    for route in &routes {
        let _ = closed_loop(connections, Duration::from_millis(300), 5_000, send(route)).await;
        let cpu = CpuMeter::start(&[
            ("origin", origin.pid()),
            ("vestibule", gate.pid()),
            ("bench", std::process::id()),
        ]);
        let proxy_cpu_start = route.proxy_pid.map(tree_cpu_secs);
        let saturated = closed_loop(connections, secs, u64::MAX, send(route)).await;
        let cpu_saturated = cpu.summary();
        // The proxy's CPU time per answered request, µs (0 with no proxy in the way).
        let proxy_us = route
            .proxy_pid
            .zip(proxy_cpu_start)
            .map(|(pid, start)| (tree_cpu_secs(pid) - start) * 1e6 / saturated.ok.max(1) as f64)
            .unwrap_or(0.0);
        cpu_per_request.push(proxy_us);
        let at_rate = open_loop(FIXED_RATE, secs, 10_000, {
            let send = send(route);
            move |n| send(0, n)
        })
        .await;
        let latency = at_rate.percentiles();
        let added = fixed
            .first()
            .map(|straight| {
                format!(
                    "; p99 {:+.2} ms vs straight",
                    latency.p99_ms - straight.p99_ms
                )
            })
            .unwrap_or_default();
        report.value(&format!("gate_{}_per_sec", route.key), saturated.rate());
        report.value(&format!("gate_{}_p99_ms", route.key), latency.p99_ms);
        report.value(&format!("gate_{}_proxy_cpu_us", route.key), proxy_us);
        let proxy_cpu = if route.proxy_pid.is_some() {
            format!("; proxy CPU {proxy_us:.0} µs/request")
        } else {
            String::new()
        };
        report.row(
            format!("Gate overhead: {}", route.name),
            format!(
                "{} req/s (closed loop){proxy_cpu}; at {}/s: {}{added}",
                short(saturated.rate()),
                short(FIXED_RATE),
                latency.triple()
            ),
            "gate's overhead ≤ nginx's",
            Verdict::Info,
            format!(
                "{connections} connections; CPU (closed loop; nginx's workers are not listed, \
                 the machine total holds them): {cpu_saturated}; errors {}/{}",
                saturated.errors,
                errors(&at_rate)
            ),
        );
        fixed.push(latency);
    }
    if let [straight, through_nginx, _, ungated, gated] = fixed.as_slice() {
        let nginx_added = through_nginx.p99_ms - straight.p99_ms;
        let worst_gate = (ungated.p99_ms - straight.p99_ms).max(gated.p99_ms - straight.p99_ms);
        report.row(
            "Gate overhead vs nginx: added p99 at a fixed rate",
            format!("gate {worst_gate:+.2} ms, nginx {nginx_added:+.2} ms"),
            "gate ≤ nginx",
            if worst_gate <= nginx_added.max(0.0) + 0.5 {
                Verdict::Met
            } else {
                Verdict::Missed
            },
            "the worse of the gate's two paths; 0.5 ms of grace for timer noise",
        );
    }
    if let [_, nginx_us, bare_us, ungated_us, gated_us] = cpu_per_request.as_slice() {
        report.row(
            "Gate overhead vs nginx: proxy CPU per request (closed loop)",
            format!(
                "gate {ungated_us:.0} µs ungated ({:.2}× nginx, {:.2}× bare hyper), {gated_us:.0} µs \
                 gated ({:.2}×, {:.2}×); nginx {nginx_us:.0} µs, bare hyper {bare_us:.0} µs ({:.2}× nginx)",
                ungated_us / nginx_us.max(1e-9),
                ungated_us / bare_us.max(1e-9),
                gated_us / nginx_us.max(1e-9),
                gated_us / bare_us.max(1e-9),
                bare_us / nginx_us.max(1e-9),
            ),
            "–",
            Verdict::Info,
            "CPU time of the proxy's processes ÷ requests answered; 10 ms clock ticks",
        );
    }
    Ok(())
}

fn send(
    route: &Route,
) -> impl Fn(
    usize,
    u64,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>
       + Send
       + Sync
       + Clone
       + 'static {
    let client = route.client.clone();
    let path = route.path;
    let headers = route.headers.clone();
    move |_worker, _n| {
        let client = client.clone();
        let headers = headers.clone();
        Box::pin(async move {
            let pairs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            let answer = client
                .send(Method::GET, path, &pairs, None)
                .await
                .map_err(|e| format!("{e:#}"))?;
            if answer.status.is_success() {
                Ok(())
            } else {
                Err(format!("answered {}", answer.status))
            }
        })
    }
}

fn errors(result: &LoadResult) -> u64 {
    result.errors
}

/// Joins the gate's room and waits for the entry token (the room admits 1,000/s).
async fn entry_token(client: &HttpClient) -> anyhow::Result<String> {
    let joined = client
        .send(
            Method::POST,
            &format!("{PREFIX}{}", paths::tickets(ROOM)),
            &[],
            None,
        )
        .await?;
    let mut status: TicketStatus =
        serde_json::from_slice(&joined.body).context("join answer through the gate")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while status.entry_token.is_none() {
        if Instant::now() > deadline {
            bail!("no entry token within 10 s: {status:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let polled = client
            .get(&format!(
                "{PREFIX}{}",
                paths::ticket(ROOM, &status.ticket_id)
            ))
            .await?;
        status = serde_json::from_slice(&polled.body).context("poll answer through the gate")?;
    }
    status.entry_token.context("entry token")
}
