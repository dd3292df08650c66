# Kandev ACP form elicitation — task runner. `just --list` shows every recipe.
set shell := ["bash", "-euo", "pipefail", "-c"]

# Show the recipes.
default:
    @just --list

# Build every binary (kandev, agentctl, mock-agent).
build:
    cargo build --workspace --bins

# Build the binaries and start kandev on http://127.0.0.1:8080 (profile dev, demo agent `mock`; Ctrl-C stops it).
run:
    cargo build --workspace --bins
    KANDEV_PROFILE=dev KANDEV_LISTEN=127.0.0.1:8080 target/debug/kandev serve

# Everything CI runs: lints, unit and integration tests, the full-stack e2e suite, the
# browser tests and the quick bench (fails only on a lost or doubled response). Needs
# Node.js + npm (bridge conformance, foreign agent, browser tests); chromium is installed
# by `web-deps` when missing.
test: lint
    cargo build --workspace --bins
    cargo test --workspace --all-targets --exclude kandev-e2e
    cargo test --workspace --doc
    just e2e
    just e2e-browser
    just bench --quick

# Release archive target/dist/kandev-<version>-<target>.tar.gz: release kandev, agentctl and mock-agent, an example kandev.toml, systemd units, the README's Deploying section.
dist:
    cargo build --release -p kandev-backend -p kandev-agentctl -p kandev-mock-agent --bins
    dist/package.sh target/release target/dist

# The same archive from the dev binaries (target/dist-dev/), quick to make; e2e/tests/dist.rs runs the demo from it.
dist-dev:
    cargo build --workspace --bins
    DIST_GZIP_LEVEL=1 dist/package.sh target/debug target/dist-dev

# Format check and clippy with warnings as errors.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# Format the code.
fmt:
    cargo fmt --all

# Install browser-test dependencies: Debian's chromium if missing, apps/web's locked npm packages.
web-deps:
    command -v chromium >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium)
    cd apps/web && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund

# Browser tests of apps/web in headless chromium against a real kandev (screenshots in target/browser-screenshots/).
e2e-browser: web-deps
    cargo build --workspace --bins
    node --test apps/web/tests/

# Full-stack e2e suite (e2e/): real kandev, agentctl, mock-agent, a Node ACP agent using the real claude-agent-acp builders, and the real claude-agent-acp bridge + Claude Code CLI (0.65.0, 0.101.0) against a fake Anthropic API.
e2e:
    cargo build --workspace --bins
    cd e2e/foreign-agent && npm ci --ignore-scripts --no-audit --no-fund
    node crates/elicitation/tests/bridge/bridge.mjs ensure 0.65.0
    node crates/elicitation/tests/bridge/bridge.mjs ensure 0.101.0
    e2e/claude/install.sh 0.65.0
    e2e/claude/install.sh 0.101.0
    node --test e2e/foreign-agent/
    cargo test -p kandev-e2e -- --test-threads 4

# The §K A/B against any published claude-agent-acp VERSION (installed into target/claude-bridge/VERSION): one-screen verdict, exit 1 on FAIL.
probe-claude VERSION:
    cargo build -p kandev-e2e --bin probe-claude
    target/debug/probe-claude {{VERSION}}

# Performance report (ARCHITECTURE §8): mapping criterion benches, full-stack round trip and load, each beside its baseline and target → target/bench/report.{json,md}. `just bench --quick` is the reduced CI run.
bench *ARGS:
    if [[ " {{ARGS}} " == *" --quick "* ]]; then cargo bench -p kandev-elicitation --bench mapping -- --warm-up-time 0.3 --measurement-time 1; else cargo bench -p kandev-elicitation --bench mapping; fi
    cargo build --workspace --bins
    target/debug/kandev-bench run {{ARGS}}

# Property-based fuzzing of map_request and build_response (arbitrary and mutated-fixture JSON, zero panics); CASES sets the count.
fuzz CASES="20000":
    PROPTEST_CASES={{CASES}} cargo test -p kandev-elicitation --test fuzz -- --ignored --nocapture
