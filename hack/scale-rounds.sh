#!/usr/bin/env bash
# scale-rounds: netio-perf --mode scale (N connections into one receiver, one
# process, tcp on 127.0.0.1) repeated in interleaved rounds, so that issue
# 21's "aggregate throughput does not fall from 1 to 64 connections" is
# judged on medians, not on one run. Rounds alternate the order of the
# connection counts (1,4,16,64 then 64,16,4,1). It prints, per connection
# count, MB/s and CPU seconds per GB (user+sys of the process: the figure a
# busy machine moves least) as median (lowest-highest), and the median of
# the per-round ratios to the first count.
# Usage: hack/scale-rounds.sh [rounds] [size] [conns] [duration] [netio-perf flags...]
#   defaults: 6 rounds, 4K, 1,4,16,64, 1s per measurement; flags after the
#   fourth argument go to netio-perf (e.g. --rx-bufs 32, --poll busy)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${PATH}:/usr/local/go/bin"
rounds=${1:-6}
size=${2:-4K}
conns=${3:-1,4,16,64}
duration=${4:-1s}
extra=("${@:5}")

mkdir -p bin
go build -o bin/netio-perf ./cmd/netio-perf
reversed=$(tr , '\n' <<<"${conns}" | tac | paste -sd, -)
out=$(mktemp)
trap 'rm -f "${out}"' EXIT

echo "scale-rounds: ${rounds} rounds, ${size}, connections ${conns}, ${duration} each${extra[*]:+, ${extra[*]}}, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
	order=${conns}
	if ((r % 2)); then order=${reversed}; fi
	# A row: conns, size, unit, window, messages, MB/s, Mmsg/s, CPU s/GB.
	timeout 300 bin/netio-perf --mode scale --conns "${order}" --sizes "${size}" --duration "${duration}" \
		"${extra[@]}" --json 2>/dev/null |
		tail -n 1 | ROUND=${r} python3 -c '
import json, os, sys
for row in json.load(sys.stdin)["rows"]:
    print(os.environ["ROUND"], row["connections"], row["mb_per_s"], row["cpu_s_per_gb"])' >>"${out}"
done
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "${out}" "${conns}" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
order = [int(c) for c in sys.argv[2].split(",")]
by = {}  # (conns) -> {round: (mb/s, cpu)}
for r, c, mbs, cpu in rows:
    by.setdefault(int(c), {})[int(r)] = (float(mbs), float(cpu))
def fmt(xs, f):
    return (f + " (" + f + "-" + f + ")") % (statistics.median(xs), min(xs), max(xs))
base = by.get(order[0], {})
for c in order:
    got = by.get(c, {})
    if not got:
        print("%3d connection%s: no result" % (c, "" if c == 1 else "s"))
        continue
    mbs = [v[0] for v in got.values()]
    cpu = [v[1] for v in got.values()]
    line = "%3d connection%s: %s MB/s, CPU %s s/GB" % (
        c, "" if c == 1 else "s", fmt(mbs, "%.0f"), fmt(cpu, "%.3f"))
    ratios = [got[r][0] / base[r][0] for r in got if r in base and base[r][0] > 0]
    if c != order[0] and ratios:
        line += ", MB/s over %d connection%s by round %s" % (
            order[0], "" if order[0] == 1 else "s", fmt(ratios, "%.2f"))
    print(line)
EOF
