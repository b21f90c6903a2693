#!/usr/bin/env bash
# sweep-ab: interleaved A/B of the one-process cases a poller change can
# cost: netio-perf's loopback sweep (tcp, one process, a sender and two
# pollers on GOMAXPROCS Ps: --sizes 4K,64K,1M --duration 300ms), and the
# rdm shm 64 B one-way latency of its sweep (two pollers in one process)
# with the default poller and with --poll busy; netio-perf built from a base
# revision against netio-perf built from this tree.
#
# Usage: hack/sweep-ab.sh [rounds] [base-revision]   (defaults: 7, main)
#
# Each round runs base and this once per case, in reversed order every
# other round. It prints, per case and contender, the median (lowest-
# highest) of MB/s or of the latency p50 in µs, the median CPU seconds per
# GB of the throughput rows, and the median of the per-round ratios
# this/base (above 1: this tree moved more, or for latency took longer).
# Every run is bounded by timeout(1); nothing is left running.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${PATH}:/usr/local/go/bin"
rounds=${1:-7}
base=${2:-main}

tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
mkdir -p "${tmp}/base"
: >"${tmp}/results"
git archive "${base}" | tar -x -C "${tmp}/base"
(cd "${tmp}/base" && go build -o "${tmp}/np-base" ./cmd/netio-perf)
go build -o "${tmp}/np-this" ./cmd/netio-perf

# run CONTENDER ROUND: appends "ROUND CONTENDER CASE VALUE CPU-s/GB" lines.
run() {
	local np="${tmp}/np-$1" r=$2 pm
	if timeout 120 "${np}" --sizes 4K,64K,1M --duration 300ms --json >"${tmp}/out" 2>"${tmp}/err"; then
		tail -n 1 "${tmp}/out" | python3 -c '
import json, sys
for row in json.load(sys.stdin)["rows"]:
    print(sys.argv[1], sys.argv[2], "stream-%d" % row["size"], row["mb_per_s"], row.get("cpu_s_per_gb", 0))' "${r}" "$1" >>"${tmp}/results"
	else
		tail -n 2 "${tmp}/err" >&2
	fi
	for pm in adaptive busy; do
		if timeout 120 "${np}" --endpoint rdm --provider shm --sizes 64 --duration 500ms --poll "${pm}" --json \
			>"${tmp}/out" 2>"${tmp}/err"; then
			tail -n 1 "${tmp}/out" | python3 -c '
import json, sys
print(sys.argv[1], sys.argv[2], "shm64-p50-us-" + sys.argv[3], json.load(sys.stdin)["rows"][0]["latency_p50_us"], 0)' \
				"${r}" "$1" "${pm}" >>"${tmp}/results"
		else
			tail -n 2 "${tmp}/err" >&2
		fi
	done
}

echo "sweep-ab: ${rounds} rounds, base ${base} ($(git rev-parse --short "${base}")) against this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
	order=(base this)
	if ((r % 2)); then order=(this base); fi
	for v in "${order[@]}"; do run "${v}" "${r}"; done
	echo "round ${r} done" >&2
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "${tmp}/results" <<'EOF'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
for case in sorted({r[2] for r in rows}):
    val = {(r[0], r[1]): float(r[3]) for r in rows if r[2] == case}
    line = "%-22s" % case
    for who in ("base", "this"):
        v = [x for (rd, w), x in val.items() if w == who]
        cpu = [float(r[4]) for r in rows if r[2] == case and r[1] == who]
        if not v:
            line += " | %s no result" % who
            continue
        line += " | %s %.4g (%.4g-%.4g)" % (who, st.median(v), min(v), max(v))
        if case.startswith("stream"):
            line += " CPU s/GB %.3f" % st.median(cpu)
    q = [val[(rd, "this")] / val[(rd, "base")] for (rd, w) in val if w == "this" and (rd, "base") in val and val[(rd, "base")] > 0]
    if q:
        line += " | this/base by round %.2f (%.2f-%.2f)" % (st.median(q), min(q), max(q))
    print(line)
EOF
