#!/usr/bin/env bash
# hack/fuzz-brief.sh — run every go fuzz target in the module briefly.
#
# The targets are found, not listed: every `func FuzzXxx(f *testing.F)` in a
# _test.go file runs for FUZZ_TIME (default 50000x: that many inputs) on top
# of its checked-in seed corpus (testdata/fuzz/FuzzXxx), so a new target is
# fuzzed in CI as soon as it exists. A crash fails the run; go test writes
# the failing input under the package's testdata/fuzz/ so it can be
# committed as a regression seed.
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
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	echo "fuzz-brief: ${pkg} ${name} (${FUZZ_TIME})"
	"$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZ_TIME" "$pkg"
done
echo "fuzz-brief: ${#targets[@]} targets, no failures"
