//! Child processes that cannot outlive their owner, and free ports for them to listen on: one
//! home for the suite's servers (`vestibule`, chromedriver) and the benchmark's (`redis-server`,
//! `vestibule`, the axum baseline).

use std::ops::{Deref, DerefMut};
use std::process::Child;

/// A child process that is killed (SIGKILL) and reaped when dropped, so a failing test or an
/// aborted benchmark leaves no server behind. Derefs to the [`Child`] (`id`, `try_wait`, …).
#[derive(Debug)]
pub struct ChildGuard(Child, bool);

impl ChildGuard {
    /// Takes charge of `child`.
    pub fn new(child: Child) -> Self {
        Self(child, false)
    }

    /// Takes charge of `child` and of every process in its process group, which `child` leads
    /// (spawned with `process_group(0)`): chromedriver's Chromium, which outlives chromedriver
    /// when a test ends without closing its browser session.
    pub fn with_group(child: Child) -> Self {
        Self(child, true)
    }
}

impl From<Child> for ChildGuard {
    fn from(child: Child) -> Self {
        Self(child, false)
    }
}

impl Deref for ChildGuard {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for ChildGuard {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if self.1 {
            // `kill -KILL -- -PGID`: the whole group, before its leader is reaped.
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.0.id())])
                .stderr(std::process::Stdio::null())
                .status();
        }
        // Errors mean it already ended (and was reaped): nothing left to stop.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free TCP port on 127.0.0.1: free when asked; the caller has it bound right after (another
/// process may take it in between, which the caller's start-up check then reports).
///
/// # Errors
/// When no port can be bound.
pub fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    #[test]
    fn a_dropped_guard_leaves_no_process_behind() {
        let guard = ChildGuard::new(Command::new("sleep").arg("30").spawn().unwrap());
        let pid = guard.id();
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
        drop(guard);
        // Killed and reaped: not even a zombie is left under its pid.
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
        assert!(free_port().unwrap() > 0);
    }
}
