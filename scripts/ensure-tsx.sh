#!/usr/bin/env bash
# Fetches tsx (the TypeScript loader a plugin may ship in its node_modules)
# with its dependencies (esbuild and its linux binary package, get-tsconfig,
# ...) from the npm registry into a cache and prints the cache's folder, the
# one holding node_modules/: the plugin host's tests copy that node_modules
# into a plugin folder when BEIGE_TSX names it. No install scripts run
# (esbuild finds its binary in @esbuild/<platform>). Idempotent; exits
# non-zero when npm cannot fetch it.
set -euo pipefail

version="${BEIGE_TSX_VERSION:-4}"
cache="${BEIGE_TSX_CACHE:-$HOME/.cache/beige/tsx-$version}"
if [ -f "$cache/.complete" ]; then
	echo "$cache"
	exit 0
fi
command -v npm >/dev/null 2>&1 || { echo "ensure-tsx: npm is not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo '{"name":"beige-tsx-cache","private":true}' >"$tmp/package.json"
(cd "$tmp" && npm install --silent --ignore-scripts --no-audit --no-fund --no-package-lock "tsx@$version" >/dev/null)
[ -f "$tmp/node_modules/tsx/package.json" ] || { echo "ensure-tsx: npm installed no node_modules/tsx" >&2; exit 1; }
rm -rf "$cache"
mkdir -p "$(dirname "$cache")"
mv "$tmp" "$cache"
trap - EXIT
chmod 755 "$cache"
touch "$cache/.complete"
echo "$cache"
