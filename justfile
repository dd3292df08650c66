# Kandev ACP form elicitation — task runner. `just --list` shows every recipe.
set shell := ["bash", "-euo", "pipefail", "-c"]

# Show the recipes.
default:
    @just --list

# Build every binary (kandev, agentctl, mock-agent).
build:
    cargo build --workspace --bins

# Everything CI runs: format, lints, and every test of the workspace.
test: lint
    cargo test --workspace --all-targets
    cargo test --workspace --doc

# Format check and clippy with warnings as errors.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# Format the code.
fmt:
    cargo fmt --all
