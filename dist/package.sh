#!/usr/bin/env bash
# Packs BIN_DIR's kandev, agentctl and mock-agent with the example kandev.toml, the
# systemd units and the deploying guide (docs/deploying.md, as DEPLOY.md) into
# OUT_DIR/kandev-<version>-<target>.tar.gz, and prints its path. `just dist` runs it on
# release binaries, `just dist-dev` (and the e2e test of the archive) on the dev ones.
# DIST_GZIP_LEVEL (default 9) trades size for time.
set -euo pipefail

bin=${1:?usage: dist/package.sh BIN_DIR [OUT_DIR]}
out=${2:-target/dist}
root=$(cd "$(dirname "$0")/.." && pwd)

version=$("$bin/kandev" --version | awk '{print $2}')
target=$(rustc -vV | sed -n 's/^host: //p')
[[ -n $version && -n $target ]] || { echo "package.sh: no version or target" >&2; exit 1; }
name="kandev-$version-$target"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/bin" "$stage/$name/systemd"
install -m 0755 "$bin/kandev" "$bin/agentctl" "$bin/mock-agent" "$stage/$name/bin/"
install -m 0644 "$root/dist/kandev.toml" "$stage/$name/kandev.toml"
install -m 0644 "$root/dist/systemd/kandev.service" "$root/dist/systemd/agentctl.service" \
    "$stage/$name/systemd/"
install -m 0644 "$root/docs/deploying.md" "$stage/$name/DEPLOY.md"

mkdir -p "$out"
tar -C "$stage" -cf - "$name" | gzip "-${DIST_GZIP_LEVEL:-9}" > "$out/$name.tar.gz"
echo "$out/$name.tar.gz"
