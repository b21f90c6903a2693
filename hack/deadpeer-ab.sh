#!/usr/bin/env bash
# deadpeer-ab.sh: what an rdm endpoint costs while its sends wait for a
# peer whose process died (hack/deadpeer: the receiver, a child process,
# is killed with SIGKILL, then SENDS messages go to it and fail after
# PeerTimeout), A against B in interleaved rounds, on tcp;ofi_rxm, whose
# every post to the dead peer is a connection attempt. Per round and
# contender, from perf stat on the whole run: connect() calls (one before
# the kill included); from the program: this process's CPU (ms) and
# voluntary context switches while the sends waited, minus those of an
# idle window as long just before (the poller alone, peer already dead),
# and how late the lane failed past PeerTimeout (ms). Prints medians with
# min-max and the B/A ratio of medians. A and B are deadpeer binaries
# (default: both built from this tree). Bounded: each run takes about
# 2 x TIMEOUT plus start-up, and is killed after 3 x TIMEOUT + 30 s.
# Usage: [A=bin] [B=bin] hack/deadpeer-ab.sh [rounds] [timeout] [sends]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${PATH}:/usr/local/go/bin"
# shellcheck source=hack/peers.sh
. hack/peers.sh
provider_env
rounds=${1:-3} timeout=${2:-2s} sends=${3:-4}
scratch_dir
go build -o "${dir}/deadpeer" ./hack/deadpeer
a=${A:-${dir}/deadpeer} b=${B:-${dir}/deadpeer}
secs=${timeout%s}
for r in $(seq "${rounds}"); do
	for c in A B; do
		bin=${a}
		[[ ${c} == B ]] && bin=${b}
		json=$(timeout "$((3 * ${secs%.*} + 30))" perf stat -x, -o "${dir}/perf" -e syscalls:sys_enter_connect \
			"${bin}" --timeout "${timeout}" --sends "${sends}")
		connects=$(awk -F, '/sys_enter_connect/ {print $1}' "${dir}/perf")
		echo "${r} ${c} ${connects} ${json}" >>"${dir}/rows"
		echo "round ${r} ${c}: connects ${connects} ${json}" >&2
	done
done
python3 - "${dir}/rows" <<'PY'
import json, statistics, sys
rows = {"A": [], "B": []}
for line in open(sys.argv[1]):
    r, c, connects, js = line.split(" ", 3)
    j = json.loads(js)
    rows[c].append({"connects": float(connects),
                    "cpu ms": j["cpu_dead_ms"] - j["cpu_idle_ms"],
                    "switches": j["switches_dead"] - j["switches_idle"],
                    "late ms": j["late_ms"]})
print("%-10s %26s %26s %7s" % ("dead peer", "A median (min-max)", "B median (min-max)", "B/A"))
for k in ("connects", "cpu ms", "switches", "late ms"):
    med = {}
    cells = []
    for c in ("A", "B"):
        xs = [x[k] for x in rows[c]]
        med[c] = statistics.median(xs)
        cells.append("%.1f (%.1f-%.1f)" % (med[c], min(xs), max(xs)))
    ratio = med["B"] / med["A"] if med["A"] else float("nan")
    print("%-10s %26s %26s %7.3f" % (k, cells[0], cells[1], ratio))
PY
