#!/usr/bin/env bash
# inject-ab.sh: message rate and CPU of uncoalesced small sends, two
# processes on 127.0.0.1, window 64, in interleaved rounds: the C baseline
# (cbaseline bw, fi_send), netio-perf server/client (regular sends) and
# netio-perf client --inject (endpoint.SendConfig.Inject, fi_inject).
#
#   hack/inject-ab.sh [--rounds N] [--count N] [--size S] [--provider P] [--poll MODE]
#
# --poll is netio-perf's --poll for both netio processes (adaptive, the
# default, or busy, block).
#
# Each run moves --count messages (default 200000) and is bounded by a 60 s
# timeout. It prints, per contender, the server's message rate (median and
# min-max over the rounds), the ratio of medians to C, and CPU seconds per
# GB of payload of both processes together (user+sys, getrusage through
# /usr/bin/time), which load changes less than the rate. It builds
# bin/netio-perf and bin/cbaseline as hack/bench-compare does.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=5 count=200000 size=64 provider=tcp poll=adaptive
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift 2 ;;
	--count) count=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--provider) provider=$2; shift 2 ;;
	--poll) poll=$2; shift 2 ;;
	*) echo "usage: $0 [--rounds N] [--count N] [--size S] [--provider P] [--poll MODE]" >&2; exit 2 ;;
	esac
done

mkdir -p bin
"${GO:-go}" build -o bin/netio-perf ./cmd/netio-perf
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
"${CC:-cc}" -O2 -Wall -Wextra -Werror -pthread -o bin/cbaseline hack/cbaseline/cbaseline.c \
	$(pkg-config --cflags --libs libfabric)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# pair IMPL: runs one server and one client; appends "rate cpu_s_per_gb"
# to $tmp/IMPL.
pair() {
	local impl=$1 srv cli
	case "$impl" in
	c)
		srv=(bin/cbaseline bw --provider "$provider" --size "$size" --rx-depth 64 --max-count "$count" --listen 127.0.0.1:0 --timeout 50)
		cli=(bin/cbaseline bw --provider "$provider" --size "$size" --window 64 --max-count "$count" --timeout 50 --connect) ;;
	netio | netio-inject)
		srv=(bin/netio-perf server --poll "$poll" --provider "$provider" --listen 127.0.0.1:0 --buf-size "$size" --bufs 64 --count "$count" --json --timeout 50s)
		cli=(bin/netio-perf client --poll "$poll" --provider "$provider" --size "$size" --bufs 64 --count "$count" --json --timeout 50s)
		[ "$impl" = netio-inject ] && cli+=(--inject)
		cli+=(--connect) ;;
	esac
	rm -f "$tmp"/srv.* "$tmp"/cli.*
	/usr/bin/time -f "%U %S" -o "$tmp/srv.time" timeout 60 "${srv[@]}" >"$tmp/srv.out" 2>"$tmp/srv.err" &
	local pid=$! addr=""
	for _ in $(seq 100); do
		addr=$(grep -oh '127\.0\.0\.1:[0-9][0-9]*' "$tmp/srv.out" "$tmp/srv.err" 2>/dev/null | head -1) || true
		[ -n "$addr" ] && break
		sleep 0.05
	done
	/usr/bin/time -f "%U %S" -o "$tmp/cli.time" timeout 60 "${cli[@]}" "$addr" >"$tmp/cli.out" 2>&1 || true
	wait "$pid" || true
	local rate cpu ccpu
	rate=$(grep -o '"role":"server".*' "$tmp/srv.out" | grep -o '"msgs_per_s":[0-9.]*' | cut -d: -f2)
	cpu=$(cat "$tmp/srv.time" "$tmp/cli.time" | awk -v b="$((count * size))" '{s += $1 + $2} END {printf "%.1f", s / (b / 1e9)}')
	ccpu=$(awk -v b="$((count * size))" '{s += $1 + $2} END {printf "%.1f", s / (b / 1e9)}' "$tmp/cli.time")
	if [ -z "$rate" ]; then
		echo "$impl: no rate; server said: $(tail -2 "$tmp/srv.err")" >&2
		return
	fi
	echo "$rate $cpu $ccpu" >>"$tmp/$impl"
}

impls=(c netio netio-inject)
for r in $(seq "$rounds"); do
	for impl in "${impls[@]}"; do pair "$impl"; done
	echo "round $r of $rounds done" >&2
done

# stats FILE COLUMN: "median (min-max)"
stats() {
	cut -d' ' -f"$2" "$1" | sort -g | awk '{v[NR] = $1} END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.4g (%.4g-%.4g)", m, v[1], v[NR] }'
}
median() { cut -d' ' -f"$2" "$1" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "provider $provider, $size B, netio --poll $poll, window 64, $count messages a run, $rounds interleaved rounds, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-14s %-30s %-6s %-24s %s\n" contender "Mmsg/s median (min-max)" "x C" "CPU s/GB, both" "CPU s/GB, client"
cmed=$(median "$tmp/c" 1)
for impl in "${impls[@]}"; do
	[ -s "$tmp/$impl" ] || { printf "%-14s no runs\n" "$impl"; continue; }
	rate=$(awk '{printf "%.6f %s\n", $1 / 1e6, $2}' "$tmp/$impl" >"$tmp/$impl.m"; stats "$tmp/$impl.m" 1)
	printf "%-14s %-30s %-6.2f %-24s %s\n" "$impl" "$rate" "$(awk -v a="$(median "$tmp/$impl" 1)" -v c="$cmed" 'BEGIN {print a / c}')" "$(stats "$tmp/$impl" 2)" "$(stats "$tmp/$impl" 3)"
done
