//! [`RedisCluster`]: a private Redis Cluster of six `redis-server` processes (three masters, a
//! replica each) on free TCP ports of 127.0.0.1, for `--redis-cluster`.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::child::{free_port, ChildGuard};

/// How many nodes a [`RedisCluster`] has: three masters and one replica each.
pub const CLUSTER_NODES: usize = 6;

/// `cluster-node-timeout`, ms: how long a master may be unreachable before its replica takes
/// over (the failover then needs about twice this).
pub const CLUSTER_NODE_TIMEOUT_MS: u64 = 1000;

/// One node of a [`RedisCluster`].
struct Node {
    port: u16,
    child: Option<ChildGuard>,
}

/// A node as `CLUSTER NODES` describes it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// The node id.
    pub id: String,
    /// Its client port on 127.0.0.1.
    pub port: u16,
    /// A master (else a replica).
    pub master: bool,
    /// Marked failed (`fail` or `fail?`).
    pub failed: bool,
    /// A replica's master's id.
    pub master_id: Option<String>,
    /// A master's slot ranges (inclusive).
    pub slots: Vec<(u16, u16)>,
}

/// Six `redis-server --cluster-enabled yes` on free ports, joined by `redis-cli --cluster create
/// … --cluster-replicas 1`, each in its own folder under one temp folder. Dropped: every node is
/// killed.
pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: tempfile::TempDir,
    /// How long it took from the first `redis-server` to `cluster_state:ok` on every node.
    pub started_in: Duration,
}

impl RedisCluster {
    /// Starts the cluster and waits until every node says `cluster_state:ok` and every replica
    /// is in sync with its master.
    ///
    /// # Panics
    /// When `redis-server` or `redis-cli` is missing (scripts/setup-tools.sh --test installs
    /// both) or the cluster is not ready within 30 s.
    pub fn start() -> Self {
        for tool in ["redis-server", "redis-cli"] {
            let found = Command::new(tool)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            assert!(
                found,
                "{tool} must be installed for the Redis Cluster tests (scripts/setup-tools.sh \
                 --test installs redis-server and redis-tools)"
            );
        }
        // A port found free can still be taken by another server of the suite (a one-server
        // Redis, a Vestibule) before our redis-server binds it: then the cluster is started
        // again on other ports.
        let mut failures = Vec::new();
        for _ in 0..4 {
            match Self::try_start() {
                Ok(cluster) => return cluster,
                Err(why) => failures.push(why),
            }
        }
        panic!("the Redis Cluster did not start: {failures:#?}");
    }

    /// One attempt of [`Self::start`]: `Err` when a node's port was taken by another process.
    fn try_start() -> Result<Self, String> {
        // Clusters of tests running at once pick their ports one after another, each only once
        // the one before listens: a port found free is released before its redis-server binds
        // it, so another cluster could pick it meanwhile, and its nodes would then join ours.
        static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let starting = STARTING
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let started = Instant::now();
        let dir = tempfile::tempdir().expect("temp dir");
        let mut cluster = Self {
            nodes: cluster_ports()
                .into_iter()
                .map(|port| Node { port, child: None })
                .collect(),
            dir,
            started_in: Duration::ZERO,
        };
        for i in 0..cluster.nodes.len() {
            cluster.launch(i);
        }
        for node in &cluster.nodes {
            wait_for_port(node.port);
        }
        drop(starting);
        // Each port is answered by our own node, not by a server that took it first.
        for node in &mut cluster.nodes {
            let pid = node
                .child
                .as_ref()
                .map(|child| child.id())
                .unwrap_or_default();
            let exited = node
                .child
                .as_mut()
                .is_some_and(|child| child.try_wait().ok().flatten().is_some());
            let output = Command::new("redis-cli")
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &node.port.to_string(),
                    "INFO",
                    "server",
                ])
                .output()
                .map_err(|error| format!("redis-cli: {error}"))?;
            let info = String::from_utf8_lossy(&output.stdout);
            if exited || !info.contains(&format!("process_id:{pid}\r")) {
                return Err(format!("port {} is another process's", node.port));
            }
        }
        let addresses: Vec<String> = cluster
            .nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port))
            .collect();
        let output = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("redis-cli runs");
        if !output.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        cluster.wait_ready(Duration::from_secs(30));
        cluster.started_in = started.elapsed();
        Ok(cluster)
    }

    fn node_dir(&self, port: u16) -> PathBuf {
        self.dir.path().join(port.to_string())
    }

    fn launch(&mut self, i: usize) {
        let port = self.nodes[i].port;
        let dir = self.node_dir(port);
        std::fs::create_dir_all(&dir).expect("node folder");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--cluster-enabled", "yes"])
            .args(["--cluster-config-file", "nodes.conf"])
            .args([
                "--cluster-node-timeout",
                &CLUSTER_NODE_TIMEOUT_MS.to_string(),
            ])
            // A shard failing over must not stop the others' rooms.
            .args(["--cluster-require-full-coverage", "no"])
            .args(["--repl-diskless-sync-delay", "0"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (scripts/setup-tools.sh --test installs it)");
        self.nodes[i].child = Some(ChildGuard::new(child));
    }

    /// Waits until every running node says `cluster_state:ok`, sees no node failed but the
    /// killed ones, and every replica's link to its master is up.
    ///
    /// # Panics
    /// When that does not happen within `timeout`.
    pub fn wait_ready(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let ok = self.running_ports().into_iter().all(|port| {
                let info = self.cli(port, &["CLUSTER", "INFO"]);
                let replication = self.cli(port, &["INFO", "replication"]);
                info.contains("cluster_state:ok")
                    && (replication.contains("role:master")
                        || replication.contains("master_link_status:up"))
            });
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the Redis Cluster is not ready within {timeout:?}: {}",
                self.cli(self.running_ports()[0], &["CLUSTER", "NODES"])
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The ports of the nodes still running.
    pub fn running_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|node| node.child.is_some())
            .map(|node| node.port)
            .collect()
    }

    /// The seed URLs for `--redis-cluster` (every node, comma-separated).
    pub fn seeds(&self) -> String {
        self.nodes
            .iter()
            .map(|node| format!("redis://127.0.0.1:{}", node.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Runs `redis-cli -p port args` (no redirections followed) and returns stdout.
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// Runs `redis-cli -c` (following redirections) on a running node and returns stdout.
    pub fn cli_any(&self, args: &[&str]) -> String {
        let port = self.running_ports()[0];
        let output = Command::new("redis-cli")
            .args(["-c", "-h", "127.0.0.1", "-p", &port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// `CLUSTER KEYSLOT key`.
    pub fn key_slot(&self, key: &str) -> u16 {
        self.cli(self.running_ports()[0], &["CLUSTER", "KEYSLOT", key])
            .parse()
            .expect("CLUSTER KEYSLOT answers a number")
    }

    /// Every node as a running node sees it (`CLUSTER NODES`).
    pub fn nodes(&self) -> Vec<NodeInfo> {
        let text = self.cli(self.running_ports()[0], &["CLUSTER", "NODES"]);
        text.lines().filter_map(parse_node_line).collect()
    }

    /// The port of the master that serves `slot`, as a running node sees it.
    ///
    /// # Panics
    /// When no live master has the slot.
    pub fn master_of_slot(&self, slot: u16) -> u16 {
        self.nodes()
            .into_iter()
            .find(|node| {
                node.master
                    && !node.failed
                    && node.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
            })
            .unwrap_or_else(|| panic!("no live master serves slot {slot}"))
            .port
    }

    /// The port of the master that serves `key`.
    pub fn master_of_key(&self, key: &str) -> u16 {
        self.master_of_slot(self.key_slot(key))
    }

    /// The port of the replica of the master on `master`, as the master's `INFO replication`
    /// lists it (waits up to 5 s for it to be listed).
    ///
    /// # Panics
    /// When that master lists no replica.
    pub fn replica_of(&self, master: u16) -> u16 {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let info = self.cli(master, &["INFO", "replication"]);
            let listed = info
                .lines()
                .find_map(|line| line.strip_prefix("slave0:"))
                .and_then(|fields| fields.split(',').find_map(|f| f.strip_prefix("port=")))
                .and_then(|port| port.trim().parse().ok());
            if let Some(port) = listed {
                return port;
            }
            assert!(
                Instant::now() < deadline,
                "the master on {master} lists no replica: {info}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to the node on `port`. A stopped replica keeps its link
    /// to its master open and acknowledges nothing: a replica falling behind.
    ///
    /// # Panics
    /// When no running node has that port or `kill` fails.
    pub fn signal(&self, port: u16, signal: &str) {
        let node = self
            .nodes
            .iter()
            .find(|node| node.port == port && node.child.is_some())
            .unwrap_or_else(|| panic!("no running node on port {port}"));
        let pid = node
            .child
            .as_ref()
            .map(|child| child.id())
            .unwrap_or_default();
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -{signal} {pid}");
    }

    /// Kills the node on `port` with SIGKILL (a crash: nothing flushed, no goodbye).
    ///
    /// # Panics
    /// When no running node has that port.
    pub fn kill(&mut self, port: u16) {
        let node = self
            .nodes
            .iter_mut()
            .find(|node| node.port == port && node.child.is_some())
            .unwrap_or_else(|| panic!("no running node on port {port}"));
        node.child = None; // ChildGuard: SIGKILL and reap
    }
}

/// Six ports P on 127.0.0.1 that are free, as are their cluster bus ports P + 10000.
fn cluster_ports() -> Vec<u16> {
    let mut ports = Vec::new();
    let mut attempts = 0;
    while ports.len() < CLUSTER_NODES {
        attempts += 1;
        assert!(attempts < 1000, "no free ports for a Redis Cluster");
        let port = free_port().expect("a free port");
        if port > 55_000 || ports.contains(&port) || ports.contains(&(port + 10_000)) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            ports.push(port);
        }
    }
    ports
}

fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "redis-server did not come up on port {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `<id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> <slot>...`
fn parse_node_line(line: &str) -> Option<NodeInfo> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 8 {
        return None;
    }
    let port = fields[1]
        .split('@')
        .next()?
        .rsplit(':')
        .next()?
        .parse()
        .ok()?;
    let flags: Vec<&str> = fields[2].split(',').collect();
    let slots = fields[8..]
        .iter()
        .filter(|slot| !slot.starts_with('['))
        .filter_map(|slot| match slot.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => slot.parse().ok().map(|s| (s, s)),
        })
        .collect();
    Some(NodeInfo {
        id: fields[0].to_owned(),
        port,
        master: flags.contains(&"master"),
        failed: flags.contains(&"fail") || flags.contains(&"fail?"),
        master_id: (fields[3] != "-").then(|| fields[3].to_owned()),
        slots,
    })
}
