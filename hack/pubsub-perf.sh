#!/usr/bin/env bash
# Prints the publish/subscribe figures issue 19 sets as targets, measured in
# one run on this machine, between processes (netio-perf publish and
# subscribe on tcp, 127.0.0.1), 64 B messages on one tag, Block:
#   - delivered to one subscriber (target >= 10 M msg/s)
#   - delivered to 4 subscribers together, and that over the single
#     subscriber's rate (target >= 2)
#   - allocations per Publish in steady state (BenchmarkPublish, target 0)
# Each subscriber is its own process; the rate is counted at the
# subscribers, from their first message to their last.
# Usage: hack/pubsub-perf.sh [messages per subscriber]   (default 5000000)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${PATH}:/usr/local/go/bin"
count=${1:-5000000}

dir=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "${dir}"
}
trap cleanup EXIT
go build -o "${dir}/netio-perf" ./cmd/netio-perf

# run N: one publisher and N subscriber processes; prints the subscribers'
# summed rate in msg/s and the slowest one's.
run() {
	local n=$1
	"${dir}/netio-perf" publish --listen 127.0.0.1:0 --tags 1 --size 64 --count "${count}" \
		--subscribers "${n}" --json >"${dir}/pub.out" 2>"${dir}/pub.err" &
	local pub=$!
	pids+=("${pub}")
	local addr=""
	for _ in $(seq 100); do
		addr=$(sed -n 's/^LISTENING //p' "${dir}/pub.out")
		[[ -n ${addr} ]] && break
		sleep 0.05
	done
	[[ -n ${addr} ]] || { echo "publisher did not start" >&2; cat "${dir}/pub.err" >&2; exit 1; }
	local subs=()
	for i in $(seq "${n}"); do
		"${dir}/netio-perf" subscribe --connect "${addr}" --tags 0 --count "${count}" --json \
			>"${dir}/sub${i}.out" 2>"${dir}/sub${i}.err" &
		subs+=($!)
		pids+=($!)
	done
	for s in "${subs[@]}"; do wait "$s"; done
	wait "${pub}"
	for i in $(seq "${n}"); do tail -n 1 "${dir}/sub${i}.out"; done |
		python3 -c '
import json, sys
rs = [json.loads(l) for l in sys.stdin if l.strip()]
for r in rs:
    if r["messages"] + r["missed"] != '"${count}"' or r["missed"]:
        sys.exit("a subscriber did not get every message: %r" % r)
print("%.0f %.0f" % (sum(r["msgs_per_s"] for r in rs), min(r["msgs_per_s"] for r in rs)))'
}

read -r one _ < <(run 1)
read -r four slowest < <(run 4)
allocs=$(go test -run '^$' -bench 'BenchmarkPublish/tcp/subs=1/size=64$' -benchtime 1000000x ./pubsub |
	awk '/^BenchmarkPublish/ { for (i = 2; i < NF; i++) if ($(i + 1) == "allocs/op") print $i }' | head -n 1)

awk -v r="${one}" 'BEGIN { printf "64 B, 1 subscriber: %.2f M msg/s delivered (target >= 10)\n", r / 1e6 }'
awk -v r="${four}" -v s="${slowest}" -v o="${one}" 'BEGIN { printf "64 B, 4 subscribers: %.2f M msg/s delivered in all (slowest %.2f), %.2f x one subscriber (target >= 2)\n", r / 1e6, s / 1e6, r / o }'
echo "Publish: ${allocs} allocs/op in steady state (target 0)"
echo "(machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
