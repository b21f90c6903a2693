#!/usr/bin/env bash
# pingpong-ab.sh: 64 B (or --size) one-way latency of two processes on
# 127.0.0.1, in short interleaved rounds: fabtests' fi_msg_pingpong, and
# netio-perf server/client --mode pingpong with each poller setting given,
# optionally against a second netio-perf binary (an A/B of two commits) and
# the C baseline (hack/cbaseline, built into bin/cbaseline with --c).
# Each round runs every side once, in turn, so load changes hit all alike;
# it prints the median and min-max of the mean and of the p50 (fabtests
# prints its mean only). Every process is killed after 60 s at the latest.
#
#   hack/pingpong-ab.sh [--rounds N] [--size S] [--iterations I]
#       [--provider P] [--polls "adaptive busy"] [--b PATH_TO_OTHER_NETIO_PERF] [--c]
#
# fi_msg_pingpong is looked up in $FABTESTS_BIN, then on PATH; without it
# only netio-perf runs. bin/netio-perf is built first (go build).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=7 size=64 iters=20000 provider=tcp polls="adaptive busy" other="" cbase=""
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--iterations) iters=$2; shift 2 ;;
	--provider) provider=$2; shift 2 ;;
	--polls) polls=$2; shift 2 ;;
	--b) other=$2; shift 2 ;;
	--c) cbase=bin/cbaseline; shift ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
timeout=60
go build -o bin/netio-perf ./cmd/netio-perf
if [ -n "$cbase" ]; then
	# shellcheck disable=SC2046 # pkg-config prints several words on purpose
	"${CC:-cc}" -O2 -Wall -Wextra -Werror -pthread -o bin/cbaseline hack/cbaseline/cbaseline.c $(pkg-config --cflags --libs libfabric)
fi
fab=""
for d in "${FABTESTS_BIN:-}" $(dirname "$(command -v fi_msg_pingpong 2>/dev/null || echo /nonexistent/x)"); do
	[ -n "$d" ] && [ -x "$d/fi_msg_pingpong" ] && { fab="$d/fi_msg_pingpong"; break; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# netio NAME BINARY POLL: one run; appends "mean p50" to $out/NAME.
netio() {
	local name=$1 bin=$2 poll=$3 addr=""
	local srv="$out/srv.$name"
	rm -f "$srv" # the server truncates it in the background: never read last round's address
	timeout $timeout "$bin" server --mode pingpong --provider "$provider" --listen 127.0.0.1:0 \
		--buf-size $((size > 256 ? size : 256)) --poll "$poll" --json --timeout ${timeout}s >"$srv" 2>/dev/null &
	local pid=$!
	for _ in $(seq 100); do
		addr=$(awk '/^LISTENING/{print $2}' "$srv" 2>/dev/null || true)
		[ -n "$addr" ] && break
		sleep 0.05
	done
	timeout $timeout "$bin" client --mode pingpong --provider "$provider" --connect "$addr" --size "$size" \
		--iterations "$iters" --poll "$poll" --json --timeout ${timeout}s |
		sed -n 's/.*"latency_p50_us":\([0-9.]*\).*"latency_mean_us":\([0-9.]*\).*/\2 \1/p' >>"$out/$name" || true
	wait $pid || true
}

# cbase: one C baseline run; appends "mean p50".
cbase() {
	local srv="$out/srv.c" addr=""
	rm -f "$srv"
	timeout $timeout bin/cbaseline pingpong --provider "$provider" --size "$size" --max-count "$iters" \
		--listen 127.0.0.1:0 --timeout $timeout >"$srv" 2>/dev/null &
	local pid=$!
	for _ in $(seq 100); do
		addr=$(awk '/^LISTENING/{print $2}' "$srv" 2>/dev/null || true)
		[ -n "$addr" ] && break
		sleep 0.05
	done
	timeout $timeout bin/cbaseline pingpong --provider "$provider" --size "$size" --max-count "$iters" \
		--connect "$addr" --timeout $timeout |
		sed -n 's/.*"latency_p50_us":\([0-9.]*\).*"latency_mean_us":\([0-9.]*\).*/\2 \1/p' >>"$out/c" || true
	wait $pid || true
}

# fabtests: one fi_msg_pingpong run on a free port; appends "mean -".
fabtests() {
	local port
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	timeout $timeout "$fab" -p "$provider" -s 127.0.0.1 -S "$size" -I "$iters" -m -B "$port" >/dev/null 2>&1 &
	local pid=$!
	sleep 0.3
	timeout $timeout "$fab" -p "$provider" -s 127.0.0.1 -S "$size" -I "$iters" -m -P "$port" 127.0.0.1 2>/dev/null |
		sed -n 's/.*usec\/xfer: *\([0-9.]*\).*/\1 -/p' >>"$out/fabtests" || true
	wait $pid || true
}

names=()
[ -n "$fab" ] && names+=(fabtests)
[ -n "$cbase" ] && names+=(c)
for p in $polls; do
	names+=("netio-$p")
	[ -n "$other" ] && names+=("b-$p")
done
for r in $(seq "$rounds"); do
	for n in "${names[@]}"; do
		case "$n" in
		fabtests) fabtests ;;
		c) cbase ;;
		netio-*) netio "$n" bin/netio-perf "${n#netio-}" ;;
		b-*) netio "$n" "$other" "${n#b-}" ;;
		esac
	done
	echo "round $r/$rounds done" >&2
done

# stat FILE COLUMN: "median (min-max)" of a column.
stat() {
	awk -v c="$2" '$c != "-" {print $c}' "$1" | sort -g | awk '{v[NR]=$1} END {
		if (NR == 0) { print "-"; exit }
		m = NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2
		printf "%.2f (%.2f-%.2f) n=%d", m, v[1], v[NR], NR }'
}
echo "one-way latency µs, $size B, $provider, $rounds interleaved rounds of $iters round trips: median (min-max)"
printf "%-18s %-28s %s\n" impl mean p50
for n in "${names[@]}"; do
	[ -s "$out/$n" ] || { printf "%-18s no result\n" "$n"; continue; }
	printf "%-18s %-28s %s\n" "$n" "$(stat "$out/$n" 1)" "$(stat "$out/$n" 2)"
done
if [ -s "$out/fabtests" ]; then
	fm=$(stat "$out/fabtests" 1 | cut -d' ' -f1)
	for n in "${names[@]}"; do
		[ "$n" = fabtests ] || [ ! -s "$out/$n" ] && continue
		printf "%s / fabtests (medians of means): %s\n" "$n" \
			"$(awk -v a="$(stat "$out/$n" 1 | cut -d' ' -f1)" -v b="$fm" 'BEGIN{printf "%.3f", a/b}')"
	done
fi
