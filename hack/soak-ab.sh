#!/usr/bin/env bash
# hack/soak-ab.sh — how often the soak loses, with two builds, in interleaved rounds.
#
#   bash hack/soak-ab.sh [ROUNDS] [A_REV] [large soak flags...]
#   bash hack/soak-ab.sh 5 main --fault-every 500ms
#
# A is hack/soak built at A_REV (default main, from `git archive`), B the
# one of this working tree. Each round runs A, then B, each as `make soak`
# does: the large soak (--duration 20s --max-size 1048576, plus the flags
# given) beside the mixed one (SOAK_AB_MIXED, default 30s), with
# SOAK_AB_BUSY busy loops (default 2, the CI shape) beside both. Every
# process is bounded by `timeout`; the busy loops end with the script. It
# prints each round's lost messages (and the listener poller's dropped
# completions where the build reports them), then per build the rounds that
# lost and the sum. The large soak's JSON lines are kept in $OUT (default
# a temporary directory, printed).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
rounds=${1:-5}
a_rev=${2:-main}
shift $(( $# > 2 ? 2 : $# ))
mixed=${SOAK_AB_MIXED:-30s}
busy=${SOAK_AB_BUSY:-2}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"

src=$(mktemp -d)
pids=()
cleanup() {
	local pid
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	rm -rf "$src"
}
trap cleanup EXIT
git archive "$a_rev" | tar -x -C "$src"
(cd "$src" && "$GO" build -o "$out/soak-A" ./hack/soak)
"$GO" build -o "$out/soak-B" ./hack/soak

for _ in $(seq 1 "$busy"); do
	timeout $((rounds * 200 + 60)) bash -c 'while :; do :; done' &
	pids+=($!)
done

declare -A lostRounds lostSum
lostRounds[A]=0 lostRounds[B]=0 lostSum[A]=0 lostSum[B]=0
summary() { # the fields of a soak's JSON line, or "none"
	python3 -c 'import json,sys
try: d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
except Exception: print("none none"); sys.exit()
print(d["lost"], d.get("poller_dropped", {}).get("soak-listener", "-"))' "$1"
}
echo "soak A/B: A = $a_rev, B = this tree; $rounds rounds; large flags: $*; results in $out"
for i in $(seq 1 "$rounds"); do
	line="round $i:"
	for v in A B; do
		timeout 300 "$out/soak-$v" --duration 20s --max-size 1048576 "$@" >"$out/large.$v.$i" 2>"$out/large.$v.$i.err" &
		large=$!
		mrc=0
		timeout 300 "$out/soak-$v" --duration "$mixed" >"$out/mixed.$v.$i" 2>&1 || mrc=$?
		lrc=0
		wait "$large" || lrc=$?
		read -r lost dropped < <(summary "$out/large.$v.$i")
		read -r mlost _ < <(summary "$out/mixed.$v.$i")
		line+=" $v large lost $lost (exit $lrc, listener dropped $dropped), mixed lost $mlost (exit $mrc);"
		if [[ $lost != 0 ]]; then
			lostRounds[$v]=$((lostRounds[$v] + 1))
			[[ $lost == none ]] || lostSum[$v]=$((lostSum[$v] + lost))
		fi
	done
	echo "$line"
done
for v in A B; do
	echo "$v: the large soak lost in ${lostRounds[$v]} of $rounds rounds, ${lostSum[$v]} messages in all"
done
