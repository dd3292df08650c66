//! One `agentctl serve` on a loopback port, its stderr, and its exit.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::bins;
use crate::wait::{DEADLINE, poll};

use super::stream::Stream;

/// The token every [`AgentCtl`] is started with (`AGENTCTL_TOKEN`).
pub const TOKEN: &str = "test-token-7f3a";

/// `crates/agentctl/tests/scenarios`: the extra mock-agent scenarios of agentctl's tests
/// (`--scenario-dir` of every [`start_payload`]).
pub fn scenario_dir() -> PathBuf {
    bins::repo_root()
        .join("crates")
        .join("agentctl")
        .join("tests")
        .join("scenarios")
}

/// A running `agentctl serve` on `127.0.0.1:0`, killed on drop.
#[derive(Debug)]
pub struct AgentCtl {
    child: Child,
    /// The bound address (`host:port`).
    pub addr: String,
    /// Where its stderr goes (for failure messages).
    pub stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl AgentCtl {
    /// Starts agentctl with [`TOKEN`] and `env` added to its environment.
    ///
    /// # Panics
    /// When it does not print its `AGENTCTL_LISTENING` line within [`DEADLINE`].
    pub fn start(env: &[(&str, &str)]) -> Self {
        Self::start_with(env, &[])
    }

    /// Like [`AgentCtl::start`], with extra `serve` arguments.
    ///
    /// # Panics
    /// When it does not print its `AGENTCTL_LISTENING` line within [`DEADLINE`].
    pub fn start_with(env: &[(&str, &str)], args: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let stderr_path = dir.path().join("agentctl.stderr");
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut command = Command::new(bins::agentctl());
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("AGENTCTL_TOKEN", TOKEN)
            .env("RUST_LOG", "kandev_agentctl=debug,info")
            .env("NO_COLOR", "1")
            // Held open by `child` until `close_stdin` (see `--exit-on-stdin-eof`).
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("spawn agentctl");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            // Keep draining so agentctl never blocks on a full pipe.
            for _ in lines {}
        });
        let line = rx.recv_timeout(DEADLINE).unwrap_or_else(|_| {
            panic!(
                "agentctl printed no AGENTCTL_LISTENING line; stderr:\n{}",
                read(&stderr_path)
            )
        });
        let addr = line
            .strip_prefix("AGENTCTL_LISTENING ")
            .unwrap_or_else(|| panic!("unexpected first stdout line {line:?}"))
            .to_owned();
        Self {
            child,
            addr,
            stderr_path,
            _dir: dir,
        }
    }

    /// Closes agentctl's stdin, as the death of the backend that started it would.
    pub fn close_stdin(&mut self) {
        drop(self.child.stdin.take());
    }

    /// The agent stream's URL.
    pub fn url(&self) -> String {
        format!("ws://{}/api/v1/agent/stream", self.addr)
    }

    /// Opens a stream authenticated with [`TOKEN`].
    pub async fn connect(&self) -> Stream {
        Stream::connect(&self.url(), Some(TOKEN))
            .await
            .expect("stream connects")
    }

    /// Opens a stream and attaches it to session `s-1`, asking for a replay of the events
    /// after `after_seq` when given; returns the stream and the attach payload
    /// (`{"pending": [...]}`).
    pub async fn attach(&self, after_seq: Option<u64>) -> (Stream, Value) {
        let stream = self.connect().await;
        let mut payload = json!({"session_id": "s-1"});
        if let Some(after) = after_seq {
            payload["after_seq"] = json!(after);
        }
        let attached = stream.ok("agent.session.attach", payload).await;
        (stream, attached)
    }

    /// agentctl's stderr so far.
    pub fn stderr(&self) -> String {
        read(&self.stderr_path)
    }

    /// Polls agentctl's stderr until it contains `needle`.
    ///
    /// # Panics
    /// When [`DEADLINE`] passes first, showing the stderr.
    pub async fn wait_stderr(&self, needle: &str) {
        if poll(DEADLINE, || async {
            self.stderr().contains(needle).then_some(())
        })
        .await
        .is_none()
        {
            panic!(
                "agentctl never logged {needle:?}; stderr:\n{}",
                self.stderr()
            );
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM.
    ///
    /// # Panics
    /// When kill(1) fails.
    pub fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -TERM {}", self.pid());
    }

    /// Waits for the process to exit; returns its exit code (`None`: killed by a signal).
    ///
    /// # Panics
    /// When it is still running after [`DEADLINE`].
    pub async fn wait_exit(&mut self) -> Option<i32> {
        let child = &mut self.child;
        let exited = poll(DEADLINE, || {
            let status = child.try_wait().expect("try_wait");
            async move { status }
        })
        .await;
        match exited {
            Some(status) => status.code(),
            None => panic!("agentctl did not exit; stderr:\n{}", self.stderr()),
        }
    }
}

impl Drop for AgentCtl {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
