#!/usr/bin/env bash
# The newcomer's one command: installs what is missing (Docker engine),
# builds bin/beige and bin/beige-sandbox, sets up $BEIGE_HOME, builds the
# sandbox image, and starts the gateway in the foreground (Ctrl-C stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
. scripts/lib.sh

ensure_docker

log "building bin/beige and bin/beige-sandbox (static, CGO off)"
mkdir -p bin
CGO_ENABLED=0 go build -trimpath -o bin/beige ./cmd/beige
if [ -d cmd/beige-sandbox ]; then
	CGO_ENABLED=0 go build -trimpath -o bin/beige-sandbox ./cmd/beige-sandbox
fi

./bin/beige setup
image=beige-sandbox:latest
if ! docker image inspect "$image" >/dev/null 2>&1; then
	if ! ./bin/beige sandbox build -t "$image"; then
		log "could not build the full image (no registry?); making a minimal one from busybox-static"
		ensure_busybox
		./bin/beige sandbox build --busybox -t "$image"
	fi
fi
exec ./bin/beige gateway start --foreground "$@"
