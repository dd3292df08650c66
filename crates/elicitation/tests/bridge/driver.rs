//! Runs `bridge.mjs` (the real `@agentclientprotocol/claude-agent-acp` builders)
//! from Rust tests.
//!
//! The conformance tests that run it are ignored unless asked for (`just test` asks);
//! a missing `node` or `npm` then fails them with the reason ([`Bridge::locate`]), as
//! does any later failure (npm, the network, the cache, the script).

use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};

/// The bridge versions checked: 0.65.0 marks the "Other" field as a companion,
/// 0.101.0 does not for ordinary clients.
pub const VERSIONS: [&str; 2] = ["0.65.0", "0.101.0"];

/// The tools the driver runs: Node executes the builders, npm fetches them.
const TOOLS: [&str; 2] = ["node", "npm"];

/// A handle on the Node driver.
pub struct Bridge {
    script: PathBuf,
    cache: PathBuf,
}

/// Why the tools in `tools` cannot run here: the first one that is not on PATH, or
/// `None` when every one answers `--version`.
fn missing_tool(tools: &[&str]) -> Option<String> {
    tools
        .iter()
        .find_map(|tool| match Command::new(tool).arg("--version").output() {
            Err(e) if e.kind() == ErrorKind::NotFound => Some(format!(
                "`{tool}` is not on PATH; the real-bridge conformance tests need node and npm"
            )),
            Err(e) => panic!("{tool} is on PATH but could not be started: {e}"),
            Ok(out) if !out.status.success() => panic!(
                "`{tool} --version` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
            Ok(_) => None,
        })
}

impl Bridge {
    /// The driver, with every bridge version fetched. The tests that call it are
    /// `#[ignore = "needs node and npm; …"]`, so the runner reports them as ignored
    /// unless asked for (`just test` asks).
    ///
    /// # Panics
    /// When `node` or `npm` is missing, with the reason; then on any failure of npm,
    /// the network, the cache or the script.
    pub fn locate() -> Bridge {
        static PROBE: OnceLock<Option<String>> = OnceLock::new();
        if let Some(why) = PROBE.get_or_init(|| missing_tool(&TOOLS)) {
            panic!("{why}");
        }
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        // CARGO_TARGET_TMPDIR is `<target>/tmp`; the cache sits beside it, ignored by git.
        let cache = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .map(|target| target.join("bridge-cache"))
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bridge-cache"));
        let bridge = Bridge {
            script: manifest.join("tests/bridge/bridge.mjs"),
            cache,
        };
        bridge.ensure_all();
        bridge
    }

    /// Fetches every version once per test process, before any test uses it, so
    /// parallel tests do not each start an `npm pack`.
    fn ensure_all(&self) {
        static ENSURED: OnceLock<()> = OnceLock::new();
        ENSURED.get_or_init(|| {
            for version in VERSIONS {
                let out = self.run("ensure", version, &Value::Null);
                assert_eq!(out["version"], version, "ensure answered {out}");
            }
        });
    }

    /// Runs one op of `bridge.mjs` for `version` with `input` on stdin.
    pub fn run(&self, op: &str, version: &str, input: &Value) -> Value {
        let mut child = Command::new("node")
            .arg(&self.script)
            .arg(op)
            .arg(version)
            .arg("--cache")
            .arg(&self.cache)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn node bridge.mjs");
        child
            .stdin
            .take()
            .expect("stdin is piped")
            .write_all(input.to_string().as_bytes())
            .expect("write bridge input");
        let out = child.wait_with_output().expect("wait for bridge.mjs");
        assert!(
            out.status.success(),
            "bridge.mjs {op} {version} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "bridge.mjs {op} {version} printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// Runs many ops of one version in a single Node process.
    pub fn batch(&self, version: &str, calls: &[(&str, Value)]) -> Vec<Value> {
        let input: Vec<Value> = calls
            .iter()
            .map(|(op, input)| json!({"op": op, "input": input}))
            .collect();
        let out = self.run("batch", version, &Value::Array(input));
        let results = out.as_array().expect("batch answers an array").clone();
        assert_eq!(results.len(), calls.len(), "one result per call");
        results
    }
}

/// The committed inputs the fixtures were captured from.
pub fn inputs() -> Value {
    read_fixture("inputs.json")
}

/// Reads `tests/fixtures/bridge/<name>` as JSON.
pub fn read_fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/bridge")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read fixture {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("fixture {} is JSON: {e}", path.display()))
}

#[test]
fn a_tool_not_on_path_is_named_as_the_reason_and_present_tools_pass() {
    let why = missing_tool(&["kandev-no-such-tool"]).expect("the tool is missing");
    assert!(
        why.contains("`kandev-no-such-tool` is not on PATH; the real-bridge conformance tests need node and npm"),
        "{why}"
    );
    assert_eq!(missing_tool(&[]), None);
}
