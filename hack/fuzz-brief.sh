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
# machine, against 2-3 s of fuzzing.
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
trap 'rm -rf "$bindir"' EXIT
cache="$("$GO" env GOCACHE)/fuzz"
declare -A built # package -> its test binary
packages=0

for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	if [[ -z ${built[$pkg]:-} ]]; then
		packages=$((packages + 1))
		bin="$bindir/$packages.test"
		"$GO" test -c -fuzz=. -o "$bin" "$pkg"
		built[$pkg]=$bin
	fi
	echo "fuzz-brief: ${pkg} ${name} (${FUZZ_TIME})"
	importpath=$("$GO" list "$pkg")
	(cd "$pkg" && "${built[$pkg]}" -test.run='^$' -test.fuzz="^${name}\$" -test.fuzztime="$FUZZ_TIME" \
		-test.fuzzcachedir="$cache/$importpath" -test.paniconexit0 -test.timeout=10m)
done
echo "fuzz-brief: ${#targets[@]} targets in $packages packages, no failures"
