//! Where the built binaries and the repository's files are.

use std::path::{Path, PathBuf};

/// The repository root (the workspace directory).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
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

/// A built binary of the workspace, `target/debug/<name>`.
///
/// # Panics
/// When it is missing, with the command that builds it: the tests drive the real
/// binaries and never build them themselves.
pub fn binary(name: &str) -> PathBuf {
    let path = target_dir().join("debug").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace --bins` first (`just e2e` does)",
        path.display()
    );
    path
}

/// `target/debug/kandev`.
pub fn kandev() -> PathBuf {
    binary("kandev")
}

/// `target/debug/agentctl`.
pub fn agentctl() -> PathBuf {
    binary("agentctl")
}

/// `target/debug/mock-agent`.
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
