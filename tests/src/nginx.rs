//! Debian's nginx as a plain reverse proxy in front of a server: the proxy most storefronts put
//! in front of their services, for the suite's "a proxy in front" checks and the benchmark's
//! gate comparison.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{free_port, ChildGuard};

/// An nginx master (with its workers) proxying everything on its port to one upstream.
pub struct Nginx {
    child: ChildGuard,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts nginx on a free 127.0.0.1 port, proxying to `upstream` (`host:port` or
    /// `http://host:port`) over HTTP/1.1 with kept-alive upstream connections, its default
    /// response buffering on (a server that streams must turn it off per response, with
    /// `X-Accel-Buffering: no`), no access log, as many workers as cores. With `http2` the
    /// listener speaks HTTP/2 by prior knowledge (h2c) as well as HTTP/1.1.
    ///
    /// # Errors
    /// nginx is not installed (`apt-get install nginx-light`; `scripts/setup-tools.sh --test`
    /// does), cannot start, or does not listen within 10 s.
    pub fn start(upstream: &str, http2: bool) -> std::io::Result<Self> {
        let binary = which_nginx().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "nginx is missing (apt-get install nginx-light; scripts/setup-tools.sh --test installs it)",
            )
        })?;
        let dir = tempfile::tempdir()?;
        let port = free_port()?;
        let upstream = upstream.trim_start_matches("http://");
        let listen = if http2 { " http2" } else { "" };
        let conf = format!(
            "worker_processes auto;\npid nginx.pid;\nerror_log stderr warn;\n\
             events {{ worker_connections 4096; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path tmp;\n  proxy_temp_path tmp;\n\
             fastcgi_temp_path tmp;\n  uwsgi_temp_path tmp;\n  scgi_temp_path tmp;\n\
             upstream origin {{ server {upstream}; keepalive 128; }}\n\
             server {{\n    listen 127.0.0.1:{port}{listen};\n    location / {{\n\
             proxy_pass http://origin;\n      proxy_http_version 1.1;\n\
             proxy_set_header Connection \"\";\n      proxy_set_header Host $host;\n\
             proxy_read_timeout 1h;\n\
             proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n    }}\n  }}\n}}\n"
        );
        std::fs::create_dir_all(dir.path().join("tmp"))?;
        std::fs::write(dir.path().join("nginx.conf"), conf)?;
        let child = Command::new(binary)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let child = ChildGuard::new(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("nginx did not listen on {port} within 10 s"),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Self {
            child,
            port,
            _dir: dir,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The master process (its workers are its children).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Nginx {
    /// Asks the master to stop its workers (SIGTERM) before the guard kills it: a master killed
    /// outright leaves its workers running.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn which_nginx() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}
