//! Where the built binaries and the repository's files are.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The repository root (the workspace directory).
pub fn repo_root() -> PathBuf {
    // This crate sits at `<repo>/crates/testkit`.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("../.."))
}

/// The cargo target directory (`$CARGO_TARGET_DIR` or `<repo>/target`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                repo_root().join(dir)
            }
        })
        .unwrap_or_else(|| repo_root().join("target"))
}

static PROFILE: OnceLock<String> = OnceLock::new();

/// Makes every later lookup use the binaries of `target/<profile>` (`release` for the
/// bench); without a call the harness uses `target/debug`. The first call wins.
pub fn use_profile(profile: &str) {
    let _ = PROFILE.set(profile.to_owned());
}

/// The profile directory binaries are taken from (`debug` unless [`use_profile`] said).
pub fn profile() -> &'static str {
    PROFILE.get().map(String::as_str).unwrap_or("debug")
}

/// A built binary of the workspace, `target/<profile>/<name>`.
///
/// # Panics
/// When it is missing, with the command that builds it: the tests drive the real
/// binaries and never build them themselves.
pub fn binary(name: &str) -> PathBuf {
    let profile = profile();
    let path = target_dir().join(profile).join(name);
    let build = match profile {
        "debug" => "cargo build --workspace --bins` first (`just e2e` does)".to_owned(),
        other => format!("cargo build --profile {other} --workspace --bins` first"),
    };
    assert!(
        path.is_file(),
        "{} is missing: run `{build}",
        path.display()
    );
    path
}

/// `target/<profile>/kandev`.
pub fn kandev() -> PathBuf {
    binary("kandev")
}

/// `target/<profile>/agentctl`.
pub fn agentctl() -> PathBuf {
    binary("agentctl")
}

/// `target/<profile>/mock-agent`.
pub fn mock_agent() -> PathBuf {
    binary("mock-agent")
}

/// `e2e/scenarios`: the suite's own mock-agent scenarios (`--scenario-dir`).
pub fn scenario_dir() -> PathBuf {
    repo_root().join("e2e").join("scenarios")
}

/// `e2e/foreign-agent/agent.mjs`: the Node agent built on the official ACP SDK.
pub fn foreign_agent() -> PathBuf {
    repo_root()
        .join("e2e")
        .join("foreign-agent")
        .join("agent.mjs")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repo_root_holds_the_workspace_manifest() {
        assert!(repo_root().join("Cargo.toml").is_file());
        assert!(scenario_dir().ends_with("e2e/scenarios"));
    }

    #[test]
    #[should_panic(expected = "cargo build --workspace --bins")]
    fn a_missing_binary_says_how_to_build_it() {
        binary("no-such-binary-anywhere");
    }
}
