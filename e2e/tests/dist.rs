//! The release archive (`just dist`): built here from the dev binaries by the same
//! script, `dist/package.sh`, unpacked in a temporary directory and started the way its
//! systemd units start it (their `ExecStart`, with `/opt/kandev` and the credentials
//! directory `%d` pointing into the temporary directory); the demo then runs on the
//! binaries from the archive.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use kandev_testkit::bins::{repo_root, target_dir};
use kandev_testkit::process::{GroupProcess, descendants};
use kandev_testkit::{DEADLINE, HttpClient, TURN_DEADLINE, poll_until};
use serde_json::{Value, json};

/// Packs `target/debug` into `out` with dist/package.sh; returns the archive.
fn package(out: &Path) -> PathBuf {
    let output = Command::new("bash")
        .arg(repo_root().join("dist/package.sh"))
        .arg(target_dir().join("debug"))
        .arg(out)
        .env("DIST_GZIP_LEVEL", "1")
        .output()
        .expect("run dist/package.sh");
    assert!(
        output.status.success(),
        "dist/package.sh failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    PathBuf::from(printed.lines().last().expect("the archive's path").trim())
}

/// The `ExecStart` of `unit`, as arguments, with the install prefix and `%d` replaced.
fn exec_start(unit: &str, root: &Path, credentials: &Path) -> Vec<String> {
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    line.replace("/opt/kandev", &root.display().to_string())
        .replace("%d", &credentials.display().to_string())
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

fn command(args: &[String], cwd: &Path) -> Command {
    let mut command = Command::new(&args[0]);
    command
        .args(&args[1..])
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", cwd);
    command
}

fn assert_unit(unit: &str, name: &str, credential: &str) {
    for line in [
        "DynamicUser=yes".to_owned(),
        format!("StateDirectory={name}"),
        format!("LoadCredential={credential}:/etc/kandev/{credential}"),
        "KillMode=mixed".to_owned(),
    ] {
        assert!(
            unit.lines().any(|l| l == line),
            "{name}.service lacks {line}:\n{unit}"
        );
    }
}

#[tokio::test]
async fn the_archive_runs_the_demo_from_its_own_binaries_as_its_units_start_them() {
    let work = tempfile::tempdir().expect("tempdir");
    let archive = package(&work.path().join("out"));
    let file = archive
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a file name")
        .to_owned();
    let prefix = format!("kandev-{}-", env!("CARGO_PKG_VERSION"));
    assert!(
        file.starts_with(&prefix) && file.ends_with(".tar.gz") && file.contains("-linux"),
        "{file}"
    );
    let opt = work.path().join("opt");
    std::fs::create_dir_all(&opt).expect("mkdir");
    let unpacked = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&opt)
        .status()
        .expect("tar");
    assert!(unpacked.success());
    let root = opt.join(file.trim_end_matches(".tar.gz"));
    for path in [
        "bin/kandev",
        "bin/agentctl",
        "bin/mock-agent",
        "kandev.toml",
        "systemd/kandev.service",
        "systemd/agentctl.service",
        "DEPLOY.md",
    ] {
        assert!(root.join(path).is_file(), "{path} is in the archive");
    }
    let deploy = std::fs::read_to_string(root.join("DEPLOY.md")).expect("DEPLOY.md");
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/deploying.md"),
    )
    .expect("docs/deploying.md");
    assert_eq!(deploy, guide, "DEPLOY.md is the deploying guide");
    assert!(deploy.starts_with("# Deploying"), "{deploy}");
    assert!(
        deploy.contains("systemd") && deploy.contains("/readyz"),
        "{deploy}"
    );
    let kandev_unit =
        std::fs::read_to_string(root.join("systemd/kandev.service")).expect("kandev.service");
    let agentctl_unit =
        std::fs::read_to_string(root.join("systemd/agentctl.service")).expect("agentctl.service");
    assert_unit(&kandev_unit, "kandev", "kandev.toml");
    assert_unit(&agentctl_unit, "agentctl", "agentctl-token");

    // kandev as kandev.service starts it, on the example kandev.toml as its credential;
    // the addresses and the database are moved into the temporary directory.
    let credentials = work.path().join("credentials");
    let state = work.path().join("state");
    std::fs::create_dir_all(&credentials).expect("mkdir");
    std::fs::create_dir_all(&state).expect("mkdir");
    std::fs::copy(root.join("kandev.toml"), credentials.join("kandev.toml")).expect("copy");
    let mut kandev_cmd = command(&exec_start(&kandev_unit, &root, &credentials), &state);
    kandev_cmd
        .env("KANDEV_LISTEN", "127.0.0.1:0")
        .env("KANDEV_METRICS__LISTEN", "127.0.0.1:0")
        .env(
            "KANDEV_DATABASE_URL",
            format!("sqlite://{}", state.join("kandev.db").display()),
        );
    let mut kandev = GroupProcess::spawn("kandev", kandev_cmd, work.path());
    let addr: SocketAddr = kandev
        .wait_for_line("KANDEV_LISTENING=", DEADLINE)
        .await
        .parse()
        .expect("an address");
    let api = HttpClient::new(addr);
    let ready = api.get("/readyz").await.expect_status(200, "readyz");
    assert_eq!(ready["status"], "ready", "{ready}");
    let first = kandev
        .stderr()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(
        serde_json::from_str::<Value>(&first).is_ok_and(|v| v.is_object()),
        "the unit logs JSON: {first}"
    );

    // The demo, as the README walks through it.
    api.patch(
        "/api/v1/runtime-flags/features.acpElicitation",
        &json!({"override": true}),
    )
    .await
    .expect_status(200, "flag");
    let task = api
        .post("/api/v1/tasks", &json!({"title": "Paint the shed"}))
        .await
        .expect_status(201, "task");
    let task = task["id"].as_str().expect("id");
    let session = api
        .post(
            &format!("/api/v1/tasks/{task}/sessions"),
            &json!({"agent": "mock", "prompt": "Pick a colour for the shed"}),
        )
        .await
        .expect_status(201, "session");
    let session = session["id"].as_str().expect("id").to_owned();
    let pending = poll_until("the demo's question", TURN_DEADLINE, || async {
        let list = api
            .get(&format!(
                "/api/v1/clarifications?session_id={session}&status=pending"
            ))
            .await
            .body;
        list["clarifications"][0]["pending_id"]
            .as_str()
            .map(str::to_owned)
    })
    .await;
    let from_archive = root.join("bin/agentctl").display().to_string();
    assert!(
        descendants(kandev.pid())
            .iter()
            .any(|(_, cmdline)| cmdline.starts_with(&from_archive)),
        "kandev started the agentctl beside it in the archive: {:?}",
        descendants(kandev.pid())
    );
    let answer = json!({"answers": [{"question_id": "question_0", "selected_options": ["Red"]}]});
    let answered = api
        .post(
            &format!("/api/v1/clarifications/{pending}/respond"),
            &answer,
        )
        .await
        .expect_status(200, "respond");
    assert_eq!(answered, json!({"status": "answered"}));
    poll_until("the agent's reply", TURN_DEADLINE, || async {
        let messages = api
            .get(&format!("/api/v1/sessions/{session}/messages"))
            .await
            .body;
        messages["messages"]
            .as_array()
            .is_some_and(|all| {
                all.iter()
                    .any(|m| m["content"].as_str() == Some("You picked Red."))
            })
            .then_some(())
    })
    .await;

    // agentctl as agentctl.service starts it, its token from the credential.
    std::fs::write(credentials.join("agentctl-token"), "archive-test-token\n").expect("token");
    let mut args = exec_start(&agentctl_unit, &root, &credentials);
    for arg in &mut args {
        if arg.ends_with(":7740") {
            *arg = "127.0.0.1:0".to_owned();
        }
    }
    let mut agentctl = GroupProcess::spawn("agentctl", command(&args, &state), work.path());
    let agentctl_addr: SocketAddr = agentctl
        .wait_for_line("AGENTCTL_LISTENING ", DEADLINE)
        .await
        .parse()
        .expect("an address");
    let health = HttpClient::new(agentctl_addr)
        .get("/healthz")
        .await
        .expect_status(200, "agentctl healthz");
    assert_eq!(health, json!({"status": "ok"}));
    assert!(kandev.is_running() && agentctl.is_running());
}
