//! The local executor: one `agentctl serve --listen 127.0.0.1:0` per session, started
//! with a fresh random token and a chosen environment: agentctl's own settings, the agent
//! allowlist and the configured `inherit_env` names — never the rest of kandev's
//! environment (its database URL, cloud credentials, …), which agentctl has no use for
//! and an agent could otherwise read from its parent.
//!
//! The child is owned by a watcher task that reports its exit on a watch channel and
//! kills it when asked, or when the [`LocalAgentctl`] handle is dropped (so a dropped
//! link never leaves an agentctl behind).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdout, Command};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::LinkError;

/// The environment variable agentctl reads its stream token from.
pub const AGENTCTL_TOKEN_VAR: &str = "AGENTCTL_TOKEN";

/// The line agentctl prints on stdout once it is bound.
const LISTENING_PREFIX: &str = "AGENTCTL_LISTENING ";

/// How long agentctl gets after SIGTERM when its link was dropped without `shutdown`.
const DROPPED_GRACE: Duration = Duration::from_secs(5);

/// How many stderr lines are kept for error messages.
const STDERR_TAIL: usize = 20;

/// What agentctl itself reads from its environment (see `agentctl --help`).
const AGENTCTL_SETTINGS: &[&str] = &[
    "KANDEV_ELICITATION_ANSWER_TIMEOUT",
    "KANDEV_ACP_IDLE_TIMEOUT",
    "KANDEV_ASK_USER_QUESTION_TIMEOUT",
    "RUST_LOG",
    "NO_COLOR",
    "AGENTCTL_LOG_FORMAT",
];

/// The part of `own` (kandev's environment) a local agentctl gets: its settings, the
/// agent allowlist and the `pass_env` names (never a withheld one).
pub(crate) fn agentctl_environment(
    own: impl IntoIterator<Item = (String, String)>,
    pass_env: &[String],
) -> Vec<(String, String)> {
    use kandev_agent_stream::agent_env::{is_allowlisted, is_withheld};
    own.into_iter()
        .filter(|(name, _)| {
            AGENTCTL_SETTINGS.contains(&name.as_str())
                || (!is_withheld(name) && (is_allowlisted(name) || pass_env.contains(name)))
        })
        .collect()
}

/// A running agentctl started by this backend.
pub(crate) struct LocalAgentctl {
    pid: Option<u32>,
    stop: Mutex<Option<oneshot::Sender<Stop>>>,
    exit: watch::Receiver<Option<String>>,
}

/// How the watcher is asked to end the process.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// SIGKILL at once.
    Kill,
    /// SIGTERM (agentctl then cancels every pending elicitation and stops its agents),
    /// SIGKILL if it is still running after this long.
    Graceful(Duration),
}

/// What [`start`] hands back.
pub(crate) struct Started {
    /// Where its agent stream listens.
    pub addr: SocketAddr,
    /// The token it was started with.
    pub token: String,
    /// The process handle.
    pub process: LocalAgentctl,
}

impl LocalAgentctl {
    /// Its process id.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// How it exited (`exit status: 1`, `signal: 9 (SIGKILL)`), once it has.
    pub fn exit_watch(&self) -> watch::Receiver<Option<String>> {
        self.exit.clone()
    }

    fn send(&self, stop: Stop) {
        let sender = self
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(sender) = sender {
            let _ = sender.send(stop);
        }
    }

    /// Kills it at once (idempotent; a stop already under way wins).
    pub fn kill(&self) {
        self.send(Stop::Kill);
    }

    /// Terminates it (SIGTERM, then SIGKILL after `grace`) and waits for the exit to
    /// be reaped.
    pub async fn stop(&self, grace: Duration) {
        self.send(Stop::Graceful(grace));
        let mut exit = self.exit_watch();
        // The watcher kills after `grace`; the extra second covers reaping.
        let reaped = grace + Duration::from_secs(1);
        match tokio::time::timeout(reaped, exit.wait_for(Option::is_some)).await {
            Ok(Ok(status)) => tracing::info!(status = status.as_deref(), "agentctl stopped"),
            _ => tracing::warn!(pid = self.pid, "agentctl did not exit in time"),
        }
    }
}

/// The agentctl beside the running executable. Under `cargo test` the executable
/// lives in `target/<profile>/deps`, so its parent directory is tried as well.
pub(crate) fn default_binary() -> Result<PathBuf, LinkError> {
    let exe = std::env::current_exe().map_err(|err| {
        LinkError::Unreachable(format!("cannot locate the running executable: {err}"))
    })?;
    let name = format!("agentctl{}", std::env::consts::EXE_SUFFIX);
    let dir = exe.parent().unwrap_or_else(|| Path::new("."));
    let beside = dir.join(&name);
    if beside.is_file() {
        return Ok(beside);
    }
    if dir.file_name().is_some_and(|n| n == "deps")
        && let Some(parent) = dir.parent()
        && parent.join(&name).is_file()
    {
        return Ok(parent.join(&name));
    }
    Err(LinkError::Unreachable(format!(
        "no agentctl binary at {} (build it with `cargo build -p kandev-agentctl`, \
         or set the executor's `agentctl` path)",
        beside.display()
    )))
}

/// A fresh 32-byte random token, hex encoded.
pub(crate) fn fresh_token() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Starts `binary serve --listen 127.0.0.1:0` and waits for `AGENTCTL_LISTENING`.
/// `pass_env` names the variables of kandev's environment agentctl may hand to agents.
pub(crate) async fn start(
    binary: &Path,
    pass_env: &[String],
    listen_timeout: Duration,
) -> Result<Started, LinkError> {
    let token = fresh_token();
    let mut child = Command::new(binary)
        .args(["serve", "--listen", "127.0.0.1:0", "--exit-on-stdin-eof"])
        .env_clear()
        .envs(agentctl_environment(std::env::vars(), pass_env))
        .env(AGENTCTL_TOKEN_VAR, &token)
        // The watcher holds the pipe: when this backend dies, even by SIGKILL, the OS
        // closes it and agentctl shuts down instead of living on as an orphan.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| {
            LinkError::Unreachable(format!("could not start {}: {err}", binary.display()))
        })?;
    let pid = child.id();
    tracing::info!(pid, binary = %binary.display(), "agentctl started");

    let tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL)));
    let stderr_task = child
        .stderr
        .take()
        .map(|stderr| tokio::spawn(forward_stderr(stderr, Arc::clone(&tail)).in_current_span()));
    let Some(stdout) = child.stdout.take() else {
        return Err(LinkError::Unreachable(
            "agentctl's stdout was not captured".into(),
        ));
    };
    let mut stdout = BufReader::new(stdout).lines();

    let listening = tokio::time::timeout(listen_timeout, async {
        loop {
            match stdout.next_line().await {
                Ok(Some(line)) => match line.strip_prefix(LISTENING_PREFIX) {
                    Some(addr) => return Ok(addr.trim().to_owned()),
                    None => tracing::debug!(target: "kandev::agentctl", "{line}"),
                },
                Ok(None) => return Err(None),
                Err(err) => return Err(Some(err)),
            }
        }
    })
    .await;

    let addr = match listening {
        Ok(Ok(addr)) => addr,
        Ok(Err(read_error)) => {
            // stdout closed: agentctl is exiting (or exited) without listening.
            let status = match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
                Ok(Ok(status)) => status.to_string(),
                Ok(Err(err)) => format!("unknown status: {err}"),
                Err(_) => {
                    let _ = child.start_kill();
                    "closed its stdout and was killed".to_owned()
                }
            };
            let stderr = stderr_tail(stderr_task, &tail).await;
            let detail = read_error
                .map(|err| format!(" (reading stdout: {err})"))
                .unwrap_or_default();
            return Err(LinkError::Unreachable(format!(
                "agentctl ({}) exited ({status}) before listening{detail}; stderr: {stderr}",
                binary.display()
            )));
        }
        Err(_) => {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
            let stderr = stderr_tail(stderr_task, &tail).await;
            return Err(LinkError::Unreachable(format!(
                "agentctl ({}) did not print AGENTCTL_LISTENING within {listen_timeout:?}; \
                 stderr: {stderr}",
                binary.display()
            )));
        }
    };
    let addr: SocketAddr = match addr.parse() {
        Ok(addr) => addr,
        Err(err) => {
            return Err(LinkError::Unreachable(format!(
                "agentctl reported an unusable address {addr:?}: {err}"
            )));
        }
    };
    tracing::info!(pid, %addr, "agentctl listening");

    // Keep draining stdout so agentctl never blocks on a full pipe.
    tokio::spawn(drain_stdout(stdout).in_current_span());
    let (stop_tx, stop_rx) = oneshot::channel();
    let (exit_tx, exit_rx) = watch::channel(None);
    tokio::spawn(watch_process(child, stop_rx, exit_tx).in_current_span());
    let process = LocalAgentctl {
        pid,
        stop: Mutex::new(Some(stop_tx)),
        exit: exit_rx,
    };
    Ok(Started {
        addr,
        token,
        process,
    })
}

/// Owns the child: reports its exit, kills it when asked or when the handle is gone.
async fn watch_process(
    mut child: Child,
    stop: oneshot::Receiver<Stop>,
    exit: watch::Sender<Option<String>>,
) {
    // `Child::wait` closes stdin before waiting; agentctl runs with --exit-on-stdin-eof,
    // so the pipe is taken out and held here for as long as the watcher lives.
    let mut stdin = child.stdin.take();
    let status = tokio::select! {
        status = child.wait() => status,
        // Asked to stop, or the handle was dropped (the sender with it): a dropped
        // link still gives agentctl the chance to cancel its pendings and stop its agent.
        stop = stop => {
            // End of file is agentctl's cue as well as SIGTERM: either starts its shutdown.
            drop(stdin.take());
            let grace = match stop.unwrap_or(Stop::Graceful(DROPPED_GRACE)) {
                Stop::Graceful(grace) => terminate(&child).await.then_some(grace),
                Stop::Kill => None,
            };
            let exited = match grace {
                Some(grace) => tokio::time::timeout(grace, child.wait()).await.ok(),
                None => None,
            };
            match exited {
                Some(status) => status,
                None => {
                    if let Err(err) = child.start_kill() {
                        tracing::debug!(error = %err, "agentctl already gone");
                    }
                    child.wait().await
                }
            }
        }
    };
    let status = match status {
        Ok(status) => status.to_string(),
        Err(err) => format!("unknown status: {err}"),
    };
    tracing::info!(status = %status, "agentctl exited");
    exit.send_replace(Some(status));
}

/// Sends SIGTERM through `kill(1)` (no unsafe code here). Called while the watcher
/// still holds the unreaped child, so the pid cannot have been reused.
async fn terminate(child: &Child) -> bool {
    let Some(pid) = child.id() else {
        return false;
    };
    let sent = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    match sent {
        Ok(status) if status.success() => true,
        other => {
            tracing::debug!(?other, "SIGTERM not sent; killing instead");
            false
        }
    }
}

async fn forward_stderr(stderr: ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        // agentctl's own tracing colours its output even into a pipe.
        let line = kandev_log::strip_ansi(&line);
        tracing::info!(target: "kandev::agentctl", "{line}");
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.len() == STDERR_TAIL {
            tail.pop_front();
        }
        tail.push_back(line);
    }
}

async fn drain_stdout(mut stdout: tokio::io::Lines<BufReader<ChildStdout>>) {
    while let Ok(Some(line)) = stdout.next_line().await {
        tracing::debug!(target: "kandev::agentctl", "{line}");
    }
}

/// The last stderr lines, after giving the forwarder a moment to read what is left.
async fn stderr_tail(task: Option<JoinHandle<()>>, tail: &Mutex<VecDeque<String>>) -> String {
    if let Some(task) = task {
        let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
    }
    let tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
    if tail.is_empty() {
        "(nothing on stderr)".to_owned()
    } else {
        tail.iter().cloned().collect::<Vec<_>>().join(" | ")
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// Writes an executable script through a child `sh`, so this multi-threaded test
    /// process never holds a write handle on a file it is about to execute (ETXTBSY).
    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        let mut writer = std::process::Command::new("sh")
            .args(["-c", "cat > \"$1\" && chmod +x \"$1\"", "sh"])
            .arg(&path)
            .stdin(Stdio::piped())
            .spawn()
            .expect("sh");
        writer
            .stdin
            .take()
            .expect("stdin")
            .write_all(format!("#!/bin/sh\n{body}\n").as_bytes())
            .expect("write script");
        assert!(writer.wait().expect("sh").success());
        path
    }

    #[test]
    fn agentctl_gets_its_settings_and_the_allowlist_not_kandevs_secrets() {
        let own = [
            ("PATH", "/bin"),
            ("LC_CTYPE", "C.UTF-8"),
            ("RUST_LOG", "debug"),
            ("KANDEV_ELICITATION_ANSWER_TIMEOUT", "2s"),
            ("KANDEV_ASK_USER_QUESTION_TIMEOUT", "3s"),
            ("KANDEV_DATABASE_URL", "sqlite://secret.db"),
            ("KANDEV_AUTH__SESSION_SECRET", "s3cr3t"),
            ("DATABASE_URL", "postgres://u:pw@db"),
            ("AGENTCTL_TOKEN", "stale"),
            ("AWS_SECRET_ACCESS_KEY", "cloud"),
            ("ANTHROPIC_API_KEY", "model"),
            ("AGENTCTL_LOG_FORMAT", "json"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let passed = agentctl_environment(own, &["ANTHROPIC_API_KEY".to_owned()]);
        let names: Vec<&str> = passed.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "PATH",
                "LC_CTYPE",
                "RUST_LOG",
                "KANDEV_ELICITATION_ANSWER_TIMEOUT",
                "KANDEV_ASK_USER_QUESTION_TIMEOUT",
                "ANTHROPIC_API_KEY",
                "AGENTCTL_LOG_FORMAT"
            ]
        );
    }

    #[test]
    fn tokens_are_fresh_64_hex_digits() {
        let a = fresh_token();
        let b = fresh_token();
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[tokio::test]
    async fn a_missing_binary_is_unreachable_naming_the_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("no-agentctl-here");
        let Err(LinkError::Unreachable(message)) =
            start(&missing, &[], Duration::from_secs(5)).await
        else {
            panic!("expected Unreachable");
        };
        assert!(message.contains("no-agentctl-here"), "{message}");
    }

    #[tokio::test]
    async fn an_early_exit_reports_status_and_stderr_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let binary = script(
            dir.path(),
            "agentctl",
            "echo 'starting' >&2\necho 'error: KANDEV_ACP_IDLE_TIMEOUT too short' >&2\nexit 3",
        );
        let Err(LinkError::Unreachable(message)) =
            start(&binary, &[], Duration::from_secs(10)).await
        else {
            panic!("expected Unreachable");
        };
        assert!(message.contains("exit status: 3"), "{message}");
        assert!(
            message.contains("KANDEV_ACP_IDLE_TIMEOUT too short"),
            "{message}"
        );
        assert!(message.contains("before listening"), "{message}");
    }

    #[tokio::test]
    async fn silence_past_the_listen_timeout_kills_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pid_file = dir.path().join("pid");
        let binary = script(
            dir.path(),
            "agentctl",
            &format!(
                "echo $$ > '{}'\necho 'still thinking' >&2\nexec sleep 30",
                pid_file.display()
            ),
        );
        let Err(LinkError::Unreachable(message)) =
            start(&binary, &[], Duration::from_millis(500)).await
        else {
            panic!("expected Unreachable");
        };
        assert!(message.contains("AGENTCTL_LISTENING"), "{message}");
        assert!(message.contains("still thinking"), "{message}");
        let pid = std::fs::read_to_string(&pid_file).expect("pid written");
        let alive = std::process::Command::new("kill")
            .args(["-0", pid.trim()])
            .status()
            .expect("kill -0");
        assert!(
            !alive.success(),
            "agentctl must be killed after the listen timeout"
        );
    }

    #[tokio::test]
    async fn the_token_and_the_allowlisted_environment_reach_agentctl() {
        let dir = tempfile::tempdir().expect("tempdir");
        let seen = dir.path().join("seen");
        // Reports what it got, then pretends to listen and waits to be killed.
        let binary = script(
            dir.path(),
            "agentctl",
            &format!(
                "echo \"$1 $2 $3 $AGENTCTL_TOKEN $PATH\" > '{}'\n\
                 echo 'AGENTCTL_LISTENING 127.0.0.1:4321'\nexec sleep 30",
                seen.display()
            ),
        );
        let started = start(&binary, &[], Duration::from_secs(10))
            .await
            .expect("started");
        assert_eq!(started.addr, "127.0.0.1:4321".parse().expect("addr"));
        let seen = std::fs::read_to_string(&seen).expect("script ran");
        let expected_path = std::env::var("PATH").expect("PATH");
        assert_eq!(
            seen.trim(),
            format!(
                "serve --listen 127.0.0.1:0 {} {expected_path}",
                started.token
            )
        );

        let mut exit = started.process.exit_watch();
        assert!(exit.borrow().is_none());
        started.process.stop(Duration::from_secs(5)).await;
        let status = exit
            .wait_for(Option::is_some)
            .await
            .expect("exit reported")
            .clone();
        assert!(status.is_some_and(|s| s.contains("signal")));
    }

    #[tokio::test]
    async fn dropping_the_handle_kills_agentctl() {
        let dir = tempfile::tempdir().expect("tempdir");
        let binary = script(
            dir.path(),
            "agentctl",
            "echo 'AGENTCTL_LISTENING 127.0.0.1:4321'\nexec sleep 30",
        );
        let started = start(&binary, &[], Duration::from_secs(10))
            .await
            .expect("started");
        let mut exit = started.process.exit_watch();
        drop(started.process);
        let status = tokio::time::timeout(Duration::from_secs(5), exit.wait_for(Option::is_some))
            .await
            .expect("exit within 5s")
            .expect("exit reported")
            .clone();
        assert!(status.is_some());
    }

    #[tokio::test]
    async fn stop_asks_politely_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let farewell = dir.path().join("farewell");
        let binary = script(
            dir.path(),
            "agentctl",
            &format!(
                "trap 'echo bye > \"{}\"; exit 0' TERM\n\
                 echo 'AGENTCTL_LISTENING 127.0.0.1:4321'\n\
                 while :; do sleep 0.05; done",
                farewell.display()
            ),
        );
        let started = start(&binary, &[], Duration::from_secs(10))
            .await
            .expect("started");
        let mut exit = started.process.exit_watch();
        started.process.stop(Duration::from_secs(10)).await;
        let status = exit.wait_for(Option::is_some).await.expect("exit").clone();
        assert_eq!(status.as_deref(), Some("exit status: 0"), "SIGTERM handled");
        assert!(farewell.exists(), "the TERM handler ran");
    }

    #[tokio::test]
    async fn stop_kills_what_ignores_sigterm_after_the_grace() {
        let dir = tempfile::tempdir().expect("tempdir");
        let binary = script(
            dir.path(),
            "agentctl",
            "trap '' TERM\necho 'AGENTCTL_LISTENING 127.0.0.1:4321'\nexec sleep 30",
        );
        let started = start(&binary, &[], Duration::from_secs(10))
            .await
            .expect("started");
        let mut exit = started.process.exit_watch();
        started.process.stop(Duration::from_millis(300)).await;
        let status = exit.wait_for(Option::is_some).await.expect("exit").clone();
        assert!(
            status.as_deref().is_some_and(|s| s.contains("SIGKILL")),
            "{status:?}"
        );
    }
}
