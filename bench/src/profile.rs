//! Benchmark profiles: `tiny` (seconds, the smoke test), `short` (≤ 5 min, what BENCHMARKS.md
//! records) and `full` (the whole scale, ~20 min).

use std::time::Duration;

/// Every size and duration of a run.
#[derive(Debug, Clone)]
pub struct Profile {
    /// `tiny`, `short` or `full`.
    pub name: &'static str,
    /// Seconds the HTTP-ceiling baseline runs.
    pub baseline_secs: f64,
    /// Requests per `redis-benchmark` command.
    pub redis_benchmark_requests: u64,
    /// Connections of the closed-loop (capacity) runs.
    pub capacity_connections: usize,
    /// Seconds of each capacity run (joins, polls).
    pub capacity_secs: f64,
    /// Open-loop poll rate for the latency figure, per second.
    pub poll_rate: f64,
    /// Seconds of the open-loop poll run.
    pub poll_rate_secs: f64,
    /// Configured admission rate of the flash sale, shoppers/s.
    pub admission_rate: f64,
    /// Scheduler tick, ms.
    pub tick_ms: u64,
    /// Ramp seconds of the arrival curve.
    pub ramp_secs: f64,
    /// Spike rate, joins/s.
    pub spike_per_sec: f64,
    /// Spike seconds.
    pub spike_secs: f64,
    /// Share of SSE shoppers in the flash sale.
    pub sse_share: f64,
    /// Seconds shoppers wait after the last arrival (enough to drain the queue at the rate).
    pub drain_timeout_secs: f64,
    /// Waiting shoppers of the small position-cost run.
    pub position_small: u64,
    /// Waiting shoppers of the large position-cost run.
    pub position_large: u64,
    /// Open-loop poll rate of the position-cost probes, per second.
    pub position_probe_rate: f64,
    /// Seconds of each position-cost probe.
    pub position_probe_secs: f64,
    /// SSE stream counts held one after another (cumulative).
    pub sse_steps: Vec<u64>,
    /// Seconds each SSE step is held while measured.
    pub sse_hold_secs: f64,
}

impl Profile {
    /// The named profile.
    ///
    /// # Errors
    /// An unknown name.
    pub fn named(name: &str) -> anyhow::Result<Self> {
        Ok(match name {
            "tiny" => Self {
                name: "tiny",
                baseline_secs: 0.5,
                redis_benchmark_requests: 2_000,
                capacity_connections: 8,
                capacity_secs: 0.5,
                poll_rate: 200.0,
                poll_rate_secs: 0.5,
                admission_rate: 175.0,
                tick_ms: 100,
                ramp_secs: 0.5,
                spike_per_sec: 400.0,
                spike_secs: 0.5,
                sse_share: 0.1,
                drain_timeout_secs: 15.0,
                position_small: 100,
                position_large: 2_000,
                position_probe_rate: 100.0,
                position_probe_secs: 0.5,
                sse_steps: vec![20, 50],
                sse_hold_secs: 0.5,
            },
            "short" => Self {
                name: "short",
                baseline_secs: 5.0,
                redis_benchmark_requests: 200_000,
                capacity_connections: 64,
                capacity_secs: 8.0,
                poll_rate: 10_000.0,
                poll_rate_secs: 8.0,
                admission_rate: 175.0,
                tick_ms: 100,
                ramp_secs: 2.0,
                spike_per_sec: 10_000.0,
                spike_secs: 1.0,
                sse_share: 0.1,
                drain_timeout_secs: 130.0,
                position_small: 1_000,
                position_large: 1_000_000,
                position_probe_rate: 2_000.0,
                position_probe_secs: 5.0,
                sse_steps: vec![10_000, 25_000, 50_000],
                sse_hold_secs: 5.0,
            },
            "full" => Self {
                name: "full",
                baseline_secs: 10.0,
                redis_benchmark_requests: 1_000_000,
                capacity_connections: 128,
                capacity_secs: 20.0,
                poll_rate: 10_000.0,
                poll_rate_secs: 20.0,
                admission_rate: 175.0,
                tick_ms: 100,
                ramp_secs: 10.0,
                spike_per_sec: 10_000.0,
                spike_secs: 10.0,
                sse_share: 0.1,
                drain_timeout_secs: 900.0,
                position_small: 1_000,
                position_large: 1_000_000,
                position_probe_rate: 5_000.0,
                position_probe_secs: 10.0,
                sse_steps: vec![10_000, 25_000, 50_000],
                sse_hold_secs: 15.0,
            },
            other => anyhow::bail!("unknown profile {other:?}: tiny, short or full"),
        })
    }

    /// Seconds as a duration.
    pub fn secs(value: f64) -> Duration {
        Duration::from_secs_f64(value)
    }
}
