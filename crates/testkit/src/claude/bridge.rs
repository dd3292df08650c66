//! The real bridge on disk and the environment it runs in.
//!
//! [`Bridge::ensure`] installs a version with `e2e/claude/install.sh` (idempotent; `just
//! e2e` runs it up front) into `target/claude-bridge/<version>`. [`AgentHome`] is the
//! agent's temporary `HOME` and `TMPDIR` with a `.claude/settings.json` that keeps the CLI
//! in the `default` permission mode (0.101.0 would start in `auto`, which asks the model
//! to classify every MCP call), and [`agent_env`] the complete environment the bridge
//! needs: nothing is left to inheritance.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use crate::bins::{repo_root, target_dir};

/// The bridge versions the suite pins (`e2e/claude/pins/<version>`): the spec's and the
/// newest when last bumped.
pub const PINNED: [&str; 2] = ["0.65.0", "0.101.0"];

/// The API key the fake API is given (any value works; it is never checked).
pub const FAKE_API_KEY: &str = "sk-ant-kandev-e2e-fake";

/// Variables of the test runner's environment that would change the CLI's behaviour if
/// the agent inherited them (sandbox mode as root, a real account, another provider).
pub fn foreign_env_names() -> Vec<String> {
    std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .filter(|name| {
            name == "IS_SANDBOX"
                || name.starts_with("ANTHROPIC_")
                || name.starts_with("CLAUDE_")
                || name.starts_with("CLAUDECODE")
        })
        .collect()
}

/// One installed bridge version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bridge {
    /// Its version.
    pub version: String,
    /// `target/claude-bridge/<version>`.
    pub dir: PathBuf,
}

impl Bridge {
    /// Installs `version` when it is not yet (one install at a time per version in this
    /// process; the script itself is safe across processes).
    pub fn ensure(version: &str) -> Result<Self, String> {
        static DONE: OnceLock<Mutex<HashMap<String, Result<PathBuf, String>>>> = OnceLock::new();
        let mut done = DONE
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let result = done
            .entry(version.to_owned())
            .or_insert_with(|| install(version))
            .clone();
        result.map(|dir| Self {
            version: version.to_owned(),
            dir,
        })
    }

    /// For a test: the installed bridge. Tests that need it are marked
    /// `#[ignore = "needs node and the claude-agent-acp bridges …"]`, so the runner reports
    /// them as ignored unless asked for (`just test` asks).
    ///
    /// # Panics
    /// When it cannot be installed, with the reason.
    pub fn for_test(version: &str) -> Self {
        Self::ensure(version).unwrap_or_else(|err| {
            panic!("claude-agent-acp {version} cannot be installed (`just e2e-deps` installs it): {err}")
        })
    }

    /// The bridge's entry point, `dist/index.js`.
    pub fn entry(&self) -> PathBuf {
        self.dir
            .join("node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js")
    }
}

fn install(version: &str) -> Result<PathBuf, String> {
    let script = repo_root().join("e2e/claude/install.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(version)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .map_err(|err| format!("cannot run {}: {err}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {version} failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let bridge = Bridge {
        version: version.to_owned(),
        dir: dir.clone(),
    };
    if !bridge.entry().is_file() {
        return Err(format!(
            "{} is missing after the install",
            bridge.entry().display()
        ));
    }
    Ok(dir)
}

/// `node` on the `PATH`, as an absolute path.
pub fn node() -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("node"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| "node is not on PATH".to_owned())
}

/// The agent's temporary home: `HOME`, a `TMPDIR` inside it, a working directory, and
/// the CLI's user settings. Removed on drop.
#[derive(Debug)]
pub struct AgentHome {
    dir: tempfile::TempDir,
}

impl AgentHome {
    /// Creates it.
    ///
    /// # Panics
    /// When the temp directory cannot be written.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("kandev-claude-home-")
            .tempdir()
            .expect("temp dir");
        for sub in [".claude", "tmp", "work"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        std::fs::write(
            dir.path().join(".claude/settings.json"),
            r#"{"permissions": {"defaultMode": "default"}}"#,
        )
        .expect("write settings.json");
        Self { dir }
    }

    /// `HOME`.
    pub fn home(&self) -> &Path {
        self.dir.path()
    }

    /// `TMPDIR`.
    pub fn tmp(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }

    /// The session's working directory.
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }
}

impl Default for AgentHome {
    fn default() -> Self {
        Self::new()
    }
}

/// The bridge's whole environment: the fake API, a fake key, the temporary home, a `PATH`
/// with `node`, and the CLI's switches for telemetry, non-essential traffic and updates.
pub fn agent_env(base_url: &str, home: &AgentHome, node: &Path) -> BTreeMap<String, String> {
    let node_dir = node
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    BTreeMap::from(
        [
            ("ANTHROPIC_BASE_URL", base_url.to_owned()),
            ("ANTHROPIC_API_KEY", FAKE_API_KEY.to_owned()),
            ("HOME", home.home().display().to_string()),
            ("TMPDIR", home.tmp().display().to_string()),
            ("PATH", format!("{node_dir}:/usr/local/bin:/usr/bin:/bin")),
            ("DISABLE_TELEMETRY", "1".to_owned()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
            ("DISABLE_AUTOUPDATER", "1".to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_home_keeps_the_cli_in_default_mode() {
        let home = AgentHome::new();
        let settings: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(home.home().join(".claude/settings.json")).expect("read"),
        )
        .expect("JSON");
        assert_eq!(settings["permissions"]["defaultMode"], "default");
        assert!(home.tmp().is_dir() && home.work().is_dir());
        let env = agent_env("http://127.0.0.1:1", &home, Path::new("/opt/node/bin/node"));
        assert_eq!(env["ANTHROPIC_BASE_URL"], "http://127.0.0.1:1");
        assert!(env["PATH"].starts_with("/opt/node/bin:"));
        assert!(!env.contains_key("IS_SANDBOX"));
    }

    #[test]
    fn every_pinned_version_has_its_lock_file() {
        for version in PINNED {
            let pin = repo_root().join("e2e/claude/pins").join(version);
            let lock: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(pin.join("package-lock.json")).expect("lock file"),
            )
            .expect("JSON");
            assert_eq!(
                lock["packages"]["node_modules/@agentclientprotocol/claude-agent-acp"]["version"],
                version
            );
        }
    }
}
