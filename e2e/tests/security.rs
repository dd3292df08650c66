//! Issue 12 full stack: operators made with `kandev operator add`, a remote agentctl over
//! `wss://` verified against a test CA (and refused under another CA), agents that dump
//! their environment, and logs that never hold a secret.

use std::path::Path;
use std::process::Command;

use kandev_testkit::{
    DEADLINE, Kandev, KandevOptions, RemoteAgentctl, TURN_DEADLINE, TestPki, bins, poll_until,
};
use serde_json::{Value, json};

/// Values planted in kandev's (or the remote agentctl's) environment that no agent may see.
const SECRETS: &[(&str, &str)] = &[
    ("AWS_SECRET_ACCESS_KEY", "cloud-secret-value"),
    ("DATABASE_URL", "postgres://kandev:db-password@db/kandev"),
    ("KANDEV_AUTH__SESSION_SECRET", "session-secret-value"),
    ("AGENTCTL_TOKEN", "stale-agentctl-token"),
];
/// The variable the agent is configured to inherit.
const PASSED_ON: (&str, &str) = ("PASSED_ON", "passed-on-value");

/// `kandev operator add NAME` → (token, the TOML lines it printed).
fn operator_add(name: &str) -> (String, String) {
    let output = Command::new(bins::kandev())
        .args(["operator", "add", name])
        .output()
        .expect("run kandev operator add");
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let token = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("kdv_"))
        .expect("a token line")
        .to_owned();
    let toml = text[text.find("[[auth.operators]]").expect("config lines")..].to_owned();
    assert!(!toml.contains(&token), "only the hash goes into the config");
    (token, toml)
}

/// An agent `envdump` that writes its own environment (and its parent's) as it starts,
/// then runs the mock agent.
fn envdump_agent(dir: &Path) -> String {
    let script = format!(
        "tr '\\000' '\\n' < /proc/$$/environ > '{own}'; \
         tr '\\000' '\\n' < /proc/$PPID/environ > '{parent}'; \
         exec '{mock}' --scenario demo",
        own = dir.join("agent.env").display(),
        parent = dir.join("parent.env").display(),
        mock = bins::mock_agent().display(),
    );
    format!(
        "[agents.envdump]\ncommand = [\"sh\", \"-c\", {}]\nenv = {{ AGENT_OWN = \"own-value\" }}\ninherit_env = [\"{}\"]\n",
        Value::String(script),
        PASSED_ON.0
    )
}

/// `NAME=value` lines of a dump, once it is complete.
async fn read_env(path: &Path) -> Vec<(String, String)> {
    poll_until(
        &format!("{} to be written", path.display()),
        DEADLINE,
        || async {
            let text = std::fs::read_to_string(path).ok()?;
            text.lines().any(|l| l.starts_with("PATH=")).then_some(text)
        },
    )
    .await
    .lines()
    .filter_map(|l| l.split_once('='))
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn assert_no_secret(env: &[(String, String)], whose: &str) {
    for (name, value) in env {
        for (secret_name, secret) in SECRETS {
            assert!(
                name != secret_name && !value.contains(secret),
                "{whose} sees {name}={value}"
            );
        }
    }
}

fn is_allowlisted(name: &str) -> bool {
    ["PATH", "HOME", "USER", "LANG", "TERM", "TMPDIR", "SHELL"].contains(&name)
        || name.starts_with("LC_")
}

/// Checks an agent's own environment: the allowlist, its `env` and its `inherit_env`.
fn assert_agent_env(env: &[(String, String)]) {
    assert_no_secret(env, "the agent");
    for (name, value) in env {
        assert!(
            is_allowlisted(name) || name == "AGENT_OWN" || name == PASSED_ON.0,
            "the agent got {name}={value}, which nothing gave it"
        );
    }
    let get = |n: &str| env.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    assert_eq!(get("AGENT_OWN"), Some("own-value"), "its own env");
    assert_eq!(get(PASSED_ON.0), Some(PASSED_ON.1), "its inherit_env");
    assert!(get("PATH").is_some(), "the allowlist");
}

async fn start_envdump_session(kandev: &Kandev) {
    let task = kandev.create_task("env dump").await;
    kandev
        .try_start_session(task["id"].as_str().expect("id"), "envdump", None)
        .await
        .expect_status(201, "start envdump");
}

#[tokio::test]
async fn an_agent_cannot_read_kandevs_secrets_from_its_environment() {
    let dumps = tempfile::tempdir().expect("tempdir");
    let mut options = KandevOptions::new().toml(&envdump_agent(dumps.path()));
    for (name, value) in SECRETS.iter().chain([&PASSED_ON]) {
        options = options.env(name, value);
    }
    let kandev = Kandev::start(options).await;
    start_envdump_session(&kandev).await;
    assert_agent_env(&read_env(&dumps.path().join("agent.env")).await);
    // Its parent, the local agentctl, whose /proc environ the agent can read: no secret
    // either, since kandev handed it only its own settings and the agent allowlist.
    let parent = read_env(&dumps.path().join("parent.env")).await;
    assert!(
        parent.iter().any(|(k, _)| k == "AGENTCTL_TOKEN"),
        "the dump is agentctl's: {parent:?}"
    );
    let stale = parent
        .iter()
        .any(|(k, v)| k == "AGENTCTL_TOKEN" && v == "stale-agentctl-token");
    assert!(!stale, "agentctl got its own fresh token");
    let without_token: Vec<_> = parent
        .into_iter()
        .filter(|(k, _)| k != "AGENTCTL_TOKEN")
        .collect();
    assert_no_secret(&without_token, "the local agentctl");
}

/// A remote agentctl over wss:// with `ca` trusted by kandev, kandev requiring `auth`.
async fn wss_stack(pki: &TestPki, ca: &Path, auth: &str, dumps: &Path) -> (RemoteAgentctl, Kandev) {
    // Its own AGENTCTL_TOKEN is the real one (which the agent must not see either).
    let mut agentctl_env: Vec<(&str, &str)> = SECRETS
        .iter()
        .copied()
        .filter(|(name, _)| *name != "AGENTCTL_TOKEN")
        .collect();
    agentctl_env.push(PASSED_ON);
    let agentctl = RemoteAgentctl::start_tls(&pki.cert, &pki.key, &agentctl_env).await;
    let url = format!("wss://localhost:{}", agentctl.addr().port());
    let kandev = Kandev::start(
        KandevOptions::new()
            .flag_env(true)
            .remote(&url, agentctl.token())
            .executor_ca_cert(ca)
            .env("KANDEV_AUTH__SESSION_SECRET", "session-secret-value")
            .toml(auth)
            .toml(&envdump_agent(dumps)),
    )
    .await;
    (agentctl, kandev)
}

fn operator_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(DEADLINE)
        .build()
        .expect("client")
}

async fn call(
    client: &reqwest::Client,
    kandev: &Kandev,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let url = format!("http://{}{path}", kandev.addr());
    let mut request = client
        .request(method.parse().expect("method"), url)
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn remote_agentctl_over_wss_with_a_test_ca_answers_an_operators_clarification() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = TestPki::new(dir.path(), "agentctl");
    let (token, auth) = operator_add("alice");
    let (agentctl, kandev) = wss_stack(
        &pki,
        &pki.ca,
        &format!("\n[auth]\nrequired = true\n\n{auth}"),
        dir.path(),
    )
    .await;
    let client = operator_client();

    // Without the token nothing is possible; with it, the whole round trip.
    let anonymous = client
        .post(format!("http://{}/api/v1/tasks", kandev.addr()))
        .json(&json!({"title": "anonymous"}))
        .send()
        .await
        .expect("post");
    assert_eq!(anonymous.status(), 401);
    let (status, task) = call(
        &client,
        &kandev,
        &token,
        "POST",
        "/api/v1/tasks",
        Some(json!({"title": "over wss"})),
    )
    .await;
    assert_eq!(status, 201, "{task}");
    let path = format!(
        "/api/v1/tasks/{}/sessions",
        task["id"].as_str().expect("id")
    );
    let (status, session) = call(
        &client,
        &kandev,
        &token,
        "POST",
        &path,
        Some(json!({"agent": "mock", "prompt": "/e2e:single"})),
    )
    .await;
    assert_eq!(status, 201, "{session}");
    let session_id = session["id"].as_str().expect("session id").to_owned();
    let list = format!("/api/v1/clarifications?session_id={session_id}&status=pending");
    let pending_id = poll_until(
        "a pending clarification over wss",
        TURN_DEADLINE,
        || async {
            let (_, body) = call(&client, &kandev, &token, "GET", &list, None).await;
            body["clarifications"][0]["pending_id"]
                .as_str()
                .map(str::to_owned)
        },
    )
    .await;
    let (status, answered) = call(
        &client,
        &kandev,
        &token,
        "POST",
        &format!("/api/v1/clarifications/{pending_id}/respond"),
        Some(kandev_testkit::answer_body(&[(
            "question_0",
            &["Postgres"],
            "",
        )])),
    )
    .await;
    assert_eq!((status, answered), (200, json!({"status": "answered"})));
    let reached = kandev
        .frames()
        .wait_for_elicitation_response(1, TURN_DEADLINE)
        .await;
    assert_eq!(reached["action"], "accept", "{reached}");

    // The same rule for a remote agentctl's agents: only the allowlist and the config.
    start_envdump_session_as(&client, &kandev, &token).await;
    assert_agent_env(&read_env(&dir.path().join("agent.env")).await);

    // No secret in any log: the operator token, the agent-stream token, the cookie key.
    let logs = format!("{}\n{}", kandev.log(), agentctl.log());
    assert!(
        logs.contains("agent stream connected"),
        "the logs are real: {logs}"
    );
    for secret in [token.as_str(), agentctl.token(), "session-secret-value"] {
        assert!(!logs.contains(secret), "a secret reached the logs:\n{logs}");
    }
}

async fn start_envdump_session_as(client: &reqwest::Client, kandev: &Kandev, token: &str) {
    let (status, task) = call(
        client,
        kandev,
        token,
        "POST",
        "/api/v1/tasks",
        Some(json!({"title": "env dump"})),
    )
    .await;
    assert_eq!(status, 201);
    let path = format!(
        "/api/v1/tasks/{}/sessions",
        task["id"].as_str().expect("id")
    );
    let (status, body) = call(
        client,
        kandev,
        token,
        "POST",
        &path,
        Some(json!({"agent": "envdump"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test]
async fn a_remote_agentctl_certified_by_another_ca_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = TestPki::new(dir.path(), "agentctl");
    let other = TestPki::new(dir.path(), "other");
    let (agentctl, kandev) = wss_stack(&pki, &other.ca, "", dir.path()).await;
    let task = kandev.create_task("wrong CA").await;
    let session = kandev
        .try_start_session(
            task["id"].as_str().expect("id"),
            "mock",
            Some("/e2e:single"),
        )
        .await
        .expect_status(201, "the session is recorded");
    assert_eq!(session["state"], "FAILED", "{session}");
    let error = session["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("invalid peer certificate") && error.contains("ca_cert"),
        "the failure says why: {session}"
    );
    // agentctl never got a stream, so no agent was started.
    assert!(
        !agentctl.log().contains("agent started"),
        "{}",
        agentctl.log()
    );
    assert!(!dir.path().join("agent.env").exists());
}
