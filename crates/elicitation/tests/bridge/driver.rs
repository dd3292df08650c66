//! Runs `bridge.mjs` (the real `@agentclientprotocol/claude-agent-acp` builders)
//! from Rust tests.
//!
//! Only a missing `node` binary makes the conformance tests skip; once Node is
//! there, any failure (npm, the network, the cache, the script) fails the test.

use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};

/// The bridge versions checked: 0.65.0 marks the "Other" field as a companion,
/// 0.101.0 does not for ordinary clients.
pub const VERSIONS: [&str; 2] = ["0.65.0", "0.101.0"];

/// A handle on the Node driver.
pub struct Bridge {
    script: PathBuf,
    cache: PathBuf,
}

/// Why the conformance tests cannot run here, or `None` when Node is on PATH.
fn node_missing() -> Option<String> {
    static PROBE: OnceLock<Option<String>> = OnceLock::new();
    PROBE
        .get_or_init(|| match Command::new("node").arg("--version").output() {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                Some("`node` is not on PATH; the real-bridge conformance test needs it".into())
            }
            Err(e) => panic!("node is on PATH but could not be started: {e}"),
            Ok(out) if !out.status.success() => panic!(
                "`node --version` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
            Ok(_) => None,
        })
        .clone()
}

impl Bridge {
    /// The driver, or `None` (after printing why) when `node` is absent.
    pub fn locate(test: &str) -> Option<Bridge> {
        if let Some(reason) = node_missing() {
            println!("SKIPPED {test}: {reason}");
            eprintln!("SKIPPED {test}: {reason}");
            return None;
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
        Some(bridge)
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
