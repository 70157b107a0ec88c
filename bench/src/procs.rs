//! The processes a benchmark runs against: a private `redis-server`, the `vestibule` binary and
//! the bare axum "hello" baseline; plus CPU and memory readings of any process from `/proc`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

/// The admin token every benchmarked server is started with.
pub const ADMIN_TOKEN: &str = "bench-admin-token-0123456789";

pub use vestibule_tests::{free_port, ChildGuard};

/// A private `redis-server` on a free TCP port of 127.0.0.1, without persistence.
pub struct RedisProcess {
    child: ChildGuard,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl RedisProcess {
    /// Starts one and waits until it answers.
    ///
    /// # Errors
    /// When `redis-server` is missing or does not come up within 5 s.
    pub fn start() -> anyhow::Result<Self> {
        let port = free_port().context("binding a probe port")?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--maxclients", "10000"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("redis-server must be installed (apt-get install redis-server)")?;
        let redis = Self {
            child: ChildGuard::new(child),
            port,
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(mut connection) = redis.connection() {
                if redis::cmd("PING").query::<String>(&mut connection).is_ok() {
                    return Ok(redis);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("redis-server did not come up on port {port}")
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A fresh synchronous connection.
    ///
    /// # Errors
    /// When Redis does not answer.
    pub fn connection(&self) -> anyhow::Result<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        Ok(client.get_connection_with_timeout(Duration::from_secs(5))?)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// A server process that prints `… listening on http://ADDR …` when ready.
pub struct ServerProcess {
    child: ChildGuard,
    /// The address it listens on.
    pub addr: SocketAddr,
    log: vestibule_tests::ServerOutput,
}

impl ServerProcess {
    /// Starts `program args…` and waits (up to 15 s) for its listening line.
    ///
    /// # Errors
    /// When it cannot start or does not print the line in time.
    pub fn start(program: &Path, args: &[String]) -> anyhow::Result<Self> {
        let mut child = Command::new(program)
            .args(args)
            // `VESTIBULE_BENCH_RUST_LOG` (say `vestibule_room=info`) shows more of a run.
            .env(
                "RUST_LOG",
                std::env::var("VESTIBULE_BENCH_RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .env("NO_COLOR", "1")
            .env_remove("VESTIBULE_REDIS_URL")
            .env_remove("VESTIBULE_DATA_DIR")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        // Keep the last lines only: a long run must not grow this without bound.
        let (address_rx, log) = vestibule_tests::follow_output(&mut child, 200);
        let address = address_rx.recv_timeout(Duration::from_secs(15));
        let Ok(address) = address else {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "{} did not start; its output:\n{}",
                program.display(),
                log.text()
            );
        };
        let addr = address
            .parse()
            .with_context(|| format!("listening address {address:?}"))?;
        Ok(Self {
            child: ChildGuard::new(child),
            addr,
            log,
        })
    }

    /// `http://ADDR`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines it printed.
    pub fn log_tail(&self) -> String {
        self.log.text()
    }
}

/// Starts `vestibule` on a free port with `--redis-url` and the given rooms and rate.
///
/// # Errors
/// When it does not start.
pub fn start_vestibule(
    binary: &Path,
    redis_url: &str,
    rooms: &str,
    admission_rate: f64,
    tick_ms: u64,
    extra: &[&str],
) -> anyhow::Result<ServerProcess> {
    let store = ["--redis-url", redis_url];
    start_vestibule_on(binary, &store, rooms, admission_rate, tick_ms, extra)
}

/// Starts `vestibule` on a free port with the store flags `store` (`--redis-url …`, or
/// `--data-dir …` for the embedded store) and the given rooms and rate.
///
/// # Errors
/// When it does not start.
pub fn start_vestibule_on(
    binary: &Path,
    store: &[&str],
    rooms: &str,
    admission_rate: f64,
    tick_ms: u64,
    extra: &[&str],
) -> anyhow::Result<ServerProcess> {
    let mut args: Vec<String> = [
        "--bind",
        "127.0.0.1:0",
        "--admin-token",
        ADMIN_TOKEN,
        "--rooms",
        rooms,
        "--static-dir",
        "/nonexistent-vestibule-bench-dist",
    ]
    .iter()
    .chain(store)
    .map(|s| (*s).to_owned())
    .collect();
    args.extend([
        "--admission-rate".to_owned(),
        admission_rate.to_string(),
        "--tick-ms".to_owned(),
        tick_ms.to_string(),
    ]);
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    ServerProcess::start(binary, &args)
}

/// Finds the `vestibule` binary: the given path, else `$VESTIBULE_BIN`, else next to this
/// executable (`target/<profile>/`), else one level up (for test executables in `deps/`).
///
/// # Errors
/// When none exists.
pub fn vestibule_binary(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = given {
        return Ok(path.to_owned());
    }
    if let Ok(path) = std::env::var("VESTIBULE_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    let mut dir = exe.parent();
    while let Some(folder) = dir {
        let candidate = folder.join("vestibule");
        if candidate.is_file() {
            return Ok(candidate);
        }
        if folder.file_name().is_some_and(|name| name == "target") {
            break;
        }
        dir = folder.parent();
    }
    bail!("the vestibule binary is not built: run `cargo build --release -p vestibule` (or pass --vestibule-bin)")
}

/// CPU seconds (user + system) a process has used so far, from `/proc/<pid>/stat`.
pub fn cpu_secs(pid: u32) -> f64 {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command name may hold spaces: fields count from after its closing parenthesis.
    let Some(rest) = text.rsplit_once(')').map(|(_, rest)| rest) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    ticks / clock_ticks_per_sec()
}

/// CPU seconds (user + system) used so far by process `pid` and its direct children (nginx's
/// master and its workers); 0 for any that cannot be read.
pub fn tree_cpu_secs(pid: u32) -> f64 {
    let children: f64 = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&child| parent_pid(child) == Some(pid))
        .map(cpu_secs)
        .sum();
    cpu_secs(pid) + children
}

/// The parent of process `pid` (field 4 of `/proc/PID/stat`).
fn parent_pid(pid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = text.rsplit_once(')')?.1;
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn clock_ticks_per_sec() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// Resident memory of a process in bytes (`VmRSS`).
pub fn rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// CPU seconds the whole machine has been busy (all cores), from `/proc/stat`.
pub fn machine_busy_secs() -> f64 {
    let Ok(text) = std::fs::read_to_string("/proc/stat") else {
        return 0.0;
    };
    let Some(line) = text.lines().next() else {
        return 0.0;
    };
    // cpu user nice system idle iowait irq softirq steal …: busy = all but idle and iowait.
    let ticks: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let busy: f64 = ticks
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4 && *i < 8)
        .map(|(_, v)| v)
        .sum();
    busy / clock_ticks_per_sec()
}

/// CPU use of a few processes over a stage, as percent of one core, and of everything else on
/// the machine in the same time (other users' builds make a shared box noisy).
#[derive(Debug, Clone)]
pub struct CpuMeter {
    started: Instant,
    at_start: Vec<(String, u32, f64)>,
    machine_at_start: f64,
}

impl CpuMeter {
    /// Starts measuring the named processes.
    pub fn start(processes: &[(&str, u32)]) -> Self {
        Self {
            started: Instant::now(),
            at_start: processes
                .iter()
                .map(|(name, pid)| ((*name).to_owned(), *pid, cpu_secs(*pid)))
                .collect(),
            machine_at_start: machine_busy_secs(),
        }
    }

    /// `name NN%` for each process and for the rest of the machine, e.g.
    /// `vestibule 120%, redis 45%, bench 30%, other processes 3%`.
    pub fn summary(&self) -> String {
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let mut ours = 0.0;
        let mut parts: Vec<String> = self
            .at_start
            .iter()
            .map(|(name, pid, start)| {
                let used = cpu_secs(*pid) - start;
                ours += used;
                format!("{name} {:.0}%", used / secs * 100.0)
            })
            .collect();
        let others = (machine_busy_secs() - self.machine_at_start - ours).max(0.0);
        parts.push(format!("other processes {:.0}%", others / secs * 100.0));
        parts.join(", ")
    }
}

/// The soft limit on open files of this process.
pub fn open_files_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("Max open files"))
                .and_then(|line| line.split_whitespace().nth(3))
                .and_then(|soft| soft.parse().ok())
        })
        .unwrap_or(1024)
}

/// Tries to raise this process's open-files limit to `wanted` (with `prlimit`, which works as
/// root); children started afterwards inherit it. Returns the limit in force afterwards.
pub fn raise_open_files_limit(wanted: u64) -> u64 {
    if open_files_limit() < wanted {
        let _ = Command::new("prlimit")
            .arg("--pid")
            .arg(std::process::id().to_string())
            .arg(format!("--nofile={wanted}:{wanted}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    open_files_limit()
}
