#!/usr/bin/env bash
# Prints the publish/subscribe figures issue 19 sets as targets, measured on
# this machine between processes (netio-perf publish and subscribe on tcp,
# 127.0.0.1), 64 B messages on one tag, Block:
#   - delivered to one subscriber (target >= 10 M msg/s)
#   - delivered to 4 subscribers together, and that over the single
#     subscriber's rate of the same round (target >= 2)
#   - allocations per Publish in steady state (BenchmarkPublish, target 0)
# Each subscriber is its own process; the rate is counted at the
# subscribers, from their first message to their last. The one- and
# four-subscriber runs alternate for ROUNDS rounds, and the script prints
# medians with the lowest and highest, the ratio of every round, and the
# CPU (user+sys) each side spent per message delivered and its context
# switches per 1000 messages (wake-ups and preemptions), and how many
# cores the processes used together while messages flowed (on a quiet
# machine, 2.00 less that is what a run leaves idle): on a shared
# machine the ratios of one round are what to compare, not the rates of
# different runs.
# MODES (default "buffered") lists the publisher modes to compare:
# "buffered shared" runs, in every round, the 1- and 4-subscriber runs of
# each mode one after the other (shared: netio-perf publish --shared, one
# encode per message for all subscribers), and prints each mode's figures
# and the CPU ratios of the last mode over the first, per round.
# A mode may name the netio-perf binary that runs it, MODE@PATH (both the
# publisher and the subscribers; default: built from this tree), for an
# A/B of two commits in interleaved rounds, e.g. "shared@/tmp/old shared"
# with /tmp/old built from the older commit (go build -o /tmp/old
# ./cmd/netio-perf in its checkout); the 4-over-1 ratios of the last mode
# over the first's, per round, are printed too.
# Usage: hack/pubsub-perf.sh [messages per subscriber] [rounds] [MODES]
#        (default 5000000, 3 and "buffered")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${PATH}:/usr/local/go/bin"
count=${1:-5000000}
rounds=${2:-3}
modes=${3:-buffered}
for m in ${modes}; do
	case ${m%%@*} in
	buffered | shared) ;;
	*) echo "mode ${m}: want buffered or shared, optionally @PATH" >&2 && exit 2 ;;
	esac
	[[ ${m} != *@* || -x ${m#*@} ]] || { echo "mode ${m}: ${m#*@} is not an executable" >&2 && exit 2; }
done

# shellcheck source=hack/peers.sh
source hack/peers.sh
scratch_dir
go build -o "${dir}/netio-perf" ./cmd/netio-perf

# run N R K M: one publisher in mode M (MODE[@PATH]) and N subscriber
# processes, round R; leaves the JSON reports in
# ${dir}/K-rR-nN-{pub,subI}.json.
run() {
	local n=$1 r=$2 out="${dir}/$3-r$2-n$1" mode=${4%%@*} bin="${dir}/netio-perf" flags=()
	[[ $4 == *@* ]] && bin=${4#*@}
	[[ ${mode} == shared ]] && flags=(--shared)
	: >"${out}-pub.out" # exists before the publisher writes it, for sed below
	"${bin}" publish --listen 127.0.0.1:0 --tags 1 --size 64 --count "${count}" \
		--subscribers "${n}" "${flags[@]}" --json >"${out}-pub.out" 2>"${out}-pub.err" &
	local pub=$!
	pids+=("${pub}")
	local addr
	addr=$(publisher_addr "${out}-pub.out" "${out}-pub.err")
	local subs=()
	for i in $(seq "${n}"); do
		"${bin}" subscribe --connect "${addr}" --tags 0 --count "${count}" --json \
			>"${out}-sub${i}.out" 2>"${out}-sub${i}.err" &
		subs+=($!)
		pids+=($!)
	done
	for s in "${subs[@]}"; do wait "$s"; done
	wait "${pub}"
	tail -n 1 "${out}-pub.out" >"${out}-pub.json"
	for i in $(seq "${n}"); do tail -n 1 "${out}-sub${i}.out" >"${out}-sub${i}.json"; done
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "${rounds}"); do
	k=0
	for m in ${modes}; do
		k=$((k + 1))
		run 1 "${r}" "m${k}" "${m}"
		run 4 "${r}" "m${k}" "${m}"
	done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
allocs=$(go test -run '^$' -bench 'BenchmarkPublish/tcp/subs=(1|4)/size=64(/shared)?$' -benchtime 300000x ./pubsub |
	awk '/^BenchmarkPublish/ { for (i = 2; i < NF; i++) if ($(i + 1) == "allocs/op") printf "%s%s %s", sep, $1, $i; sep = ", " }')

python3 - "${dir}" "${rounds}" "${count}" ${modes} <<'EOF'
import json, statistics, sys
d, rounds, count, modes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]

def load(path):
    with open(path) as f:
        return json.loads(f.read())

def fmt(xs, scale=1e6, unit=""):
    return "%.2f%s (%.2f-%.2f)" % (statistics.median(xs) / scale, unit, min(xs) / scale, max(xs) / scale)

def figures(key):
    one, four, slowest, ratio, cpu = [], [], [], [], {1: ([], []), 4: ([], [])}
    csw, cores = {1: ([], []), 4: ([], [])}, {1: [], 4: []}
    for r in range(1, rounds + 1):
        for n in (1, 4):
            subs = [load("%s/%s-r%d-n%d-sub%d.json" % (d, key, r, n, i)) for i in range(1, n + 1)]
            pub = load("%s/%s-r%d-n%d-pub.json" % (d, key, r, n))
            for s in subs:
                if s["messages"] != count or s["missed"]:
                    sys.exit("%s, round %d, %d subscribers: a subscriber did not get every message: %r" % (modes[int(key[1:]) - 1], r, n, s))
            total = sum(s["msgs_per_s"] for s in subs)
            delivered = sum(s["messages"] for s in subs)
            cpu[n][0].append(pub["cpu_seconds"] / delivered * 1e9)
            cpu[n][1].append(sum(s["cpu_seconds"] for s in subs) / delivered * 1e9)
            csw[n][0].append(pub.get("ctx_switches", 0) / delivered * 1e3)
            csw[n][1].append(sum(s.get("ctx_switches", 0) for s in subs) / delivered * 1e3)
            # CPU of all the run's processes over the subscribers' time from
            # first message to last: 2.00 is both cores of the machine
            cores[n].append((pub["cpu_seconds"] + sum(s["cpu_seconds"] for s in subs)) / max(s["seconds"] for s in subs))
            if n == 1:
                one.append(total)
            else:
                four.append(total)
                slowest.append(min(s["msgs_per_s"] for s in subs))
                ratio.append(total / one[-1])
    return one, four, slowest, ratio, cpu, csw, cores

got = {}
for k, mode in enumerate(modes, 1):
    one, four, slowest, ratio, cpu, csw, cores = got[mode] = figures("m%d" % k)
    if len(modes) > 1:
        print("publisher mode %s:" % mode)
    print("64 B, 1 subscriber: %s M msg/s delivered, median (lowest-highest) of %d rounds (target >= 10)" % (fmt(one), rounds))
    print("64 B, 4 subscribers: %s M msg/s delivered in all, slowest subscriber %s" % (fmt(four), fmt(slowest)))
    print("4 subscribers over 1, same round: %s (target >= 2); by round: %s" % (
        "%.2f (%.2f-%.2f)" % (statistics.median(ratio), min(ratio), max(ratio)), " ".join("%.2f" % x for x in ratio)))
    for n in (1, 4):
        print("CPU per message delivered, %d subscriber%s: publisher %s ns, subscribers %s ns (user+sys, medians)" % (
            n, "s" if n > 1 else "", "%.0f" % statistics.median(cpu[n][0]), "%.0f" % statistics.median(cpu[n][1])))
    for n in (1, 4):
        print("Context switches per 1000 messages delivered, %d subscriber%s: publisher %.2f, subscribers %.2f (voluntary+involuntary, medians)" % (
            n, "s" if n > 1 else "", statistics.median(csw[n][0]), statistics.median(csw[n][1])))
    print("Cores the run's processes used (their CPU over the time from first message to last; set-up included): 1 subscriber %s, 4 subscribers %s" % (
        fmt(cores[1], 1), fmt(cores[4], 1)))
if len(modes) > 1:
    a, b = modes[0], modes[-1]
    if "@" in a + b:
        q = [y / x for x, y in zip(got[a][3], got[b][3])]
        print("4 subscribers over 1, %s over %s, same round: %.2f (%.2f-%.2f)" % (b, a, statistics.median(q), min(q), max(q)))
    for n in (1, 4):
        pub = [y / x for x, y in zip(got[a][4][n][0], got[b][4][n][0])]
        sub = [y / x for x, y in zip(got[a][4][n][1], got[b][4][n][1])]
        print("CPU per message delivered, %s over %s, %d subscriber%s, same round: publisher %.2f (%.2f-%.2f), subscribers %.2f (%.2f-%.2f)" % (
            b, a, n, "s" if n > 1 else "", statistics.median(pub), min(pub), max(pub), statistics.median(sub), min(sub), max(sub)))
EOF
echo "Publish allocs/op in steady state (target 0): ${allocs}"
echo "(machine: $(nproc) cores, load ${load0} at the start, ${load1} at the end; ${count} messages per subscriber per run)"
