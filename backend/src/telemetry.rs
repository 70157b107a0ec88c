//! Logs (tracing) and metrics (Prometheus via the `metrics` crate), set up once per process.
//! The room gauges read from the store at scrape time are written by `http::observe`.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

/// Installs the global Prometheus recorder (once; later calls return the same handle).
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            // Fails only if another recorder was installed first; metrics then go there.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            handle
        })
        .clone()
}

fn describe() {
    use metrics::{describe_counter, describe_gauge};
    describe_gauge!(
        "vestibule_store_may_evict",
        "1 when Redis's maxmemory-policy lets it delete keys (tickets, tokens) on its own"
    );
    describe_gauge!(
        "vestibule_store_persistent",
        "1 when Redis keeps an AOF or RDB snapshots (a Redis restart keeps the queue)"
    );
    describe_counter!(
        "vestibule_joins_total",
        "Joins by outcome (new ticket or existing one)"
    );
    describe_counter!("vestibule_polls_total", "Ticket polls");
    describe_counter!(
        "vestibule_http_responses_total",
        "Answers of the API and the page by status and error code (code none: not an error)"
    );
    describe_counter!("vestibule_leaves_total", "Tickets that left the queue");
    describe_counter!(
        "vestibule_admissions_total",
        "Shoppers admitted (entry tokens issued)"
    );
    describe_counter!(
        "vestibule_admission_ticks_total",
        "Scheduler ticks that ran an admission as leader"
    );
    describe_counter!(
        "vestibule_admissions_fenced_total",
        "Admissions refused because the lease was lost"
    );
    describe_counter!(
        "vestibule_tokens_used_total",
        "Entry tokens consumed by an order"
    );
    describe_counter!(
        "vestibule_tokens_expired_total",
        "Entry tokens whose TTL passed unused"
    );
    describe_counter!(
        "vestibule_late_ticks_total",
        "Scheduler ticks that started 5 ms or more after their point on the tick grid"
    );
    describe_gauge!(
        "vestibule_largest_tick_lateness_ms",
        "Most a scheduler tick of this process started after its point on the grid, ms"
    );
    describe_gauge!(
        "vestibule_scheduler_nice",
        "The scheduler thread's nice value (--scheduler-nice; Linux)"
    );
    describe_gauge!(
        "vestibule_largest_tick_admissions",
        "Most shoppers admitted in one tick by this process"
    );
    describe_gauge!(
        "vestibule_scheduler_leader",
        "1 when this process leads the room's scheduler"
    );
    describe_gauge!("vestibule_sse_streams", "Open SSE streams in this process");
    describe_gauge!(
        "vestibule_connections_open",
        "Client connections each serving thread serves now (HTTP/1.1 and HTTP/2)"
    );
    describe_counter!(
        "vestibule_cap_limited_ticks_total",
        "Leader ticks held back by the active-users cap"
    );
    describe_counter!(
        "vestibule_instant_admissions_total",
        "Shoppers admitted by their own join with nobody waiting (not in vestibule_admissions_total)"
    );
    describe_counter!(
        "vestibule_redis_join_calls_total",
        "join.lua calls to Redis (each carries one or more joins of one room)"
    );
    describe_counter!(
        "vestibule_redis_joins_sent_total",
        "Joins sent to Redis in join.lua calls (÷ the calls: joins per call)"
    );
}

/// Installs the tracing subscriber: `RUST_LOG` filter, default `info`.
pub fn init_tracing() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,tower_http=warn"));
    use std::io::IsTerminal as _;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::stdout().is_terminal())
        .try_init();
}
