//! What the stack benches share: the bench agent's configuration, and starting a
//! `kandev` (the e2e harness's) with it on an engine, configured as it is deployed:
//! operator auth on, `info` logs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kandev_testkit::{Kandev, KandevOptions, RemoteAgentctl};
use serde_json::{Value, json};

use crate::agent::REPORT_ENV;
use crate::engine::Engine;
use crate::operator::{OPERATOR, TOKEN, bearer};

/// How long the bench waits for any single expected report or event before calling the
/// run broken (generous: two shared cores).
pub const STALL: Duration = Duration::from_secs(30);

/// The agent id the bench configures.
pub const AGENT_ID: &str = "bench";

/// This executable (`kandev-bench`), which is also the agent (`kandev-bench agent`).
pub fn bench_exe() -> Result<PathBuf, String> {
    std::env::current_exe().map_err(|err| format!("current_exe: {err}"))
}

/// The agent command as `agent.session.start` and `kandev.toml` carry it.
pub fn agent_command() -> Result<Vec<String>, String> {
    Ok(vec![bench_exe()?.display().to_string(), "agent".to_owned()])
}

/// How a stack bench starts its kandev.
#[derive(Debug, Clone, Copy)]
pub struct Stack<'a> {
    /// The collector the bench agents report to.
    pub report: SocketAddr,
    /// Its database engine.
    pub engine: Engine,
    /// Whether kandev and its local agentctls log the per-hop timing events.
    pub timing: bool,
    /// A remote agentctl to run every session on (else kandev starts one per session).
    pub remote: Option<&'a RemoteAgentctl>,
    /// One of several replicas on a shared PostgreSQL database (else a database of its own).
    pub replica: Option<Replica<'a>>,
}

impl<'a> Stack<'a> {
    /// One kandev of its own on `engine`, timing events off, a local agentctl per session.
    pub fn plain(report: SocketAddr, engine: Engine) -> Self {
        Self {
            report,
            engine,
            timing: false,
            remote: None,
            replica: None,
        }
    }
}

/// A replica's place in a cluster of bench kandevs.
#[derive(Debug, Clone, Copy)]
pub struct Replica<'a> {
    /// Its number (`replica_id = "bench-<id>"`).
    pub id: usize,
    /// The database every replica shares.
    pub database: &'a str,
}

/// The cluster secret of the bench's replicas (loopback only, throwaway).
const CLUSTER_SECRET: &str = "kandev-bench-replicas";

/// The log filter of a measured kandev: a deployment's `info`, plus the one line that
/// states the database's commit settings.
const PRODUCTION: &str = "info,kandev_backend::store=debug";

/// With the per-hop timing events on, also in the local agentctls (whose lines kandev
/// forwards into its own log at `info` on `kandev::agentctl`).
const TIMED: &str = "info,kandev_backend::store=debug,kandev::timing=debug";

/// Hex SHA-256 of `text`, as `[[auth.operators]] token_sha256` holds a token.
fn sha256_hex(text: &str) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `[auth]` with the bench operator, required although kandev listens on loopback.
fn auth_toml() -> String {
    format!(
        "[auth]\nrequired = true\n[[auth.operators]]\nname = \"{OPERATOR}\"\ntoken_sha256 = \"{}\"\n",
        sha256_hex(TOKEN)
    )
}

/// Starts a kandev with the flag on and the bench agent reporting to `stack.report`.
pub async fn start_kandev(stack: Stack<'_>) -> Result<Kandev, String> {
    let command: Vec<Value> = agent_command()?.into_iter().map(Value::from).collect();
    let mut toml = format!(
        "[agents.{AGENT_ID}]\ncommand = {}\nenv = {{ {REPORT_ENV} = {} }}\n",
        json!(command),
        json!(stack.report.to_string())
    );
    toml.push_str(&auth_toml());
    if let Some(replica) = stack.replica {
        toml.push_str(&format!(
            "[cluster]\nreplica_id = \"bench-{}\"\nsecret = \"{CLUSTER_SECRET}\"\n",
            replica.id
        ));
    }
    let mut options = KandevOptions::new()
        .flag_env(true)
        .env("RUST_LOG", if stack.timing { TIMED } else { PRODUCTION })
        .toml(&toml);
    match stack.replica {
        Some(replica) => options = options.database(replica.database),
        None => {
            if let Some(url) = stack.engine.database().await? {
                options = options.database(&url);
            }
        }
    }
    if let Some(agentctl) = stack.remote {
        options = options.remote(&format!("ws://{}", agentctl.addr()), agentctl.token());
    }
    Ok(Kandev::start(options).await)
}

/// A new task with a session of the bench agent started on `prompt`, as the bench
/// operator → the session.
pub async fn start_session(kandev: &Kandev, prompt: &str) -> Result<Value, String> {
    let auth = bearer();
    let headers = [("authorization", auth.as_str())];
    let api = kandev.api();
    let task = api
        .send(
            "POST",
            "/api/v1/tasks",
            Some(&json!({"title": format!("bench: {prompt}"), "description": "bench"})),
            &headers,
        )
        .await;
    let id = match (task.status, task.body["id"].as_str()) {
        (201, Some(id)) => id.to_owned(),
        _ => return Err(format!("create task: {task}")),
    };
    let session = api
        .send(
            "POST",
            &format!("/api/v1/tasks/{id}/sessions"),
            Some(&json!({"agent": AGENT_ID, "prompt": prompt})),
            &headers,
        )
        .await;
    match session.status {
        201 => Ok(session.body),
        _ => Err(format!("start session: {session}")),
    }
}

/// VmHWM (peak resident set) of a process, bytes, from /proc/<pid>/status.
pub fn peak_rss_bytes(pid: u32) -> Option<u64> {
    status_kb(pid, "VmHWM:").map(|kb| kb * 1024)
}

/// VmRSS (current resident set) of a process, bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    status_kb(pid, "VmRSS:").map(|kb| kb * 1024)
}

/// How many threads a process runs, from /proc/<pid>/status.
pub fn threads(pid: u32) -> Option<u64> {
    status_kb(pid, "Threads:")
}

/// How many of a process's open files are under `dir` (its database's files, for one
/// whose directory holds nothing else it keeps open), from /proc/<pid>/fd.
pub fn open_files_under(pid: u32, dir: &std::path::Path) -> Option<usize> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(
        fds.flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .filter(|target| target.starts_with(dir))
            .count(),
    )
}

fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    field_kb(&status, field)
}

/// The number a field of `/proc/<pid>/status` text starts with (`kB` for sizes).
fn field_kb(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_token_is_configured_by_its_sha256() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(auth_toml().contains(&sha256_hex(TOKEN)));
    }

    #[test]
    fn counts_its_own_threads_and_the_files_it_holds_under_a_directory() {
        let me = std::process::id();
        let dir = tempfile::tempdir().expect("dir");
        assert_eq!(open_files_under(me, dir.path()), Some(0));
        let held = std::fs::File::create(dir.path().join("k.db")).expect("file");
        let other = tempfile::tempdir().expect("another dir");
        let _elsewhere = std::fs::File::create(other.path().join("x")).expect("file");
        assert_eq!(open_files_under(me, dir.path()), Some(1));
        drop(held);
        assert_eq!(open_files_under(me, dir.path()), Some(0));
        assert!(threads(me).is_some_and(|n| n >= 1));
        assert_eq!(threads(u32::MAX), None);
    }

    #[test]
    fn reads_its_own_memory() {
        let me = std::process::id();
        assert!(rss_bytes(me).is_some_and(|b| b > 0));
        assert!(peak_rss_bytes(me).is_some_and(|b| b > 0));
        assert_eq!(peak_rss_bytes(u32::MAX), None);
        // Peak against current only within one read: between two reads other test threads
        // may free memory in ways the kernel's high-water mark never records.
        let status = std::fs::read_to_string(format!("/proc/{me}/status")).expect("status");
        let (now, peak) = (field_kb(&status, "VmRSS:"), field_kb(&status, "VmHWM:"));
        assert!(
            matches!((now, peak), (Some(n), Some(p)) if p >= n && n > 0),
            "{status}"
        );
    }
}
