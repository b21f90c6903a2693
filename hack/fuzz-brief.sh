#!/usr/bin/env bash
# hack/fuzz-brief.sh — run every go fuzz target in the module briefly.
#
# The targets are found, not listed: every `func FuzzXxx(f *testing.F)` in a
# _test.go file runs for FUZZ_TIME (default 50000x: that many inputs) on top
# of its checked-in seed corpus (testdata/fuzz/FuzzXxx), so a new target is
# fuzzed in CI as soon as it exists. A crash fails the run; the test binary
# writes the failing input under the package's testdata/fuzz/ so it can be
# committed as a regression seed.
#
# Each package's test binary is built once, with fuzzing instrumentation
# (go test -c -fuzz), and run once per target from the package's
# directory, with the fuzz cache go test itself uses
# ($GOCACHE/fuzz/IMPORT/PATH). `go test -fuzz` per target would link the
# same binary again for every target: about 2 s each here, more on a busy
# machine, against 2-3 s of fuzzing. The packages' builds all start at
# once, before the first target runs, and each target waits only for its
# own package's: one after another they took 40 s of the phase on a busy
# 2-core machine, mostly links that wait on one another for no reason.
#
# The default is a count, not a duration: with a duration, go1.26's fuzz
# coordinator can fail a target that found nothing with a bare "context
# deadline exceeded" at the deadline (go.dev/issue/75804, reported fixed in
# Go 1.27; CI hit it once on FuzzParseHostPort). A count has no deadline
# to race.
#
#   hack/fuzz-brief.sh            # all targets, 50000 inputs each
#   FUZZ_TIME=60s hack/fuzz-brief.sh
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZ_TIME=${FUZZ_TIME:-50000x}

mapfile -t targets < <(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . |
	grep -v '/\.' | sort | while read -r file; do
		pkg="./$(dirname "${file#./}")"
		grep -oE '^func Fuzz[A-Za-z0-9_]+' "$file" | sed 's/^func //' | sed "s|^|${pkg} |"
	done)

[[ ${#targets[@]} -gt 0 ]] || { echo "fuzz-brief: no fuzz targets found" >&2; exit 1; }

bindir=$(mktemp -d)
declare -A bin importpath builder # package -> its test binary, import path, build's pid until waited for
# cleanup ends the builds not waited for yet (a run that failed early) and
# removes the binaries.
cleanup() {
	local pid
	for pid in "${builder[@]}"; do
		[[ -z $pid ]] || kill "$pid" 2>/dev/null || true
	done
	wait
	rm -rf "$bindir"
}
trap cleanup EXIT
cache="$("$GO" env GOCACHE)/fuzz"
mapfile -t pkgs < <(printf '%s\n' "${targets[@]}" | awk '!seen[$1]++ { print $1 }')
mapfile -t importpaths < <("$GO" list "${pkgs[@]}")
for i in "${!pkgs[@]}"; do
	pkg=${pkgs[$i]}
	bin[$pkg]="$bindir/$i.test"
	importpath[$pkg]=${importpaths[$i]}
	"$GO" test -c -fuzz=. -o "${bin[$pkg]}" "$pkg" >"$bindir/$i.log" 2>&1 &
	builder[$pkg]=$!
done

# built waits for pkg's build (once) and fails the run, with the
# compiler's words, when it failed.
built() {
	local pkg=$1 pid=${builder[$1]:-}
	[[ -n $pid ]] || return 0
	builder[$pkg]=
	if ! wait "$pid"; then
		echo "fuzz-brief: building $pkg failed:" >&2
		cat "${bin[$pkg]%.test}.log" >&2
		exit 1
	fi
	cat "${bin[$pkg]%.test}.log"
}

for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	built "$pkg"
	echo "fuzz-brief: ${pkg} ${name} (${FUZZ_TIME})"
	(cd "$pkg" && "${bin[$pkg]}" -test.run='^$' -test.fuzz="^${name}\$" -test.fuzztime="$FUZZ_TIME" \
		-test.fuzzcachedir="$cache/${importpath[$pkg]}" -test.paniconexit0 -test.timeout=10m)
done
echo "fuzz-brief: ${#targets[@]} targets in ${#pkgs[@]} packages, no failures"
