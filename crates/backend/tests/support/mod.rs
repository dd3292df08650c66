//! Harness for the backend integration tests: the real `kandev` binary with the
//! real `agentctl` and `mock-agent` beside it (build them with
//! `cargo build --workspace --bins`), the HTTP client ([`http`]), the one poll loop
//! ([`wait`]), the operator WebSocket, and the mock-agent frame log.

#![allow(dead_code, missing_docs)]

pub mod http;
pub mod wait;

pub use http::http;
pub use wait::wait_for;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// How long any wait in these tests may take before it fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// `target/<profile>/`, where cargo put `kandev` and its siblings.
pub fn bin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kandev"))
        .parent()
        .expect("kandev has a directory")
        .to_path_buf()
}

/// A sibling binary, which must have been built.
pub fn sibling(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

/// What to start kandev with.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Extra environment (flag env var, agentctl timeouts, …).
    pub env: Vec<(String, String)>,
    /// Extra TOML appended to the generated kandev.toml.
    pub toml: String,
    /// Database URL to use instead of a fresh one (to restart on the same data).
    pub database: Option<String>,
}

/// Whether the tests run on PostgreSQL: `TEST_DATABASE=postgres` (the test recipe runs
/// them once per engine). SQLite otherwise.
pub fn on_postgres() -> bool {
    std::env::var("TEST_DATABASE").is_ok_and(|v| v == "postgres")
}

/// A fresh database of the engine under test: a file under `dir`, or a new database of
/// the PostgreSQL test cluster (which must be there when asked for).
pub async fn fresh_database(dir: &Path) -> String {
    if on_postgres() {
        let cluster = kandev_testkit::postgres::cluster().unwrap_or_else(|why| {
            panic!("TEST_DATABASE=postgres but PostgreSQL is unavailable: {why}")
        });
        return cluster.create_database().await.expect("a fresh database");
    }
    format!("sqlite://{}", dir.join("data/kandev.db").display())
}

impl Options {
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn database(mut self, url: String) -> Self {
        self.database = Some(url);
        self
    }

    pub fn toml(mut self, text: &str) -> Self {
        self.toml.push_str(text);
        self.toml.push('\n');
        self
    }
}

/// A running kandev, stopped (SIGTERM, then SIGKILL) on drop.
pub struct Kandev {
    child: Option<Child>,
    pub addr: SocketAddr,
    /// The `metrics.listen` listener, when configured (`KANDEV_METRICS_LISTENING=`).
    pub metrics_addr: Option<SocketAddr>,
    pub dir: tempfile::TempDir,
}

impl Kandev {
    pub async fn start() -> Self {
        Self::start_with(Options::default()).await
    }

    /// Starts kandev in a fresh directory: its own database, and an agent `mock` (the
    /// mock-agent, `demo` scenario) logging frames to `mock.log`.
    pub async fn start_with(options: Options) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mock = sibling("mock-agent");
        sibling("agentctl");
        let log = dir.path().join("mock.log");
        let config = format!(
            "[agents.mock]\ncommand = [{mock:?}, \"--scenario\", \"demo\"]\nenv = {{ MOCK_AGENT_LOG = {log:?} }}\n{}",
            options.toml,
            mock = mock.display().to_string(),
            log = log.display().to_string(),
        );
        let config_path = dir.path().join("kandev.toml");
        std::fs::write(&config_path, config).expect("write kandev.toml");
        let database = match options.database.clone() {
            Some(url) => url,
            None => fresh_database(dir.path()).await,
        };
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kandev"));
        for (key, _) in std::env::vars() {
            if key.starts_with("KANDEV_")
                || key == "AGENTCTL_TOKEN"
                || key == "AGENTCTL_LOG_FORMAT"
                || key == "MOCK_AGENT_LOG"
            {
                cmd.env_remove(key);
            }
        }
        cmd.arg("--config")
            .arg(&config_path)
            .arg("serve")
            .current_dir(dir.path())
            .env("KANDEV_LISTEN", "127.0.0.1:0")
            .env("KANDEV_PROFILE", "e2e")
            .env("KANDEV_DATABASE_URL", &database)
            .env("RUST_LOG", "info,kandev_backend=debug")
            .envs(options.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                std::fs::File::create(dir.path().join("kandev.stderr")).expect("stderr file"),
            ))
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn kandev");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut metrics_addr = None;
        let addr = tokio::time::timeout(DEADLINE, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(addr) = line.strip_prefix("KANDEV_METRICS_LISTENING=") {
                    metrics_addr = addr.parse::<SocketAddr>().ok();
                }
                if let Some(addr) = line.strip_prefix("KANDEV_LISTENING=") {
                    return addr.parse::<SocketAddr>().ok();
                }
            }
            None
        })
        .await
        .ok()
        .flatten();
        let Some(addr) = addr else {
            let stderr =
                std::fs::read_to_string(dir.path().join("kandev.stderr")).unwrap_or_default();
            panic!("kandev did not start:\n{stderr}");
        };
        // Keep draining stdout so kandev never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            child: Some(child),
            addr,
            metrics_addr,
            dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().and_then(Child::id).expect("running")
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("kandev.stderr")).unwrap_or_default()
    }

    /// Waits until kandev's log holds `needle` at least `n` times.
    pub async fn wait_log(&self, needle: &str, n: usize) {
        wait_for(&format!("{n}× {needle:?} in kandev's log"), || async {
            (self.stderr().matches(needle).count() >= n).then_some(())
        })
        .await
    }

    pub fn mock_log(&self) -> MockLog {
        MockLog(self.dir.path().join("mock.log"))
    }

    /// One HTTP request; returns the status and the JSON body (null when empty).
    pub async fn http(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        http(self.addr, method, path, body).await
    }

    pub async fn get(&self, path: &str) -> Value {
        let (status, v) = self.http("GET", path, None).await;
        assert_eq!(status, 200, "GET {path}: {v}");
        v
    }

    pub async fn create_task(&self, title: &str) -> String {
        let (status, v) = self
            .http("POST", "/api/v1/tasks", Some(json!({"title": title})))
            .await;
        assert_eq!(status, 201, "{v}");
        v["id"].as_str().expect("task id").to_owned()
    }

    /// Starts a session; returns the 201 body.
    pub async fn start_session(&self, task: &str, agent: &str, prompt: Option<&str>) -> Value {
        let mut body = json!({"agent": agent});
        if let Some(p) = prompt {
            body["prompt"] = json!(p);
        }
        let (status, v) = self
            .http(
                "POST",
                &format!("/api/v1/tasks/{task}/sessions"),
                Some(body),
            )
            .await;
        assert_eq!(status, 201, "{v}\n{}", self.stderr());
        v
    }

    pub async fn set_flag(&self, on: Option<bool>) -> (u16, Value) {
        self.http(
            "PATCH",
            "/api/v1/runtime-flags/features.acpElicitation",
            Some(json!({"override": on})),
        )
        .await
    }

    pub async fn session(&self, id: &str) -> Value {
        self.get(&format!("/api/v1/sessions/{id}")).await
    }

    pub async fn messages(&self, session: &str) -> Vec<Value> {
        self.get(&format!("/api/v1/sessions/{session}/messages"))
            .await["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub async fn clarifications(&self, query: &str) -> Vec<Value> {
        self.get(&format!("/api/v1/clarifications?{query}")).await["clarifications"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub async fn clarification(&self, pending_id: &str) -> Value {
        self.get(&format!("/api/v1/clarifications/{pending_id}"))
            .await
    }

    pub async fn notifications(&self) -> Vec<Value> {
        self.get("/api/v1/notifications").await["notifications"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub async fn respond(&self, pending_id: &str, body: Value) -> (u16, Value) {
        self.http(
            "POST",
            &format!("/api/v1/clarifications/{pending_id}/respond"),
            Some(body),
        )
        .await
    }

    /// Waits until the session has `n` pending clarifications; returns them.
    pub async fn wait_pending(&self, session: &str, n: usize) -> Vec<Value> {
        let query = format!("session_id={session}&status=pending");
        wait_for(&format!("{n} pending clarifications"), || async {
            let list = self.clarifications(&query).await;
            (list.len() == n).then_some(list)
        })
        .await
    }

    pub async fn wait_state(&self, session: &str, state: &str) -> Value {
        wait_for(&format!("session state {state}"), || async {
            let s = self.session(session).await;
            (s["state"] == state).then_some(s)
        })
        .await
    }

    pub async fn wait_status(&self, pending_id: &str, status: &str) -> Value {
        wait_for(&format!("clarification {status}"), || async {
            let c = self.clarification(pending_id).await;
            (c["status"] == status).then_some(c)
        })
        .await
    }

    /// Waits for an agent message containing `text`.
    pub async fn wait_agent_text(&self, session: &str, text: &str) -> Vec<Value> {
        wait_for(&format!("agent text {text:?}"), || async {
            let all = self.messages(session).await;
            all.iter()
                .any(|m| {
                    m["author_type"] == "agent"
                        && m["content"].as_str().is_some_and(|c| c.contains(text))
                })
                .then_some(all)
        })
        .await
    }

    /// Opens the operator WebSocket; events are collected from now on.
    pub async fn events(&self) -> EventLog {
        let url = format!("ws://{}/api/v1/ws", self.addr);
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("operator websocket");
        let log = EventLog::default();
        let sink = log.clone();
        tokio::spawn(async move {
            let (_, mut read) = ws.split();
            while let Some(Ok(msg)) = read.next().await {
                if let tokio_tungstenite::tungstenite::Message::Text(text) = msg
                    && let Ok(v) = serde_json::from_str::<Value>(&text)
                {
                    sink.0.lock().expect("lock").push(v);
                }
            }
        });
        log
    }

    /// Sends SIGTERM without waiting (see [`Kandev::wait_exit`]).
    pub fn sigterm(&self) {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -TERM");
    }

    /// Waits for kandev to exit (after [`Kandev::sigterm`]); returns its exit code.
    pub async fn wait_exit(&mut self) -> Option<i32> {
        let mut child = self.child.take().expect("running");
        match tokio::time::timeout(DEADLINE, child.wait()).await {
            Ok(Ok(status)) => status.code(),
            _ => {
                let _ = child.start_kill();
                panic!(
                    "kandev did not exit within {DEADLINE:?}:\n{}",
                    self.stderr()
                );
            }
        }
    }

    /// Sends SIGTERM and waits for kandev to exit; returns its exit code.
    pub async fn terminate(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        if let Some(pid) = child.id() {
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
        }
        match tokio::time::timeout(DEADLINE, child.wait()).await {
            Ok(Ok(status)) => status.code(),
            _ => {
                let _ = child.start_kill();
                None
            }
        }
    }
}

impl Drop for Kandev {
    fn drop(&mut self) {
        // SIGTERM first, so kandev stops the agentctl processes it started.
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = child.id() {
                let _ = std::process::Command::new("kill")
                    .arg("-TERM")
                    .arg(pid.to_string())
                    .status();
                let deadline = std::time::Instant::now() + Duration::from_secs(10);
                while std::time::Instant::now() < deadline {
                    if let Ok(Some(_)) = child.try_wait() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            let _ = child.start_kill();
        }
    }
}

/// Operator events received on the WebSocket.
#[derive(Debug, Clone, Default)]
pub struct EventLog(Arc<Mutex<Vec<Value>>>);

impl EventLog {
    pub fn all(&self) -> Vec<Value> {
        self.0.lock().expect("lock").clone()
    }

    pub fn of_type(&self, kind: &str) -> Vec<Value> {
        self.all()
            .into_iter()
            .filter(|e| e["type"] == kind)
            .map(|e| e["data"].clone())
            .collect()
    }

    /// Waits until an event of `kind` whose data satisfies `pred` has arrived.
    pub async fn wait(&self, kind: &str, pred: impl Fn(&Value) -> bool) -> Value {
        wait_for(&format!("a {kind} event"), || async {
            self.of_type(kind).into_iter().find(|d| pred(d))
        })
        .await
    }
}

/// The mock-agent's `MOCK_AGENT_LOG`: `{"dir": "recv"|"send", "frame": …}` per line.
#[derive(Debug, Clone)]
pub struct MockLog(pub PathBuf);

impl MockLog {
    pub fn frames(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.0)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Requests the agent received with `method`.
    pub fn received(&self, method: &str) -> Vec<Value> {
        self.frames()
            .into_iter()
            .filter(|f| f["dir"] == "recv" && f["frame"]["method"] == method)
            .map(|f| f["frame"].clone())
            .collect()
    }

    /// Requests the agent sent with `method`.
    pub fn sent(&self, method: &str) -> Vec<Value> {
        self.frames()
            .into_iter()
            .filter(|f| f["dir"] == "send" && f["frame"]["method"] == method)
            .map(|f| f["frame"].clone())
            .collect()
    }

    /// Responses the agent received to its request `id` (from agentctl).
    pub fn responses_to(&self, id: &Value) -> Vec<Value> {
        self.frames()
            .into_iter()
            .filter(|f| {
                f["dir"] == "recv" && f["frame"]["id"] == *id && f["frame"].get("method").is_none()
            })
            .map(|f| f["frame"].clone())
            .collect()
    }

    /// Responses the agent sent to a request it received (`session/prompt` answers).
    pub fn answers_to(&self, id: &Value) -> Vec<Value> {
        self.frames()
            .into_iter()
            .filter(|f| {
                f["dir"] == "send" && f["frame"]["id"] == *id && f["frame"].get("method").is_none()
            })
            .map(|f| f["frame"].clone())
            .collect()
    }

    /// The `result` of every response agentctl sent to the agent's `elicitation/create` requests, in order.
    pub fn elicitation_results(&self) -> Vec<Value> {
        self.sent("elicitation/create")
            .iter()
            .flat_map(|req| self.responses_to(&req["id"]))
            .map(|r| {
                r.get("result")
                    .cloned()
                    .unwrap_or_else(|| json!({"error": r["error"]}))
            })
            .collect()
    }

    /// Waits until `n` elicitation responses have been received by the agent.
    pub async fn wait_elicitation_results(&self, n: usize) -> Vec<Value> {
        wait_for(&format!("{n} elicitation responses"), || async {
            let r = self.elicitation_results();
            (r.len() >= n).then_some(r)
        })
        .await
    }
}

/// Processes whose parent is `pid` and whose command name is `name` (Linux `/proc`).
pub fn children_named(pid: u32, name: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            // `pid (comm) state ppid …`; comm may hold spaces, so split after the last ')'.
            let Some((left, right)) = stat.rsplit_once(')') else {
                return false;
            };
            let comm = left.split_once('(').map(|(_, c)| c).unwrap_or_default();
            let ppid = right
                .split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u32>().ok());
            comm == name && ppid == Some(pid)
        })
        .collect()
}

/// A UUID v4 in its canonical text form.
pub fn is_uuid_v4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && [8, 4, 4, 4, 12]
            .iter()
            .zip(&parts)
            .all(|(n, p)| p.len() == *n && p.chars().all(|c| c.is_ascii_hexdigit()))
        && parts[2].starts_with('4')
        && matches!(
            parts[3].chars().next(),
            Some('8' | '9' | 'a' | 'b' | 'A' | 'B')
        )
}

/// The checked-in capability fixtures of agentctl, one per agent family (AC-02).
pub fn capability_fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agentctl/tests/fixtures/capabilities")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim_end()
        .to_owned()
}

/// An `agentctl serve` started by a test (the remote executor's far end).
pub struct RemoteAgentctl {
    child: Child,
    pub addr: SocketAddr,
    /// Its `--metrics` listener, when asked for (`AGENTCTL_METRICS_LISTENING`).
    pub metrics_addr: Option<SocketAddr>,
    pub token: String,
}

impl RemoteAgentctl {
    pub async fn start() -> Self {
        Self::start_with(&[], &[], None).await
    }

    /// Starts with extra `args` to `serve` and `env`, its stderr into `stderr` when given.
    pub async fn start_with(args: &[&str], env: &[(&str, &str)], stderr: Option<&Path>) -> Self {
        let token = format!("test-token-{}", std::process::id());
        let stderr = match stderr {
            Some(path) => Stdio::from(std::fs::File::create(path).expect("agentctl stderr file")),
            None => Stdio::null(),
        };
        let mut child = Command::new(sibling("agentctl"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("AGENTCTL_TOKEN", &token)
            .env_remove("KANDEV_FEATURES_ACP_ELICITATION")
            .env_remove("AGENTCTL_LOG_FORMAT")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn agentctl");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut metrics_addr = None;
        let addr = tokio::time::timeout(DEADLINE, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(addr) = line.strip_prefix("AGENTCTL_METRICS_LISTENING ") {
                    metrics_addr = addr.trim().parse::<SocketAddr>().ok();
                }
                if let Some(addr) = line.strip_prefix("AGENTCTL_LISTENING ") {
                    return addr.trim().parse::<SocketAddr>().ok();
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .expect("agentctl listening");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            child,
            addr,
            metrics_addr,
            token,
        }
    }

    /// The kandev.toml section pointing the remote executor at `addr`.
    pub fn executor_toml(&self, addr: SocketAddr) -> String {
        format!(
            "[executor]\nkind = \"remote\"\nurl = \"ws://{addr}\"\ntoken = \"{}\"\n",
            self.token
        )
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// A TCP proxy a test can cut (closing every connection and refusing new ones) and heal.
pub struct Proxy {
    pub addr: SocketAddr,
    cut: Arc<std::sync::atomic::AtomicBool>,
    conns: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Proxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let (cut2, conns2) = (Arc::clone(&cut), Arc::clone(&conns));
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if cut2.load(std::sync::atomic::Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                conns2.lock().expect("lock").push(task);
            }
        });
        Self { addr, cut, conns }
    }

    /// Closes every open connection and refuses new ones.
    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for task in self.conns.lock().expect("lock").drain(..) {
            task.abort();
        }
    }

    /// Accepts connections again.
    pub fn heal(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Runs `kandev serve` and expects it to refuse to start; returns (exit code, stderr).
pub async fn refused_start(toml: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("kandev.toml");
    std::fs::write(&config, toml).expect("write");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_kandev"));
    for (key, _) in std::env::vars() {
        if key.starts_with("KANDEV_") {
            command.env_remove(key);
        }
    }
    command
        .arg("--config")
        .arg(&config)
        .arg("serve")
        .current_dir(dir.path())
        .env(
            "KANDEV_DATABASE_URL",
            format!("sqlite://{}", dir.path().join("k.db").display()),
        )
        .envs(env.iter().copied())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(20), command.output())
        .await
        .expect("kandev exits in time")
        .expect("run kandev");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
