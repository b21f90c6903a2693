#!/usr/bin/env bash
# retrycost-ab.sh: what a sender's retry costs while its peer takes
# nothing (hack/retrycost), A against B in interleaved rounds, on
# 127.0.0.1. SHAPE=deadpeer (default): an rdm endpoint on tcp;ofi_rxm
# sends SENDS messages to a receiver process killed with SIGKILL, which
# fail at PeerTimeout (TIMEOUT); every post to the dead peer is a
# connection attempt, counted by perf stat over the whole run (the one
# before the kill included), and the report adds how late the lane failed
# past PeerTimeout (ms); LIVE=1 streams 8-byte messages to a live peer
# meanwhile (--live) and adds how many went. SHAPE=handoff: a connected tcp sender's hand-off
# queue stalled at the inject bound behind a large send, its receiver not
# reading, for TIMEOUT. Per round and contender: the sender's CPU (ms) and
# voluntary context switches while the retry waited, minus those of an
# idle window as long just before. Prints medians with min-max and the
# B/A ratio of medians. A and B are retrycost binaries (default: both
# built from this tree). Bounded: each run takes about 2-3 x TIMEOUT plus
# start-up, and is killed after 3 x TIMEOUT + 30 s.
# Usage: [SHAPE=deadpeer|handoff] [LIVE=1] [A=bin] [B=bin] hack/retrycost-ab.sh [rounds] [timeout] [sends]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${PATH}:/usr/local/go/bin"
# shellcheck source=hack/peers.sh
. hack/peers.sh
provider_env
shape=${SHAPE:-deadpeer}
rounds=${1:-3} timeout=${2:-2s} sends=${3:-4}
scratch_dir
go build -o "${dir}/retrycost" ./hack/retrycost
a=${A:-${dir}/retrycost} b=${B:-${dir}/retrycost}
secs=${timeout%s}
live=()
[[ -n ${LIVE:-} ]] && live=(--live)
for r in $(seq "${rounds}"); do
	for c in A B; do
		bin=${a}
		[[ ${c} == B ]] && bin=${b}
		json=$(timeout "$((3 * ${secs%.*} + 30))" perf stat -x, -o "${dir}/perf" -e syscalls:sys_enter_connect \
			"${bin}" --shape "${shape}" --timeout "${timeout}" --sends "${sends}" "${live[@]}") ||
			{
				echo "round ${r} ${c}: ${bin} failed" >&2
				exit 1
			}
		connects=$(awk -F, '/sys_enter_connect/ {print $1}' "${dir}/perf")
		echo "${r} ${c} ${connects} ${json}" >>"${dir}/rows"
		echo "round ${r} ${c}: connects ${connects} ${json}" >&2
	done
done
python3 - "${dir}/rows" "${shape}" <<'PY'
import json, statistics, sys
rows = {"A": [], "B": []}
for line in open(sys.argv[1]):
    r, c, connects, js = line.split(" ", 3)
    j = json.loads(js)
    row = {"cpu ms": j["cpu_wait_ms"] - j["cpu_idle_ms"],
           "switches": j["switches_wait"] - j["switches_idle"]}
    if sys.argv[2] == "deadpeer":
        row["connects"] = float(connects)
        row["late ms"] = j["late_ms"]
        if "live_sent" in j:
            row["live sent"] = float(j["live_sent"])
    rows[c].append(row)
print("%-10s %26s %26s %7s" % (sys.argv[2], "A median (min-max)", "B median (min-max)", "B/A"))
for k in rows["A"][0]:
    med = {}
    cells = []
    for c in ("A", "B"):
        xs = [x[k] for x in rows[c]]
        med[c] = statistics.median(xs)
        cells.append("%.1f (%.1f-%.1f)" % (med[c], min(xs), max(xs)))
    ratio = med["B"] / med["A"] if med["A"] else float("nan")
    print("%-10s %26s %26s %7.3f" % (k, cells[0], cells[1], ratio))
PY
