#!/usr/bin/env bash
# Fetches the original Beige's toolkit (@matthias-hausberger/beige-toolkit)
# from the npm registry into a cache, with the npm dependencies of the
# plugins the tests run (schedule's cron-parser) installed in each plugin's
# own folder, and prints its plugins/ folder: the TypeScript plugin host's
# tests run those plugins unmodified when BEIGE_TOOLKIT names it.
# Idempotent; exits non-zero when npm cannot fetch it.
set -euo pipefail

version="${BEIGE_TOOLKIT_VERSION:-1.0.8}"
cache="${BEIGE_TOOLKIT_CACHE:-$HOME/.cache/beige/toolkit-$version}"
if [ -f "$cache/.complete" ]; then
	echo "$cache/package/plugins"
	exit 0
fi
command -v npm >/dev/null 2>&1 || { echo "ensure-toolkit: npm is not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@matthias-hausberger/beige-toolkit@$version" >/dev/null)
tar -xzf "$tmp"/matthias-hausberger-beige-toolkit-*.tgz -C "$tmp"
for p in schedule; do
	# No scripts, no peer dependencies (the original gateway itself).
	(cd "$tmp/package/plugins/$p" && npm install --silent --ignore-scripts --legacy-peer-deps --no-audit --no-fund --no-package-lock >/dev/null)
done
rm -rf "$cache"
mkdir -p "$cache"
mv "$tmp/package" "$cache/package"
touch "$cache/.complete"
echo "$cache/package/plugins"
