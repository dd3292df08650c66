# Kandev ACP form elicitation — task runner. `just --list` shows every recipe.
set shell := ["bash", "-euo", "pipefail", "-c"]

# Every recipe's dev build has clippy lint the workspace's crates as it compiles them, warnings
# as errors, as `cargo clippy` itself does (docs/decisions/0018-lint-while-compiling.md). One
# setting for all recipes, so switching between them never recompiles; release builds unset it.
# A toolchain without clippy gets it from rustup (it ships with every toolchain as a component).
export RUSTC_WORKSPACE_WRAPPER := `rustup which clippy-driver 2>/dev/null || (rustup component add clippy >&2 && rustup which clippy-driver) || command -v clippy-driver || echo 'clippy-driver-missing:install-clippy'`
export CLIPPY_ARGS := "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"

# Show the recipes.
default:
    @just --list

# Build every binary (kandev, agentctl, mock-agent).
build: c-deps
    cargo build --workspace --bins

# Build the binaries and start kandev on http://127.0.0.1:8080 (profile dev, demo agent `mock`; Ctrl-C stops it).
run: c-deps
    cargo build --workspace --bins
    KANDEV_PROFILE=dev KANDEV_LISTEN=127.0.0.1:8080 target/debug/kandev serve

# The whole suite, what CI runs (.ci/run): format check, unit, integration, doc and e2e tests, the e2e suite again on PostgreSQL, browser, quick bench; clippy lints every workspace crate while it compiles (warnings are errors). Installs Debian's gcc, make, postgresql and chromium when missing; needs Node.js + npm.
test: c-deps pg-deps e2e-deps web-deps
    cargo fmt --all -- --check
    cargo build --workspace --bins
    RUST_TEST_THREADS=4 cargo test --workspace --no-fail-fast -- --include-ignored
    node --test e2e/foreign-agent/
    TEST_DATABASE=postgres cargo test --workspace --test e2e -- --include-ignored --test-threads 4
    node --test apps/web/tests/
    just bench --quick

# Install Debian's gcc and make when missing: the bundled SQLite and kandev's jemalloc are built from C source.
c-deps:
    command -v cc >/dev/null && command -v make >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y gcc make)

# Install Debian's postgresql when no initdb is found (the tests run their own throwaway cluster, never the system's).
pg-deps:
    command -v initdb >/dev/null || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql)

# The e2e suite (the backend's whole-stack tests among it) again, on PostgreSQL (a throwaway cluster in a temp dir, one fresh database per kandev). Recipes pick test binaries by name inside the whole workspace (`--test e2e`), never with `-p`: cargo then resolves features once, and every dependency is built once for `cargo build` and `cargo test` alike.
postgres: c-deps pg-deps e2e-deps
    cargo build --workspace --bins
    TEST_DATABASE=postgres cargo test --workspace --test e2e -- --include-ignored --test-threads 4

# Release archive target/dist/kandev-<version>-<target>.tar.gz: release kandev, agentctl and mock-agent, an example kandev.toml, systemd units, docs/deploying.md as DEPLOY.md.
dist: c-deps
    env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS cargo build --release --workspace --bins
    dist/package.sh target/release target/dist

# The same archive from the dev binaries (target/dist-dev/), quick to make; e2e/tests/dist.rs runs the demo from it.
dist-dev: c-deps
    cargo build --workspace --bins
    DIST_GZIP_LEVEL=1 dist/package.sh target/debug target/dist-dev

# Format check and clippy with warnings as errors.
lint: c-deps
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
e2e-browser: c-deps web-deps
    cargo build --workspace --bins
    node --test apps/web/tests/

# Full-stack e2e suite (e2e/): real kandev, agentctl, mock-agent, a Node ACP agent using the real claude-agent-acp builders, and the real claude-agent-acp bridge + Claude Code CLI (0.65.0, 0.101.0) against a fake Anthropic API.
e2e: c-deps e2e-deps
    cargo build --workspace --bins
    node --test e2e/foreign-agent/
    cargo test --workspace --test e2e -- --include-ignored --test-threads 4

# The e2e suite's Node prerequisites: the foreign agent's locked packages, the bridge builders and the real bridges (0.65.0, 0.101.0) under target/.
e2e-deps:
    cd e2e/foreign-agent && npm ci --ignore-scripts --no-audit --no-fund
    node crates/elicitation/tests/bridge/bridge.mjs ensure 0.65.0
    node crates/elicitation/tests/bridge/bridge.mjs ensure 0.101.0
    e2e/claude/install.sh 0.65.0
    e2e/claude/install.sh 0.101.0

# The §K A/B against any published claude-agent-acp VERSION (installed into target/claude-bridge/VERSION): one-screen verdict, exit 1 on FAIL.
probe-claude VERSION: c-deps
    cargo build --workspace --bin probe-claude
    target/debug/probe-claude {{VERSION}}

# The fault suite N times in a row (not in CI): stops at the first failure, naming the run. `just stress 200` is the bar for the stream-cut test.
stress N="200": c-deps
    cargo build --workspace --bins
    cargo test --workspace --test e2e --no-run
    for i in $(seq 1 {{N}}); do cargo test -q --workspace --test e2e -- faults:: --test-threads 4 >target/stress.log 2>&1 || { echo "run $i of {{N}} failed; its output is in target/stress.log"; tail -40 target/stress.log; exit 1; }; echo "run $i of {{N}} passed"; done

# Performance report (issue 29, docs/architecture.md §8): mapping criterion benches, round trips (two-question, 64-question, ask_user_question) with time to visible, per-hop breakdown, the open-loop arrival-rate sweep and its knee (SQLite and PostgreSQL), 1,000 operator sockets, streaming agents, the scale curve and replicas, against absolute budgets, on release binaries configured as deployed → target/bench/report.{json,md} (+ SVGs, runs/). `--quick` is CI's reduced run on dev binaries; `--only PART` runs one part; `--think MS` sets the operators' think time; `--soak` runs only the 30-minute soak → target/bench/soak/.
bench *ARGS: c-deps
    #!/usr/bin/env bash
    set -euo pipefail
    args=" {{ARGS}} "
    if [[ "$args" == *" --quick "* ]]; then
        profile=debug; build=(); criterion=(--profile dev -- --warm-up-time 0.3 --measurement-time 1)
    else
        profile=release; build=(--release); criterion=()
        # Release figures come from rustc's own build, never clippy-driver's.
        unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
    fi
    if [[ "$args" != *" --soak "* ]] && [[ "$args" != *" --only "* || "$args" == *" --only mapping "* ]]; then
        cargo bench --workspace --bench mapping "${criterion[@]}"
    fi
    cargo build "${build[@]}" --workspace --bins
    "target/$profile/kandev-bench" run {{ARGS}}

# Property-based fuzzing of map_request and build_response (arbitrary and mutated-fixture JSON, zero panics); CASES sets the count.
fuzz CASES="20000": c-deps
    PROPTEST_CASES={{CASES}} cargo test --workspace --test elicitation -- --ignored --nocapture fuzz::fuzz_
