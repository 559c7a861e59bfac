# Shared by .ci/run and scripts/run-gateway.sh: make sure a Docker engine
# answers, installing Debian's docker.io and starting dockerd when needed;
# install and run the linters.
# shellcheck shell=bash

log() { printf '[beige] %s\n' "$*" >&2; }

apt_install() {
	if [ "$(id -u)" != 0 ]; then
		log "need root to install: $* (run: sudo apt-get install -y $*)"
		return 1
	fi
	if [ -z "${APT_UPDATED:-}" ]; then
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

ensure_docker() {
	if docker info >/dev/null 2>&1; then
		return 0
	fi
	if ! command -v dockerd >/dev/null 2>&1; then
		log "no Docker engine: installing docker.io"
		apt_install docker.io
	fi
	if ! docker info >/dev/null 2>&1; then
		if [ "$(id -u)" != 0 ]; then
			log "the Docker engine does not answer; start it (sudo systemctl start docker) or run as root"
			return 1
		fi
		log "starting dockerd (log: /tmp/dockerd.log)"
		nohup dockerd >/tmp/dockerd.log 2>&1 &
		for _ in $(seq 1 60); do
			docker info >/dev/null 2>&1 && break
			sleep 1
		done
		if ! docker info >/dev/null 2>&1; then
			log "dockerd did not answer within 60 s; its log:"
			tail -n 30 /tmp/dockerd.log >&2 || true
			return 1
		fi
	fi
	log "docker engine $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')"
}

# ensure_busybox installs the static busybox the tests (and the offline
# fallback sandbox image) are made from.
ensure_busybox() {
	if ! dpkg -s busybox-static >/dev/null 2>&1; then
		log "installing busybox-static"
		apt_install busybox-static
	fi
}

# ensure_tmux installs tmux, in which the terminal client's end-to-end test
# drives the real binary.
ensure_tmux() {
	if ! command -v tmux >/dev/null 2>&1; then
		log "installing tmux"
		apt_install tmux
	fi
}

# ensure_chromium installs Debian's chromium, in which the web console's
# browser tests (chromedp) drive the page; they skip without it, so a failed
# install only logs.
ensure_chromium() {
	if ! command -v chromium >/dev/null 2>&1; then
		log "installing chromium (for the web console's browser tests)"
		apt_install chromium || log "chromium not installed: the console's browser tests will skip"
	fi
}

# ensure_promtool installs promtool (Debian's prometheus package), with
# which the metrics tests check the /metrics exposition.
ensure_promtool() {
	if ! command -v promtool >/dev/null 2>&1; then
		log "installing prometheus (for promtool)"
		apt_install prometheus
	fi
}

# The linters CI runs, pinned. A fresh machine has only Go and the module
# proxy, so ensure_linters builds them (go install, into LINT_BIN) and puts
# them first on PATH.
STATICCHECK_VERSION=v0.8.2  # honnef.co/go/tools
XTOOLS_VERSION=v0.52.0      # golang.org/x/tools: nilness, deadcode
LINT_BIN="${LINT_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/beige/lint-bin}"

ensure_linters() {
	mkdir -p "$LINT_BIN"
	log "installing staticcheck $STATICCHECK_VERSION, nilness and deadcode (x/tools $XTOOLS_VERSION) into $LINT_BIN"
	GOBIN="$LINT_BIN" GOFLAGS= go install \
		"honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
	GOBIN="$LINT_BIN" GOFLAGS= go install \
		"golang.org/x/tools/go/analysis/passes/nilness/cmd/nilness@$XTOOLS_VERSION" \
		"golang.org/x/tools/cmd/deadcode@$XTOOLS_VERSION"
	PATH="$LINT_BIN:$PATH"
	export PATH
}

# run_linters runs every linter over the whole module and fails when any of
# them reports something: staticcheck (a wrong finding gets a
# //lint:ignore CHECK reason), the nilness analyzer (nil values used; vet
# does not run it), and deadcode -test (functions reachable neither from a
# main nor from a test; of the build without tags).
run_linters() {
	local rc=0 dead
	log "staticcheck"
	staticcheck ./... || rc=1
	log "nilness"
	nilness ./... || rc=1
	# The noop tool is built only with -tags benchplugins (go run ./bench).
	log "staticcheck and nilness, -tags benchplugins"
	GOFLAGS=-tags=benchplugins staticcheck ./internal/plugin/noop/ ./internal/plugin/builtin/ || rc=1
	GOFLAGS=-tags=benchplugins nilness ./internal/plugin/noop/ ./internal/plugin/builtin/ || rc=1
	log "deadcode -test"
	dead="$(deadcode -test ./...)" || rc=1
	if [ -n "$dead" ]; then
		printf '%s\n' "$dead" >&2
		log "deadcode: remove the unreachable functions above"
		rc=1
	fi
	return "$rc"
}
