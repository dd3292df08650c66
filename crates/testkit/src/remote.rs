//! A remote-executor `agentctl serve --listen 127.0.0.1:0` with a token, started by the
//! test (not by kandev), in its own process group.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use crate::bins;
use crate::kandev::clean_env;
use crate::process::GroupProcess;
use crate::wait::DEADLINE;

/// A running remote agentctl; dropped → killed with its agents.
#[derive(Debug)]
pub struct RemoteAgentctl {
    process: GroupProcess,
    addr: SocketAddr,
    token: String,
    _dir: tempfile::TempDir,
}

impl RemoteAgentctl {
    /// Starts it with `env` (e.g. the answer timeout) and waits for `AGENTCTL_LISTENING`.
    pub async fn start(env: &[(&str, &str)]) -> Self {
        Self::start_with_args(&[], env).await
    }

    /// Like [`RemoteAgentctl::start`], serving `wss://` with this certificate and key.
    pub async fn start_tls(cert: &Path, key: &Path, env: &[(&str, &str)]) -> Self {
        let cert = cert.display().to_string();
        let key = key.display().to_string();
        Self::start_with_args(&["--tls-cert", &cert, "--tls-key", &key], env).await
    }

    /// Like [`RemoteAgentctl::start`], with extra arguments to `agentctl serve`
    /// (`--metrics 127.0.0.1:0`, `--log-format json`, …).
    pub async fn start_with_args(args: &[&str], env: &[(&str, &str)]) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("kandev-e2e-agentctl-")
            .tempdir()
            .expect("temp dir");
        let token = format!(
            "e2e-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        );
        let mut command = Command::new(bins::agentctl());
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args);
        clean_env(&mut command);
        command
            .env("AGENTCTL_TOKEN", &token)
            .env("RUST_LOG", "info,kandev_agentctl=debug")
            .env("NO_COLOR", "1");
        for (name, value) in env {
            command.env(name, value);
        }
        let mut process = GroupProcess::spawn("agentctl", command, dir.path());
        let addr = process
            .wait_for_line("AGENTCTL_LISTENING ", DEADLINE)
            .await
            .parse()
            .expect("AGENTCTL_LISTENING holds an address");
        Self {
            process,
            addr,
            token,
            _dir: dir,
        }
    }

    /// Where its agent stream listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its pid (and process group).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Its bearer token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Its stderr log so far.
    pub fn log(&self) -> String {
        self.process.stderr()
    }

    /// SIGKILLs it (and its agents).
    pub fn kill(&mut self) {
        self.process.kill_group();
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// Its `--metrics` listener, when it was started with one (the
    /// `AGENTCTL_METRICS_LISTENING` line it prints before it listens).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.process.stdout().lines().find_map(|line| {
            line.strip_prefix("AGENTCTL_METRICS_LISTENING ")
                .and_then(|addr| addr.trim().parse().ok())
        })
    }
}

impl Drop for RemoteAgentctl {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.process.dump_logs();
        }
    }
}
