//! Helpers for Vestibule's black-box suite.
//!
//! - [`RedisServer`]: a private `redis-server` on a Unix socket in a temp folder (stop, restart).
//! - [`RedisCluster`]: a private Redis Cluster, six `redis-server`s on TCP (kill a master).
//! - [`TestApp`]: the real `vestibule` binary on `127.0.0.1:0`, with typed request methods and
//!   its log captured.
//! - [`Backend`]: which store a test runs against; [`both_stores!`] makes one test per store.
//! - [`LinkProxy`]: a TCP proxy in front of a [`TestApp`] that can hang the link (accept, never
//!   answer) or lose the server's answers, as a bad mobile network or middlebox does.
//! - [`chromium`]: headless Chromium (chromedriver) and the waits the page tests share.
//! - [`nginx::Nginx`]: Debian's nginx as a reverse proxy in front of a server (HTTP/1.1, h2c).
//! - [`origin_model::OriginModel`]: a storefront with a true capacity (workers, a queue, 503
//!   past it) that can change during a run, for the closed loop.
//!
//! - [`ChildGuard`] / [`free_port`]: a child process killed and reaped on drop, and a port for
//!   it (shared with the benchmark).
//! - [`Served`]: an axum app on a free port of 127.0.0.1 that a test can stop (a stand-in
//!   origin, a storefront).
//!
//! Nothing here skips: a missing binary or `redis-server` fails the test with a reason.

pub mod chromium;
pub mod entry_cases;
pub mod nginx;
pub mod origin_model;

mod cluster;
pub use cluster::{NodeInfo, RedisCluster, CLUSTER_NODES, CLUSTER_NODE_TIMEOUT_MS};

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;
use vestibule_shared::{paths, TicketStatus};

mod child;
pub use child::{free_port, ChildGuard};

mod figures;
mod served;
pub use served::Served;

/// The admin token every [`TestApp`] is started with.
pub const ADMIN_TOKEN: &str = "test-admin-token-0123456789";

/// Where the test binaries live (`target/<profile>`).
fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/<test-binary>
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// Path of the `vestibule` binary: `$VESTIBULE_BIN`, else next to the test binaries.
///
/// # Panics
/// When it is not built: run `cargo build -p vestibule` first (scripts/test.sh does).
pub fn vestibule_binary() -> PathBuf {
    if let Ok(path) = std::env::var("VESTIBULE_BIN") {
        return PathBuf::from(path);
    }
    let path = target_profile_dir().join("vestibule");
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo build -p vestibule` (scripts/test.sh does this)",
        path.display()
    );
    path
}

/// The workspace's root folder (where `scripts/` and `.tools/` live).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

/// A program of the test suite's Python tools (`.tools/venv/bin/<name>`: `python`,
/// `schemathesis`), installed by `scripts/setup-tools.sh --test`.
///
/// # Panics
/// When it is missing: run `scripts/setup-tools.sh --test` (scripts/test.sh does).
pub fn python_tool(name: &str) -> PathBuf {
    let path = workspace_root().join(".tools/venv/bin").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run scripts/setup-tools.sh --test (scripts/test.sh does)",
        path.display()
    );
    path
}

/// The claims of an entry token (a JWT), read without checking its signature: what a test
/// compares with what the server verified.
///
/// # Panics
/// When `token` is not three base64url parts with JSON in the middle one.
pub fn entry_claims(token: &str) -> serde_json::Value {
    use base64::Engine as _;
    let payload = token.split('.').nth(1).expect("a JWT has three parts");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .expect("base64url claims");
    serde_json::from_slice(&bytes).expect("JSON claims")
}

/// What [`RedisServer::fill_to_limit`] did, for [`RedisServer::unfill`].
#[derive(Debug)]
pub struct Filled {
    /// How many junk keys it wrote.
    keys: usize,
    /// The memory limit before it.
    maxmemory: String,
}

/// A private `redis-server` listening on a Unix socket in its own temp folder.
pub struct RedisServer {
    child: Option<Child>,
    dir: tempfile::TempDir,
    extra_args: Vec<String>,
}

impl RedisServer {
    /// Starts one with no persistence.
    pub fn start() -> Self {
        Self::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// Starts one with extra arguments (e.g. AOF settings).
    ///
    /// # Panics
    /// When `redis-server` is not installed or does not come up within 5 s.
    pub fn start_with(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut server = Self {
            child: None,
            dir,
            extra_args: args.iter().map(|a| (*a).to_owned()).collect(),
        };
        server.launch();
        server
    }

    fn launch(&mut self) {
        let socket = self.socket_path();
        let child = Command::new("redis-server")
            .args(["--port", "0", "--unixsocket"])
            .arg(&socket)
            .args(["--unixsocketperm", "700", "--dir"])
            .arg(self.dir.path())
            .args(&self.extra_args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (scripts/setup-tools.sh --test installs it)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not come up on {}", socket.display());
    }

    /// The socket path.
    pub fn socket_path(&self) -> PathBuf {
        self.dir.path().join("redis.sock")
    }

    /// The URL to give `--redis-url`.
    pub fn url(&self) -> String {
        format!("redis+unix://{}", self.socket_path().display())
    }

    /// Kills the server (SIGKILL: an outage, not a clean stop).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(self.socket_path());
    }

    /// Starts it again on the same socket and folder (AOF files, if any, are replayed).
    pub fn restart(&mut self) {
        self.stop();
        self.launch();
    }

    /// One without persistence, limited to 8 MB of memory under `maxmemory-policy` `policy`,
    /// with `extra` arguments.
    pub fn with_8mb_limit(policy: &str, extra: &[&str]) -> Self {
        let mut args = vec![
            "--save",
            "",
            "--appendonly",
            "no",
            "--maxmemory",
            "8mb",
            "--maxmemory-policy",
            policy,
        ];
        args.extend_from_slice(extra);
        Self::start_with(&args)
    }

    /// Fills the server to its memory limit with keys of no TTL (another tenant, a leak …) until
    /// a write is refused with OOM, then lowers `maxmemory` to 1 MiB below what is used: Redis
    /// decides OOM from the memory used *before* a command (a script's writes pass when it started
    /// under the limit), and a few KB freed afterwards (a client's buffers) would otherwise let
    /// the next write through. [`RedisServer::unfill`] undoes both.
    ///
    /// # Panics
    /// When 64 half-megabyte keys never fill it.
    pub fn fill_to_limit(&self) -> Filled {
        let mut keys = 0;
        while !self
            .cli(&["SETRANGE", &format!("junk:{keys}"), "524288", "x"])
            .contains("OOM")
        {
            keys += 1;
            assert!(keys < 64, "the memory limit was never reached");
        }
        let maxmemory = self
            .cli(&["CONFIG", "GET", "maxmemory"])
            .lines()
            .nth(1)
            .expect("CONFIG GET maxmemory answers")
            .to_owned();
        let used: u64 = self
            .cli(&["INFO", "memory"])
            .lines()
            .find_map(|line| line.strip_prefix("used_memory:"))
            .and_then(|value| value.trim().parse().ok())
            .expect("INFO memory names used_memory");
        let below = used.saturating_sub(1 << 20).max(1 << 20).to_string();
        assert_eq!(self.cli(&["CONFIG", "SET", "maxmemory", &below]), "OK");
        Filled { keys, maxmemory }
    }

    /// Deletes what [`RedisServer::fill_to_limit`] wrote and gives back its memory limit.
    pub fn unfill(&self, filled: Filled) {
        for i in 0..=filled.keys {
            self.cli(&["DEL", &format!("junk:{i}")]);
        }
        assert_eq!(
            self.cli(&["CONFIG", "SET", "maxmemory", &filled.maxmemory]),
            "OK"
        );
    }

    /// Freezes the server (SIGSTOP): it keeps its connections but answers nothing, like a
    /// stalled or partitioned Redis. [`RedisServer::resume`] wakes it.
    pub fn pause(&self) {
        self.send_signal("STOP");
    }

    /// Wakes a paused server (SIGCONT); it then runs every command sent meanwhile.
    pub fn resume(&self) {
        self.send_signal("CONT");
    }

    fn send_signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("redis-server runs").id();
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} redis-server failed");
    }

    /// Runs `redis-cli` against it and returns stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .arg("-s")
            .arg(self.socket_path())
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Which store a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The embedded store.
    Memory,
    /// A private `redis-server`.
    Redis,
    /// A private Redis Cluster ([`RedisCluster`], `--redis-cluster`).
    RedisCluster,
}

/// The real `vestibule` process on a free port.
pub struct TestApp {
    child: ChildGuard,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// An HTTP client (no pooling surprises: fresh per app).
    pub client: reqwest::Client,
    log: ServerOutput,
    /// The private Redis, when the app runs on one it owns.
    pub redis: Option<RedisServer>,
    /// The private Redis Cluster, when the app runs on one it owns.
    pub cluster: Option<RedisCluster>,
}

/// The `vestibule` command line every [`TestApp`] starts from: a free port, the test admin
/// token, `args`, the store (`url`, none = embedded; `--data-dir none` unless `args` name one, so
/// tests never share state nor write into the working folder) and a log filter.
pub fn vestibule_command(url: Option<&str>, args: &[&str], log_filter: &str) -> Command {
    let mut command = Command::new(vestibule_binary());
    command
        .args(["--bind", "127.0.0.1:0", "--admin-token", ADMIN_TOKEN])
        .args(args)
        .env("RUST_LOG", log_filter)
        .env("NO_COLOR", "1")
        .env_remove("VESTIBULE_REDIS_URL")
        .env_remove("VESTIBULE_REDIS_CLUSTER")
        .env_remove("VESTIBULE_DATA_DIR");
    if !args.contains(&"--data-dir") {
        command.args(["--data-dir", "none"]);
    }
    if let Some(url) = url {
        command.args(["--redis-url", url]);
    }
    command
}

impl TestApp {
    /// Starts the binary on `backend` with extra flags (a fresh Redis for [`Backend::Redis`]).
    pub async fn spawn(backend: Backend, args: &[&str]) -> Self {
        match backend {
            Backend::Memory => Self::spawn_with_url(None, args).await,
            Backend::Redis => {
                let redis = RedisServer::start();
                let mut app = Self::spawn_with_url(Some(&redis.url()), args).await;
                app.redis = Some(redis);
                app
            }
            Backend::RedisCluster => {
                let cluster = tokio::task::spawn_blocking(RedisCluster::start)
                    .await
                    .expect("the cluster starts");
                let mut app = Self::spawn_on_cluster(&cluster, args).await;
                app.cluster = Some(cluster);
                app
            }
        }
    }

    /// Starts the binary with `--redis-cluster` on `cluster`'s nodes and extra flags.
    pub async fn spawn_on_cluster(cluster: &RedisCluster, args: &[&str]) -> Self {
        let seeds = cluster.seeds();
        let mut all = vec!["--redis-cluster", seeds.as_str()];
        all.extend_from_slice(args);
        Self::spawn_with_url(None, &all).await
    }

    /// Starts the binary with `--redis-url url` (or the embedded store) and extra flags.
    ///
    /// # Panics
    /// When the process does not print its listening line within 15 s.
    pub async fn spawn_with_url(url: Option<&str>, args: &[&str]) -> Self {
        Self::spawn_logging(url, args, "info").await
    }

    /// [`TestApp::spawn_with_url`] with a `RUST_LOG` filter (e.g. `debug`).
    pub async fn spawn_logging(url: Option<&str>, args: &[&str], log_filter: &str) -> Self {
        Self::spawn_command(vestibule_command(url, args, log_filter)).await
    }

    /// [`TestApp::spawn_with_url`] started in the folder `dir` (as an operator would, outside
    /// the checkout).
    pub async fn spawn_in(dir: &Path, url: Option<&str>, args: &[&str]) -> Self {
        let mut command = vestibule_command(url, args, "info");
        command.current_dir(dir);
        Self::spawn_command(command).await
    }

    async fn spawn_command(mut command: Command) -> Self {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().expect("vestibule binary starts");
        let (address_rx, log) = follow_output(&mut child, usize::MAX);
        let address =
            tokio::task::spawn_blocking(move || address_rx.recv_timeout(Duration::from_secs(15)))
                .await
                .expect("join");
        let Ok(address) = address else {
            let _ = child.kill();
            panic!("vestibule did not start; its output:\n{}", log.text());
        };
        Self {
            child: ChildGuard::new(child),
            base: format!("http://{address}"),
            // Idle connections are dropped before the server's keep-alive timeout (10 s,
            // `--header-read-timeout-secs`) closes them: a request sent on a connection the server
            // is closing fails (IncompleteMessage), which browsers retry and reqwest does not.
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .pool_idle_timeout(Duration::from_secs(5))
                .build()
                .expect("client"),
            log,
            redis: None,
            cluster: None,
        }
    }

    /// Everything the process printed so far (stdout and stderr).
    pub fn log(&self) -> String {
        self.log.text()
    }

    /// The process id (for signals).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Joins `room`, with an `Idempotency-Key` when given.
    pub async fn join(&self, room: &str, key: Option<&str>) -> (StatusCode, TicketStatus) {
        let mut request = self.client.post(self.url(&paths::tickets(room)));
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        let response = request.send().await.expect("join request");
        let status = response.status();
        let body = response.text().await.expect("join body");
        let ticket = serde_json::from_str(&body)
            .unwrap_or_else(|_| panic!("join answered {status} with {body}"));
        (status, ticket)
    }

    /// Polls a ticket (panics unless 200).
    pub async fn poll(&self, room: &str, ticket_id: &str) -> TicketStatus {
        let (status, body) = self.get_json(&paths::ticket(room, ticket_id)).await;
        assert_eq!(status, StatusCode::OK, "poll answered {body}");
        serde_json::from_value(body).expect("TicketStatus")
    }

    /// Leaves the queue; returns the status code.
    pub async fn leave(&self, room: &str, ticket_id: &str) -> StatusCode {
        self.client
            .delete(self.url(&paths::ticket(room, ticket_id)))
            .send()
            .await
            .expect("leave request")
            .status()
    }

    /// GET returning status and JSON body (Null when the body is not JSON).
    pub async fn get_json(&self, path: &str) -> (StatusCode, Value) {
        let response = self.client.get(self.url(path)).send().await.expect("GET");
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// GETs an admin `path` with the admin token: its status and JSON body (`null` when the
    /// body is not JSON).
    pub async fn admin_get(&self, path: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(self.url(path))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("admin GET");
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// GETs `path` and returns the whole body (panics when it cannot be read).
    pub async fn get_bytes(&self, path: &str) -> Vec<u8> {
        let response = self.client.get(self.url(path)).send().await.expect("GET");
        response.bytes().await.expect("a whole body").to_vec()
    }

    /// PATCHes the admin settings of `room` (panics unless 200).
    pub async fn patch_room(&self, room: &str, patch: Value) -> Value {
        let response = self
            .client
            .patch(self.url(&paths::admin_room(room)))
            .bearer_auth(ADMIN_TOKEN)
            .json(&patch)
            .send()
            .await
            .expect("PATCH");
        let status = response.status();
        let body: Value = response.json().await.expect("settings JSON");
        assert_eq!(status, StatusCode::OK, "PATCH answered {body}");
        body
    }

    /// Places a demo order with `token` (none = no header); returns status and JSON body.
    pub async fn order(&self, room: &str, token: Option<&str>) -> (StatusCode, Value) {
        let mut request = self
            .client
            .post(self.url(&paths::orders(room)))
            .json(&serde_json::json!({"sku": "sneaker-42", "quantity": 1}));
        if let Some(token) = token {
            request = request.header("X-Entry-Token", token);
        }
        let response = request.send().await.expect("order request");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics(&self) -> String {
        // In gate mode the metrics need the admin token; elsewhere it is ignored.
        self.client
            .get(self.url(paths::METRICS))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text")
    }

    /// The value of one metric line (`name{labels}`), 0 when absent.
    pub async fn metric(&self, series: &str) -> f64 {
        metric_value(&self.metrics().await, series)
    }

    /// Polls `ticket_id` until `done` holds or `timeout` passes; returns the last status.
    pub async fn poll_until(
        &self,
        room: &str,
        ticket_id: &str,
        timeout: Duration,
        done: impl Fn(&TicketStatus) -> bool,
    ) -> TicketStatus {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.poll(room, ticket_id).await;
            if done(&status) || Instant::now() > deadline {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A join request for `room` to complete with headers (`send()` it).
    pub fn join_request(&self, room: &str) -> reqwest::RequestBuilder {
        self.client.post(self.url(&paths::tickets(room)))
    }

    /// Joins `room` without a key and waits up to 5 s for the entry token; the ticket as
    /// admitted, and its token.
    ///
    /// # Panics
    /// When the ticket is not admitted within 5 s.
    pub async fn admitted(&self, room: &str) -> (TicketStatus, String) {
        let (_, ticket) = self.join(room, None).await;
        let admitted = self
            .poll_until(room, &ticket.ticket_id, Duration::from_secs(5), |t| {
                t.status == vestibule_shared::TicketState::TokenIssued
            })
            .await;
        let token = admitted.entry_token.clone().expect("admitted within 5 s");
        (admitted, token)
    }

    /// The embedded store behind a trusted proxy that writes `X-Forwarded-For`, with a join
    /// limit of `per_minute` and the room `main` paused (nobody leaves the line meanwhile).
    pub async fn behind_proxy_with_join_limit(per_minute: &str, extra: &[&str]) -> Self {
        let mut args = vec![
            "--joins-per-ip-per-minute",
            per_minute,
            "--client-ip-header",
            "X-Forwarded-For",
        ];
        args.extend_from_slice(extra);
        let app = Self::spawn(Backend::Memory, &args).await;
        app.patch_room("main", serde_json::json!({"paused": true}))
            .await;
        app
    }

    /// Waits up to `timeout` for the process to exit; its exit status, or `None` if it still runs.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Places a demo order with `token`, an optional `Idempotency-Key` and `quantity`; returns
    /// the whole answer.
    pub async fn order_with_key(
        &self,
        room: &str,
        token: &str,
        key: Option<&str>,
        quantity: u32,
    ) -> reqwest::Response {
        let mut request = self
            .client
            .post(self.url(&paths::orders(room)))
            .header("X-Entry-Token", token)
            .json(&serde_json::json!({"sku": "sneaker-42", "quantity": quantity}));
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        request.send().await.expect("order request")
    }

    /// Sends a signal to the process (`kill -<signal> <pid>`).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }
}

/// What a server process printed (stdout and stderr, line by line), the last `keep` lines.
#[derive(Clone)]
pub struct ServerOutput {
    lines: Arc<Mutex<VecDeque<String>>>,
}

impl ServerOutput {
    /// The lines kept, joined with newlines.
    pub fn text(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        let mut text = String::new();
        for line in lines.iter() {
            text.push_str(line);
            text.push('\n');
        }
        text
    }
}

/// Follows a started server's stdout and stderr (both piped) on two threads: keeps its last
/// `keep` lines, and sends the address of its `… listening on http://ADDR …` line once printed.
/// Shared by the black-box tests and the benchmark.
///
/// # Panics
/// When stdout or stderr was not piped.
pub fn follow_output(
    child: &mut Child,
    keep: usize,
) -> (std::sync::mpsc::Receiver<String>, ServerOutput) {
    let output = ServerOutput {
        lines: Arc::new(Mutex::new(VecDeque::new())),
    };
    let (address_tx, address_rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");
    for (stream, sender) in [
        (
            Box::new(stdout) as Box<dyn std::io::Read + Send>,
            Some(address_tx),
        ),
        (Box::new(stderr), None),
    ] {
        let lines = output.lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if let (Some(sender), Some(rest)) =
                    (&sender, line.split("listening on http://").nth(1))
                {
                    let address = rest.split_whitespace().next().unwrap_or("").to_owned();
                    let _ = sender.send(address);
                }
                let mut lines = lines.lock().unwrap_or_else(|p| p.into_inner());
                if lines.len() >= keep {
                    lines.pop_front();
                }
                lines.push_back(line);
            }
        });
    }
    (address_rx, output)
}

/// The value of `series` (exact `name{labels}` prefix) in Prometheus text, 0 when absent.
pub fn metric_value(text: &str, series: &str) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series).then(|| value.parse().ok()).flatten()
        })
        .unwrap_or(0.0)
}

/// Makes one `#[tokio::test]` on a private Redis Cluster from each `async fn name(backend:
/// Backend)` (beside [`both_stores!`], for the tests whose flow a cluster must keep).
#[macro_export]
macro_rules! on_redis_cluster_too {
    ($($name:ident),+ $(,)?) => {
        mod on_redis_cluster {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::Backend::RedisCluster).await;
                }
            )+
        }
    };
}

/// Makes one `#[tokio::test]` per store from `async fn name(backend: Backend)`.
#[macro_export]
macro_rules! both_stores {
    ($($name:ident),+ $(,)?) => {
        mod on_memory_store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::Backend::Memory).await;
                }
            )+
        }
        mod on_redis_store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::Backend::Redis).await;
                }
            )+
        }
    };
}

/// What a [`LinkProxy`] does with the traffic of its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Bytes flow both ways.
    Up,
    /// Connections are accepted but nothing is forwarded either way: a hung link.
    Hung,
    /// Requests reach the server but its answers never come back: a lost answer.
    AnswersLost,
    /// Connections are closed at once (open ones too): the server is unreachable.
    Down,
}

/// A TCP proxy on `127.0.0.1:<port>` in front of a server, with a switch for the link.
///
/// A connection that was open (or opened) while the link was [`LinkState::Hung`] stays hung
/// for good, and one that lived through [`LinkState::AnswersLost`] never answers again, as when
/// a middlebox loses its connection state: setting [`LinkState::Up`] again helps only new
/// connections, so a page recovers only if it gives up on the old ones by itself.
pub struct LinkProxy {
    /// The port the proxy listens on.
    pub port: u16,
    state: tokio::sync::watch::Sender<LinkState>,
    accept_loop: tokio::task::JoinHandle<()>,
}

impl LinkProxy {
    /// Starts a proxy forwarding to `upstream` (e.g. `TestApp::base`, `http://127.0.0.1:port`).
    ///
    /// # Panics
    /// When `upstream` is not `http://host:port` or no local port can be bound.
    pub async fn start(upstream: &str) -> Self {
        let upstream: std::net::SocketAddr = upstream
            .trim_start_matches("http://")
            .parse()
            .expect("upstream is http://ip:port");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port for the proxy");
        let port = listener.local_addr().expect("bound address").port();
        let (state, _) = tokio::sync::watch::channel(LinkState::Up);
        let link = state.clone();
        let accept_loop = tokio::spawn(async move {
            // Dropped with the accept loop: every relay ends with the proxy.
            let mut relays = tokio::task::JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                relays.spawn(relay(client, upstream, link.subscribe()));
                while relays.try_join_next().is_some() {}
            }
        });
        Self {
            port,
            state,
            accept_loop,
        }
    }

    /// Switches the link (see [`LinkState`]).
    pub fn set(&self, state: LinkState) {
        self.state.send_replace(state);
    }

    /// `http://127.0.0.1:<port>` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

/// Forwards one connection while the link allows; see [`LinkProxy`].
async fn relay(
    client: tokio::net::TcpStream,
    upstream: std::net::SocketAddr,
    mut link: tokio::sync::watch::Receiver<LinkState>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let initial = *link.borrow_and_update();
    if initial == LinkState::Down {
        return;
    }
    let mut hung = initial == LinkState::Hung;
    let mut answers_lost = initial == LinkState::AnswersLost;
    let server = if hung {
        None
    } else {
        tokio::net::TcpStream::connect(upstream).await.ok()
    };
    let (mut from_server, mut to_server) = match server {
        Some(server) => {
            let (read, write) = server.into_split();
            (Some(read), Some(write))
        }
        None => (None, None),
    };
    let (mut from_client, mut to_client) = client.into_split();
    let (mut up, mut down) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        tokio::select! {
            changed = link.changed() => {
                if changed.is_err() {
                    return;
                }
                match *link.borrow_and_update() {
                    LinkState::Hung => hung = true,
                    LinkState::AnswersLost => answers_lost = true,
                    LinkState::Down => return,
                    LinkState::Up => {}
                }
            }
            read = from_client.read(&mut up) => {
                let Ok(n @ 1..) = read else { return };
                if let (false, Some(server)) = (hung, to_server.as_mut()) {
                    if server.write_all(&up[..n]).await.is_err() {
                        return;
                    }
                }
            }
            read = read_if_open(&mut from_server, &mut down) => {
                match read {
                    Ok(n @ 1..) if !hung && !answers_lost => {
                        if to_client.write_all(&down[..n]).await.is_err() {
                            return;
                        }
                    }
                    Ok(1..) => {}
                    // The server closed: a working link passes that on; a dead one never does.
                    _ if hung || answers_lost => from_server = None,
                    _ => return,
                }
            }
        }
    }
}

async fn read_if_open(
    half: &mut Option<tokio::net::tcp::OwnedReadHalf>,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    use tokio::io::AsyncReadExt;
    match half {
        Some(half) => half.read(buf).await,
        None => std::future::pending().await,
    }
}
