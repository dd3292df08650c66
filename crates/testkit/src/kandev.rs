//! One `kandev` per test: its own temp directory, database (SQLite, or PostgreSQL under
//! `TEST_DATABASE=postgres`) and `kandev.toml`
//! (profile `e2e`, listen `127.0.0.1:0`) and per-test environment overrides. What a test
//! asks of it as an operator is in the `operator` module, beside this one.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use crate::bins;
use crate::database::fresh_database;
use crate::frames::FrameLog;
use crate::http::HttpClient;
use crate::process::{GroupProcess, descendants};
use crate::wait::{DEADLINE, poll_until};
use crate::ws::OperatorWs;

/// The flag's environment variable (locks the Settings toggle).
pub const FLAG_ENV: &str = "KANDEV_FEATURES_ACP_ELICITATION";
/// The flag's key in the runtime-flags API.
pub const FLAG_KEY: &str = "features.acpElicitation";
/// agentctl's answer deadline variable.
pub const ANSWER_TIMEOUT_ENV: &str = "KANDEV_ELICITATION_ANSWER_TIMEOUT";

/// Where kandev runs agentctl.
#[derive(Debug, Clone, Default)]
pub enum Executor {
    /// kandev starts `target/<profile>/agentctl` per session (with a chosen part of kandev's environment).
    #[default]
    Local,
    /// kandev connects to an agentctl at `url` with `token`.
    Remote {
        /// `ws://host:port`.
        url: String,
        /// The agent-stream bearer token.
        token: String,
    },
    /// kandev spreads sessions over several agentctls (`executor.hosts`), `(url, token)`.
    RemoteHosts(Vec<(String, String)>),
}

/// How to start a [`Kandev`].
#[derive(Debug, Clone, Default)]
pub struct KandevOptions {
    env: Vec<(String, String)>,
    unset: Vec<String>,
    executor: Executor,
    executor_ca_cert: Option<PathBuf>,
    extra_toml: String,
    mock_toml: String,
    database: Option<String>,
}

impl KandevOptions {
    /// Defaults: no `KANDEV_*` variable from the test runner's environment, local executor.
    pub fn new() -> Self {
        Self::default()
    }

    /// An environment variable of kandev. A local agentctl gets only its own settings
    /// (`KANDEV_ELICITATION_ANSWER_TIMEOUT`, …), the agent allowlist and `inherit_env` names.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Removes a variable of the test runner's environment from kandev's (and so from the
    /// local agentctl's and its agents').
    pub fn unset_env(mut self, name: &str) -> Self {
        self.unset.push(name.to_owned());
        self
    }

    /// Forces the flag through its env var (which also locks the toggle).
    pub fn flag_env(self, on: bool) -> Self {
        self.env(FLAG_ENV, if on { "true" } else { "false" })
    }

    /// agentctl's answer deadline, humantime (`2s`).
    pub fn answer_timeout(self, value: &str) -> Self {
        self.env(ANSWER_TIMEOUT_ENV, value)
    }

    /// Connect to a remote agentctl.
    pub fn remote(mut self, url: &str, token: &str) -> Self {
        self.executor = Executor::Remote {
            url: url.to_owned(),
            token: token.to_owned(),
        };
        self
    }

    /// Several remote agentctls, `(url, token)` each (`executor.hosts`).
    pub fn remote_hosts(mut self, hosts: &[(String, String)]) -> Self {
        self.executor = Executor::RemoteHosts(hosts.to_vec());
        self
    }

    /// The CA a remote `wss://` agentctl is verified against (`executor.ca_cert`).
    pub fn executor_ca_cert(mut self, path: &Path) -> Self {
        self.executor_ca_cert = Some(path.to_owned());
        self
    }

    /// The database kandev uses (default: a fresh one of the engine under test), e.g. one
    /// PostgreSQL database from `kandev_testkit::postgres` shared by replicas.
    pub fn database(mut self, url: &str) -> Self {
        self.database = Some(url.to_owned());
        self
    }

    /// Extra TOML appended to `kandev.toml` (more agents, notification switches).
    pub fn toml(mut self, text: &str) -> Self {
        self.extra_toml.push_str(text);
        self.extra_toml.push('\n');
        self
    }

    /// Extra keys of the `mock` agent's own table, `[agents.mock]` (`on_deadline = "cancel"`,
    /// `inherit_env = […]`); its sub-tables (`[[agents.mock.auto_answers]]`) go in
    /// [`KandevOptions::toml`].
    pub fn mock_agent_toml(mut self, text: &str) -> Self {
        self.mock_toml.push_str(text);
        self.mock_toml.push('\n');
        self
    }
}

/// A running kandev. Dropping it kills its process group (agentctl and agents too);
/// when the test is panicking, its logs and the agent's last frames are printed first.
#[derive(Debug)]
pub struct Kandev {
    process: GroupProcess,
    addr: SocketAddr,
    pub(crate) http: HttpClient,
    frames: FrameLog,
    dir: TempDir,
    database: String,
}

/// A TOML basic string (JSON's escapes are valid TOML for these inputs).
fn toml_str(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

fn toml_path(path: &Path) -> String {
    toml_str(&path.display().to_string())
}

impl Kandev {
    /// Starts kandev with `options` and waits until it listens.
    pub async fn start(options: KandevOptions) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("kandev-e2e-")
            .tempdir()
            .expect("temp dir");
        let database = match &options.database {
            Some(url) => url.clone(),
            None => fresh_database(dir.path()).await,
        };
        let (process, addr, frames) = Self::launch(dir.path(), &database, &options).await;
        Self {
            process,
            addr,
            http: HttpClient::new(addr),
            frames,
            dir,
            database,
        }
    }

    /// Restarts kandev on the same directory and database with new `options` (the way
    /// an operator restarts the backend with a different environment). With
    /// `graceful`, kandev gets SIGTERM and may shut its sessions down; otherwise its
    /// whole process group is SIGKILLed, as in a crash. The address changes.
    pub async fn restart(&mut self, options: KandevOptions, graceful: bool) {
        if graceful {
            let exited = self.process.terminate(DEADLINE).await;
            assert!(exited, "kandev did not exit on SIGTERM within {DEADLINE:?}");
        } else {
            self.process.kill_group();
        }
        let database = options
            .database
            .clone()
            .unwrap_or_else(|| self.database.clone());
        let (process, addr, _) = Self::launch(self.dir.path(), &database, &options).await;
        self.database = database;
        // The old process's logs stay in the directory under a new name.
        self.process = process;
        self.addr = addr;
        self.http = HttpClient::new(addr);
    }

    async fn launch(
        dir: &Path,
        database: &str,
        options: &KandevOptions,
    ) -> (GroupProcess, SocketAddr, FrameLog) {
        let kandev_bin = bins::kandev();
        let agentctl = bins::agentctl();
        let mock = bins::mock_agent();
        for old in ["kandev.stderr.log", "kandev.stdout.log"] {
            let path = dir.join(old);
            if path.is_file() {
                let mut n = 1;
                while dir.join(format!("{old}.{n}")).exists() {
                    n += 1;
                }
                let _ = std::fs::rename(&path, dir.join(format!("{old}.{n}")));
            }
        }
        let frames = FrameLog::new(dir.join("agent-frames.jsonl"));
        let foreign = bins::foreign_agent();
        let mut toml = format!(
            "profile = \"e2e\"\n\
             listen = \"127.0.0.1:0\"\n\
             database_url = {db}\n\n\
             [agents.mock]\n\
             command = [{mock}, \"--scenario\", \"demo\", \"--scenario-dir\", {scenarios}]\n\
             env = {{ MOCK_AGENT_LOG = {log} }}\n\
             {mock_toml}\n\
             [agents.claude-bridge-065]\n\
             command = [\"node\", {foreign}, \"--bridge\", \"0.65.0\"]\n\n\
             [agents.claude-bridge-0101]\n\
             command = [\"node\", {foreign}, \"--bridge\", \"0.101.0\"]\n\n",
            db = toml_str(database),
            mock = toml_path(&mock),
            scenarios = toml_path(&bins::scenario_dir()),
            log = toml_path(frames.path()),
            mock_toml = options.mock_toml,
            foreign = toml_path(&foreign),
        );
        match &options.executor {
            Executor::Local => toml.push_str(&format!(
                "[executor]\nkind = \"local\"\nagentctl = {}\n\n",
                toml_path(&agentctl)
            )),
            Executor::Remote { url, token } => {
                toml.push_str(&format!(
                    "[executor]\nkind = \"remote\"\nurl = {}\ntoken = {}\n",
                    toml_str(url),
                    toml_str(token)
                ));
                if let Some(ca) = &options.executor_ca_cert {
                    toml.push_str(&format!("ca_cert = {}\n", toml_path(ca)));
                }
                toml.push('\n');
            }
            Executor::RemoteHosts(hosts) => {
                let listed: Vec<String> = hosts
                    .iter()
                    .map(|(url, token)| {
                        format!("{{ url = {}, token = {} }}", toml_str(url), toml_str(token))
                    })
                    .collect();
                toml.push_str(&format!(
                    "[executor]\nkind = \"remote\"\nhosts = [{}]\n\n",
                    listed.join(", ")
                ));
            }
        }
        toml.push_str(&options.extra_toml);
        let config = dir.join("kandev.toml");
        std::fs::write(&config, toml).expect("write kandev.toml");

        let mut command = Command::new(kandev_bin);
        command.arg("serve").current_dir(dir);
        clean_env(&mut command);
        for name in &options.unset {
            command.env_remove(name);
        }
        command
            .env("KANDEV_CONFIG", &config)
            .env(
                "RUST_LOG",
                "info,kandev=debug,kandev_backend=debug,sqlx=warn",
            )
            .env("NO_COLOR", "1");
        for (name, value) in &options.env {
            command.env(name, value);
        }
        let mut process = GroupProcess::spawn("kandev", command, dir);
        let addr: SocketAddr = process
            .wait_for_line("KANDEV_LISTENING=", DEADLINE)
            .await
            .parse()
            .expect("KANDEV_LISTENING holds an address");
        (process, addr, frames)
    }

    /// SIGKILLs kandev's process group, as in a crash (a remote agentctl, in its own
    /// group, lives on); its directory and logs stay.
    pub fn kill(&mut self) {
        self.process.kill_group();
    }

    /// SIGTERMs kandev and waits for it to drain and exit (panics after [`DEADLINE`]),
    /// then kills whatever is left of its process group; returns its exit code. Its
    /// directory and logs stay.
    pub async fn terminate(&mut self) -> Option<i32> {
        let exited = self.process.terminate(DEADLINE).await;
        assert!(exited, "kandev did not exit on SIGTERM within {DEADLINE:?}");
        self.process.exit_code()
    }

    /// Sends kandev SIGTERM and returns at once (see [`Kandev::wait_exit`]); a second
    /// call is a second signal.
    pub fn sigterm(&self) {
        crate::process::kill(&self.pid().to_string(), "TERM");
    }

    /// Waits for kandev to exit by itself (after [`Kandev::sigterm`]), killing nothing,
    /// and returns its exit code.
    ///
    /// # Panics
    /// When it is still running after [`DEADLINE`].
    pub async fn wait_exit(&mut self) -> Option<i32> {
        let process = &mut self.process;
        let exited = crate::wait::poll(DEADLINE, || {
            let gone = (!process.is_running()).then_some(());
            async move { gone }
        })
        .await;
        assert!(exited.is_some(), "kandev did not exit within {DEADLINE:?}");
        self.process.exit_code()
    }

    /// Starts kandev with the default options.
    pub async fn start_default() -> Self {
        Self::start(KandevOptions::new()).await
    }

    /// Where its API listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its database URL.
    pub fn database(&self) -> &str {
        &self.database
    }

    /// Its temp directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The operator API.
    pub fn api(&self) -> HttpClient {
        self.http
    }

    /// The mock agent's frame log (shared by every mock-agent session of this kandev).
    pub fn frames(&self) -> &FrameLog {
        &self.frames
    }

    /// Its pid (and process group).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// kandev's stderr so far (its log; the local agentctl's lines are forwarded into it).
    pub fn log(&self) -> String {
        self.process.stderr()
    }

    /// Waits until kandev's log holds `needle` at least `n` times.
    pub async fn wait_log(&self, needle: &str, n: usize) {
        poll_until(
            &format!("{n}× {needle:?} in kandev's log"),
            DEADLINE,
            || {
                let found = (self.log().matches(needle).count() >= n).then_some(());
                async move { found }
            },
        )
        .await
    }

    /// The `[metrics] listen` listener, when one is configured (the
    /// `KANDEV_METRICS_LISTENING=` line kandev prints before it listens).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.process.stdout().lines().find_map(|line| {
            line.strip_prefix("KANDEV_METRICS_LISTENING=")
                .and_then(|addr| addr.trim().parse().ok())
        })
    }

    /// A new operator WebSocket.
    pub async fn ws(&self) -> OperatorWs {
        OperatorWs::connect(self.addr).await
    }

    /// A new operator WebSocket that follows only these sessions' transcripts from its
    /// first event (`?watch=`).
    pub async fn ws_watching(&self, sessions: &[&str]) -> OperatorWs {
        OperatorWs::connect_watching(self.addr, sessions).await
    }

    /// The local agentctl processes kandev started, `(pid, command line)`.
    pub fn agentctls(&self) -> Vec<(u32, String)> {
        descendants(self.pid())
            .into_iter()
            .filter(|(_, cmd)| cmd.contains("agentctl") && cmd.contains("serve"))
            .collect()
    }

    /// Waits until kandev has no local agentctl process left.
    ///
    /// # Panics
    /// When [`DEADLINE`] passes first.
    pub async fn wait_agentctls_gone(&self) {
        poll_until("kandev's agentctls gone", DEADLINE, || async {
            self.agentctls().is_empty().then_some(())
        })
        .await
    }

    /// Prints kandev's log and the agent's last frames (done on drop while panicking).
    pub fn dump_logs(&self) {
        eprintln!(
            "===== kandev at {} (dir {}) =====",
            self.addr,
            self.dir.path().display()
        );
        self.process.dump_logs();
        eprintln!(
            "===== agent frames (last 30, {}) =====",
            self.frames.path().display()
        );
        eprintln!("{}", self.frames.tail(30));
    }
}

impl Drop for Kandev {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dump_logs();
        }
        self.process.kill_group();
    }
}

/// Variables of the runner's environment, besides `KANDEV_*`, that a started process
/// must not inherit: a test's agentctl token, log format and agent settings come only
/// from what it passes.
const UNINHERITED: &[&str] = &[
    "AGENTCTL_TOKEN",
    "AGENTCTL_LOG_FORMAT",
    "MOCK_AGENT_LOG",
    "MOCK_AGENT_SCENARIO_DIR",
];

/// Removes every `KANDEV_*` variable (and those of [`UNINHERITED`]) of the runner's
/// environment: a test's flag, timeouts and config come only from what it passes.
pub(crate) fn clean_env(command: &mut Command) {
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if text.starts_with("KANDEV_") || UNINHERITED.contains(&text.as_ref()) {
            command.env_remove(name);
        }
    }
}

/// A one-shot `kandev` command (`--help`, `migrate-db`, a start that must fail) with none
/// of the runner's `KANDEV_*` variables.
pub fn kandev_command() -> Command {
    let mut command = Command::new(bins::kandev());
    clean_env(&mut command);
    command
}

/// Runs `kandev --config <toml> serve` (on an SQLite file of its own, plus `env`) and
/// expects it to refuse to start: returns its exit code and stderr.
///
/// # Panics
/// When it is still running after [`DEADLINE`].
pub async fn refused_start(toml: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = tempfile::Builder::new()
        .prefix("kandev-e2e-refused-")
        .tempdir()
        .expect("temp dir");
    let config = dir.path().join("kandev.toml");
    std::fs::write(&config, toml).expect("write kandev.toml");
    let mut command = kandev_command();
    command
        .arg("--config")
        .arg(&config)
        .arg("serve")
        .current_dir(dir.path())
        .env(
            "KANDEV_DATABASE_URL",
            format!("sqlite://{}", dir.path().join("k.db").display()),
        )
        .envs(env.iter().copied());
    let mut command = tokio::process::Command::from(command);
    command.kill_on_drop(true);
    let output = tokio::time::timeout(DEADLINE, command.output())
        .await
        .expect("kandev exits in time")
        .expect("run kandev");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Whether `text` is a UUID v7 in its canonical (hyphenated) form, as kandev and agentctl
/// mint record ids (time-ordered, docs/decisions/0023).
pub fn is_uuid_v7(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    parts.len() == 5
        && [8, 4, 4, 4, 12]
            .iter()
            .zip(&parts)
            .all(|(n, p)| p.len() == *n && p.chars().all(|c| c.is_ascii_hexdigit()))
        && parts[2].starts_with('7')
        && matches!(
            parts[3].chars().next(),
            Some('8' | '9' | 'a' | 'b' | 'A' | 'B')
        )
}

/// `kandev.toml` of a kandev, for a test that wants to read it.
pub fn config_path(kandev: &Kandev) -> PathBuf {
    kandev.dir().join("kandev.toml")
}

/// A generous deadline for waits that involve a whole agent turn.
pub const TURN_DEADLINE: Duration = Duration::from_secs(45);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uuid_v7_is_recognised_in_its_canonical_form_only() {
        assert!(is_uuid_v7("019af3c2-4b5a-7c6d-8e7f-001122334455"));
        assert!(is_uuid_v7(&uuid::Uuid::now_v7().to_string()));
        for not in [
            "019af3c2-4b5a-4c6d-8e7f-001122334455",
            "019af3c2-4b5a-7c6d-7e7f-001122334455",
            "019af3c24b5a7c6d8e7f001122334455",
            "e1",
        ] {
            assert!(!is_uuid_v7(not), "{not}");
        }
    }

    #[test]
    fn toml_strings_escape_quotes_and_backslashes() {
        let text = toml_str("a \"b\" \\c");
        let parsed: Value =
            serde_json::from_str(&text).expect("a JSON string is a TOML basic string");
        assert_eq!(parsed, "a \"b\" \\c");
    }

    #[test]
    fn options_collect_env_and_executor() {
        let o = KandevOptions::new()
            .flag_env(true)
            .answer_timeout("2s")
            .remote("ws://127.0.0.1:1", "t");
        assert_eq!(
            o.env,
            vec![
                (FLAG_ENV.to_owned(), "true".to_owned()),
                (ANSWER_TIMEOUT_ENV.to_owned(), "2s".to_owned())
            ]
        );
        assert!(matches!(o.executor, Executor::Remote { ref token, .. } if token == "t"));
    }
}
