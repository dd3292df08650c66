#!/usr/bin/env bash
# Installs the real @agentclientprotocol/claude-agent-acp VERSION and the Claude Code CLI
# it brings (the native binary of @anthropic-ai/claude-agent-sdk-<platform>, ~340 MB) into
# <target>/claude-bridge/VERSION and prints that directory.
#
#   e2e/claude/install.sh VERSION
#
# A version pinned under e2e/claude/pins/VERSION is installed with `npm ci` from its lock
# file (every package and its integrity fixed); any other published version (for
# `just probe-claude`) with `npm install --save-exact`. No lifecycle scripts run. Once
# installed, a run only checks a marker. The tree is built in a staging directory and
# renamed into place, so concurrent callers never see half an install.
set -euo pipefail

version=${1:-}
if [[ ! $version =~ ^[0-9]+\.[0-9]+\.[0-9]+([-.][0-9A-Za-z.-]+)?$ ]]; then
    echo "usage: e2e/claude/install.sh VERSION (a published version, e.g. 0.101.0)" >&2
    exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
[[ $target == /* ]] || target=$root/$target
cache=${KANDEV_CLAUDE_BRIDGE_CACHE:-$target/claude-bridge}
dir=$cache/$version
pin=$here/pins/$version
package=@agentclientprotocol/claude-agent-acp

if [[ -f $pin/package-lock.json ]]; then
    expected="pinned $(sha256sum "$pin/package-lock.json" | cut -d' ' -f1)"
else
    expected="unpinned $package@$version"
fi

# The CLI binary of this platform: the piece a broken install most often lacks.
has_cli() {
    compgen -G "$1/node_modules/@anthropic-ai/claude-agent-sdk-*/claude" >/dev/null
}

if [[ -f $dir/.complete && $(cat "$dir/.complete") == "$expected" ]] && has_cli "$dir"; then
    echo "$dir"
    exit 0
fi

command -v npm >/dev/null || { echo "install.sh: npm is not on PATH" >&2; exit 1; }
mkdir -p "$cache"
staging=$(mktemp -d "$cache/.staging-$version-XXXXXX")
trap 'rm -rf "$staging"' EXIT
npm_flags=(--ignore-scripts --no-audit --no-fund --loglevel=error)
if [[ -f $pin/package-lock.json ]]; then
    cp "$pin/package.json" "$pin/package-lock.json" "$staging/"
    (cd "$staging" && npm ci "${npm_flags[@]}") >&2
else
    printf '{"name":"kandev-claude-bridge","version":"%s","private":true}\n' "$version" >"$staging/package.json"
    (cd "$staging" && npm install --save-exact "${npm_flags[@]}" "$package@$version") >&2
fi
has_cli "$staging" || {
    echo "install.sh: $package@$version installed no Claude Code CLI binary for this platform" \
        "(node_modules/@anthropic-ai/claude-agent-sdk-*/claude)" >&2
    exit 1
}
echo "$expected" >"$staging/.complete"
complete() { [[ -f $dir/.complete && $(cat "$dir/.complete") == "$expected" ]]; }
if ! complete; then
    # A stale or different install: replace it. If another caller finishes first, theirs
    # is as good as ours.
    rm -rf "$dir"
    mv -T "$staging" "$dir" 2>/dev/null || complete || {
        echo "install.sh: cannot move the install into $dir" >&2
        exit 1
    }
fi
echo "$dir"
