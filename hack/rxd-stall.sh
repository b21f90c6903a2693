#!/usr/bin/env bash
# rxd-stall.sh: count stalls of senders streaming into one receiver over
# udp;ofi_rxd between processes, per shape and per provider setting, in
# the interop tests' shape (tests/rdm_perf_test.go): 4 KiB messages,
# --verify, short watchdogs. Rounds interleave every shape and setting.
#
#   hack/rxd-stall.sh RUNS [SHAPE...]
#
# SHAPE (default: the four one-sender shapes):
#   c2np   cpeer send         -> netio-perf server (--poll $POLL)
#   c2c    cpeer send         -> cpeer recv
#   np2c   netio-perf client  -> cpeer recv
#   np2np  netio-perf client  -> netio-perf server (--poll $POLL)
#   2c2c   two cpeer sends    -> cpeer recv (COUNT/2 each)
#   2np2np two netio-perf clients -> netio-perf server (COUNT/2 each)
#
# Environment:
#   VARIANTS  space-separated settings to compare, each NAME=VALUE[,NAME=VALUE]
#             given to every process of a run, or "-" for none (default "-"),
#             e.g. VARIANTS="FI_OFI_RXD_MAX_UNACKED=128 -". Four names are
#             the script's own: NP=PATH and CPEER=PATH run other binaries,
#             RCVBUF=B gives cpeer --rcvbuf B, and POLL=MODE the server's
#             --poll, e.g. VARIANTS="POLL=block POLL=busy"
#   NP        netio-perf binary (default: built from this checkout)
#   CPEER     cpeer binary (default: tests/cpeer/cpeer.c built as
#             internal/testbin builds it)
#   POLL      netio-perf server's --poll: block (the tests'), busy, adaptive
#             (a variant's POLL= overrides it)
#   COUNT (10000), SIZE (4096), CTIMEOUT (cpeer's watchdog, s: 20),
#   STIMEOUT (netio-perf's --timeout: 25s), PROVIDER (udp;ofi_rxd)
#
# A run stalls when a process exits non-zero (a watchdog or a timeout).
# For each it prints what each side said: cpeer's watchdog line
# (received=, completed=, posted=, idle_ms= since its last step forward)
# and netio-perf's error (messages received, sends pending). "ok" lines
# give the run's wall time and the sender's seconds, and "drops" the
# host's UDP receive-buffer drops (RcvbufErrors of /proc/net/snmp, which
# counts other programs' drops too) during the run. Every run ends by
# itself: each process has its own timeout, and timeout(1) kills what is
# left after 40 s.
set -euo pipefail
runs=${1:?usage: hack/rxd-stall.sh RUNS [c2np|c2c|np2c|np2np|2c2c|2np2np ...]}
shift
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(c2np c2c np2c np2np)
read -r -a variants <<<"${VARIANTS:--}"
prov=${PROVIDER:-udp;ofi_rxd}
count=${COUNT:-10000}
size=${SIZE:-4096}
poll=${POLL:-block}
ct=${CTIMEOUT:-20}
st=${STIMEOUT:-25s}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
np=${NP:-}
if [ -z "$np" ]; then
	np=$work/netio-perf
	(cd "$root" && go build -o "$np" ./cmd/netio-perf)
fi
cpeer=${CPEER:-}
if [ -z "$cpeer" ]; then
	cpeer=$work/cpeer
	# shellcheck disable=SC2046
	cc -O2 -o "$cpeer" "$root/tests/cpeer/cpeer.c" $(pkg-config --cflags --libs libfabric)
fi

recv_cmd() { # shape
	case $1 in
	c2np | np2np | 2np2np) echo "$np server --endpoint rdm --provider $prov --listen 127.0.0.1:0 --count $count --buf-size $size --verify --json --timeout $st --poll $poll" ;;
	*) echo "$cpeer recv --endpoint rdm --provider $prov --listen 127.0.0.1:0 --size $size --count $count --verify --timeout $ct$rcvbuf" ;;
	esac
}
send_cmd() { # shape addr n
	case $1 in
	c2np | c2c | 2c2c) echo "$cpeer send --endpoint rdm --provider $prov --size $size --count $3 --verify --timeout $ct --connect $2$rcvbuf" ;;
	*) echo "$np client --endpoint rdm --provider $prov --size $size --count $3 --verify --json --timeout $st --connect $2" ;;
	esac
}
senders() { case $1 in 2*) echo 2 ;; *) echo 1 ;; esac; }
drops() { awk '/^Udp:/ && $6 ~ /^[0-9]+$/ {print $6}' /proc/net/snmp; }

# one SHAPE VARIANT RUN: one exchange; prints "ok" or a stall's details.
one() {
	local shape=$1 var=$2 i=$3 d=$work/$1.$3.$RANDOM addr="" pr rr=0 rs=0 t0 t1 d0 n k kv
	local np=$np cpeer=$cpeer poll=$poll rcvbuf="" # recv_cmd and send_cmd see these
	local -a env=() ps=() set=()
	[ "$var" = - ] || IFS=, read -r -a set <<<"$var"
	for kv in "${set[@]}"; do
		case $kv in
		NP=*) np=${kv#NP=} ;;
		CPEER=*) cpeer=${kv#CPEER=} ;;
		RCVBUF=*) rcvbuf=" --rcvbuf ${kv#RCVBUF=}" ;;
		POLL=*) poll=${kv#POLL=} ;;
		*) env+=("$kv") ;;
		esac
	done
	mkdir -p "$d"
	: >"$d/r.out"
	: >"$d/r.err"
	d0=$(drops)
	t0=$(date +%s.%N)
	# shellcheck disable=SC2046
	env "${env[@]}" timeout -s KILL 40 $(recv_cmd "$shape") >"$d/r.out" 2>"$d/r.err" &
	pr=$!
	for _ in $(seq 200); do
		addr=$(awk '/^LISTENING/{print $2; exit}' "$d/r.out" || true)
		[ -n "$addr" ] && break
		sleep 0.05
	done
	if [ -z "$addr" ]; then
		kill -KILL "$pr" 2>/dev/null || true
		wait "$pr" || true
		echo "$shape $var $i: receiver never listened: $(tr '\n' ' ' <"$d/r.err")"
		return
	fi
	n=$(senders "$shape")
	for k in $(seq "$n"); do
		# shellcheck disable=SC2046
		env "${env[@]}" timeout -s KILL 40 $(send_cmd "$shape" "$addr" $((count / n))) >"$d/s$k.out" 2>"$d/s$k.err" &
		ps+=($!)
	done
	for k in "${ps[@]}"; do
		wait "$k" || rs=$?
	done
	wait "$pr" || rr=$?
	t1=$(date +%s.%N)
	if [ "$rs" = 0 ] && [ "$rr" = 0 ]; then
		printf '%s %s %d: ok %.2fs (sender %ss) drops %d\n' "$shape" "$var" "$i" "$(echo "$t1 - $t0" | bc)" \
			"$(grep -ho '"seconds":[0-9.]*' "$d"/s*.out | cut -d: -f2 | sort -n | tail -n 1)" $(($(drops) - d0))
		return
	fi
	echo "$shape $var $i: STALL sender rc=$rs receiver rc=$rr drops $(($(drops) - d0))"
	for k in $(seq "$n"); do
		echo "  sender $k:  $(grep -hv '^LISTENING' "$d/s$k.err" "$d/s$k.out" | tail -n 3 | tr '\n' ' ')"
	done
	echo "  receiver: $(grep -hv '^LISTENING' "$d/r.err" "$d/r.out" | tail -n 3 | tr '\n' ' ')"
}

for i in $(seq "$runs"); do
	for s in "${shapes[@]}"; do
		for v in "${variants[@]}"; do
			one "$s" "$v" "$i"
		done
	done
done | tee "$work/log"
echo "--- $prov, $count x $size B, netio-perf server --poll $poll, $runs runs per shape and setting"
for s in "${shapes[@]}"; do
	for v in "${variants[@]}"; do
		printf '%-6s %-28s stalls %d of %d, median wall %ss, median drops %s\n' "$s" "$v" \
			"$(grep -c "^$s $v [0-9]*: STALL" "$work/log" || true)" "$runs" \
			"$(grep "^$s $v [0-9]*: ok" "$work/log" | awk '{print $5}' | tr -d s | sort -n | awk '{a[NR]=$1} END {print NR ? a[int((NR+1)/2)] : "-"}')" \
			"$(grep "^$s $v [0-9]*: " "$work/log" | grep -o 'drops -*[0-9]*' | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {print NR ? a[int((NR+1)/2)] : "-"}')"
	done
done
