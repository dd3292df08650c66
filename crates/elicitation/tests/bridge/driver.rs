//! Runs `bridge.mjs` (the real `@agentclientprotocol/claude-agent-acp` builders)
//! from Rust tests.
//!
//! A missing `node` or `npm` makes the conformance tests skip, with a `SKIPPED` line,
//! outside CI; under `CI=true` it fails them ([`decide`]). Once both are there, any
//! failure (npm, the network, the cache, the script) fails the test.

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

/// What a conformance test does here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Every tool is there: run.
    Run,
    /// A tool is missing outside CI: say so and pass without checking anything.
    Skip(String),
    /// A tool is missing under CI: fail, so a CI machine without Node cannot go green.
    Fail(String),
}

/// The gate for `missing` (why a tool is absent, if one is) on a CI run or not.
pub fn decide(missing: Option<String>, ci: bool) -> Gate {
    match missing {
        None => Gate::Run,
        Some(why) if ci => Gate::Fail(format!("{why}, and CI=true requires it")),
        Some(why) => Gate::Skip(why),
    }
}

/// Whether `CI` (its value, if set) marks a CI run: anything but empty, `0` or `false`,
/// as e2e's `claude::bridge::in_ci` reads it.
pub fn is_ci(value: Option<&str>) -> bool {
    value.is_some_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// Why the conformance tests cannot run here, or `None` when every tool is on PATH.
fn missing_tool() -> Option<String> {
    static PROBE: OnceLock<Option<String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            TOOLS
                .into_iter()
                .find_map(|tool| match Command::new(tool).arg("--version").output() {
                    Err(e) if e.kind() == ErrorKind::NotFound => Some(format!(
                        "`{tool}` is not on PATH; the real-bridge conformance test needs it"
                    )),
                    Err(e) => panic!("{tool} is on PATH but could not be started: {e}"),
                    Ok(out) if !out.status.success() => panic!(
                        "`{tool} --version` failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    ),
                    Ok(_) => None,
                })
        })
        .clone()
}

impl Bridge {
    /// The driver, or `None` (after printing why) when a tool is absent outside CI.
    ///
    /// # Panics
    /// When a tool is absent under `CI=true` ([`decide`]).
    pub fn locate(test: &str) -> Option<Bridge> {
        let ci = is_ci(std::env::var("CI").ok().as_deref());
        match decide(missing_tool(), ci) {
            Gate::Run => {}
            Gate::Skip(reason) => {
                // Straight to the process's stderr: the test harness captures (and, for
                // a passing test, hides) what `println!`/`eprintln!` write.
                let line = format!("SKIPPED {test}: {reason}\n");
                let _ = std::io::stderr().write_all(line.as_bytes());
                return None;
            }
            Gate::Fail(reason) => panic!("{test}: {reason}"),
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

#[cfg(test)]
mod gate_tests {
    use super::*;

    #[test]
    fn a_missing_tool_fails_under_ci_and_skips_elsewhere() {
        let why = || Some("`node` is not on PATH".to_owned());
        assert!(
            matches!(decide(why(), true), Gate::Fail(r) if r.contains("`node`") && r.contains("CI=true"))
        );
        assert_eq!(
            decide(why(), false),
            Gate::Skip("`node` is not on PATH".into())
        );
        assert_eq!(decide(None, true), Gate::Run);
        assert_eq!(decide(None, false), Gate::Run);
    }

    #[test]
    fn ci_is_any_value_but_empty_zero_or_false() {
        for on in ["true", "1", "yes", " true "] {
            assert!(is_ci(Some(on)), "{on:?}");
        }
        for off in [None, Some(""), Some("0"), Some("false"), Some(" ")] {
            assert!(!is_ci(off), "{off:?}");
        }
    }
}
