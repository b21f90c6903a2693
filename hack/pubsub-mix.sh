#!/usr/bin/env bash
# Compares the subscribers of two netio-perf binaries in the same runs: one
# publisher (tcp, 127.0.0.1, 64 B messages on one tag, Shared mode, Block)
# and N subscriber processes (default 4), alternately of binary OLD and of
# binary NEW, so that both sides of the comparison share the run's load,
# the publisher's stream and the scheduler's moods, which on a busy machine
# move the CPU per message of one run against the next by tens of percent.
# The publisher's binary alternates by round. Prints, per round and as the
# median (lowest-highest) over the rounds, each binary's subscriber CPU
# (user+sys) per message delivered and context switches per 1000 messages,
# and NEW over OLD. N is even and at least 2 (for one subscriber, use
# hack/pubsub-perf.sh with OLD and NEW as modes: "shared@OLD shared@NEW").
# PUBSUB_MIX_TAGS=T (default 1) spreads the messages over T tags taking
# turns, every subscriber subscribing to all of them (a buffer then
# interleaves T tags, as for many links).
# Usage: hack/pubsub-mix.sh OLD [NEW] [messages per subscriber] [rounds] [subscribers]
#        (NEW default: netio-perf built from this tree; 5000000, 6 and 4)
# e.g. OLD built from main: git worktree add /tmp/m main && (cd /tmp/m &&
# go build -o /tmp/np-main ./cmd/netio-perf); hack/pubsub-mix.sh /tmp/np-main
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${PATH}:/usr/local/go/bin"
old=${1:?usage: hack/pubsub-mix.sh OLD [NEW] [messages] [rounds] [subscribers]}
new=${2:-}
count=${3:-5000000}
rounds=${4:-6}
n=${5:-4}
tags=${PUBSUB_MIX_TAGS:-1}
((tags >= 1)) || { echo "PUBSUB_MIX_TAGS: want 1 or more" >&2 && exit 2; }
# shellcheck source=hack/peers.sh
source hack/peers.sh
scratch_dir
if [[ -z ${new} ]]; then
	go build -o "${dir}/netio-perf" ./cmd/netio-perf
	new="${dir}/netio-perf"
fi
for b in "${old}" "${new}"; do [[ -x ${b} ]] || { echo "${b} is not an executable" >&2 && exit 2; }; done
((n >= 2 && n % 2 == 0)) || { echo "subscribers: want an even number, at least 2" >&2 && exit 2; }

# run R PUB SUB...: one publisher of binary PUB and one subscriber per SUB
# binary; the reports go to ${dir}/rR-{pub,subI-old|new}.out.
run() {
	local r=$1 pubbin=$2 out="${dir}/r$1"
	shift 2
	: >"${out}-pub.out"
	"${pubbin}" publish --listen 127.0.0.1:0 --tags "${tags}" --size 64 --count "${count}" \
		--subscribers "$#" --shared --json >"${out}-pub.out" 2>"${out}-pub.err" &
	local pub=$! addr i=0 subs=() b side
	pids+=("${pub}")
	addr=$(publisher_addr "${out}-pub.out" "${out}-pub.err")
	for b in "$@"; do
		i=$((i + 1))
		side=new
		[[ ${b} == "${old}" ]] && side=old
		"${b}" subscribe --connect "${addr}" --tags "0-$((tags - 1))" --count "${count}" --json \
			>"${out}-sub${i}-${side}.out" 2>"${out}-sub${i}-${side}.err" &
		subs+=($!)
		pids+=($!)
	done
	for s in "${subs[@]}"; do wait "$s"; done
	wait "${pub}"
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "${rounds}"); do
	a=${old} b=${new}
	((r % 2 == 0)) && a=${new} b=${old} # who publishes, and who subscribes first
	subs=()
	for i in $(seq "${n}"); do
		if ((i % 2)); then subs+=("${a}"); else subs+=("${b}"); fi
	done
	run "${r}" "${a}" "${subs[@]}"
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "${dir}" "${rounds}" "${count}" <<'PY'
import glob, json, statistics, sys
d, rounds, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def last(path):
    with open(path) as f:
        return json.loads(f.read().splitlines()[-1])

def fmt(xs, f="%.2f"):
    return (f + " (" + f + "-" + f + ")") % (statistics.median(xs), min(xs), max(xs))

cpu, csw, ratio = {"old": [], "new": []}, {"old": [], "new": []}, []
for r in range(1, rounds + 1):
    got = {}
    for side in ("old", "new"):
        reps = [last(p) for p in glob.glob("%s/r%d-sub*-%s.out" % (d, r, side))]
        for s in reps:
            if s["messages"] != count or s["missed"]:
                sys.exit("round %d: a subscriber did not get every message: %r" % (r, s))
        m = sum(s["messages"] for s in reps)
        got[side] = sum(s["cpu_seconds"] for s in reps) / m * 1e9
        cpu[side].append(got[side])
        csw[side].append(sum(s.get("ctx_switches", 0) for s in reps) / m * 1e3)
    ratio.append(got["new"] / got["old"])
    print("round %d: subscriber CPU per message, old %.1f ns, new %.1f ns, new/old %.2f" % (r, got["old"], got["new"], ratio[-1]))
for side in ("old", "new"):
    print("%s: subscriber CPU per message %s ns, context switches per 1000 messages %s (median, lowest-highest)" % (
        side, fmt(cpu[side], "%.1f"), fmt(csw[side])))
print("new over old, same round: %s" % fmt(ratio))
PY
echo "(machine: $(nproc) cores, load ${load0} at the start, ${load1} at the end; ${count} messages per subscriber, ${n} subscribers per run, ${tags} tags)"
