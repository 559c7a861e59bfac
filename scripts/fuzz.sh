#!/usr/bin/env bash
# Runs every fuzz target of the module (found with `go test -list '^Fuzz'`,
# so new ones join by themselves) for FUZZTIME each.
#
#   scripts/fuzz.sh                      # 10 s each
#   FUZZTIME=5s scripts/fuzz.sh          # CI: about 2 minutes on 2 cores
#   FUZZTIME=5m scripts/fuzz.sh          # the long run
#   scripts/fuzz.sh ./internal/client    # only these packages
#
# FUZZJOBS targets run at once (default: the number of CPUs), each with one
# worker. A failing input is written by `go test` to the package's
# testdata/fuzz/<Target>/: commit it with the fix, it then runs as a
# regression test in every `go test`. Exits 1 if any target failed, naming
# them; their output is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

FUZZTIME=${FUZZTIME:-10s}
FUZZJOBS=${FUZZJOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}
# Minimizing a new input may otherwise take a minute of a short run.
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-2s}
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# `go test -list` prints each package's matching names, then "ok <pkg> ...".
targets=$logs/targets
go test -list '^Fuzz' "${pkgs[@]}" | awk '
	/^Fuzz/ { names[n++] = $1; next }
	/^ok / { for (i = 0; i < n; i++) print $2, names[i]; n = 0; next }
	/no test files/ { n = 0 }
' >"$targets"
count=$(wc -l <"$targets")
if [ "$count" -eq 0 ]; then
	echo "fuzz: no fuzz targets in ${pkgs[*]}" >&2
	exit 1
fi
echo "fuzz: $count targets, $FUZZTIME each, $FUZZJOBS at a time" >&2

export FUZZTIME FUZZMINIMIZETIME logs
run_one() {
	local pkg=$1 name=$2 log
	log="$logs/$(echo "$pkg" | tr / _).$name"
	if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" \
		-parallel 1 "$pkg" >"$log.out" 2>&1; then
		echo "ok   $pkg $name" >&2
	elif grep -q 'context deadline exceeded' "$log.out" && ! grep -qE 'Failing input written|panic:|^ +--- FAIL' "$log.out"; then
		# The toolchain stops a worker that is still minimizing a new
		# coverage input when -fuzztime runs out and reports that as a
		# failure; nothing failed, no input was written.
		echo "ok   $pkg $name (stopped at the deadline while minimizing; no failing input)" >&2
	else
		echo "FAIL $pkg $name" >&2
		mv "$log.out" "$log.fail"
	fi
}
export -f run_one
xargs -P "$FUZZJOBS" -L 1 bash -c 'run_one "$@"' _ <"$targets"

failed=0
for f in "$logs"/*.fail; do
	[ -e "$f" ] || continue
	failed=$((failed + 1))
	echo "=== $(basename "$f" .fail)" >&2
	cat "$f" >&2
done
if [ "$failed" -gt 0 ]; then
	echo "fuzz: $failed of $count targets failed" >&2
	exit 1
fi
echo "fuzz: all $count targets passed" >&2
